"""The value every call of :func:`torchdpgmm.release.release` returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm.privacy import PrivacyRecord
from torchdpgmm.mixture import LabeledGMM

__all__ = ["Release"]


#: the sound release's diagnostics that are dicts of tensors with the release's batch shape in front (for several
#: epsilons at once, a leading epsilon axis): ``"auto"``'s rule weights, and the noisy second moments' z-scores
PER_RELEASE_EXTRAS = ("shrinkage", "signal")


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
        records: a sound release of several epsilons at once (``epsilon=[e_1, ..., e_E]``, the model's batch shape
            ``(E, *batch)``): one full :class:`PrivacyRecord` per epsilon, each what the scalar release at ``e_i``
            records; ``privacy`` then states the vector of epsilons with ``covered=False`` (the E releases of the
            same data are independent draws, not one composed guarantee). ``None`` otherwise.
    """

    model: LabeledGMM
    privacy: PrivacyRecord
    design: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    fitted: LabeledGMM | None = None
    kl: torch.Tensor | None = None
    records: tuple[PrivacyRecord, ...] | None = None

    def at_epsilon(self, index: int) -> "Release":
        """A batched-epsilon sound release (``epsilon=[e_1, ..., e_E]``): the release at ``epsilon[index]``, with
        its own full record (``records[index]``, covered as a scalar release's). ``ValueError`` otherwise."""
        if self.records is None:
            raise ValueError("at_epsilon applies to a release of several epsilons (epsilon=[...] in sound mode)")
        E = len(self.records)
        if isinstance(index, bool) or not isinstance(index, int) or not -E <= index < E:
            raise ValueError(f"index must be an int in [-{E}, {E}), got {index!r}")
        extras = dict(self.extras)
        extras["noise"] = self.extras["noise"][index]
        extras.pop("epsilons", None)
        for key in PER_RELEASE_EXTRAS:  # a leading epsilon axis
            if key in extras:
                extras[key] = {k: v[index] for k, v in extras[key].items()}
        return Release(model=self.model[index], privacy=self.records[index], design=self.design, extras=extras)
