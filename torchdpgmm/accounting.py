"""Backward-compatible names for the calibrations and the privacy record.

Everything here is a thin wrapper over :mod:`torchdpgmm.privacy` (the accounting package): new code
should import from there. Gaussian calibrations (``gaussian_sigma``) for a query of L2 sensitivity
``Delta``:

- ``rule="paper"``: ``sigma = Delta sqrt(2 ln(2/delta)) / eps``, condition (10) of Liu, Scaglione &
  Peisert (2025) with ``Gamma = I/sigma^2``. Not (eps, delta)-DP for large eps (above about 9.4 at
  delta = 1e-5); see docs/privacy.md.
- ``rule="classical"``: ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (Dwork & Roth 2014, Thm A.1;
  valid for eps < 1 only).
- ``rule="analytic"``: the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8): exact for every eps > 0.

Other charges: the Laplace scale ``Delta_1 / eps`` and the Wishart charge ``3 gamma_k / (2 N_k)`` of
eq. (9) of Liu, Scaglione & Peisert (a mechanism later shown not to be DP; kept for the as-published
reproduction).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchdpgmm import privacy as _P
from torchdpgmm.privacy.record import NoisedBlock, PrivacyRecord

__all__ = [
    "gaussian_sigma",
    "gaussian_delta",
    "laplace_scale",
    "wishart_epsilon",
    "PrivacyRecord",
    "NoisedBlock",
    "AS_PUBLISHED_CAVEATS",
]

AS_PUBLISHED_CAVEATS = (
    "as-published mode reproduces Liu, Scaglione & Peisert (2025) and is NOT a verified DP guarantee:",
    "the Wishart mechanism of Jiang et al. (2016) charged by eq. (9) was shown not to be DP (Sheffet 2019; Amin et al. 2019)",
    "noise is calibrated to the dataset at hand (local sensitivity), which is not DP in general",
    "a label flip changes two classes, so max_k composition under-counts",
    "the random mapping's support depends on the data; lambda/|S| smoothing does not bound the likelihood ratio by e^eps0",
)


def _call(fn, ref: Any, *args: Any) -> Any:
    """Run a torch calibration on numpy/list inputs too; return the kind (and float dtype) of ``ref``."""
    args = tuple(torch.as_tensor(np.asarray(a, dtype=np.float64)) if isinstance(a, (np.ndarray, list, tuple)) else a
                 for a in args)
    out = fn(*args)
    if torch.is_tensor(ref):
        return out.to(ref.dtype) if ref.dtype.is_floating_point else out
    if isinstance(ref, (np.ndarray, list, tuple)) or torch.is_tensor(out):
        return out.cpu().numpy() if torch.is_tensor(out) else np.asarray(out)
    return out


def gaussian_delta(sigma: Any, epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Exact delta of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Thm 8), elementwise."""
    return _call(_P.gaussian_delta, sigma, sigma, epsilon, sensitivity)


_RULES = {"paper": _P.paper_gaussian_sigma, "classical": _P.classical_gaussian_sigma,
          "analytic": _P.analytic_gaussian_sigma}


def gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0, rule: str = "paper") -> Any:
    """Noise standard deviation for an (epsilon, delta) Gaussian mechanism of L2 ``sensitivity``.

    Accepts scalars, numpy arrays or tensors (elementwise, broadcast); returns the kind of ``epsilon``.
    ``rule`` is one of ``"paper"``, ``"classical"`` or ``"analytic"`` (see module docstring).
    """
    if rule not in _RULES:
        raise ValueError(f"rule must be 'paper', 'classical' or 'analytic', got {rule!r}")
    return _call(_RULES[rule], epsilon, epsilon, delta, sensitivity)


def laplace_scale(epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Laplace scale ``b = Delta_1 / epsilon`` for an epsilon-DP release of L1 sensitivity ``Delta_1``."""
    return _call(_P.laplace_scale, epsilon, epsilon, sensitivity)


def wishart_epsilon(gamma: Any, n_k: Any) -> Any:
    """The Wishart charge ``3 gamma_k / (2 N_k)`` of eq. (9) (Jiang et al. 2016; see the caveats)."""
    if torch.is_tensor(gamma) or torch.is_tensor(n_k):
        g = torch.as_tensor(gamma)
        return 1.5 * g / torch.as_tensor(n_k, dtype=g.dtype if g.dtype.is_floating_point else torch.float64,
                                         device=g.device)
    return 1.5 * np.asarray(gamma, dtype=np.float64) / np.asarray(n_k, dtype=np.float64)
