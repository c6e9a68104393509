"""Exact discrete samplers (Canonne, Kamath & Steinke 2020, Algorithms 1-3), batched in torch.

Everything here uses integer arithmetic only: a Bernoulli(n/d) is ``U < n`` with ``U`` uniform on
``{0, ..., d-1}`` (int64, exact: :func:`_uniform_below`), so there is no floating-point rounding for a
Mironov (2012)-style attack to exploit. Rejection loops repeat over fresh random draws for the entries
that were rejected; they never look at private values (the noise is drawn before it is added).

- :func:`bernoulli_exp_neg` - ``Bernoulli(exp(-n/d))`` (Algorithm 1).
- :func:`discrete_laplace_noise` - ``P(k) ∝ exp(-|k| s/t)`` on Z (Algorithm 2).
- :func:`discrete_gaussian_noise` - ``P(k) ∝ exp(-k^2 / (2 sigma^2))`` on Z (Algorithm 3).
- :func:`add_noise` - the release helper with the ``noise="continuous" | "discrete"`` switch, and
  :func:`discrete_sensitivity` for the accounting of real-valued statistics snapped to a grid.

Rational parameters. A float scale is turned into a rational **no smaller** than it (more noise, so the
guarantee computed from the float still holds), exactly with :class:`fractions.Fraction`: the Laplace
scale ``b`` becomes ``t/s`` with ``s = 2^p``, ``t = ceil(b s)`` (about 20 bits; relative excess below
1e-6); the Gaussian variance ``sigma^2`` becomes ``t q / den`` with ``t = floor(sigma) + 1`` (the proposal
scale of Algorithm 3), ``den = 2^p`` and ``q = ceil(sigma^2 den / t)`` (about 20 bits or more; relative
excess below ``max(2^-20, 1/sigma)``). Writing the variance as a multiple of ``t / den`` keeps every
integer of Algorithm 3 small. :func:`rational_laplace_scale` / :func:`rational_gaussian_variance` return
the values used; :func:`add_noise` reports the scale actually used.

Truncation. To keep every product inside int64, Algorithm 3 rejects a proposal ``Y`` with
``| |Y| den - q | > 2^31``; such a proposal would be accepted with probability below
``exp(-2^62 / D) <= exp(-2^10)`` (``D = 2 den t q <= 2^52`` over the parameter ranges enforced), so
the output's distance in total variation to the exact discrete Gaussian is below ``e^-1000``.
Parameter ranges (grid units): Gaussian ``0.25 <= sigma <= 2^25``, Laplace ``2^-20 <= b <= 2^40``.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import torch

__all__ = [
    "bernoulli_exp_neg",
    "discrete_laplace_noise",
    "discrete_gaussian_noise",
    "rational_laplace_scale",
    "rational_gaussian_variance",
    "discrete_sensitivity",
    "add_noise",
]

_TWO62 = 2 ** 62


def _uniform_below(m: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Exact uniform integers on ``{0, ..., m-1}`` elementwise (1-D int64 ``m`` in [1, 2^62]).

    ``randint(0, 2^62)`` is exactly uniform (a power of two); values at or above the largest multiple of
    ``m`` are redrawn (probability < m / 2^62), so ``u mod m`` has no modulo bias."""
    limit = (_TWO62 // m) * m
    u = torch.randint(0, _TWO62, m.shape, generator=generator, dtype=torch.int64, device=m.device)
    bad = u >= limit
    while bool(bad.any()):
        u = torch.where(bad, torch.randint(0, _TWO62, m.shape, generator=generator, dtype=torch.int64,
                                           device=m.device), u)
        bad = u >= limit
    return u % m


def _bern_exp_neg_frac(num: torch.Tensor, den: torch.Tensor, generator) -> torch.Tensor:
    """Bernoulli(exp(-num/den)) for 1-D int64 ``0 <= num <= den`` (Algorithm 1, gamma in [0, 1]): draw
    A_K ~ Bernoulli(gamma/K) for K = 1, 2, ... until the first 0; return 1 iff that K is odd.
    Runs on the shrinking set of entries still drawing."""
    K = torch.ones_like(num)
    idx = torch.arange(num.numel(), device=num.device)
    while idx.numel():
        kk = K[idx]
        a = _uniform_below(den[idx] * kk, generator) < num[idx]
        K[idx] = kk + a.to(kk.dtype)
        idx = idx[a]
    return K % 2 == 1


def _geometric_exp_neg1(n: int, generator, device) -> torch.Tensor:
    """1-D int64: successes before the first failure of i.i.d. Bernoulli(exp(-1)) trials.

    Each trial is Algorithm 1 at gamma = 1 (draw Bernoulli(1/K), K = 1, 2, ... until a 0; the trial
    succeeds iff that K is odd); the trials of all entries run as one flat loop with state (count, K)."""
    count = torch.zeros(n, dtype=torch.int64, device=device)
    K = torch.ones(n, dtype=torch.int64, device=device)
    idx = torch.arange(n, device=device)
    while idx.numel():
        k = K[idx]
        a = _uniform_below(k, generator) == 0  # Bernoulli(1/K)
        odd = k % 2 == 1
        trial_ok = ~a & odd  # trial ended with K odd: one more success
        count[idx[trial_ok]] += 1
        K[idx] = torch.where(a, k + 1, torch.ones_like(k))  # continue the trial, or start the next one
        idx = idx[a | trial_ok]
    return count


def bernoulli_exp_neg(num: torch.Tensor, den: torch.Tensor | int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Exact ``Bernoulli(exp(-num/den))`` elementwise for int64 ``num >= 0``, ``den >= 1`` (Canonne,
    Kamath & Steinke 2020, Algorithm 1): ``exp(-gamma) = exp(-1)^floor(gamma) exp(-frac(gamma))``, the
    first factor as "at least floor(gamma) successes of Bernoulli(exp(-1))" (a geometric count)."""
    num = torch.as_tensor(num, dtype=torch.int64)
    shape = num.shape
    num = num.reshape(-1)
    den = torch.as_tensor(den, dtype=torch.int64, device=num.device).expand(shape).reshape(-1)
    k = num // den
    r = num - k * den
    whole = torch.ones_like(num, dtype=torch.bool)
    need = (k > 0).nonzero(as_tuple=True)[0]
    if need.numel():
        whole[need] = _geometric_exp_neg1(need.numel(), generator, num.device) >= k[need]
    return (whole & _bern_exp_neg_frac(r, den, generator)).reshape(shape)


def _check_shape(shape: Any) -> tuple:
    return tuple(int(s) for s in shape)


def rational_laplace_scale(scale: float) -> tuple[int, int]:
    """``(t, s)`` with ``t/s >= scale`` (``s`` a power of two, ``t`` ~ 20 bits; see module docstring)."""
    b = float(scale)
    if not (math.isfinite(b) and 2.0 ** -20 <= b <= 2.0 ** 40):
        raise ValueError(f"discrete Laplace scale must lie in [2^-20, 2^40] (grid units), got {scale!r}")
    p = max(0, 20 - math.floor(math.log2(b)))
    s = 2 ** p
    t = math.ceil(Fraction(b) * s)
    return t, s


def rational_gaussian_variance(sigma: float) -> tuple[int, int, int]:
    """``(t, q, den)`` with ``sigma_r^2 = t q / den >= sigma^2``, ``t = floor(sigma) + 1`` the proposal
    scale of Algorithm 3, ``den`` a power of two and ``q`` of about 20 bits or more (module docstring)."""
    sg = float(sigma)
    if not (math.isfinite(sg) and 0.25 <= sg <= 2.0 ** 25):
        raise ValueError(f"discrete Gaussian sigma must lie in [0.25, 2^25] (grid units), got {sigma!r}")
    t = math.floor(sg) + 1
    var = Fraction(sg) ** 2
    p = max(0, 20 - math.floor(math.log2(var / t)))
    den = 2 ** p
    return t, math.ceil(var * den / t), den


def discrete_laplace_noise(shape: torch.Size | tuple, scale: float, generator: torch.Generator | None = None,
                           *, device: Any = None) -> torch.Tensor:
    """int64 draws with ``P(k) ∝ exp(-|k|/b)``, ``b = t/s >= scale`` (Algorithm 2 of Canonne, Kamath &
    Steinke 2020; ``scale`` public, rationalised by :func:`rational_laplace_scale`)."""
    t, s = rational_laplace_scale(scale)
    return _discrete_laplace_ts(_check_shape(shape), t, s, generator, device)


def _laplace_candidates(n: int, t: int, s: int, generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass of Algorithm 2 for ``n`` i.i.d. candidates: ``(values, accepted)``."""
    # exact uniform on {0..t-1} (torch.randint(0, t) reduces a 32/64-bit draw modulo t: a tiny bias)
    U = _uniform_below(torch.full((n,), t, dtype=torch.int64, device=device), generator)
    D = bernoulli_exp_neg(U, t, generator)
    V = _geometric_exp_neg1(n, generator, device)
    Y = (U + t * V) // s
    B = torch.randint(0, 2, (n,), generator=generator, dtype=torch.int64, device=device)
    return (1 - 2 * B) * Y, D & ~((B == 1) & (Y == 0))


def _fill(n: int, propose, accept_rate: float, device) -> torch.Tensor:
    """``n`` i.i.d. accepted candidates: propose i.i.d. candidates in rounds (about ``1.2 n_left / rate + 16``,
    ``rate`` the acceptance rate seen so far, starting from ``accept_rate``) and keep the accepted ones in
    order (acceptance never depends on the slot, so the kept values are i.i.d. from the target)."""
    got: list[torch.Tensor] = []
    have, proposed, accepted = 0, 0, 0
    while have < n:
        rate = max(0.02, accepted / proposed) if accepted else accept_rate
        m = int(1.2 * (n - have) / rate) + 16
        vals, ok = propose(m)
        proposed, accepted = proposed + m, accepted + int(ok.sum())
        kept = vals[ok][: n - have]
        got.append(kept)
        have += kept.numel()
    return torch.cat(got) if got else torch.zeros(0, dtype=torch.int64, device=device)


def _discrete_laplace_ts(shape: tuple, t: int, s: int, generator, device) -> torch.Tensor:
    n = math.prod(shape)
    out = _fill(n, lambda m: _laplace_candidates(m, t, s, generator, device), 0.5, device)
    return out.reshape(shape)


def discrete_gaussian_noise(shape: torch.Size | tuple, sigma: float, generator: torch.Generator | None = None,
                            *, device: Any = None) -> torch.Tensor:
    """int64 draws with ``P(k) ∝ exp(-k^2/(2 sigma_r^2))``, ``sigma_r^2 = t q/den >= sigma^2`` (Algorithm 3
    of Canonne, Kamath & Steinke 2020: discrete Laplace proposals of scale ``t = floor(sigma) + 1``
    accepted with probability ``exp(-(|Y| - sigma_r^2/t)^2 / (2 sigma_r^2))``; correct for any t > 0,
    efficient for t ~ sigma)."""
    t, q, den = rational_gaussian_variance(sigma)
    shape = _check_shape(shape)
    D = 2 * den * t * q  # acceptance exponent (|Y| - sigma_r^2/t)^2 / (2 sigma_r^2) = a^2 / D, a = |Y| den - q

    def propose(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        Y, ok = _laplace_candidates(m, t, 1, generator, device)
        a = Y.abs() * den - q
        small = a.abs() <= 2 ** 31
        a = torch.where(small, a, torch.zeros_like(a))
        return Y, ok & small & bernoulli_exp_neg(a * a, D, generator)

    return _fill(math.prod(shape), propose, 0.5, device).reshape(shape)


def discrete_sensitivity(sensitivity: float, *, grid: float = 1.0, dim: int = 1, norm: str = "l2",
                         integer: bool = False) -> float:
    """Sensitivity, in grid units, of a statistic snapped to the grid ``grid * Z^dim`` by rounding.

    ``integer=True`` (an integer-valued statistic on the unit grid): no rounding, ``sensitivity``.
    Otherwise, with ``r(x) = round(x / grid)`` and rounding errors ``e = r(x) - x/grid`` in
    ``[-1/2, 1/2]^dim``: ``r(x) - r(x') = (x - x')/grid + (e - e')`` and ``|e_i - e'_i| <= 1``, so

        ||r(x) - r(x')||_2 <= Delta_2 / grid + sqrt(dim),      ||r(x) - r(x')||_1 <= Delta_1 / grid + dim.

    A relative slack of 1e-9 covers the float64 rounding of ``x / grid``. (Choosing
    ``grid <= Delta / (100 sqrt(dim))`` keeps the inflation near 1%.)
    """
    if norm not in ("l1", "l2"):
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
    if not (grid > 0 and math.isfinite(grid)) or not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"grid must be > 0 and sensitivity >= 0, got grid={grid!r}, sensitivity={sensitivity!r}")
    if integer:
        if grid != 1.0:
            raise ValueError("integer=True needs grid=1")
        return float(sensitivity)
    extra = math.sqrt(dim) if norm == "l2" else float(dim)
    return (sensitivity / grid + extra) * (1 + 1e-9)


def _triu_coords(x: torch.Tensor, isometric: bool) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1]
    iu = torch.triu_indices(d, d, device=x.device)
    v = x[..., iu[0], iu[1]]
    if isometric:  # Frobenius-isometric coordinates: off-diagonal entries times sqrt 2
        v = torch.where(iu[0] != iu[1], v * math.sqrt(2.0), v)
    return v, iu


def _from_triu(v: torch.Tensor, iu: torch.Tensor, d: int, isometric: bool) -> torch.Tensor:
    if isometric:
        v = torch.where(iu[0] != iu[1], v / math.sqrt(2.0), v)
    out = torch.zeros(v.shape[:-1] + (d, d), dtype=v.dtype, device=v.device)
    out[..., iu[0], iu[1]] = v
    out[..., iu[1], iu[0]] = v
    return out


def add_noise(x: torch.Tensor, scale: Any, *, kind: str = "gaussian", noise: str = "continuous",
              grid: float = 1.0, symmetric: bool = False, isometric: bool | None = None,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, float]:
    """Release ``x`` plus noise; returns ``(noisy x, noise scale actually used)``.

    Args:
        x: the statistic (batch dims first). ``symmetric=True``: ``x (..., d, d)`` symmetric, noise on the
            upper triangle, mirrored (``isometric``, default True for Gaussian: off-diagonal coordinates
            scaled so that the noise is isotropic in Frobenius norm, as in the sound release).
        scale: standard deviation (Gaussian) or scale ``b`` (Laplace), in the units of ``x``.
        kind: ``"gaussian"`` or ``"laplace"``.
        noise: ``"continuous"`` (float64 samplers) or ``"discrete"``: ``x`` snapped to ``grid * Z``
            (nearest point) and exact discrete Gaussian / Laplace noise of scale ``scale / grid`` added on
            the grid (Canonne, Kamath & Steinke 2020). An integer-dtype ``x`` with ``grid == 1`` stays
            integer (int64). Account with :func:`discrete_sensitivity`; a statistic whose values are
            integers (counts, even stored as floats) on ``grid == 1`` is not moved by the rounding, so
            ``integer=True`` (no inflation) applies to it.
    """
    from torchdpgmm.mechanisms.laplace import laplace_noise
    from torchdpgmm.mechanisms.noise import normal_noise, symmetric_noise

    if kind not in ("gaussian", "laplace") or noise not in ("continuous", "discrete"):
        raise ValueError(f"kind must be 'gaussian'/'laplace' and noise 'continuous'/'discrete', got {kind!r}, {noise!r}")
    iso = (kind == "gaussian") if isometric is None else bool(isometric)
    if noise == "continuous":
        xf = x.to(torch.float64)
        if symmetric:
            e = symmetric_noise(xf.shape[:-2], xf.shape[-1], scale, kind=kind, isometric=iso, generator=generator,
                                dtype=torch.float64, device=xf.device)
        else:
            draw = normal_noise if kind == "gaussian" else laplace_noise
            e = draw(xf.shape, scale, generator, dtype=torch.float64, device=xf.device)
        return xf + e, float(scale) if not torch.is_tensor(scale) else scale
    g, sc = float(grid), float(scale)
    if not (g > 0 and math.isfinite(g)):
        raise ValueError(f"grid must be finite and > 0, got {grid!r}")
    v, iu = _triu_coords(x, iso) if symmetric else (x, None)
    integer = not v.dtype.is_floating_point and g == 1.0
    k = v.to(torch.int64) if integer else torch.round(v.to(torch.float64) / g).to(torch.int64)
    if kind == "gaussian":
        z = discrete_gaussian_noise(k.shape, sc / g, generator, device=k.device)
        t, q, den = rational_gaussian_variance(sc / g)
        used = g * math.sqrt(t * q / den)
    else:
        z = discrete_laplace_noise(k.shape, sc / g, generator, device=k.device)
        t, s = rational_laplace_scale(sc / g)
        used = g * t / s
    if integer and not symmetric:
        return k + z, used
    out = g * (k + z).to(torch.float64)
    return (_from_triu(out, iu, x.shape[-1], iso) if symmetric else out), used
