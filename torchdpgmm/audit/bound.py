"""The lower confidence bound on epsilon from the error counts of one threshold test.

If a mechanism M is (epsilon, delta)-DP then for every event S and neighbours D0, D1

    P[M(D1) in S] <= e^eps P[M(D0) in S] + delta   and   P[M(D0) in S^c] <= e^eps P[M(D1) in S^c] + delta.

With S = {statistic > t} (or <), FPR = P[M(D0) in S] and FNR = P[M(D1) not in S], so
``eps >= ln((1 - delta - FNR) / FPR)`` and ``eps >= ln((1 - delta - FPR) / FNR)`` (Kairouz et al. 2015;
Jagielski et al. 2020). Replacing FPR and FNR by one-sided Clopper-Pearson upper bounds, each at level
``1 - alpha/2`` (Bonferroni), gives a lower confidence bound on the mechanism's true epsilon at level
``1 - alpha``.
"""
from __future__ import annotations

__all__ = ["clopper_pearson_upper", "epsilon_lower_bound"]


def clopper_pearson_upper(k, n, alpha: float):
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial proportion (k successes of n)."""
    import numpy as np
    from scipy.special import betaincinv  # quantile of Beta(k+1, n-k); lighter than scipy.stats

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    out = betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - alpha)
    return np.where(k >= n, 1.0, out)


def epsilon_lower_bound(fp, fn, n0, n1, delta: float, confidence: float = 0.95):
    """``max(ln((1-delta-FNR_u)/FPR_u), ln((1-delta-FPR_u)/FNR_u), 0)`` with CP upper bounds at 1-alpha/2.

    ``fp``: draws on D0 inside the rejection region (of ``n0``); ``fn``: draws on D1 outside it (of ``n1``).
    Returns ``(eps_lb, fpr_upper, fnr_upper)`` (numpy arrays broadcast over the inputs).
    """
    import numpy as np

    alpha = 1 - confidence
    fpr_u = clopper_pearson_upper(fp, n0, alpha / 2)
    fnr_u = clopper_pearson_upper(fn, n1, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1 - delta - fnr_u, 0.0)) - np.log(fpr_u)
        b = np.log(np.maximum(1 - delta - fpr_u, 0.0)) - np.log(fnr_u)
    eps = np.maximum(np.maximum(np.nan_to_num(a, nan=0.0, neginf=0.0), np.nan_to_num(b, nan=0.0, neginf=0.0)), 0.0)
    return eps, fpr_u, fnr_u
