"""L1 sensitivities of the class-statistic queries of Xi, Kantarcioglu & Inan (2011), Section 3.

Every record lies in ``[0, 1]^d`` (Section 1.1); sibling databases have the same size ``n`` and differ
in one record (replace-one adjacency, the paper's reference [3]). The covariance queries use the
``1/n`` divisor of the paper (proof of Theorem 3.5: ``Var = sum x^2 / n - xbar^2``).

Beyond the paper: the lower bound of Theorems 3.5-3.7 is the *exact* sensitivity. Adding a record
``a`` to ``n-1`` common records with mean ``c`` gives ``Cov_n = M/n + (n-1)/n^2 (a-c)(a-c)^T`` (``M`` the
common scatter), so two siblings differ by ``(n-1)/n^2 (u u^T - v v^T)`` with ``u = a-c``, ``v = b-c``
in the same unit box shifted by ``-c``; on such a box every product ``u_k u_l`` (and square) ranges
over an interval of length at most 1, so each upper-triangle entry changes by at most ``(n-1)/n^2``,
and ``x_common = 0, x_1 = 1, x_2 = 0`` attains it. :func:`covariance_matrix_sensitivity` therefore
offers ``bound="exact"`` beside the paper's ``"upper"`` (3x larger) and ``"lower"``.
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "mean_sensitivity",
    "sum_sensitivity",
    "median_sensitivity",
    "sum_and_size_sensitivity",
    "variance_sensitivity_bounds",
    "covariance_sensitivity_bounds",
    "covariance_matrix_sensitivity_bounds",
    "covariance_matrix_sensitivity",
    "mean_sensitivity_all_n",
    "covariance_matrix_sensitivity_all_n",
    "range_adjusted_sensitivities",
]


def _check_int(x: Any, name: str, minimum: int) -> None:
    if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {x!r}")


def _n_tensor(n: Any, minimum: int) -> torch.Tensor:
    t = torch.as_tensor(n, dtype=torch.float64) if not torch.is_tensor(n) else n.to(torch.float64)
    if bool((t < minimum).any()) or not bool(torch.isfinite(t).all()):
        raise ValueError(f"n must be >= {minimum} (finite), got {n!r}")
    return t


def mean_sensitivity(n: Any, d: int) -> torch.Tensor:
    """Theorem 3.1: the d means of ``n`` records in ``[0,1]^d`` have L1 sensitivity ``d / n``."""
    _check_int(d, "d", 1)
    return d / _n_tensor(n, 1)


def sum_sensitivity(d: int) -> float:
    """Theorem 3.2: the d attribute sums have L1 sensitivity ``d`` whatever ``n``."""
    _check_int(d, "d", 1)
    return float(d)


def median_sensitivity(d: int) -> float:
    """Theorem 3.3: the d attribute medians have L1 sensitivity ``d`` whatever ``n``."""
    _check_int(d, "d", 1)
    return float(d)


def sum_and_size_sensitivity(d: int) -> float:
    """Theorem 3.4: sums plus the sample size (sensitivity 0 under replace-one) have sensitivity ``d``."""
    return sum_sensitivity(d)


def variance_sensitivity_bounds(n: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Theorem 3.5: ``1/n - 1/n^2 <= S(Var_1) <= 3/n - 3/n^2`` for ``n >= 2`` (the lower one is exact)."""
    t = _n_tensor(n, 2)
    c = 1.0 / t - 1.0 / t**2
    return c, 3.0 * c


def covariance_sensitivity_bounds(n: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Theorem 3.6: the same bounds for a single covariance ``Cov_{1,2}``."""
    return variance_sensitivity_bounds(n)


def covariance_matrix_sensitivity_bounds(n: Any, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Theorem 3.7: the upper triangle of the covariance matrix has sensitivity between
    ``(1/n - 1/n^2) d(d+1)/2`` and ``(3/n - 3/n^2) d(d+1)/2``."""
    _check_int(d, "d", 1)
    lo, hi = variance_sensitivity_bounds(n)
    m = d * (d + 1) / 2
    return lo * m, hi * m


def covariance_matrix_sensitivity(n: Any, d: int, bound: str = "upper") -> torch.Tensor:
    """Sensitivity used to calibrate the covariance release: ``"upper"`` (Theorem 3.7, what the paper
    proves), ``"lower"``/``"exact"`` (Theorem 3.7's lower bound, which is attained and is exact; see the
    module docstring)."""
    lo, hi = covariance_matrix_sensitivity_bounds(n, d)
    if bound == "upper":
        return hi
    if bound in ("lower", "exact"):
        return lo
    raise ValueError(f"bound must be 'upper', 'lower' or 'exact', got {bound!r}")


def mean_sensitivity_all_n(d: int) -> float:
    """Corollary 3.1: over all database sizes the mean query has sensitivity ``d`` (attained at n = 1)."""
    _check_int(d, "d", 1)
    return float(d)


def covariance_matrix_sensitivity_all_n(d: int) -> float:
    """Corollary 3.2: over all sizes ``S(Sigma) <= 3 d (d+1) / 8`` (Theorem 3.7's upper bound at n = 2)."""
    _check_int(d, "d", 1)
    return 3.0 * d * (d + 1) / 8.0


def range_adjusted_sensitivities(
    n: torch.Tensor, widths: torch.Tensor, bound: str = "upper"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and upper-triangle covariance sensitivities for records in the box ``prod_i [lo_i, lo_i + w_i]``.

    Rescaling attribute ``i`` by ``w_i`` multiplies a mean by ``w_i`` and a covariance entry ``(k, l)`` by
    ``w_k w_l``; Theorems 3.1 and 3.7 are sums of per-entry bounds, so the adjusted sensitivities are
    ``sum_i w_i / n`` and ``c(n) sum_{k<=l} w_k w_l`` with ``c(n) = 3/n - 3/n^2`` (``bound="upper"``) or
    ``1/n - 1/n^2`` (``"lower"``/``"exact"``). Shapes: ``n (...)``, ``widths (..., d)`` -> two ``(...)`` tensors.
    """
    widths = widths.to(torch.float64) if not widths.dtype.is_floating_point else widths
    n = torch.as_tensor(n, dtype=widths.dtype, device=widths.device)
    lo_c = 1.0 / n - 1.0 / n**2
    if bound == "upper":
        c = 3.0 * lo_c
    elif bound in ("lower", "exact"):
        c = lo_c
    else:
        raise ValueError(f"bound must be 'upper', 'lower' or 'exact', got {bound!r}")
    mean_s = widths.sum(-1) / n
    s = widths.sum(-1)
    upper_pairs = 0.5 * (s**2 + (widths**2).sum(-1))  # sum_{k<=l} w_k w_l
    return mean_s, c * upper_pairs
