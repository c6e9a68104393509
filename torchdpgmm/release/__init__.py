"""The release layer: from a batch of labeled datasets to a batch of differentially private GMMs.

``torchdpgmm.release.release(X, y, num_classes, epsilon, delta, *, mechanism=..., mode=..., **options)``
(also ``torchdpgmm.release(...)``) is the one entry point. The layer's modules, one concept each:

* :mod:`~torchdpgmm.release.dispatch` -- the dispatcher over mechanism objects (:data:`REGISTRY`), the
  as-published KL-optimal release of Liu, Scaglione & Peisert (2025, Algorithm 1, eqs. 5, 6, 15) and the
  refusal of meaningless budgets;
* :mod:`~torchdpgmm.release.sound` -- the record-level mode (clipping, global sensitivities, joint
  replace-one accounting, covariance types);
* :mod:`~torchdpgmm.release.baselines` -- the Laplace / Gaussian / colored / R1SMG releases of Sec. V-A;
* :mod:`~torchdpgmm.release.result` -- :class:`Release`, the value every call returns;
* :mod:`~torchdpgmm.release.evaluation` -- the explicitly NON-private evaluation of a release against the
  raw data (eq. 2 and the KL of Appendix B) and the data owner's settings check; never called by a release.
"""
from __future__ import annotations

import sys as _sys
import types as _types
from typing import Any

from torchdpgmm.release.dispatch import (
    AS_PUBLISHED_CAVEATS,
    AS_PUBLISHED_NOTES,
    MECHANISMS,
    MODES,
    REFUSE_DELTA,
    REFUSE_EPSILON,
    REGISTRY,
    SOLVERS,
    VARIANTS,
    BaselineMechanism,
    KLMechanism,
    Mechanism,
    SoundMechanism,
    WeakPrivacyWarning,
    check_privacy_strength,
    release,
)
from torchdpgmm._validation import allow_weak_privacy
from torchdpgmm.release.result import Release

__all__ = ["release", "Release", "WeakPrivacyWarning", "check_privacy_strength", "allow_weak_privacy", "REGISTRY",
           "Mechanism",
           "KLMechanism", "BaselineMechanism", "SoundMechanism", "MECHANISMS", "VARIANTS", "SOLVERS", "MODES",
           "AS_PUBLISHED_NOTES", "AS_PUBLISHED_CAVEATS", "REFUSE_EPSILON", "REFUSE_DELTA"]


# ``torchdpgmm.release`` is both this package and, at the top level, the function ``release``. Importing the
# package makes Python bind the *module* to the attribute of ``torchdpgmm``, which would shadow the function
# for ``tdg.release(...)``. Making the module callable keeps both spellings working; the call looks
# ``release`` up here, so a test that patches ``torchdpgmm.release.release`` patches both.
class _CallableModule(_types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any):
        return release(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
