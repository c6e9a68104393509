"""Calibrations and privacy records.

Gaussian calibrations (``gaussian_sigma``) for a query of L2 sensitivity ``Delta``:

- ``rule="paper"``: ``sigma = Delta sqrt(2 ln(2/delta)) / eps`` — condition (10) of paper 000
  (``Delta^T Gamma Delta <= eps^2 / (2 ln(2/delta))`` with ``Gamma = I/sigma^2``). Not (eps, delta)-DP
  for large eps (above about 9.4 at delta = 1e-5); see docs/privacy.md.
- ``rule="classical"``: ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (Dwork & Roth, Thm A.1; valid for
  eps < 1 only).
- ``rule="analytic"``: the smallest sigma with
  ``Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta) <= delta``
  (Balle & Wang 2018, Thm 8): exact, valid for every eps > 0.

Other charges: the Laplace scale ``Delta_1 / eps`` and the Wishart charge ``3 gamma_k / (2 N_k)`` of
eq. (9) (a mechanism later shown not to be DP; kept for the as-published reproduction).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from scipy import optimize, special

from torchdpgmm._validation import check_delta, check_epsilon

__all__ = [
    "gaussian_sigma",
    "gaussian_delta",
    "laplace_scale",
    "wishart_epsilon",
    "PrivacyRecord",
    "AS_PUBLISHED_CAVEATS",
]

AS_PUBLISHED_CAVEATS = (
    "as-published mode reproduces paper 000 and is NOT a verified DP guarantee:",
    "the Wishart mechanism of Jiang et al. (2016) charged by eq. (9) was shown not to be DP (Sheffet 2019; Amin et al. 2019)",
    "noise is calibrated to the dataset at hand (local sensitivity), which is not DP in general",
    "a label flip changes two classes, so max_k composition under-counts",
    "the random mapping's support depends on the data; lambda/|S| smoothing does not bound the likelihood ratio by e^eps0",
)


def _to_numpy(x: Any) -> np.ndarray:
    if torch.is_tensor(x):
        return x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _like(values: np.ndarray, ref: Any) -> Any:
    if torch.is_tensor(ref):
        return torch.as_tensor(values, dtype=ref.dtype if ref.dtype.is_floating_point else torch.float64,
                               device=ref.device)
    if np.ndim(values) == 0:
        return float(values)
    return values


def gaussian_delta(sigma: Any, epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Exact delta of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Thm 8), elementwise."""
    s, e, d = np.broadcast_arrays(_to_numpy(sigma), _to_numpy(epsilon), _to_numpy(sensitivity))
    a = d / (2 * s)
    b = e * s / d
    val = special.ndtr(a - b) - np.exp(e + special.log_ndtr(-a - b))
    return _like(np.maximum(val, 0.0), sigma)


def _analytic_sigma_scalar(eps: float, delta: float) -> float:
    # sigma for unit sensitivity; delta(sigma) decreases in sigma
    f = lambda s: float(gaussian_delta(s, eps, 1.0)) - delta  # noqa: E731
    lo, hi = 1e-3, 1.0
    while f(hi) > 0:
        hi *= 2
        if hi > 1e12:
            raise ValueError("could not bracket the analytic Gaussian sigma")
    while f(lo) < 0:
        lo /= 2
        if lo < 1e-12:
            return lo
    return optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-13, maxiter=500)


def gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0, rule: str = "paper") -> Any:
    """Noise standard deviation for an (epsilon, delta) Gaussian mechanism of L2 ``sensitivity``.

    Accepts scalars, numpy arrays or tensors (elementwise, broadcast); returns the type of ``epsilon``.
    ``rule`` is one of ``"paper"``, ``"classical"`` or ``"analytic"`` (see module docstring).
    """
    check_epsilon(epsilon)
    check_delta(delta)
    eps, dl, sens = np.broadcast_arrays(_to_numpy(epsilon), _to_numpy(delta), _to_numpy(sensitivity))
    if np.any(sens < 0) or not np.all(np.isfinite(sens)):
        raise ValueError("sensitivity must be finite and >= 0")
    if rule == "paper":
        out = sens * np.sqrt(2 * np.log(2 / dl)) / eps
    elif rule == "classical":
        out = sens * np.sqrt(2 * np.log(1.25 / dl)) / eps
    elif rule == "analytic":
        unit = np.vectorize(_analytic_sigma_scalar, otypes=[np.float64])(eps, dl)
        out = sens * unit
    else:
        raise ValueError(f"rule must be 'paper', 'classical' or 'analytic', got {rule!r}")
    return _like(out, epsilon)


def laplace_scale(epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Laplace scale ``b = Delta_1 / epsilon`` for an epsilon-DP release of L1 sensitivity ``Delta_1``."""
    check_epsilon(epsilon)
    eps, sens = np.broadcast_arrays(_to_numpy(epsilon), _to_numpy(sensitivity))
    if np.any(sens < 0) or not np.all(np.isfinite(sens)):
        raise ValueError("sensitivity must be finite and >= 0")
    return _like(sens / eps, epsilon)


def wishart_epsilon(gamma: Any, n_k: Any) -> Any:
    """The Wishart charge ``3 gamma_k / (2 N_k)`` of eq. (9) (Jiang et al. 2016; see the caveats)."""
    if torch.is_tensor(gamma) or torch.is_tensor(n_k):
        g = torch.as_tensor(gamma)
        return 1.5 * g / torch.as_tensor(n_k, dtype=g.dtype if g.dtype.is_floating_point else torch.float64,
                                         device=g.device)
    return 1.5 * np.asarray(gamma, dtype=np.float64) / np.asarray(n_k, dtype=np.float64)


@dataclass
class PrivacyRecord:
    """What a release spent and under which assumptions; travels with every released model.

    Attributes:
        epsilon, delta: the total guarantee claimed.
        adjacency: e.g. ``"label-flip"`` (as published) or ``"replace-one"`` / ``"add-remove"``.
        accountant: how the parts were composed (e.g. ``"basic (Theorem 1, max over classes)"``, ``"zCDP"``).
        mode: ``"as-published"`` or ``"sound"``.
        mechanism: the release mechanism's name.
        split: per-part budget (e.g. ``{"eps0": ..., "eps_k": [...], "wishart": [...]}``); tensors allowed.
        notes: caveats a user must read (the as-published weaknesses, data-derived bounds, ...).
    """

    epsilon: float
    delta: float
    adjacency: str
    accountant: str
    mode: str
    mechanism: str = ""
    split: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if torch.is_tensor(v):
                v = v.detach().cpu()
                return v.item() if v.numel() == 1 else v.tolist()
            if isinstance(v, np.ndarray):
                return v.tolist()
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [conv(x) for x in v]
            return v

        return conv(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PrivacyRecord":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown privacy record fields: {sorted(unknown)}")
        return cls(**d)
