"""Tradeoff curves and the power of an audit: what the same test certifies against a mechanism on a curve.

:func:`audit_ceiling` computes what the same test (same evaluation draws, same confidence) certifies
against a mechanism that sits *exactly* at a tradeoff curve: the mu-GDP curve
``G_mu(a) = Phi(Phi^{-1}(1 - a) - mu)`` (Dong, Roth & Su 2019) or the (eps, delta)-DP curve
(Kairouz, Oh & Viswanath 2015). An audit that certifies close to that ceiling cannot be improved by a
better statistic, only by more draws; :func:`power_report` puts the numbers side by side.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from torchdpgmm.audit.bound import epsilon_lower_bound
from torchdpgmm.audit.calibration import gdp_epsilon_exact, gdp_mu_exact

__all__ = ["gdp_tradeoff", "dp_tradeoff", "audit_ceiling", "power_report"]


def gdp_tradeoff(alpha, mu: float):
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``: the smallest false-negative rate at false-positive
    rate ``alpha`` against a mu-GDP mechanism (Dong, Roth & Su 2019, eq. 2.2); scipy, numpy arrays."""
    import numpy as np
    from scipy.stats import norm

    return norm.cdf(norm.isf(np.asarray(alpha, dtype=float)) - mu)


def dp_tradeoff(alpha, epsilon: float, delta: float):
    """``max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))``: the (eps, delta)-DP tradeoff
    curve (Kairouz, Oh & Viswanath 2015), attained by randomised response."""
    import numpy as np

    a = np.asarray(alpha, dtype=float)
    return np.maximum(0.0, np.maximum(1 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1 - delta - a)))


def _check_test_args(num_evaluation, delta, confidence) -> int:
    """The evaluation draws (a positive whole number, returned as an int), delta in [0, 1), confidence in (0, 1)."""
    try:
        n = int(num_evaluation)
    except (TypeError, ValueError):
        raise TypeError(f"num_evaluation must be a positive int, got {num_evaluation!r}") from None
    if isinstance(num_evaluation, bool) or n != num_evaluation or n < 1:
        raise ValueError(f"num_evaluation must be a positive int, got {num_evaluation!r}")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return n


def audit_ceiling(tradeoff: Callable[[Any], Any], num_evaluation: int, delta: float, *,
                  confidence: float = 0.95, num_grid: int = 4000) -> dict[str, float]:
    """The bound the Clopper-Pearson test certifies with ``num_evaluation`` draws per dataset against a
    mechanism exactly on ``tradeoff``, at the best threshold and with counts equal to their expectations.

    This is the ceiling of the audit at that number of draws (Jagielski, Ullman & Oprea 2020; Nasr et
    al. 2021): no statistic does better on average, since the tradeoff curve is the most powerful test's.
    Returns ``{"epsilon", "fpr", "fnr"}``.
    """
    import numpy as np

    n = _check_test_args(num_evaluation, delta, confidence)
    a = np.unique(np.concatenate([np.geomspace(0.1 / n, 0.5, num_grid), np.linspace(0.0, 1.0, num_grid)]))
    b = np.asarray(tradeoff(a), dtype=float)
    eps, _, _ = epsilon_lower_bound(n * a, n * b, n, n, delta, confidence)
    i = int(np.argmax(eps))
    return {"epsilon": float(eps[i]), "fpr": float(a[i]), "fnr": float(b[i])}


def power_report(claimed_epsilon: float, delta: float, num_evaluation: int, *, confidence: float = 0.95,
                 gaussian: bool = True, pair_mu: float | None = None) -> dict[str, float]:
    """Side-by-side numbers that say how close an audit's bound can get to the truth.

    ``claim_ceiling_epsilon``: what the same test certifies against a mechanism exactly at the claim
    (the mu-GDP curve with ``mu = gdp_mu_exact(eps, delta)`` for Gaussian noise; the (eps, delta)-DP
    curve otherwise). With ``pair_mu`` (a Gaussian pair, :func:`sound_pair_mu`): the pair's exact epsilon
    at ``delta`` and the test's ceiling against it.
    """
    out: dict[str, float] = {"num_evaluation": _check_test_args(num_evaluation, delta, confidence),
                             "confidence": float(confidence)}
    if gaussian:
        mu = gdp_mu_exact(claimed_epsilon, delta)
        out["claim_mu"] = mu
        out["claim_ceiling_epsilon"] = audit_ceiling(lambda a: gdp_tradeoff(a, mu), num_evaluation, delta,
                                                     confidence=confidence)["epsilon"]
    else:
        out["claim_ceiling_epsilon"] = audit_ceiling(lambda a: dp_tradeoff(a, claimed_epsilon, delta),
                                                     num_evaluation, delta, confidence=confidence)["epsilon"]
    if pair_mu is not None:
        out["pair_mu"] = float(pair_mu)
        out["pair_exact_epsilon"] = gdp_epsilon_exact(delta, pair_mu)
        out["pair_ceiling_epsilon"] = audit_ceiling(lambda a: gdp_tradeoff(a, pair_mu), num_evaluation, delta,
                                                    confidence=confidence)["epsilon"]
    return out
