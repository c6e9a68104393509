"""The value every call of :func:`torchdpgmm.release.release` returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm.privacy import PrivacyRecord
from torchdpgmm.mixture import LabeledGMM

__all__ = ["Release"]


@dataclass
class Release:
    """A differentially private release of a labeled GMM.

    Attributes:
        model: the released :class:`LabeledGMM` (safe to publish under ``privacy``).
        privacy: the :class:`PrivacyRecord` of what was spent and how (one per release).
        design: the mechanism design (noise shapes, budget split) when there is one (as-published ``kl``
            and ``colored``), else None.
        extras: mechanism-specific diagnostics (noise scales, sensitivities, settings).
        fitted: as-published mode only: the NON-private empirical fit of eq. (2) (Liu, Scaglione & Peisert
            2025) the release was derived from. The as-published mode reproduces that paper, is not DP for
            real data, and its Monte Carlo studies need the fit and the KL of every trial. ``None`` in
            sound mode, which returns nothing computed from the data without noise: use
            :func:`torchdpgmm.release.evaluation.evaluate` (explicitly non-private) there.
        kl: as-published mode only: ``kl_divergence(model, fitted)`` per trial (Appendix B), ``batch_shape``;
            ``None`` in sound mode.
    """

    model: LabeledGMM
    privacy: PrivacyRecord
    design: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    fitted: LabeledGMM | None = None
    kl: torch.Tensor | None = None
