"""mu-GDP and (epsilon, delta)-DP converted into each other with scipy (Dong, Roth & Su 2019, Cor. 2.13;
Balle & Wang 2018), independent of the torch calibrations of :mod:`torchdpgmm.privacy.calibration` that
the releases use, so that an audit's reference numbers do not come from the code under audit.
"""
from __future__ import annotations

import math

__all__ = ["gdp_epsilon_exact", "gdp_mu_exact"]


def _gdp_delta_scipy(eps: float, mu: float) -> float:
    from scipy.stats import norm

    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_epsilon_exact(delta: float, mu: float) -> float:
    """The epsilon of a mu-GDP mechanism at ``delta``: the root of
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta`` (Dong, Roth & Su 2019, Cor. 2.13); scipy."""
    from scipy.optimize import brentq

    if _gdp_delta_scipy(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta_scipy(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: _gdp_delta_scipy(e, mu) - delta, 0.0, hi, xtol=1e-12))


def gdp_mu_exact(epsilon: float, delta: float) -> float:
    """The largest mu whose mu-GDP curve is (epsilon, delta)-DP (the analytic Gaussian calibration of
    Balle & Wang 2018 in GDP form); scipy root finding, independent of :mod:`torchdpgmm.release.sound`."""
    from scipy.optimize import brentq

    hi = 1.0
    while _gdp_delta_scipy(epsilon, hi) < delta:
        hi *= 2
    return float(brentq(lambda m: _gdp_delta_scipy(epsilon, m) - delta, 1e-9, hi, xtol=1e-14))
