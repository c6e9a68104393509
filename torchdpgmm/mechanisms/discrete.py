"""Exact discrete samplers (Canonne, Kamath & Steinke 2020, Algorithms 1-3), batched in torch, with a fixed
amount of work per draw.

Everything here uses integer arithmetic only: a Bernoulli(n/m) is ``u < c n`` for ``u`` uniform on
``{0, ..., 2^63 - 1}`` (int64 ``random_()``) and ``c = floor((2^63 - 1) / m)``, given ``u < c m`` (then ``u``
is uniform on ``c m`` values, so the Bernoulli is exact), so there is no floating-point rounding for a
Mironov (2012)-style attack to exploit.

- :func:`bernoulli_exp_neg` - ``Bernoulli(exp(-n/d))`` (Algorithm 1).
- :func:`discrete_laplace_noise` - ``P(k) ∝ exp(-|k| s/t)`` on Z (Algorithm 2).
- :func:`discrete_gaussian_noise` - ``P(k) ∝ exp(-k^2 / (2 sigma^2))`` on Z (Algorithm 3).
- :func:`add_noise` - the release helper with the ``noise="continuous" | "discrete"`` switch, and
  :func:`discrete_sensitivity` for the accounting of real-valued statistics snapped to a grid.

Fixed work (no timing channel, no host synchronisation). The loops of the paper ("repeat until accepted")
are replaced by a fixed amount of work that depends on public parameters only (the number of draws and the
rationalised scale), never on the noise drawn:

* **Candidates.** One candidate is one pass of Algorithm 2 (Laplace) or of Algorithms 2 + 3 (Gaussian), with
  every random draw it could need made up front. All the rejections of a pass (Algorithm 2's
  ``Bernoulli(exp(-U/t))`` and its ``(B = 1, Y = 0)`` case, Algorithm 3's acceptance, and the out-of-range
  region ``u >= c m`` of every uniform, whose probability does not depend on any value) fold into one
  accept flag; given acceptance the candidate has exactly the target law.
* **Pool and gather.** ``n`` draws use a pool of ``m(n)`` i.i.d. candidates, ``m`` the smallest size with
  ``P(Binomial(m, p) < n) <= 2^-66`` by the Chernoff bound ``exp(-m KL((n-1)/m || p))``, ``p`` a lower
  bound (closed form, :func:`_acceptance`) on the acceptance probability. Output ``j`` is the ``j``-th
  accepted candidate, found by ``searchsorted`` on the running count of accepts and read by a **gather**
  (no compaction, no boolean indexing, no ``nonzero``): the accepted candidates are i.i.d. from the target
  whatever the accept pattern, so the first ``n`` of them are ``n`` i.i.d. draws. Per draw the pool holds
  about ``1/p`` candidates (2.4 for the discrete Gaussian at sigma = 2, 2.1 from sigma = 17 on) where fixed
  rounds per draw would need ``64 ln 2 / -ln(1 - p)`` (81 and 68). Draws are processed in chunks of at
  most ``2^17`` (so a release of up to 4,369 trials at K = 5, d = 3 draws each block in one pass, and the
  dispatched ops of a call do not grow with the trials below that): on the CPU round by round in place (a
  working set of about 220 bytes per draw, 29 MB per chunk), on an accelerator with each stage's rounds
  drawn as one tensor to keep kernel launches few (about 1.4 KB per draw, 180 MB per chunk). The layout
  depends on the device alone, so the dispatched ops of a call are the same from one draw to a chunk's worth
  (a CPU pool of at most 4096 candidates once took the accelerator layout: no faster, measured, and it made the
  ops of a 16-trial release differ from a 4,096-trial one's). The working set
  is bounded by the chunk, whatever the number of draws of the call.
* **Caps.** Every unbounded loop inside a pass has a fixed cap, each derived from an exact tail:

  - Algorithm 1 for ``gamma in [0, 1]`` draws ``A_K ~ Bernoulli(gamma / K)`` for ``K = 1..24`` and reads
    the first ``K`` with ``A_K = 0``; all 24 are one with probability ``gamma^24 / 24! <= 2^-79``.
  - The geometric count ``V`` of Algorithm 2 (successes of ``Bernoulli(exp(-1))`` before the first failure,
    ``P(V >= v) = e^-v``) is read in one step instead of trial by trial: ``V = #{v <= 53 : X < S_v}`` for
    ``X`` uniform on 126 bits (two 63-bit draws) and the integer table ``S_v = floor(2^126 e^-v)`` (computed
    once to 90 digits), so each ``P(V >= v)`` is within ``2^-126`` of ``e^-v`` (total variation ``<= 53
    2^-126`` per count). Its cap: 53 for the Laplace (``e^-53 < 2^-76``), 11 inside the Gaussian, where a
    proposal with ``V >= 11`` has ``|Y| >= 11 t`` and would be accepted with probability at most
    ``exp(-(11 - 1)^2 / 2)``: ``e^-11 e^-50 < 2^-76``. A candidate whose count reaches the cap is rejected.
  - ``Bernoulli(exp(-gamma))`` for ``gamma > 1`` (Algorithm 3's acceptance) is "at least ``floor(gamma)``
    successes of ``Bernoulli(exp(-1))``", i.e. a second count ``>= floor(gamma)``, capped at 52
    (``floor(gamma) > 52`` is refused, where the exact coin is one with probability ``<= e^-53 < 2^-76``),
    times Algorithm 1 on the fractional part.

* **What happens when the caps bind.** A capped event changes the candidate's law (it is not independent of
  the value), and a pool with fewer than ``n`` accepts leaves the remaining outputs at the fixed fallback
  ``0`` (selected by ``torch.where``, never by a retry). Coupling the sampler with the unbounded algorithm on
  the same random draws, the joint law of the ``n`` draws of one call is within total variation
  ``P(Binomial(m, p) < n) + m beta <= n 2^-64`` of ``n`` i.i.d. exact draws (``beta <= 2^-75`` the caps'
  probability per candidate, the table's rounding included; :func:`tv_bound` computes the bound, a test
  checks it). A mechanism that is ``(eps, delta)``-DP with the exact sampler is therefore
  ``(eps, delta + (1 + e^eps) n 2^-64)``-DP with this one (pure ``eps``-DP becomes
  ``(eps, (1 + e^eps) n 2^-64)``); no fixed-work sampler can do better than some such term, since finitely
  many random bits only make dyadic probabilities.

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
from functools import lru_cache
from typing import Any

import torch

__all__ = [
    "sampler_tv",
    "bernoulli_exp_neg",
    "discrete_laplace_noise",
    "discrete_gaussian_noise",
    "rational_laplace_scale",
    "rational_gaussian_variance",
    "discrete_sensitivity",
    "tv_bound",
    "add_noise",
    "add_noise_tv",
]

_RANGE = 2 ** 63        # int64 ``random_()`` draws uniformly from {0, ..., 2^63 - 1} (64 random bits mod 2^63)
_TOP = _RANGE - 1       # c = floor(_TOP / m) keeps c m (and c num, num <= m) inside int64
_EXP_STEPS = 24         # Algorithm 1, gamma in [0, 1]: all 24 coins one with probability <= 1/24! < 2^-79
_GEO_LEVELS = 53        # levels of the cumulative table of the geometric count (P(V >= v) = e^-v, v <= 53)
_V_LAPLACE = 53         # geometric count of the Laplace proposal: P(V >= 53) = e^-53 < 2^-76
_V_GAUSS = 11           # inside the Gaussian: P(V >= 11) * max acceptance <= e^-11 e^-50 < 2^-76
_INT_CAP = 52           # integer part of Algorithm 3's exponent: exact for floor(gamma) <= 52; e^-53 < 2^-76
_RUNOUT_LOG2 = -66      # P(a pool has fewer accepts than draws) <= 2^-66 (Chernoff)
_CHUNK = 2 ** 17        # draws per pool on the CPU (working set about 220 bytes per draw: ~29 MB)
_CHUNK_ACCEL = _CHUNK   # the same on an accelerator (~1.4 KB per draw there: ~180 MB): sampler_tv counts pools by it
_BERN_MAX_DEN = 2 ** 48  # bernoulli_exp_neg: largest denominator (sizes its fixed attempts)


def _vectorised(device: torch.device, m: int) -> bool:
    """Whether to draw a pool's fixed rounds as a few big tensors (on an accelerator: few kernel launches) rather
    than in place, round by round (on the CPU: less memory traffic). Both layouts do a fixed amount of work; the
    choice depends on the device only (``m``, the public pool size, is kept for callers)."""
    return torch.device(device).type != "cpu"


def _uniform(m: int, generator, device, dtype=torch.int64) -> torch.Tensor:
    """``m`` i.i.d. uniform draws: int64 on ``{0, ..., 2^63 - 1}`` (exact), or fair bools."""
    return torch.empty(m, dtype=dtype, device=device).random_(generator=generator)


def _uniform_below(t: int, m: int, generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(U, ok)``: ``m`` draws, ``U`` exactly uniform on ``{0, ..., t-1}`` where ``ok`` (``1 <= t < 2^63``).

    One 63-bit draw ``w``: ``ok = w < c t`` with ``c = floor((2^63 - 1) / t)``, then ``U = floor(w / c)`` takes
    each value for exactly ``c`` of the ``c t`` allowed ``w``. ``ok`` fails with probability
    ``1 - c t / 2^63 < t / 2^63`` whatever ``U``, so a caller folds it into its rejection; ``U`` is 0 where not
    ``ok``. Fixed work."""
    c = _TOP // t
    w = _uniform(m, generator, device)
    ok = w < c * t
    return torch.where(ok, w // c, torch.zeros_like(w)), ok


def _exp_neg_frac(num: torch.Tensor, den, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bit, valid)``: ``bit ~ Bernoulli(exp(-num/den))`` for 1-D int64 ``0 <= num <= den`` (Algorithm 1 with
    gamma in [0, 1]) where ``valid``; ``den`` an int or an int64 tensor (broadcast), ``24 den < 2^63``.

    Draws ``A_K ~ Bernoulli(gamma / K)`` for all ``K = 1..24`` (``A_K = u_K < c_K num``, ``c_K =
    floor((2^63 - 1) / (den K))``) and returns 1 iff the first ``K`` with ``A_K = 0`` is odd, i.e. the leading
    run of ones is even. Not ``valid``: some ``u_K >= c_K den K`` (probability independent of the values) or
    all 24 coins one (probability ``gamma^24 / 24! <= 2^-79``). Fixed work: 24 draws, no branch on values."""
    m, dev = num.numel(), num.device
    if _vectorised(dev, m):  # one (24, m) draw and a few broadcast ops: few kernel launches on an accelerator
        ks = torch.arange(1, _EXP_STEPS + 1, dtype=torch.int64, device=dev).unsqueeze(1)
        mk = (den.unsqueeze(0) if torch.is_tensor(den) else den) * ks
        c = _TOP // mk
        u = torch.empty((_EXP_STEPS, m), dtype=torch.int64, device=dev).random_(generator=generator)
        ok = (u < c * mk).all(0)
        run = (u < c * num.unsqueeze(0)).to(torch.int32).cumprod(0)  # 1 while every coin so far is one
        return (run.sum(0) & 1) == 0, ok & (run[-1] == 0)
    alive = torch.ones(m, dtype=torch.bool, device=dev)
    odd = torch.zeros(m, dtype=torch.bool, device=dev)
    ok = torch.ones(m, dtype=torch.bool, device=dev)
    u = torch.empty(m, dtype=torch.int64, device=dev)
    cn = torch.empty(m, dtype=torch.int64, device=dev)
    tmp = torch.empty(m, dtype=torch.bool, device=dev)
    for k in range(1, _EXP_STEPS + 1):  # on the CPU, in place: no (24, m) temporaries
        mk = den * k
        c = _TOP // mk
        u.random_(generator=generator)
        ok &= torch.lt(u, c * mk, out=tmp)
        alive &= torch.lt(u, torch.mul(num, c, out=cn), out=tmp)
        odd ^= alive
    return ~odd, ok & ~alive


def _exp_neg_thresholds(cap: int) -> list[int]:
    """``S_v = floor(2^126 e^-v)`` for ``v = 1..cap``, exact: ``e^-v`` to 90 significant digits (the decimal
    module rounds ``exp`` correctly), checked to lie at least ``1e-30`` from an integer after scaling."""
    from decimal import ROUND_FLOOR, Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 90
        out = []
        for v in range(1, cap + 1):
            x = Decimal(-v).exp() * (Decimal(2) ** 126)
            fl = x.to_integral_value(rounding=ROUND_FLOOR)
            if not (Decimal("1e-30") < x - fl < 1 - Decimal("1e-30")):  # pragma: no cover - never for v <= 53
                raise ArithmeticError(f"2^126 e^-{v} too close to an integer for 90 digits")
            out.append(int(fl))
    return out


_S = _exp_neg_thresholds(_GEO_LEVELS)  # P(V >= v) = e^-v is read as X < S_v, X uniform on 126 bits
_H = [v >> 63 for v in _S]             # high and low 63-bit words of S_v (decreasing in v)
_L = [v & (_RANGE - 1) for v in _S]
_H0 = sum(h > 0 for h in _H)           # S_v < 2^63 (high word 0) from v = _H0 + 1 on
assert all(a > b for a, b in zip(_H[:_H0], _H[1:_H0])) and all(h == 0 for h in _H[_H0:])


_TABLES: dict = {}


def _tables(device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The table's words as tensors on ``device``, ascending (high words, low words, low words of the
    thresholds with high word 0), copied to the device once (a host-to-device copy waits for the stream)."""
    key = torch.device(device)
    if key.type == "cuda" and key.index is None:
        key = torch.device("cuda", torch.cuda.current_device())
    if key not in _TABLES:
        _TABLES[key] = (torch.tensor(_H[::-1], dtype=torch.int64, device=key),
                        torch.tensor(_L[::-1], dtype=torch.int64, device=key),
                        torch.tensor(sorted(_L[_H0:]), dtype=torch.int64, device=key))
    return _TABLES[key]


def _geometric_exp_neg1(m: int, cap: int, generator, device) -> torch.Tensor:
    """``min(V, cap)`` for ``m`` i.i.d. ``V`` with ``P(V >= v) = e^-v`` (the number of successes of
    ``Bernoulli(exp(-1))`` before the first failure), ``cap <= 53``; fixed work: two 63-bit draws and a lookup.

    ``V = #{v <= 53 : X < S_v}`` for ``X = hi 2^63 + lo`` uniform on ``{0, ..., 2^126 - 1}`` and the integer
    thresholds ``S_v = floor(2^126 e^-v)`` (a cumulative table of 53 entries: ``torch.bucketize`` on ``hi``, then
    one comparison of ``lo`` where ``hi`` ties a threshold's high word, or a second lookup for ``hi = 0``). Then
    ``P(V >= v) = S_v / 2^126`` is within ``2^-126`` of ``e^-v`` for every ``v``: the law of ``min(V, cap)`` is
    within total variation ``53 2^-126`` of the exact capped geometric. Integer comparisons only."""
    h_asc, l_asc, l0_asc = _tables(device)
    hi = _uniform(m, generator, device)
    lo = _uniform(m, generator, device)
    le = torch.bucketize(hi, h_asc, right=True)  # #{v: H_v <= hi} >= 1 (some H_v are 0)
    j = le - 1  # index (ascending) of the largest H_v <= hi: the only possible tie when hi > 0
    tie = (h_asc.gather(0, j) == hi) & (lo < l_asc.gather(0, j))
    zero = len(_L) - _H0 - torch.bucketize(lo, l0_asc, right=True)  # hi = 0: #{v > _H0 : lo < L_v}
    v = (_GEO_LEVELS - le) + torch.where(hi == 0, zero, tie.to(torch.int64))
    return v.clamp_(max=cap)


def _exp_neg(num: torch.Tensor, den, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bit, valid)``, ``bit ~ Bernoulli(exp(-num/den))`` for 1-D int64 ``num >= 0``: "at least
    ``floor(num/den)`` successes of ``Bernoulli(exp(-1))``" (a geometric count capped at 52: ``floor(num/den)
    > 52`` gives 0, where the exact coin is one with probability ``<= e^-53``) and Algorithm 1 on the
    remainder."""
    k = num // den
    whole = _geometric_exp_neg1(num.numel(), _INT_CAP, generator, num.device) >= k
    frac, ok = _exp_neg_frac(num - k * den, den, generator)
    return whole & frac, ok


def _check_den(den) -> None:
    if torch.is_tensor(den):
        if den.device.type == "cpu" and den.numel() and not bool(((den >= 1) & (den <= _BERN_MAX_DEN)).all()):
            raise ValueError(f"bernoulli_exp_neg: den must lie in [1, 2^48], got {den!r}")
    elif not (isinstance(den, int) and 1 <= den <= _BERN_MAX_DEN):
        raise ValueError(f"bernoulli_exp_neg: den must be an integer in [1, 2^48], got {den!r}")


def _check_num(num) -> None:
    """``num >= 0`` when the caller gives it as Python integers (host values: nothing is read back). A negative num
    returned ``Bernoulli(exp(-frac(num/den)))`` silently (``exp(-num/den) > 1`` is no probability). A tensor ``num``
    is not read: in a sampler built on this function it is a function of the draws, and the fixed work has no host
    read (its range is the caller's promise, as for a ``den`` off the CPU)."""
    if not torch.is_tensor(num) and bool((torch.as_tensor(num) < 0).any()):
        raise ValueError(f"bernoulli_exp_neg: num must be >= 0, got {num!r}")


def _bern_attempts(den_max: int) -> int:
    """Fixed number of attempts of :func:`bernoulli_exp_neg` so that all fail with probability < 2^-70."""
    q = sum(den_max * k for k in range(1, _EXP_STEPS + 1)) / _RANGE + 1 / math.factorial(_EXP_STEPS)
    return max(1, math.ceil(-70 / math.log2(q)))


def bernoulli_exp_neg(num: torch.Tensor, den: torch.Tensor | int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``Bernoulli(exp(-num/den))`` elementwise for int64 ``num >= 0``, ``1 <= den <= 2^48`` (Canonne, Kamath &
    Steinke 2020, Algorithm 1): ``exp(-gamma) = exp(-1)^floor(gamma) exp(-frac(gamma))``, the first factor as
    "at least floor(gamma) successes of Bernoulli(exp(-1))".

    Fixed work: a fixed number of attempts (11 for ``den = 2^48``, 4 for ``den <= 2^32``), each of
    fixed work (module docstring), the first valid one selected by a gather; an element with no valid attempt
    (probability < 2^-70) is 0. With the caps, each element is within total variation ``2^-70 + 2^-76``
    of the exact coin. A tensor ``den`` is checked when it lives on the CPU (elsewhere the range is the
    caller's promise: checking it there would synchronise). ``num`` given as Python integers is checked (``>= 0``);
    a tensor ``num`` is not read back (fixed work: in a sampler it depends on the draws), its range is the caller's
    promise."""
    _check_den(den)
    _check_num(num)
    num = torch.as_tensor(num, dtype=torch.int64)
    shape = num.shape
    num = num.reshape(-1)
    if torch.is_tensor(den):
        den = den.to(dtype=torch.int64, device=num.device).expand(shape).reshape(-1)
        rounds = _bern_attempts(_BERN_MAX_DEN)
    else:
        rounds = _bern_attempts(int(den))
    bits, valid = zip(*(_exp_neg(num, den, generator) for _ in range(rounds)))
    bits, valid = torch.stack(bits), torch.stack(valid)
    first = valid.to(torch.uint8).argmax(0, keepdim=True)  # the first valid attempt (0 when none is)
    return (bits.gather(0, first)[0] & valid.any(0)).reshape(shape)


def _check_shape(shape: Any) -> tuple:
    return tuple(int(s) for s in shape)


#: the largest discrete Laplace scale (grid units) the exact sampler takes (:func:`rational_laplace_scale`)
LAPLACE_SCALE_MAX = 2.0 ** 40


def rational_laplace_scale(scale: float) -> tuple[int, int]:
    """``(t, s)`` with ``t/s >= scale`` (``s`` a power of two, ``t`` ~ 20 bits; see module docstring)."""
    b = float(scale)
    if not (math.isfinite(b) and 2.0 ** -20 <= b <= LAPLACE_SCALE_MAX):
        raise ValueError(f"discrete Laplace scale must lie in [2^-20, 2^40] (grid units), got {scale!r}")
    p = max(0, 20 - math.floor(math.log2(b)))
    s = 2 ** p
    t = math.ceil(Fraction(b) * s)
    return t, s


#: the largest discrete Gaussian sigma (grid units) the exact sampler takes (:func:`rational_gaussian_variance`)
GAUSSIAN_SIGMA_MAX = 2.0 ** 25


def rational_gaussian_variance(sigma: float) -> tuple[int, int, int]:
    """``(t, q, den)`` with ``sigma_r^2 = t q / den >= sigma^2``, ``t = floor(sigma) + 1`` the proposal
    scale of Algorithm 3, ``den`` a power of two and ``q`` of about 20 bits or more (module docstring)."""
    sg = float(sigma)
    if not (math.isfinite(sg) and 0.25 <= sg <= GAUSSIAN_SIGMA_MAX):
        raise ValueError(f"discrete Gaussian sigma must lie in [0.25, 2^25] (grid units), got {sigma!r}")
    t = math.floor(sg) + 1
    var = Fraction(sg) ** 2
    p = max(0, 20 - math.floor(math.log2(var / t)))
    den = 2 ** p
    return t, math.ceil(var * den / t), den


def discrete_laplace_noise(shape: torch.Size | tuple, scale: float, generator: torch.Generator | None = None,
                           *, device: Any = None) -> torch.Tensor:
    """int64 draws with ``P(k) ∝ exp(-|k|/b)``, ``b = t/s >= scale`` (Algorithm 2 of Canonne, Kamath &
    Steinke 2020; ``scale`` public, rationalised by :func:`rational_laplace_scale`). Fixed work per draw
    (module docstring); draws use ``generator`` on ``device``."""
    t, s = rational_laplace_scale(scale)
    return _sample(_check_shape(shape), ("laplace", t, s), generator, device)


def discrete_gaussian_noise(shape: torch.Size | tuple, sigma: float, generator: torch.Generator | None = None,
                            *, device: Any = None) -> torch.Tensor:
    """int64 draws with ``P(k) ∝ exp(-k^2/(2 sigma_r^2))``, ``sigma_r^2 = t q/den >= sigma^2`` (Algorithm 3
    of Canonne, Kamath & Steinke 2020: discrete Laplace proposals of scale ``t = floor(sigma) + 1``
    accepted with probability ``exp(-(|Y| - sigma_r^2/t)^2 / (2 sigma_r^2))``; correct for any t > 0,
    efficient for t ~ sigma). Fixed work per draw (module docstring); draws use ``generator`` on ``device``."""
    t, q, den = rational_gaussian_variance(sigma)
    return _sample(_check_shape(shape), ("gaussian", t, q, den), generator, device)


def _laplace_pass(m: int, t: int, s: int, vcap: int, generator, device):
    """One pass of Algorithm 2 for ``m`` i.i.d. candidates, fixed work: ``(values, accepted)``. A count
    ``V`` reaching ``vcap`` rejects the candidate (see the caps in the module docstring)."""
    U, ok = _uniform_below(t, m, generator, device)
    D, ok_d = _exp_neg_frac(U, t, generator)
    V = _geometric_exp_neg1(m, vcap, generator, device)
    B = _uniform(m, generator, device, torch.bool)
    X = U + t * V
    Y = X >> (s.bit_length() - 1) if s != 1 else X  # s is a power of two
    return torch.where(B, -Y, Y), ok & ok_d & D & (V < vcap) & ~(B & (Y == 0))


def _candidates(m: int, params: tuple, generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``m`` i.i.d. candidates of the sampler ``params`` with their accept flags (fixed work)."""
    if params[0] == "laplace":
        _, t, s = params
        return _laplace_pass(m, t, s, _V_LAPLACE, generator, device)
    _, t, q, den = params
    D = 2 * den * t * q  # acceptance exponent (|Y| - sigma_r^2/t)^2 / (2 sigma_r^2) = a^2 / D, a = |Y| den - q
    Y, acc = _laplace_pass(m, t, 1, _V_GAUSS, generator, device)
    a = Y.abs() * den - q
    small = a.abs() <= 2 ** 31
    a = torch.where(small, a, torch.zeros_like(a))
    num = a * a
    k = num // D
    whole = _geometric_exp_neg1(m, _INT_CAP, generator, device) >= k
    frac, ok = _exp_neg_frac(num - k * D, D, generator)
    return Y, acc & small & whole & frac & ok


def _sample(shape: tuple, params: tuple, generator, device) -> torch.Tensor:
    """``prod(shape)`` draws: per chunk, a pool of :func:`_pool_size` candidates; output ``j`` of a chunk is
    its ``j``-th accepted candidate (``searchsorted`` on the running count of accepts, then a gather), or the
    fallback 0 if the pool has fewer accepts (probability <= 2^-66). No host synchronisation."""
    n = math.prod(shape)
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    p = _acceptance(params)
    chunk = _CHUNK if torch.device(device).type == "cpu" else _CHUNK_ACCEL
    out = []
    for start in range(0, n, chunk):
        nc = min(chunk, n - start)
        m = _pool_size(nc, p)
        vals, acc = _candidates(m, params, generator, device)
        idx = torch.searchsorted(torch.cumsum(acc.to(torch.int64), 0),
                                 torch.arange(1, nc + 1, dtype=torch.int64, device=device))
        got = vals.gather(0, idx.clamp(max=m - 1))
        out.append(torch.where(idx < m, got, torch.zeros_like(got)))
    if not out:
        return torch.zeros(shape, dtype=torch.int64, device=device)
    return (torch.cat(out) if len(out) > 1 else out[0]).reshape(shape)


def _ok_prob(m: int) -> Fraction:
    """Probability that a 63-bit uniform falls below ``floor((2^63 - 1) / m) m`` (a uniform below ``m`` is valid)."""
    return Fraction((_TOP // m) * m, _RANGE)


@lru_cache(maxsize=256)
def _acceptance(params: tuple) -> float:
    """A lower bound on the probability that one candidate is accepted (public parameters only).

    Exact factors: the in-range probabilities of every uniform a candidate draws (rationals). Closed forms:
    Algorithm 2 accepts ``U`` with ``P(D) = (1 - e^-1) / (t (1 - e^(-1/t)))`` and then rejects ``(B = 1, Y = 0)``
    with probability ``(1 - e^(-s/t)) / 2``; Algorithm 3 accepts a discrete Laplace ``Y`` of scale ``t`` with
    probability ``C_t e^(-sigma^2/(2 t^2)) sum_y e^(-y^2/(2 sigma^2))``, ``C_t = (1 - e^(-1/t))/(1 + e^(-1/t))``
    (the Laplace and Gaussian exponents combine), and the sum is at least ``max(1, sqrt(2 pi) sigma)`` (Poisson
    summation). Minus the caps' probability per candidate; times ``1 - 1e-9`` for rounding."""
    kind, t = params[0], params[1]
    ok = _ok_prob(t)
    for k in range(1, _EXP_STEPS + 1):
        ok *= _ok_prob(t * k)
    e = math.exp
    p_d = -math.expm1(-1.0) / (t * -math.expm1(-1.0 / t))
    if kind == "laplace":
        s = params[2]
        p = p_d * (1 + math.expm1(-s / t) / 2)
    else:
        q, den = params[2], params[3]
        D = 2 * den * t * q
        for k in range(1, _EXP_STEPS + 1):
            ok *= _ok_prob(D * k)
        var = t * q / den
        c_t = -math.expm1(-1.0 / t) / (1 + e(-1.0 / t))
        p = p_d * (1 + math.expm1(-1.0 / t) / 2) * c_t * e(-var / (2 * t * t)) * max(1.0, math.sqrt(2 * math.pi * var))
    return (float(ok) * p - _cap_prob(kind)) * (1 - 1e-9)


def _cap_prob(kind: str) -> float:
    """An upper bound ``beta`` on the probability that one candidate hits a cap (module docstring)."""
    beta = 2 * _GEO_LEVELS * 2.0 ** -126  # the geometric counts' table (one or two per candidate)
    if kind == "laplace":
        return beta + 1 / math.factorial(_EXP_STEPS) + math.exp(-_V_LAPLACE)
    return (beta + 2 / math.factorial(_EXP_STEPS) + math.exp(-_V_GAUSS - (_V_GAUSS - 1) ** 2 / 2)
            + math.exp(-(_INT_CAP + 1)) + math.exp(-1000))


def _log_tail(m: int, n: int, p: float) -> float:
    """Natural log of the Chernoff bound on ``P(Binomial(m, p) < n)``: ``-m KL((n-1)/m || p)``."""
    a = (n - 1) / m
    if a >= p:
        return 0.0
    kl = (a * math.log(a / p) if a > 0 else 0.0) + (1 - a) * math.log((1 - a) / (1 - p))
    return -m * kl


@lru_cache(maxsize=4096)
def _pool_size(n: int, p: float) -> int:
    """Smallest pool ``m`` with Chernoff ``P(Binomial(m, p) < n) <= 2^-66`` (public ``n``, ``p``)."""
    target = _RUNOUT_LOG2 * math.log(2)
    lo = hi = max(n, math.ceil(n / p))
    while _log_tail(hi, n, p) > target:
        lo, hi = hi, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        if _log_tail(mid, n, p) <= target:
            hi = mid
        else:
            lo = mid + 1
    return hi


def tv_bound(n: int, sigma: float | None = None, *, laplace_scale: float | None = None,
             chunk: int = _CHUNK) -> float:
    """Upper bound on the total-variation distance between the joint law of ``n`` draws of one call of
    :func:`discrete_gaussian_noise` (``sigma``) or :func:`discrete_laplace_noise` (``laplace_scale``) and ``n``
    i.i.d. exact draws: per chunk (``chunk`` draws, ``2^17`` by default),
    ``P(Binomial(m, p) < n_chunk)`` (Chernoff) plus ``m beta`` (caps). It is below ``n 2^-64`` over the
    parameter ranges (module docstring)."""
    if (sigma is None) == (laplace_scale is None):
        raise ValueError("tv_bound: give exactly one of sigma or laplace_scale")
    params = (("gaussian",) + rational_gaussian_variance(sigma) if sigma is not None
              else ("laplace",) + rational_laplace_scale(laplace_scale))
    p, beta = _acceptance(params), _cap_prob(params[0])
    total = 0.0
    for start in range(0, n, chunk):
        nc = min(chunk, n - start)
        m = _pool_size(nc, p)
        total += math.exp(_log_tail(m, nc, p)) + m * beta
    return total


def sampler_tv(n: int, scale: float, kind: str = "gaussian") -> float:
    """:func:`tv_bound` of one call of ``n`` draws of the discrete Gaussian (``kind="gaussian"``, ``scale`` its
    sigma in grid units) or discrete Laplace (``"laplace"``, scale ``b``), summed chunk by chunk as there (the equal
    full chunks multiplied out, so a call of 10^9 draws costs two terms). Public numbers only; TVs of independent
    calls add up (the record's ``sampler_tv``)."""
    if kind not in ("gaussian", "laplace"):
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    n = int(n)
    if n <= 0:
        return 0.0
    full, rest = divmod(n, _CHUNK)
    return (full * _chunk_tv(_CHUNK, kind, float(scale)) if full else 0.0) + (
        _chunk_tv(rest, kind, float(scale)) if rest else 0.0)


@lru_cache(maxsize=4096)
def _chunk_tv(m: int, kind: str, scale: float) -> float:
    return tv_bound(m, sigma=scale) if kind == "gaussian" else tv_bound(m, laplace_scale=scale)


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


def add_noise_tv(x: torch.Tensor, scale: float, *, kind: str = "gaussian", grid: float = 1.0,
                 symmetric: bool = False) -> tuple[int, float]:
    """``(draws, tv)`` of :func:`add_noise` ``(x, scale, kind=kind, noise="discrete", grid=grid,
    symmetric=symmetric)``: how many draws its one sampler call makes (``x.numel()``, or ``d (d + 1) / 2`` per
    matrix when ``symmetric``) and :func:`sampler_tv` of them at the grid scale ``scale / grid``. Shapes and public
    scales only (no device read)."""
    if symmetric:
        d = x.shape[-1]
        n = math.prod(x.shape[:-2]) * d * (d + 1) // 2
    else:
        n = x.numel()
    return n, sampler_tv(n, float(scale) / float(grid), kind)


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
