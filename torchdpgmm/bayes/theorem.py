"""Theorem 4.1 of Xi, Kantarcioglu & Inan (2011): a probabilistic range for the Bhattacharyya distance
``K`` (eq. 5) of two univariate Gaussian classes whose sample means and ``1/n`` sample variances are
released with independent Laplace noise ``r_i ~ L(0, lambda_i)``:
``mu_hat_i = xbar_i + r_i``, ``var_hat_i = S_i^2 + r_{i+2}``.

Reading of the theorem. Each of the eight independent ingredients (two sample means, two sample
variances, four noises) is confined to a central interval; on the intersection of the eight events
interval arithmetic puts ``K`` (computed from the released values) inside ``(K^L, K^U)``, and the
intersection has probability ``p^8`` when each interval has probability ``p``. Hence
``Pr(K^L < K < K^U) >= p^8`` (the paper writes "="), and by eq. (4)
``Pr(sqrt(P1 P2) exp(-K) < sqrt(P1 P2) exp(-K^L)) >= p^8``: the Bhattacharyya bound *of the released
pair of Gaussians* is below ``sqrt(P1 P2) exp(-K^L(p))``.

Two points where we depart from the printed text (``quantiles="paper"`` keeps the printed version):

* the printed intervals use the quantiles ``Z(1 - p/2)``, ``chi2(p/2)``, ``chi2(1 - p/2)`` and the
  Laplace ``p/2`` / ``1 - p/2`` quantiles ``+-lambda log(p)``; such central intervals have probability
  ``1 - p``, not ``p``. ``quantiles="corrected"`` (default) uses the ``(1-p)/2`` and ``(1+p)/2``
  quantiles (``Z((1+p)/2)``, ``chi2((1-p)/2)``, ``chi2((1+p)/2)``, ``+-lambda log(1/(1-p))``), which
  have probability ``p`` each;
* ``form="paper"`` bounds the terms ``mu1^2 + mu2^2`` and ``-2 mu1 mu2`` of eq. (5) separately as the
  printed formula does (correct when both mean intervals are positive); ``form="interval"`` bounds
  ``(mu1 - mu2)^2`` through the interval of ``mu1 - mu2`` and holds for any signs.

If a variance interval reaches 0 or below, ``K`` is unbounded there: ``K^L = -inf`` (the error bound is
vacuous) and ``K^U = +inf``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["theorem41_intervals", "theorem41_bounds", "theorem41_error_bound", "bhattacharyya_distance_1d"]


def bhattacharyya_distance_1d(mu1, var1, mu2, var2):
    """Eq. (5): ``K = (mu1 - mu2)^2 / (4 (s1 + s2)) + log(s1 + s2)/2 - log(4 s1 s2)/4`` (tensors or plain
    numbers; numbers alone are computed in float64)."""
    like = next((v for v in (mu1, var1, mu2, var2) if torch.is_tensor(v)), None)
    dtype = torch.float64 if like is None else like.dtype  # a number takes the tensors' dtype, as in arithmetic
    device = None if like is None else like.device
    mu1, var1, mu2, var2 = (v if torch.is_tensor(v) else torch.as_tensor(v, dtype=dtype, device=device)
                            for v in (mu1, var1, mu2, var2))
    s = var1 + var2
    return (mu1 - mu2) ** 2 / (4 * s) + 0.5 * torch.log(s) - 0.25 * torch.log(4 * var1 * var2)


def _t(x):
    if torch.is_tensor(x):
        return x.to(torch.float64)
    return torch.as_tensor(x, dtype=torch.float64)


def theorem41_intervals(mu, var, n, lam, p: float, quantiles: str = "corrected"):
    """The eight central intervals of the proof: returns ``(mean_lo, mean_hi, var_lo, var_hi)``, each
    ``(..., 2)``, for released means ``xbar_i + r_i`` and released variances ``S_i^2 + r_{i+2}``.

    ``mu, var, n (..., 2)`` true class means / variances / sizes; ``lam (..., 4)`` the Laplace scales of
    ``(r_1, r_2, r_3, r_4)``."""
    from scipy import stats

    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")
    if quantiles == "corrected":
        lo_q, hi_q = (1 - p) / 2, (1 + p) / 2
    elif quantiles == "paper":
        lo_q, hi_q = p / 2, 1 - p / 2
    else:
        raise ValueError(f"quantiles must be 'corrected' or 'paper', got {quantiles!r}")
    mu, var, n, lam = _t(mu), _t(var), _t(n), _t(lam)
    if lam.shape[-1] != 4 or mu.shape[-1] != 2:
        raise ValueError("mu, var, n must end in 2 (two classes) and lam in 4 (four noises)")
    if not bool((lam >= 0).all() & torch.isfinite(lam).all()):
        raise ValueError("lam (the Laplace scales) must be finite and >= 0")
    if not bool((n >= 2).all()):
        raise ValueError("n (the class sizes) must be >= 2 (chi-square with n - 1 degrees of freedom)")
    z = stats.norm.ppf(hi_q)
    lap = -math.log(1 - 2 * abs(hi_q - 0.5))  # (hi_q) quantile of L(0, 1)
    # chi-square quantiles come from scipy on the host (a few numbers, not a hot path); the inputs may live
    # on any device, so they are copied to the CPU first and the quantiles moved back to n's device
    dof = (n - 1).detach().cpu().tolist()
    chi_lo = torch.as_tensor(stats.chi2.ppf(lo_q, dof), dtype=torch.float64, device=n.device)
    chi_hi = torch.as_tensor(stats.chi2.ppf(hi_q, dof), dtype=torch.float64, device=n.device)
    half_mean = torch.sqrt(var / n) * z + lam[..., :2] * lap
    mean_lo, mean_hi = mu - half_mean, mu + half_mean
    var_lo = var / n * chi_lo - lam[..., 2:] * lap
    var_hi = var / n * chi_hi + lam[..., 2:] * lap
    return mean_lo, mean_hi, var_lo, var_hi


def theorem41_bounds(mu, var, n, lam, p: float, quantiles: str = "corrected", form: str = "interval"):
    """``(K^L(p), K^U(p))`` of Theorem 4.1 (see the module docstring for ``quantiles`` and ``form``)."""
    if form not in ("paper", "interval"):
        raise ValueError(f"form must be 'paper' or 'interval', got {form!r}")
    mlo, mhi, vlo, vhi = theorem41_intervals(mu, var, n, lam, p, quantiles)
    s_lo, s_hi = vlo.sum(-1), vhi.sum(-1)
    valid = (vlo > 0).all(-1)
    if form == "paper":
        sq_hi = (mhi**2).sum(-1)
        sq_lo = (mlo**2).sum(-1)
        prod_lo = mlo.prod(-1)
        prod_hi = mhi.prod(-1)
        t1_hi = sq_hi / (4 * s_lo) - prod_lo / (2 * s_hi)
        t1_lo = sq_lo / (4 * s_hi) - prod_hi / (2 * s_lo)
    else:
        dlo = mlo[..., 0] - mhi[..., 1]
        dhi = mhi[..., 0] - mlo[..., 1]
        d2_hi = torch.maximum(dlo**2, dhi**2)
        d2_lo = torch.where((dlo <= 0) & (dhi >= 0), torch.zeros_like(dlo), torch.minimum(dlo**2, dhi**2))
        t1_hi = d2_hi / (4 * s_lo)
        t1_lo = d2_lo / (4 * s_hi)
    pos = lambda v: v.clamp(min=torch.finfo(v.dtype).tiny)  # noqa: E731 (masked below when invalid)
    k_hi = t1_hi + 0.5 * torch.log(pos(s_hi)) - 0.25 * torch.log(4 * pos(vlo).prod(-1))
    k_lo = t1_lo + 0.5 * torch.log(pos(s_lo)) - 0.25 * torch.log(4 * vhi.prod(-1))
    inf = torch.full_like(k_lo, float("inf"))
    return torch.where(valid, k_lo, -inf), torch.where(valid, k_hi, inf)


def theorem41_error_bound(prior1, mu, var, n, lam, p: float, quantiles: str = "corrected", form: str = "interval"):
    """``sqrt(P1 P2) exp(-K^L(p))``: with probability >= ``p^8`` the Bhattacharyya bound (eq. 4) of the
    released Gaussians lies below it (Theorem 4.1)."""
    k_lo, _ = theorem41_bounds(mu, var, n, lam, p, quantiles, form)
    p1 = _t(prior1)
    return torch.sqrt(p1 * (1 - p1)) * torch.exp(-k_lo)
