"""The one home of the "release is mostly noise" warning, computed from RELEASED values only.

A sound release drops every row whose label is not among the public classes or whose features are not
finite numbers, without a branch or an error (an error would reveal that such a row exists). When the
classes do not match the labels (``Cat,Dog`` against ``cat,dog``), or no cell is a number, every row is
dropped and the release is noise alone, yet it looks like any other. This module says so, in one warning,
from the released class counts and their public noise scale: post-processing of a DP output, which costs
no privacy (Dwork & Roth 2014, Prop. 2.1). It never reads the data.

The test: an empty table releases, per class, ``max(floor, e_k)`` with ``e_k`` the count noise (mean 0,
standard deviation ``s``; Gaussian or Laplace) and ``floor`` the public post-processing floor of a count
(``min_count``; for ``covariance_type="auto"`` at least three noise standard deviations, the rule's step 0).
Then ``sum_k (c_k - floor) = sum_k max(e_k - floor, 0)``: the noise's tail beyond the floor, whose mean ``m_f``
and standard deviation ``v_f`` per class have closed forms (:func:`floor_excess`; the larger of the Gaussian's
and the Laplace law's of the same ``s``). The release is called mostly noise when its released total is within
:data:`EXCESS_SDS` = 5 such standard deviations of what an empty table releases on average:
``sum_k c_k <= K (floor + m_f) + 5 sqrt(K) v_f`` (the tail sum is skewed: 3 standard deviations left 1-2.5% of
empty tables unflagged at low floors; 5 leave under 1% in numpy draws for K from 1 to 50, floors from 0 to 3
noise stds, Gaussian or Laplace, ``tests/test_frontdoor_noise.py``). An empty table is called so with probability
at least ``P(e <= floor)^K`` (0.985 for K = 2 at a 3-sigma floor under Laplace noise). A table whose true total is of that
size is mostly noise too (each class count is within a few noise scales of the floor), so the warning is right
in both cases; it is a hint, never a refusal. Except where the released class means say otherwise: with the share
of the budget a release gives its counts, a clean table of a few dozen rows per class has counts within a few noise
scales of the floor (wine's 178 rows at epsilon 1: count noise std 19, floor 58) while its means classify well. So
a sound release's warning (``release`` on the command line, :class:`~torchdpgmm.estimator.DPGaussianMixture`)
also needs the means to look empty (:func:`sound_mostly_noise`, :func:`means_carry_signal`): an empty table releases
``m_k - centre = e_k / c_k``, pure noise then shrunk toward the centre, so ``sum_k ||c_k (m_k - centre)||^2 / s^2``
(``s`` the sums' Gaussian noise std) is at most a chi-square with ``K d`` degrees, above Laurent & Massart's
bound (:func:`empty_sums_threshold`) with probability under ``EMPTY_SUMS_TAIL`` = 1e-4. And every front door (the
pipeline's too) also needs the noisy second moments to look empty (:func:`second_moment_signal`, published by the
sound release as ``extras["signal"]``, :func:`second_moments_carry_signal`): the trace of a noisy second-moment block
is ``sum_n ||z_n||^2`` of the kept records plus the sum of ``m`` noise coordinates of std ``s``, so an empty table's
``z = trace / (s sqrt(m))`` is sub-Gaussian noise (continuous or discrete Gaussian) and exceeds :data:`SIGNAL_Z`
``= sqrt(2 ln 1e4)`` with probability under 1e-4 per block, while records push it up whatever their classes look
like. ``"auto"`` publishes two blocks: the class blocks' and the pooled block's, which takes most of the budget and
sees every record (wine's 142 training rows at epsilon 1, ``tests/test_frontdoor_noise.py``: the counts alone look
empty in most fits, and the warning now fires in at most one of ten). A Laplace release's trace is judged against
Chernoff's bound on a sum of ``m`` signed Laplace coordinates (:func:`laplace_sum_threshold`, same tail; since
2026-12-02), and its means by the L1 norm (:func:`means_carry_signal_laplace`: an empty table's is at most a sum of
``K d`` absolute Laplace coordinates, bounded the same way; until 2026-12-01 its counts were judged alone, and most
small clean tables were called noise).
The pipeline is also called mostly noise when its DP PCA truncates (fewer components than the transformed width) and
the trace z-score of the PCA's noisy second moment (``sum_n ||z_n||^2`` of the centred, clipped records plus ``D``
noise coordinates, :func:`~torchdpgmm.pipelines.dp_pca.dp_pca`'s ``extras["second_moment_signal"]``) is at most
:data:`SIGNAL_Z` (:func:`pipeline_projection_noise`): the table cannot be told from an empty one, its released
directions are then mostly noise (at most the top few can be partly recovered), and so is what the class stage sees
through them, whatever its own blocks say (Fashion-MNIST at epsilon 1: 200 rows gave chance
accuracy with the class stage's blocks carrying signal, no warning until 2026-12-02). With every component kept (the
tables' default) the projection is a rotation, which loses nothing whatever its noise, so a table is not judged so.
Before the second moments' test the pipeline's counts were judged alone:
its class sums' noise, against records in the unit ball of its projection, left the means' test below the bound
on clean tables where its counts alone are flagged (3 classes of 40 or 60 rows at epsilon 1).
(Until issue 37 item 5 the allowance was the tail of ``max(e_k, 0)``, ``s (K / sqrt(2 pi) + 3 sqrt(K))`` above ``K floor``: with a floor of 3 noise stds it added about
5 stds to a total that cannot exceed ``K floor`` by more than a hair when empty, and clean AIS at epsilon 1 through
the pipeline, 202 rows against a threshold of 209, was called noise in half the fits.)

The released means get the same treatment against their public box (:func:`means_at_bounds`, issue 38 item 1):
the box is the unit box of public bounds (or ``[-B, B]`` per coordinate about the origin for a clip bound ``B``
without bounds), the noise of a released mean of class ``k`` has standard deviation ``s_k = sigma_sums / c_k``
(``sigma_sums`` the public noise scale of the sums block, ``c_k`` the released count, floored). A column is called
mostly noise when, for every class, the released mean lies within ``MEAN_AT_BOUND_SDS = 2`` noise standard
deviations of one of the column's bounds or beyond it. The true mean of records clipped into the box lies inside it,
so a released mean outside is noise; every class at a bound means that the bounds are far wider than the data
(AIS heights with bounds 0:1e6 cm released means of -17,682 cm) or that the data sit at the bound (a rare 0/1
column), and when the box is narrower than ``4 s_k`` every mean is flagged: its noise covers the whole width of the
bounds. The second moments are drowned (:func:`second_moments_drowned`) when the noise std of a released
variance, ``sigma_second_moments / c_k`` (with ``covariance_type="auto"`` the pooled block's
``sigma_pooled_second_moment / sum_k c_k``, which the rule falls back on), exceeds ``w_j^2 / 4`` for every column
``j`` of width ``w_j``: the largest variance any distribution inside the bounds can have (Popoviciu's inequality),
so the released covariances say nothing the bounds did not. Released values and public scales only; a hint,
never a refusal (``--strict`` makes the command line refuse it).

Every front door calls them: ``torchdpgmm release`` and ``torchdpgmm synthesize`` (printed as one line on
stderr), :class:`~torchdpgmm.estimator.DPGaussianMixture` and
:class:`~torchdpgmm.estimator.DPSyntheticClassifier` (``fit`` issues a :class:`MostlyNoiseWarning`).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any

import torch

__all__ = ["MostlyNoiseWarning", "mostly_noise", "floor_excess", "EXCESS_SDS", "sound_count_noise", "block_noise_std",
           "EMPTY_SUMS_TAIL", "empty_sums_threshold", "means_carry_signal", "sound_means_signal",
           "sound_mostly_noise", "warn_mostly_noise", "SIGNAL_Z", "second_moment_signal",
           "second_moments_carry_signal", "pipeline_mostly_noise", "pipeline_noise_reason", "pipeline_projection_noise",
           "PROJECTION_NOISE",
           "pipeline_count_noise", "CLI_CAUSES", "ESTIMATOR_CAUSES", "MEAN_AT_BOUND_SDS", "means_at_bounds",
           "second_moments_drowned", "warn_if_moments_mostly_noise", "warn_sound_release"]

MOSTLY_NOISE = "the release is mostly noise: the released class counts are within a few noise scales of zero"
CLI_CAUSES = ("--classes not matching the labels (case?), wrong label column, features that are not numbers, "
              "or too few rows for this epsilon")
ESTIMATOR_CAUSES = ("classes= not matching the labels of y (case? type?), feature cells that are not numbers "
                    "(their rows are dropped), or too few rows for this epsilon")


class MostlyNoiseWarning(UserWarning):
    """A sound release whose released class counts are within a few noise scales of zero (module docstring)."""


#: The allowance of :func:`mostly_noise` above an empty table's mean released total, in standard deviations of it.
EXCESS_SDS = 5.0


def floor_excess(floor: float, std: float) -> tuple[float, float]:
    """``(mean, standard deviation)`` of ``max(e - floor, 0)`` for count noise ``e`` of mean 0 and standard
    deviation ``std``, the larger of the Gaussian's and the Laplace law's (scale ``std / sqrt 2``) values, in closed
    form: Gaussian ``a = floor / std``, ``E = std (phi(a) - a Q(a))``, ``E^2 = std^2 ((1 + a^2) Q(a) - a phi(a))``;
    Laplace ``p = exp(-floor / b) / 2``, ``E = b p``, ``E^2 = 2 b^2 p`` (``floor >= 0``; public numbers only)."""
    f, s = max(float(floor), 0.0), float(std)
    if s == 0.0:
        return 0.0, 0.0
    a = f / s
    q, phi = 0.5 * math.erfc(a / math.sqrt(2.0)), math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
    g1, g2 = s * (phi - a * q), s * s * ((1.0 + a * a) * q - a * phi)
    b = s / math.sqrt(2.0)
    p = 0.5 * math.exp(-f / b)
    l1, l2 = b * p, 2.0 * b * b * p
    sd = lambda m1, m2: math.sqrt(max(m2 - m1 * m1, 0.0))  # noqa: E731
    return max(g1, l1), max(sd(g1, g2), sd(l1, l2))


def mostly_noise(counts: Any, count_std: float | None, *, floor: float = 0.0) -> bool:
    """True when the released ``counts (K,)`` are consistent with an empty table (module docstring's test:
    ``sum_k c_k <= K (floor + m_f) + EXCESS_SDS sqrt(K) v_f`` with :func:`floor_excess`); ``count_std`` is the
    public standard deviation of one count's noise, ``floor`` the public floor of a count. ``counts`` or
    ``count_std`` None (nothing released to judge from): False."""
    if counts is None or count_std is None:
        return False
    c = torch.as_tensor(counts, dtype=torch.float64).detach().cpu().reshape(-1)
    k = max(int(c.numel()), 1)
    s = float(count_std)
    if not (math.isfinite(s) and s >= 0):
        return False
    m, v = floor_excess(floor, s)
    return float(c.sum()) <= k * (float(floor) + m) + EXCESS_SDS * math.sqrt(k) * v


#: an empty table's class sums pass :func:`means_carry_signal`'s threshold with probability at most this
EMPTY_SUMS_TAIL = 1e-4


def empty_sums_threshold(k: int) -> float:
    """The ``1 - EMPTY_SUMS_TAIL`` bound of Laurent & Massart (2000, Lemma 1) on a chi-square with ``k`` degrees of
    freedom, ``k + 2 sqrt(k x) + 2 x`` with ``x = ln(1 / EMPTY_SUMS_TAIL)``: what ``sum ||e_k||^2 / s^2`` of pure
    Gaussian noise of std ``s`` on ``k`` coordinates exceeds with probability at most ``EMPTY_SUMS_TAIL``."""
    x = math.log(1.0 / EMPTY_SUMS_TAIL)
    return k + 2.0 * math.sqrt(k * x) + 2.0 * x


def means_carry_signal(means: Any, counts: Any, centre: Any, sums_std: float | None) -> bool:
    """True when the released class means of a sound release say more than an empty table's would (module
    docstring): ``T = sum_k ||c_k (m_k - centre)||^2 / s^2`` above :func:`empty_sums_threshold` of ``K d`` degrees,
    with ``c_k`` the released counts, ``m_k`` the released means about the public clipping ``centre`` and ``s`` the
    public Gaussian noise std of one coordinate of a class sum. An empty table releases ``m_k - centre = e_k / c_k``
    (pure noise ``e_k``), then shrunk toward the centre (its James-Stein step, the projection onto the clipping
    ball), so its ``T`` is at most a chi-square with ``K d`` degrees. Released values and public scales only; None
    ``sums_std`` (Laplace noise, or nothing released): False."""
    if means is None or counts is None or sums_std is None or not (math.isfinite(float(sums_std)) and sums_std > 0):
        return False
    sums = _centred_class_sums(means, counts, centre)
    t = float(sums.square().sum() / float(sums_std) ** 2)
    return math.isfinite(t) and t > empty_sums_threshold(sums.numel())


def _centred_class_sums(means: Any, counts: Any, centre: Any) -> torch.Tensor:
    """``c_k (m_k - centre)`` as a ``(K, d)`` float64 CPU tensor: the released class sums about the public centre
    that the means tests weigh against an empty table's noise (released values only)."""
    m = torch.as_tensor(means, dtype=torch.float64).detach().cpu()
    m = m.reshape(-1, m.shape[-1])
    c = torch.as_tensor(counts, dtype=torch.float64).detach().cpu().reshape(-1, 1)
    z = torch.as_tensor(centre, dtype=torch.float64).detach().cpu().reshape(1, -1)
    return c * (m - z)


def _chernoff(n: int, scale: float, log_m: Any, tail: float) -> float:
    """``min_l (n log M(l) + ln(1/tail)) / l`` over a public grid of ``l`` in ``(0, 1/scale)``: Chernoff's bound on
    ``P(sum of n independent copies >= a) <= tail`` for a law whose moment generating function is ``M`` (every ``l``
    in the domain gives a valid bound; the grid only decides how tight)."""
    return min((n * log_m(u / scale) + math.log(1.0 / tail)) / (u / scale) for u in (i / 1000 for i in range(1, 1000)))


def _laplace_scale(n: int, scale: float) -> float:
    s = float(scale)
    if not (n >= 1 and math.isfinite(s) and s > 0):
        raise ValueError(f"need n >= 1 and a finite scale > 0, got {n!r}, {scale!r}")
    return s


@functools.lru_cache(maxsize=1024)  # public floats; a release calls it per block and epsilon
def laplace_l1_threshold(n: int, scale: float, discrete: bool, tail: float = EMPTY_SUMS_TAIL) -> float:
    """``a`` with ``P(sum_{i <= n} |e_i| >= a) <= tail`` for ``n`` independent Laplace noise coordinates: continuous of
    scale ``b = scale`` (density ``exp(-|x|/b) / 2b``), or discrete on the integers with ``P(k)`` proportional to
    ``exp(-|k|/t)``, ``t = scale`` (grid units). Chernoff's bound (:func:`_chernoff`) with ``M`` the moment generating
    function of ``|e|``: ``1 / (1 - l b)``, or ``(1-p)/(1+p) (1 + p e^l) / (1 - p e^l)`` with ``p = exp(-1/t)``."""
    s = _laplace_scale(n, scale)
    p = math.exp(-1.0 / s)

    def log_m(lam: float) -> float:
        if not discrete:
            return -math.log1p(-lam * s)
        q = p * math.exp(lam)
        return math.log((1 - p) / (1 + p)) + math.log1p(q) - math.log1p(-q)

    return _chernoff(n, s, log_m, tail)


@functools.lru_cache(maxsize=1024)  # public floats; a release calls it per block and epsilon
def laplace_sum_threshold(n: int, scale: float, discrete: bool, tail: float = EMPTY_SUMS_TAIL) -> float:
    """``a`` with ``P(sum_{i <= n} e_i >= a) <= tail`` for ``n`` independent Laplace noise coordinates (signed; the laws
    of :func:`laplace_l1_threshold`). Chernoff's bound with the moment generating function of ``e``:
    ``1 / (1 - l^2 b^2)``, or ``(1-p)^2 / ((1 - p e^l)(1 - p e^-l))`` with ``p = exp(-1/t)``. The sum's standard
    deviation is ``sqrt(2n) b``, so the threshold grows as ``sqrt(n)`` where the L1 one grows as ``n``."""
    s = _laplace_scale(n, scale)
    p = math.exp(-1.0 / s)

    def log_m(lam: float) -> float:
        if not discrete:
            return -math.log1p(-((lam * s) ** 2))
        return 2 * math.log1p(-p) - math.log1p(-p * math.exp(lam)) - math.log1p(-p * math.exp(-lam))

    return _chernoff(n, s, log_m, tail)


def means_carry_signal_laplace(means: Any, counts: Any, centre: Any, scale: float, grid: float | None) -> bool:
    """:func:`means_carry_signal` for Laplace noise on the class sums: ``sum_k ||c_k (m_k - centre)||_1`` (in grid
    units for discrete noise, ``grid`` the sums' public grid) above :func:`laplace_l1_threshold` of ``K d``
    coordinates. An empty table releases ``c_k (m_k - centre) = e_k`` shrunk toward the centre (the projection onto
    the clipping ball scales it), so its statistic is at most ``sum |e_i|``. Released values and public scales only."""
    if means is None or counts is None or not (math.isfinite(float(scale)) and scale > 0):
        return False
    sums = _centred_class_sums(means, counts, centre)
    t = float(sums.abs().sum()) / (float(grid) if grid else 1.0)
    return math.isfinite(t) and t > laplace_l1_threshold(sums.numel(), float(scale), grid is not None)


def _laplace_sums_scale(rel: Any) -> tuple[float, float | None] | None:
    """``(scale, grid)`` of a sound release's Laplace noise on its class sums, from its record (the scale actually
    drawn: grid units for discrete noise, with the sums' grid; data units and None for continuous), or None."""
    privacy = getattr(rel, "privacy", None)
    block = next((b for b in getattr(privacy, "blocks", ()) or () if b.name == "sums"), None)
    if block is None or "laplace" not in block.mechanism:
        return None
    noise = (getattr(rel, "extras", None) or {}).get("noise") or {}
    grid = noise.get("grid_sums") if block.mechanism.startswith("discrete") else None
    return float(block.noise_scale), None if grid is None else float(grid)


def sound_means_signal(rel: Any, lower: Any, upper: Any) -> bool:
    """:func:`means_carry_signal` of a sound :class:`~torchdpgmm.release.result.Release` whose released means lie in
    the public box ``lower``/``upper`` (the unit box, or ``[-B, B]`` per coordinate): about its released centre
    (``extras["centre"]``, a centred release) or else the box's middle (the one-stage release's centre); Gaussian
    noise only (``sigma_sums`` in its noise summary)."""
    extras = getattr(rel, "extras", None) or {}
    noise = extras.get("noise") or {}
    mid = (torch.as_tensor(lower, dtype=torch.float64) + torch.as_tensor(upper, dtype=torch.float64)) / 2
    centre = extras.get("centre", mid)
    sigma = noise.get("sigma_sums")
    means, counts = getattr(rel.model, "means", None), getattr(rel.model, "counts", None)
    if sigma is None and (lap := _laplace_sums_scale(rel)) is not None:
        return means_carry_signal_laplace(means, counts, centre, *lap)
    return means_carry_signal(means, counts, centre, None if sigma is None else float(sigma))


#: an empty table's noisy second-moment traces pass :func:`second_moments_carry_signal` with probability at most
#: ``EMPTY_SUMS_TAIL`` each: the sub-Gaussian tail ``exp(-z^2 / 2)`` of a sum of Gaussian (continuous or discrete)
#: noise coordinates in units of its standard deviation
SIGNAL_Z = math.sqrt(2.0 * math.log(1.0 / EMPTY_SUMS_TAIL))


def second_moment_signal(second: torch.Tensor, pooled: torch.Tensor | None, covariance_type: str, sigma: float,
                         pooled_sigma: float | None, *, kind: str = "gaussian",
                         grids: tuple[float | None, float | None] = (None, None)) -> dict[str, torch.Tensor]:
    """The noisy second-moment blocks of a sound release as z-scores against an empty table (computed by
    :mod:`torchdpgmm.release.sound` from its noisy blocks, before any post-processing; published in
    ``Release.extras["signal"]``): the sum ``T`` of the block's ``m`` noisy diagonal coordinates (``sum_n ||z_n||^2``
    of the kept records plus noise, never negative without noise). ``second`` is ``(..., K, d, d)`` (full),
    ``(..., d, d)`` (tied), ``(..., K, d)`` (diag) or ``(..., K)`` (spherical); ``pooled (..., d, d)`` the ``"auto"``
    pooled block. An empty table's ``T`` is pure noise of mean 0.

    * ``kind="gaussian"``: ``z = T / (sigma sqrt(m))``, ``sigma`` the public noise std of one coordinate. Gaussian noise
      (continuous, or discrete: sub-Gaussian with the same parameter, Canonne, Kamath & Steinke 2020) puts
      ``z > SIGNAL_Z`` at probability at most ``EMPTY_SUMS_TAIL``.
    * ``kind="laplace"``: ``sigma`` is the Laplace scale ``b`` of a coordinate in data units (diagonal and off-diagonal
      alike); for discrete noise ``grids`` gives the blocks' public grids ``g`` (the noise is ``g`` times discrete
      Laplace of scale ``b / g``). ``z = SIGNAL_Z T / (g a)`` with ``a`` :func:`laplace_sum_threshold` of ``m``
      coordinates, so ``z > SIGNAL_Z`` again at probability at most ``EMPTY_SUMS_TAIL`` on an empty table: one
      comparison (:func:`second_moments_carry_signal`) for both laws.

    Returns ``{"second_moments": z (...), "pooled_second_moment": z (...)}`` (the latter with ``pooled``), on the
    blocks' device, without a host read."""
    def z(block: torch.Tensor, square: bool, lead: int, std: float, grid: float | None) -> torch.Tensor:
        diag = torch.diagonal(block, dim1=-2, dim2=-1) if square else block  # its last `lead` dims: the block's
        m = math.prod(diag.shape[diag.dim() - lead:])  # public: a shape
        total = diag.sum(tuple(range(-lead, 0)))
        if kind == "gaussian":
            return total / (float(std) * math.sqrt(m))
        g = 1.0 if grid is None else float(grid)
        return total * (SIGNAL_Z / (g * laplace_sum_threshold(m, float(std) / g, grid is not None)))

    leads = {"full": 2, "tied": 1, "diag": 2, "spherical": 1}
    if covariance_type not in leads:
        raise ValueError(f"covariance_type must be one of {sorted(leads)}, got {covariance_type!r}")
    if kind not in ("gaussian", "laplace"):
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    for name, v in (("sigma", sigma), ("pooled_sigma", pooled_sigma)) + tuple(zip(("grid", "pooled_grid"), grids)):
        if v is not None and not (math.isfinite(float(v)) and float(v) > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    square, lead = covariance_type in ("full", "tied"), leads[covariance_type]
    out = {"second_moments": z(second, square, lead, sigma, grids[0])}
    if pooled is not None and pooled_sigma is not None:
        out["pooled_second_moment"] = z(pooled, True, 1, pooled_sigma, grids[1])
    return out


def second_moments_carry_signal(signal: Any) -> bool:
    """True when a release's noisy second moments say there are records (:func:`second_moment_signal`'s z-scores,
    ``Release.extras["signal"]`` or a pipeline's ``class_signal``): some z-score above :data:`SIGNAL_Z`. An empty
    table passes with probability at most ``EMPTY_SUMS_TAIL`` per block. None or empty (an older release): False. A host read of released values, after the release."""
    if not signal:
        return False
    return any(bool((torch.as_tensor(v).detach().cpu() > SIGNAL_Z).any()) for v in signal.values())


def sound_mostly_noise(rel: Any, lower: Any, upper: Any) -> bool:
    """The verdict on a sound :class:`~torchdpgmm.release.result.Release` whose released means lie in the public box
    ``lower``/``upper``: its class counts are consistent with an empty table (:func:`mostly_noise` of
    :func:`sound_count_noise`), its class means carry no signal (:func:`sound_means_signal`) and neither do its
    noisy second moments (:func:`second_moments_carry_signal` of ``extras["signal"]``)."""
    counts, count_std, floor = sound_count_noise(rel)
    extras = getattr(rel, "extras", None) or {}
    return (mostly_noise(counts, count_std, floor=floor) and not sound_means_signal(rel, lower, upper)
            and not second_moments_carry_signal(extras.get("signal")))


def pipeline_projection_noise(rel: Any) -> bool:
    """True when a :class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineRelease`'s DP PCA keeps fewer components
    than the transformed width (a truncation: with every component the projection is a rotation, which loses nothing
    whatever its noise) and its released second moment carries no signal: the z-score of its trace
    (``pca.extras["second_moment_signal"]``, :func:`~torchdpgmm.pipelines.dp_pca.dp_pca`: ``sum_n ||z_n||^2`` plus
    ``D`` diagonal noise coordinates of std ``sigma``, over ``sigma sqrt(D)``) is at most :data:`SIGNAL_Z`, as an
    empty table's is with probability ``1 - EMPTY_SUMS_TAIL``: the table cannot be told from an empty one, and the
    released directions are mostly noise (the top few may be partly recovered), as is what the class stage sees (Fashion-MNIST at epsilon 1: 200 rows give z of 0.5 to 2.2 and chance accuracy, 2,000 rows z
    of 10 to 11). Released values and public shapes only; no signal recorded (an older release): False."""
    pca = getattr(rel, "pca", None)
    z = (getattr(pca, "extras", None) or {}).get("second_moment_signal")
    if z is None:
        return False
    d, D = pca.components.shape[-2], pca.components.shape[-1]  # public: n_components and the transformed width
    return d < D and not second_moments_carry_signal({"pca-second-moment": z})


#: :func:`pipeline_noise_reason`'s words when the DP PCA's second moment is what looks empty
PROJECTION_NOISE = ("the DP PCA's released second moment cannot be told from an empty table's (within a few noise "
                    "scales), so its directions are mostly noise")


def pipeline_noise_reason(rel: Any) -> str | None:
    """Why a :class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineRelease` is mostly noise, or None: its class
    stage's counts are consistent with an empty table (:func:`mostly_noise` of :func:`pipeline_count_noise`) while its
    noisy second moments carry no signal (:func:`second_moments_carry_signal` of ``model.extras["class_signal"]``), or
    its projection is mostly noise (:func:`pipeline_projection_noise`)."""
    counts, count_std, floor = pipeline_count_noise(rel)
    signal = (getattr(rel.model, "extras", None) or {}).get("class_signal")
    if mostly_noise(counts, count_std, floor=floor) and not second_moments_carry_signal(signal):
        return MOSTLY_NOISE[len("the release is mostly noise: "):]
    return PROJECTION_NOISE if pipeline_projection_noise(rel) else None


def pipeline_mostly_noise(rel: Any) -> bool:
    """The verdict on a :class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineRelease`: :func:`pipeline_noise_reason`
    gives a reason."""
    return pipeline_noise_reason(rel) is not None


def warn_mostly_noise(causes: str = ESTIMATOR_CAUSES, *, reason: str | None = None, stacklevel: int = 2) -> None:
    """Issue the one :class:`MostlyNoiseWarning` of a release that is mostly noise, naming ``causes`` (and ``reason``,
    default: the class counts are within a few noise scales of zero)."""
    text = MOSTLY_NOISE if reason is None else f"the release is mostly noise: {reason}"
    warnings.warn(f"{text}; likely causes: {causes}", MostlyNoiseWarning, stacklevel=stacklevel + 1)


def _default_min_count() -> float:
    from torchdpgmm.release.sound import SoundSettings

    return float(next(f.default for f in dataclasses.fields(SoundSettings) if f.name == "min_count"))


def _floor(auto: bool, std: float | None) -> float:
    """The public floor of a released count: ``min_count``, and for ``covariance_type="auto"`` (step 0 of
    :mod:`torchdpgmm.release.covariance_rule`) at least ``NOISE_SDS`` noise standard deviations."""
    from torchdpgmm.release.covariance_rule import count_floor

    return count_floor(std, _default_min_count()) if auto and std is not None else _default_min_count()


def block_noise_std(noise: dict, block: str) -> float | None:
    """Standard deviation of the noise on each coordinate of a sound release's ``block``, in data units, from its
    public noise summary ``extras["noise"]``: Gaussian ``sigma_<block>``, Laplace ``sqrt(2) laplace_scale_<block>``;
    None when the summary has neither."""
    if f"sigma_{block}" in noise:
        return float(noise[f"sigma_{block}"])
    if f"laplace_scale_{block}" in noise:
        return math.sqrt(2.0) * float(noise[f"laplace_scale_{block}"])
    return None


def sound_count_noise(rel: Any) -> tuple[Any, float | None, float]:
    """``(counts, count_std, floor)`` of a sound :class:`~torchdpgmm.release.result.Release`: the released counts, the
    standard deviation of their noise in count units (:func:`block_noise_std` of ``extras["noise"]``) and the sound
    release's public floor of a count (:func:`_floor`)."""
    noise = (getattr(rel, "extras", None) or {}).get("noise") or {}
    std = block_noise_std(noise, "counts")
    auto = (getattr(rel, "extras", None) or {}).get("covariance_type") == "auto"
    return getattr(rel.model, "counts", None), std, _floor(auto, std)


def pipeline_count_noise(rel: Any) -> tuple[Any, float | None, float]:
    """``(counts, count_std, floor)`` of a :class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineRelease`:
    the class stage's released counts (``model.extras["class_counts"]``), the Gaussian scale of its
    ``class-counts`` block in the privacy record, and the floor of a count (:func:`_floor`; the class stage is
    ``"auto"`` when the record holds its pooled block)."""
    counts = (getattr(rel.model, "extras", None) or {}).get("class_counts")
    blocks = getattr(rel.privacy, "blocks", ())
    std = next((float(b.noise_scale) for b in blocks if b.name == "class-counts"), None)
    auto = any(b.name == "class-pooled-second-moment" for b in blocks)
    return counts, std, _floor(auto, std)


#: A released mean this many noise standard deviations from a bound of its column (or beyond it) is "at the bound".
MEAN_AT_BOUND_SDS = 2.0


def means_at_bounds(means: Any, counts: Any, sums_std: float | None, lower: Any, upper: Any, *,
                    floor: float = 1.0) -> list[int]:
    """The columns whose released means are mostly noise against their public box (module docstring): for every
    class ``k`` the mean lies within ``MEAN_AT_BOUND_SDS * sums_std / c_k`` of ``lower`` or ``upper`` or beyond
    them. ``means (K, d)`` and ``counts (K,)`` are released values, ``sums_std`` the public noise std of one
    coordinate of a class sum, ``lower``/``upper (d,)`` the public box, ``floor`` the public floor of a count.
    None ``sums_std`` or ``counts`` (nothing to judge from): no column."""
    if means is None or counts is None or sums_std is None or not math.isfinite(float(sums_std)):
        return []
    m = torch.as_tensor(means, dtype=torch.float64).detach().cpu()
    m = m.reshape(-1, m.shape[-1])
    c = torch.as_tensor(counts, dtype=torch.float64).detach().cpu().reshape(-1, 1).clamp(min=max(float(floor), 1.0))
    lo = torch.as_tensor(lower, dtype=torch.float64).reshape(1, -1)
    hi = torch.as_tensor(upper, dtype=torch.float64).reshape(1, -1)
    margin = MEAN_AT_BOUND_SDS * float(sums_std) / c  # (K, 1)
    near = (m < lo + margin) | (m > hi - margin)
    return [j for j in range(m.shape[-1]) if bool(near[:, j].all())]


def second_moments_drowned(counts: Any, second_std: float | None, lower: Any, upper: Any, *, floor: float = 1.0,
                           pooled_std: float | None = None) -> bool:
    """True when the noise std of every released variance exceeds ``w_j^2 / 4`` in every column (module docstring):
    per class ``second_std / c_k`` for every class, or with ``pooled_std`` (``covariance_type="auto"``) the pooled
    block's ``pooled_std / sum_k c_k``. ``counts`` are released (floored at ``floor``), the rest public."""
    if counts is None or (second_std is None and pooled_std is None):
        return False
    c = torch.as_tensor(counts, dtype=torch.float64).detach().cpu().reshape(-1).clamp(min=max(float(floor), 1.0))
    w = torch.as_tensor(upper, dtype=torch.float64).reshape(-1) - torch.as_tensor(lower, dtype=torch.float64).reshape(-1)
    top = float((w.square() / 4).max())  # the widest column's largest possible variance
    noise = float(pooled_std) / float(c.sum()) if pooled_std is not None else float(second_std) / float(c.max())
    return math.isfinite(noise) and noise > top


def warn_if_moments_mostly_noise(rel: Any, lower: Any, upper: Any, names: Any = None, *,
                                 stacklevel: int = 2) -> list[int]:
    """The released moments against their public box for a sound :class:`~torchdpgmm.release.result.Release` (its
    released means and counts, in the units of ``lower``/``upper``, and its public noise summary): one
    :class:`MostlyNoiseWarning` naming the columns of :func:`means_at_bounds`, one when
    :func:`second_moments_drowned`; returns those columns. Nothing when the release is mostly noise
    (:func:`sound_mostly_noise`: then that warning is issued, and every moment is noise anyway)."""
    if sound_mostly_noise(rel, lower, upper):
        return []  # the release's own warning (warn_mostly_noise) already says it is noise
    return _warn_moments(rel, lower, upper, names, stacklevel + 1)


def warn_sound_release(rel: Any, lower: Any, upper: Any, names: Any = None, *, causes: str = ESTIMATOR_CAUSES,
                       stacklevel: int = 2) -> bool:
    """Every warning a front door gives after a sound release whose released means lie in the public box
    ``lower``/``upper``, from released values only: the one :class:`MostlyNoiseWarning` naming ``causes`` when
    :func:`sound_mostly_noise` holds, else those of :func:`warn_if_moments_mostly_noise`; the verdict is taken once.
    Returns the verdict."""
    if sound_mostly_noise(rel, lower, upper):
        warn_mostly_noise(causes, stacklevel=stacklevel + 1)
        return True
    _warn_moments(rel, lower, upper, names, stacklevel + 1)
    return False


def _warn_moments(rel: Any, lower: Any, upper: Any, names: Any, stacklevel: int) -> list[int]:
    """:func:`warn_if_moments_mostly_noise` after its verdict (``stacklevel`` counted from this function's caller)."""
    counts, _, floor = sound_count_noise(rel)
    noise = (getattr(rel, "extras", None) or {}).get("noise") or {}
    cols = means_at_bounds(getattr(rel.model, "means", None), counts, block_noise_std(noise, "sums"), lower, upper,
                           floor=floor)
    if cols:
        label = ", ".join(str(names[j]) if names is not None else f"column {j}" for j in cols)
        warnings.warn(f"the released means of {label} are mostly noise: for every class they lie within "
                      f"{MEAN_AT_BOUND_SDS:g} noise standard deviations of a bound or beyond it; likely causes: "
                      "bounds (or a clip bound) far wider than the data for this epsilon, too few rows, or data "
                      "that sit at a bound", MostlyNoiseWarning, stacklevel=stacklevel + 1)
    auto = (getattr(rel, "extras", None) or {}).get("covariance_type") == "auto"
    pooled = block_noise_std(noise, "pooled_second_moment") if auto else None
    if second_moments_drowned(counts, block_noise_std(noise, "second_moments"), lower, upper, floor=floor,
                              pooled_std=pooled):
        warnings.warn("the released covariances are mostly noise: the noise of every released variance exceeds the "
                      "largest variance any data inside the bounds can have (width^2 / 4); likely causes: too few "
                      "rows for this epsilon, or a clip bound far larger than the data", MostlyNoiseWarning,
                      stacklevel=stacklevel + 1)
    return cols
