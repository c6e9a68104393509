"""Moments accountant for iterative mechanisms (DP-EM: Park, Foulds, Chaudhuri & Welling 2017, supplement
Sec. 2), plus linear composition.

The log moment of a mechanism M at order ``lambda > 0`` is ``a_M(lambda) = log E[exp(lambda Z)]``, Z the
privacy-loss random variable, maximised over neighbouring datasets. Log moments *add* under adaptive
composition, so everything is kept in log space (the MGFs themselves overflow quickly):

* Laplace mechanism, L1 sensitivity ``Delta``, per-coordinate scale ``b`` (Park et al. 2017, supplement
  2.1; the worst case is ``mu = Delta e_j``), with ``e = Delta / b``:
  ``a(lambda) = log( (lambda+1)/(2 lambda+1) exp(lambda e) + lambda/(2 lambda+1) exp(-(lambda+1) e) )``.
* Gaussian mechanism, L2 sensitivity ``Delta``, noise ``N(0, sigma^2 I)`` (supplement 2.2), with
  ``s = sigma / Delta``: ``a(lambda) = (lambda + lambda^2) / (2 s^2)``.

Conversion to ``(epsilon, delta)`` (tail bound of Abadi et al. 2016):
``epsilon(delta) = min_lambda (a(lambda) + log(1/delta)) / lambda`` ("classic"), or the sharper
``epsilon = a/lambda + log1p(-1/alpha) - log(delta alpha)/(alpha - 1)`` with ``alpha = lambda + 1``
("improved", Canonne-Kamath-Steinke 2020 / Asoodeh et al. 2020, as used by dp-accounting).

Relation to Renyi DP: ``a(lambda) = lambda * RDP(alpha = lambda + 1)``, so these numbers can be checked
against an RDP accountant (the tests do so against ``dp_accounting.rdp.RdpAccountant``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "DEFAULT_LAMBDAS",
    "laplace_log_moment",
    "gaussian_log_moment",
    "MomentsAccountant",
    "linear_composition",
    "calibrate_noise_multiplier",
]

# the default RDP orders of dp-accounting, minus one (lambda = alpha - 1), restricted to lambda > 0
DEFAULT_LAMBDAS: tuple[float, ...] = tuple(
    a - 1.0 for a in ([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512, 1024])
)


def laplace_log_moment(lam, eps):
    """``log E[exp(lambda Z)]`` of the Laplace mechanism with ``eps = Delta_1 / b`` (supplement 2.1), in
    log space: ``logaddexp(log((l+1)/(2l+1)) + l e, log(l/(2l+1)) - (l+1) e)``."""
    lam = np.asarray(lam, dtype=np.float64)
    eps = np.asarray(eps, dtype=np.float64)
    with np.errstate(divide="ignore"):
        a = np.log(lam + 1.0) - np.log(2.0 * lam + 1.0) + lam * eps
        b = np.log(lam) - np.log(2.0 * lam + 1.0) - (lam + 1.0) * eps
    return np.logaddexp(a, b)


def gaussian_log_moment(lam, noise_multiplier):
    """``log E[exp(lambda Z)] = (lambda + lambda^2) / (2 s^2)``, ``s = sigma / Delta_2`` (supplement 2.2)."""
    lam = np.asarray(lam, dtype=np.float64)
    s = np.asarray(noise_multiplier, dtype=np.float64)
    return (lam + lam * lam) / (2.0 * s * s)


@dataclass
class MomentsAccountant:
    """Accumulates log moments at a grid of orders ``lambdas``; compose, then ask for epsilon or delta."""

    lambdas: Sequence[float] = DEFAULT_LAMBDAS
    log_moments: np.ndarray = field(init=False)
    events: list[tuple[str, float, int]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        lam = np.asarray(self.lambdas, dtype=np.float64)
        if lam.ndim != 1 or lam.size == 0 or not np.all(lam > 0):
            raise ValueError("lambdas must be a non-empty 1-D sequence of positive orders")
        self.lambdas = lam
        self.log_moments = np.zeros_like(lam)

    def compose_laplace(self, eps_per_step: float, count: int = 1) -> "MomentsAccountant":
        """``count`` Laplace mechanisms, each with ``Delta_1 / b = eps_per_step``."""
        if not (eps_per_step > 0 and math.isfinite(eps_per_step)):
            raise ValueError(f"eps_per_step must be finite and > 0, got {eps_per_step!r}")
        self.log_moments = self.log_moments + count * laplace_log_moment(self.lambdas, eps_per_step)
        self.events.append(("laplace", float(eps_per_step), int(count)))
        return self

    def compose_gaussian(self, noise_multiplier: float, count: int = 1) -> "MomentsAccountant":
        """``count`` Gaussian mechanisms with ``sigma / Delta_2 = noise_multiplier``."""
        if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
            raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
        self.log_moments = self.log_moments + count * gaussian_log_moment(self.lambdas, noise_multiplier)
        self.events.append(("gaussian", float(noise_multiplier), int(count)))
        return self

    @property
    def rdp(self) -> np.ndarray:
        """Renyi DP at orders ``alpha = lambda + 1``: ``a(lambda) / lambda``."""
        return self.log_moments / self.lambdas

    def get_epsilon(self, delta: float, conversion: str = "classic") -> float:
        """Smallest epsilon over the order grid for the given delta."""
        if not (0 < delta < 1):
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        lam = self.lambdas
        if conversion == "classic":
            eps = (self.log_moments + math.log(1.0 / delta)) / lam
        elif conversion == "improved":
            alpha = lam + 1.0
            eps = self.rdp + np.log1p(-1.0 / alpha) - np.log(delta * alpha) / (alpha - 1.0)
            eps = np.where(alpha > 1.01, eps, np.inf)
        else:
            raise ValueError(f"conversion must be 'classic' or 'improved', got {conversion!r}")
        return float(max(0.0, np.min(eps)))

    def get_delta(self, epsilon: float) -> float:
        """``delta = min_lambda exp(a(lambda) - lambda epsilon)`` (classic tail bound), capped at 1."""
        return float(min(1.0, np.exp(np.min(self.log_moments - self.lambdas * epsilon))))


def linear_composition(epsilons: Iterable[float], deltas: Iterable[float] | None = None) -> tuple[float, float]:
    """Basic sequential composition: ``(sum eps_i, sum delta_i)``."""
    e = float(sum(epsilons))
    d = float(sum(deltas)) if deltas is not None else 0.0
    return e, d


def calibrate_noise_multiplier(epsilon_of, target_epsilon: float, lo: float = 1e-3, hi: float = 1e6,
                               rel_tol: float = 1e-10) -> float:
    """Smallest multiplier ``m`` with ``epsilon_of(m) <= target_epsilon`` (``epsilon_of`` decreasing), by
    bisection in log space. Runs on the host: calibration happens once per release, before any noise."""
    if epsilon_of(hi) > target_epsilon:
        raise ValueError(f"target epsilon {target_epsilon} unreachable even with multiplier {hi}")
    if epsilon_of(lo) <= target_epsilon:
        return lo
    a, b = math.log(lo), math.log(hi)
    while b - a > rel_tol:
        mid = 0.5 * (a + b)
        if epsilon_of(math.exp(mid)) > target_epsilon:
            a = mid
        else:
            b = mid
    return math.exp(b)
