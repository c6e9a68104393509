"""The value every release returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm.accounting import PrivacyRecord
from torchdpgmm.mixture import LabeledGMM

__all__ = ["Release"]


@dataclass
class Release:
    """A differentially private release of a labeled GMM.

    Attributes:
        model: the released :class:`LabeledGMM` (safe to publish).
        fitted: the non-private fit it was derived from (NEVER publish; kept for evaluation).
        kl: ``kl_divergence(model, fitted)`` per trial, ``batch_shape``.
        privacy: the :class:`PrivacyRecord` of what was spent and how.
        design: the mechanism design (noise shapes, budget split) when there is one.
        extra: mechanism-specific diagnostics.
    """

    model: LabeledGMM
    fitted: LabeledGMM
    kl: torch.Tensor
    privacy: PrivacyRecord
    design: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
