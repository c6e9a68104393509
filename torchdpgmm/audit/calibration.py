"""mu-GDP and (epsilon, delta)-DP converted into each other with scipy (Dong, Roth & Su 2019, Cor. 2.13;
Balle & Wang 2018), independent of the torch calibrations of :mod:`torchdpgmm.privacy.calibration` that
the releases use, so that an audit's reference numbers do not come from the code under audit.
"""
from __future__ import annotations

import math

__all__ = ["gdp_epsilon_exact", "gdp_mu_exact"]


def _gdp_delta_scipy(eps: float, mu: float) -> float:
    from scipy.stats import norm

    if eps > 700.0:  # e^eps overflows a float past 709: the same product taken in logs
        return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2)))
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_epsilon_exact(delta: float, mu: float) -> float:
    """The epsilon of a mu-GDP mechanism at ``delta``: the root of
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta`` (Dong, Roth & Su 2019, Cor. 2.13); scipy.

    ``delta`` in ``[0, 1]``, ``mu`` finite and ``>= 0``. ``mu = 0`` (identical outputs) gives 0; ``delta = 0``
    with ``mu > 0`` gives ``inf`` (no mu-GDP mechanism with ``mu > 0`` is (eps, 0)-DP for a finite eps)."""
    from scipy.optimize import brentq

    delta, mu = float(delta), float(mu)
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must lie in [0, 1], got {delta!r}")
    if not (math.isfinite(mu) and mu >= 0.0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    if mu == 0.0:
        return 0.0
    if delta == 0.0:
        return math.inf
    if _gdp_delta_scipy(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta_scipy(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: _gdp_delta_scipy(e, mu) - delta, 0.0, hi, xtol=1e-12))


def gdp_mu_exact(epsilon: float, delta: float) -> float:
    """The largest mu whose mu-GDP curve is (epsilon, delta)-DP (the analytic Gaussian calibration of
    Balle & Wang 2018 in GDP form); scipy root finding, independent of :mod:`torchdpgmm.release.sound`.
    ``epsilon`` finite and ``>= 0``, ``delta`` in ``(0, 1)`` (at ``delta = 1`` every mu qualifies, at
    ``delta = 0`` none but 0)."""
    from scipy.optimize import brentq

    epsilon, delta = float(epsilon), float(delta)
    if not (math.isfinite(epsilon) and epsilon >= 0.0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    lo, hi = 1e-9, 1.0
    while _gdp_delta_scipy(epsilon, lo) > delta:  # epsilon near 0 with a tiny delta: the root is below 1e-9
        lo /= 2
    while _gdp_delta_scipy(epsilon, hi) < delta:
        hi *= 2
    return float(brentq(lambda m: _gdp_delta_scipy(epsilon, m) - delta, lo, hi, xtol=1e-14))
