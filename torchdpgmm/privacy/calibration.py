"""Noise calibrations as pure torch functions (batched, on the input's device, no host round trip).

Every function accepts Python numbers or tensors (broadcast elementwise). Tensor inputs give float64
tensors on the inputs' device; Python numbers give a Python float. Validation of the public privacy
parameters happens first (it reads their values once; they are public).

Gaussian differential privacy (Dong, Roth & Su 2019): a Gaussian mechanism with L2 sensitivity Delta
and noise sigma is mu-GDP with ``mu = Delta / sigma``, and mu-GDP is (eps, delta)-DP exactly when

    delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)                  (Balle & Wang 2018, Thm 8)

``gdp_mu`` inverts this in mu (the analytic Gaussian mechanism, ``sigma = Delta / gdp_mu``), always on
the safe side (the returned mu satisfies ``delta(eps; mu) <= delta``).

The rule of Liu, Scaglione & Peisert (2025), condition (10) with ``Gamma = I/sigma^2``, is
``sigma = Delta sqrt(2 ln(2/delta)) / eps`` (:func:`paper_gaussian_sigma`, kept for the as-published
mode; it is not (eps, delta)-DP for large eps); the classical rule of Dwork & Roth (2014, Thm A.1) is
``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (valid for eps <= 1 only: Dwork & Roth 2014, Thm A.1 states
eps < 1; eps = 1 holds too, tests/test_front_door_leftovers.py).

zCDP (Bun & Steinke 2016): rho-zCDP implies (eps, delta)-DP with the conversion of Canonne, Kamath &
Steinke (2020, Cor. 13): ``delta = min_{a > 1} exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a``.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch

from torchdpgmm._validation import check_delta, check_epsilon

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gaussian_delta",
    "analytic_gaussian_sigma",
    "laplace_scale",
    "paper_gaussian_sigma",
    "classical_gaussian_sigma",
    "GAUSSIAN_RULES",
    "gaussian_sigma",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
    "block_sigmas",
]

_BISECT_STEPS = 110  # bracket widths shrink by 2^-110: far below float64 resolution


def _prepare(*args: Any) -> tuple[list[torch.Tensor], bool]:
    """Broadcast float64 tensors on the first tensor argument's device; flag whether any was a tensor."""
    device = next((a.device for a in args if torch.is_tensor(a)), None)
    ts = [torch.as_tensor(a, dtype=torch.float64, device=device) if not torch.is_tensor(a)
          else a.detach().to(dtype=torch.float64) for a in args]
    return list(torch.broadcast_tensors(*ts)), device is not None


def _out(t: torch.Tensor, is_tensor: bool) -> Any:
    return t if is_tensor else float(t)


def _check_sensitivity(sens: torch.Tensor) -> None:
    if not bool(torch.isfinite(sens).all()) or bool((sens < 0).any()):
        raise ValueError("sensitivity must be finite and >= 0")


#: a bound on the rounding of each float64 term of :func:`_gdp_delta`, relative to the term's size (a few ulps
#: each for the quotients, ``log_ndtr``, ``exp`` and the sums, with room to spare)
_ROUNDING = 8 * 2.0 ** -52


def _gdp_delta(eps: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Unvalidated core of :func:`gdp_delta`, an upper bound (log space; exact 0 for mu = 0).

    ``delta = Phi(a) (1 - exp(lb - la))`` with ``la = log Phi(a)``, ``lb = eps + log Phi(b)``. When mu is small,
    ``la`` and ``lb`` are large and nearly equal, and their difference loses digits (a relative error of 2e-10 in
    delta at mu = 1e-6, on the optimistic side as often as not). The difference is therefore taken smaller by
    ``err`` and ``Phi(a)`` larger by a relative ``_ROUNDING (|la| + 1)``. These cover the rounding of ``log_ndtr``
    (within 2.5 ulps of the exact value for negative arguments) and of the ``+- mu/2`` sums, but not the rounding
    of the shared ``eps/mu``, which can exceed them for ``Phi(a)`` alone at large mu: delta is stationary in it
    (``e^eps phi(b) = phi(a)``), so it cancels, as long as ``a`` and ``b`` are formed from the SAME rounded
    ``eps/mu`` (keep it so). The value is then never below the exact delta while that is at least 2.2e-308
    (tests/test_privacy_calibration.py checks it against 80-digit arithmetic; an independent review searched
    1.8 million points)."""
    safe = torch.where(mu > 0, mu, torch.ones_like(mu))
    t = eps / safe  # one rounding shared by a and b (see above)
    la = torch.special.log_ndtr(-t + safe / 2)
    lb = eps + torch.special.log_ndtr(-t - safe / 2)
    err = _ROUNDING * (eps.abs() + la.abs() + lb.abs() + 1)
    d = torch.exp(la) * (1 + _ROUNDING * (la.abs() + 1)) * -torch.expm1(torch.clamp(lb - la - err, max=0.0))
    return torch.where(mu > 0, torch.clamp(d, min=0.0), torch.zeros_like(d))


def gdp_delta(epsilon: Any, mu: Any) -> Any:
    """delta(eps) of a mu-GDP mechanism (tight; Balle & Wang 2018 Thm 8; Dong, Roth & Su 2019 Cor. 2.13).

    ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, evaluated in log space; 0 for mu = 0. The
    value is an upper bound: never below the exact delta, above it by less than 1e-8 relative from mu = 0.01 on
    and by up to 1% at mu = 1e-8, where float64 cannot resolve the difference (see ``_gdp_delta``). So every
    calibration built on it (:func:`gdp_epsilon`, :func:`gdp_mu`) lands on the safe side.
    """
    (eps, mu), is_t = _prepare(epsilon, mu)
    if not bool(torch.isfinite(eps).all()) or bool((eps < 0).any()):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    if not bool(torch.isfinite(mu).all()) or bool((mu < 0).any()):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    return _out(_gdp_delta(eps, mu), is_t)


def gaussian_delta(sigma: Any, epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Delta of the Gaussian mechanism at ``epsilon``, ``gdp_delta(epsilon, sensitivity / sigma)``: exact up to
    rounding, never below the exact value."""
    (s, e, d), is_t = _prepare(sigma, epsilon, sensitivity)
    if not bool((s > 0).all()):
        raise ValueError("sigma must be > 0")
    _check_sensitivity(d)
    return _out(_gdp_delta(e, d / s), is_t)


def gdp_epsilon(delta: Any, mu: Any) -> Any:
    """Smallest epsilon >= 0 with ``gdp_delta(epsilon, mu) <= delta`` (batched bisection, safe side).

    The bracket's upper end is the zCDP bound ``mu^2/2 + mu sqrt(2 ln(1/delta))`` (rho = mu^2/2), which
    is always sufficient; the returned value is the bracket's upper end after bisection.
    """
    check_delta(delta)
    (dl, mu), is_t = _prepare(delta, mu)
    if not bool(torch.isfinite(mu).all()) or bool((mu < 0).any()):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    lo = torch.zeros_like(mu)
    hi = mu * mu / 2 + mu * torch.sqrt(2 * torch.log(1 / dl)) + 1e-12
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        bad = _gdp_delta(mid, mu) > dl
        lo, hi = torch.where(bad, mid, lo), torch.where(bad, hi, mid)
    hi = torch.where(_gdp_delta(torch.zeros_like(mu), mu) <= dl, torch.zeros_like(hi), hi)
    return _out(hi, is_t)


def gdp_mu(epsilon: Any, delta: Any) -> Any:
    """Largest mu such that mu-GDP is (epsilon, delta)-DP (the analytic Gaussian calibration).

    Batched bisection on ``delta(eps; mu) <= delta`` (increasing in mu). The bracket starts at the zCDP
    lower bound ``mu_0`` solving ``mu^2/2 + mu sqrt(2 ln(1/delta)) = eps`` (feasible in exact arithmetic; where
    the bound of :func:`gdp_delta` says otherwise, the bracket is ``[0, mu_0]``) and is grown by doubling a fixed
    number of times; the returned value is the feasible (lower) end, checked by that bound at every step.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    (eps, dl), is_t = _prepare(epsilon, delta)
    L = torch.sqrt(-2 * torch.log(dl))
    start = 2 * eps / (L + torch.sqrt(L * L + 2 * eps))  # the zCDP root of mu^2/2 + mu L = eps, without cancellation
    # feasible in exact arithmetic, and checked: where rounding says otherwise it is the bracket's upper end, 0 its lower
    ok = _gdp_delta(eps, start) <= dl
    lo, hi = torch.where(ok, start, torch.zeros_like(start)), torch.where(ok, 2 * start, start)
    for _ in range(64):  # grow hi until infeasible (public values only)
        ok = _gdp_delta(eps, hi) <= dl
        if not bool(ok.any()):
            break
        lo, hi = torch.where(ok, hi, lo), torch.where(ok, 2 * hi, hi)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        ok = _gdp_delta(eps, mid) <= dl
        lo, hi = torch.where(ok, mid, lo), torch.where(ok, hi, mid)
    return _out(lo, is_t)


def analytic_gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0) -> Any:
    """The analytic Gaussian mechanism (Balle & Wang 2018, Thm 8): the smallest sigma with
    ``Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta``, i.e. ``sensitivity / gdp_mu``."""
    mu = gdp_mu(epsilon, delta)
    (mu_t, sens), is_t = _prepare(mu, sensitivity)
    _check_sensitivity(sens)
    return _out(sens / mu_t, is_t)


def laplace_scale(epsilon: Any, sensitivity: Any = 1.0) -> Any:
    """Laplace scale ``b = Delta_1 / epsilon`` of the epsilon-DP Laplace mechanism (Dwork et al. 2006)."""
    check_epsilon(epsilon)
    (eps, sens), is_t = _prepare(epsilon, sensitivity)
    _check_sensitivity(sens)
    return _out(sens / eps, is_t)


def paper_gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0) -> Any:
    """The as-published rule ``sigma = Delta sqrt(2 ln(2/delta)) / eps`` (Liu, Scaglione & Peisert 2025,
    condition (10)); NOT (eps, delta)-DP for large eps (about eps > 9.4 at delta = 1e-5)."""
    check_epsilon(epsilon)
    check_delta(delta)
    (eps, dl, sens), is_t = _prepare(epsilon, delta, sensitivity)
    _check_sensitivity(sens)
    return _out(sens * torch.sqrt(2 * torch.log(2 / dl)) / eps, is_t)


def classical_gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0) -> Any:
    """The classical rule ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (Dwork & Roth 2014, Thm A.1;
    valid for eps <= 1 only)."""
    check_epsilon(epsilon)
    check_delta(delta)
    (eps, dl, sens), is_t = _prepare(epsilon, delta, sensitivity)
    _check_sensitivity(sens)
    return _out(sens * torch.sqrt(2 * torch.log(1.25 / dl)) / eps, is_t)


GAUSSIAN_RULES = ("paper", "classical", "analytic")


def gaussian_sigma(epsilon: Any, delta: Any, sensitivity: Any = 1.0, *, rule: str) -> Any:
    """Noise standard deviation of an (epsilon, delta) Gaussian mechanism of L2 ``sensitivity`` by ``rule``.

    ``"paper"``: :func:`paper_gaussian_sigma` (Liu, Scaglione & Peisert 2025, condition (10); not DP for
    large epsilon); ``"classical"``: :func:`classical_gaussian_sigma` (Dwork & Roth 2014, Thm A.1;
    epsilon <= 1 only); ``"analytic"``: :func:`analytic_gaussian_sigma` (Balle & Wang 2018, Thm 8; exact
    for every epsilon). A tensor ``epsilon`` of a floating dtype gives the result in that dtype.
    """
    fns = {"paper": paper_gaussian_sigma, "classical": classical_gaussian_sigma, "analytic": analytic_gaussian_sigma}
    if rule not in fns:
        raise ValueError(f"rule must be one of {GAUSSIAN_RULES}, got {rule!r}")
    out = fns[rule](epsilon, delta, sensitivity)
    if torch.is_tensor(epsilon) and epsilon.dtype.is_floating_point:
        low = out.to(epsilon.dtype)  # rounded to nearest: up where it went down, so the noise is never smaller
        return torch.where(low.to(out.dtype) < out, torch.nextafter(low, torch.full_like(low, math.inf)), low)
    return out


def _zcdp_log_delta(eps: torch.Tensor, rho: torch.Tensor, steps: int = 80) -> torch.Tensor:
    """``min_a log[exp((a-1)(a rho - eps)) / (a-1) * (1-1/a)^a]`` by golden section over ``log(a-1)``
    (any order gives a valid delta, so an inexact minimum is only conservative)."""
    def f(t: torch.Tensor) -> torch.Tensor:
        am1 = torch.exp(t)
        a = am1 + 1
        return am1 * (a * rho - eps) - torch.log(am1) + a * torch.log1p(-1 / a)

    lo = torch.full_like(rho, math.log(1e-6))
    hi = torch.full_like(rho, math.log(1e7))
    g = (math.sqrt(5) - 1) / 2
    for _ in range(steps):
        m1, m2 = hi - g * (hi - lo), lo + g * (hi - lo)
        left = f(m1) <= f(m2)
        lo, hi = torch.where(left, lo, m1), torch.where(left, m2, hi)
    return torch.minimum(f(0.5 * (lo + hi)), torch.zeros_like(rho))


_GOLDEN = (math.sqrt(5) - 1) / 2
_LOG_ORDER_LO, _LOG_ORDER_HI = math.log(1e-6), math.log(1e7)


def _zcdp_log_delta_float(eps: float, rho: float, steps: int = 80) -> float:
    """:func:`_zcdp_log_delta` of two Python floats in Python floats, step for step: a scalar calibration's few
    thousand evaluations then cost microseconds each instead of a dozen tensor ops each (0.6 s of every sound release
    at a new epsilon went there). Equal to the tensor path up to the last bits of ``exp``/``log`` (the two libraries
    round a few arguments differently)."""
    def f(t: float) -> float:
        am1 = math.exp(t)
        a = am1 + 1
        return am1 * (a * rho - eps) - math.log(am1) + a * math.log1p(-1 / a)

    lo, hi = _LOG_ORDER_LO, _LOG_ORDER_HI
    for _ in range(steps):
        m1, m2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
        if f(m1) <= f(m2):
            hi = m2
        else:
            lo = m1
    v = f(0.5 * (lo + hi))
    return v if not v > 0.0 else 0.0  # min(v, 0), a NaN kept (as torch.minimum)


def zcdp_delta(rho: Any, epsilon: Any) -> Any:
    """delta(eps) implied by rho-zCDP (Canonne, Kamath & Steinke 2020, Cor. 13); 0 for rho = 0."""
    if not torch.is_tensor(rho) and not torch.is_tensor(epsilon):  # Python numbers: the float path
        r, e = float(rho), float(epsilon)
        if not math.isfinite(r) or r < 0 or e < 0 or math.isnan(e):
            raise ValueError("rho and epsilon must be finite and >= 0")
        return math.exp(_zcdp_log_delta_float(e, max(r, 1e-300))) if r > 0 else 0.0
    (r, e), is_t = _prepare(rho, epsilon)
    if not bool(torch.isfinite(r).all()) or bool((r < 0).any()) or bool((e < 0).any()):
        raise ValueError("rho and epsilon must be finite and >= 0")
    d = torch.exp(_zcdp_log_delta(e, torch.clamp(r, min=1e-300)))
    return _out(torch.where(r > 0, d, torch.zeros_like(d)), is_t)


def zcdp_epsilon(rho: Any, delta: Any) -> Any:
    """Smallest epsilon with ``zcdp_delta(rho, epsilon) <= delta`` (bisection; safe side): 0 where ``delta`` alone
    covers ``rho`` (``zcdp_delta(rho, 0) <= delta``), as :func:`gdp_epsilon` gives 0 there, not the bisection's
    last tiny step (a stage calibrated to that tiny epsilon got back a rho larger than the one it was given)."""
    check_delta(delta)
    if not torch.is_tensor(rho) and not torch.is_tensor(delta):  # Python numbers: the float path, step for step
        r, dl = float(rho), float(delta)
        if not math.isfinite(r) or r < 0:
            raise ValueError("rho must be finite and >= 0")
        lo, hi = 0.0, r + 2 * math.sqrt(r * math.log(1 / dl)) + 1e-12
        ld, rr = math.log(dl), max(r, 1e-300)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            if _zcdp_log_delta_float(mid, rr, steps=48) > ld:
                lo = mid
            else:
                hi = mid
        return hi if r > 0 and _zcdp_log_delta_float(0.0, rr, steps=48) > ld else 0.0
    (r, dl), is_t = _prepare(rho, delta)
    if not bool(torch.isfinite(r).all()) or bool((r < 0).any()):
        raise ValueError("rho must be finite and >= 0")
    lo = torch.zeros_like(r)
    hi = r + 2 * torch.sqrt(r * torch.log(1 / dl)) + 1e-12  # Bun & Steinke 2016, Prop. 1.3
    ld = torch.log(dl)
    rr = torch.clamp(r, min=1e-300)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        bad = _zcdp_log_delta(mid, rr, steps=48) > ld
        lo, hi = torch.where(bad, mid, lo), torch.where(bad, hi, mid)
    covered = _zcdp_log_delta(torch.zeros_like(r), rr, steps=48) <= ld  # delta alone covers rho: epsilon 0
    return _out(torch.where((r > 0) & ~covered, hi, torch.zeros_like(hi)), is_t)


def zcdp_rho(epsilon: Any, delta: Any) -> Any:
    """Largest rho such that rho-zCDP is (epsilon, delta)-DP under :func:`zcdp_delta` (bisection, safe side).

    Python-number calls are memoised (a pure function of two public floats; a sweep calls it once per
    release with the same few values)."""
    check_epsilon(epsilon)
    check_delta(delta)
    if not torch.is_tensor(epsilon) and not torch.is_tensor(delta):
        return _zcdp_rho_float(float(epsilon), float(delta))
    return _zcdp_rho(epsilon, delta)


_ZCDP_RHO_MEMO: dict[tuple[float, float], float] = {}


def _zcdp_rho_float(epsilon: float, delta: float) -> float:
    key = (epsilon, delta)
    if key not in _ZCDP_RHO_MEMO:
        if len(_ZCDP_RHO_MEMO) >= 4096:
            _ZCDP_RHO_MEMO.clear()
        _ZCDP_RHO_MEMO[key] = _zcdp_rho_scalar(epsilon, delta)
    return _ZCDP_RHO_MEMO[key]


def _zcdp_rho_scalar(eps: float, dl: float) -> float:
    """:func:`_zcdp_rho` of two Python floats in Python floats (:func:`_zcdp_log_delta_float`), step for step."""
    L = math.log(1 / dl)
    lo, hi = (math.sqrt(L + eps) - math.sqrt(L)) ** 2, eps  # Bun & Steinke 2016, Prop. 1.3: lo feasible
    ld = math.log(dl)
    for _ in range(64):
        if not _zcdp_log_delta_float(eps, hi, steps=48) <= ld:
            break
        lo, hi = hi, 2 * hi
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if _zcdp_log_delta_float(eps, mid, steps=48) <= ld:
            lo = mid
        else:
            hi = mid
    return lo


def prime_zcdp_rho(epsilons: list[float], delta: float) -> None:
    """Memoise :func:`zcdp_rho` of several public epsilons at one delta (each value that of its own scalar call: a
    sweep's epsilon grid is calibrated once, before its releases)."""
    todo = sorted({float(e) for e in epsilons if (float(e), float(delta)) not in _ZCDP_RHO_MEMO})
    for e in todo:
        check_epsilon(e)
    check_delta(delta)
    for e in todo:
        _zcdp_rho_float(e, float(delta))


def _zcdp_rho(epsilon: Any, delta: Any) -> Any:
    (eps, dl), is_t = _prepare(epsilon, delta)
    L = torch.log(1 / dl)
    lo = (torch.sqrt(L + eps) - torch.sqrt(L)) ** 2  # Bun & Steinke 2016, Prop. 1.3: feasible
    hi = eps.clone()  # rho = eps already gives delta >= ... > delta for every useful setting; grown below
    ld = torch.log(dl)
    for _ in range(64):
        ok = _zcdp_log_delta(eps, hi, steps=48) <= ld
        if not bool(ok.any()):
            break
        lo, hi = torch.where(ok, hi, lo), torch.where(ok, 2 * hi, hi)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        ok = _zcdp_log_delta(eps, mid, steps=48) <= ld
        lo, hi = torch.where(ok, mid, lo), torch.where(ok, hi, mid)
    return _out(lo, is_t)


def block_sigmas(epsilon: float, delta: float, sensitivities: dict[str, float], split: dict[str, float], *,
                 accountant: str = "gdp") -> dict[str, float]:
    """Noise standard deviations for Gaussian blocks that together are exactly (epsilon, delta)-DP.

    Block ``b`` of L2 sensitivity ``Delta_b`` gets a share ``w_b`` (``split``, normalised) of the budget:
    ``accountant="gdp"``: ``sigma_b = Delta_b / (mu sqrt(w_b))`` with ``mu = gdp_mu(epsilon, delta)``, so
    ``sum_b (Delta_b/sigma_b)^2 = mu^2`` (Dong, Roth & Su 2019; continuous Gaussian noise);
    ``accountant="zcdp"``: ``sigma_b = Delta_b / sqrt(2 rho w_b)`` with ``rho = zcdp_rho(epsilon, delta)``
    (valid for discrete Gaussian noise too, Canonne, Kamath & Steinke 2020; ``Delta_b`` in grid units).
    """
    if set(sensitivities) != set(split):
        raise ValueError(f"split keys {sorted(split)} must match the blocks {sorted(sensitivities)}")
    if any(not (w > 0 and math.isfinite(w)) for w in split.values()):
        raise ValueError(f"split fractions must be finite and > 0, got {split!r}")
    tot = float(sum(split.values()))
    if accountant == "gdp":
        scale = float(gdp_mu(float(epsilon), float(delta)))
    elif accountant == "zcdp":
        scale = math.sqrt(2 * float(zcdp_rho(float(epsilon), float(delta))))
    else:
        raise ValueError(f"accountant must be 'gdp' or 'zcdp', got {accountant!r}")
    return {b: float(sensitivities[b]) / (scale * math.sqrt(split[b] / tot)) for b in sensitivities}
