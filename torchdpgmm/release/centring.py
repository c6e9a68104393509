"""Two-stage sound release: a private centre first, then the mixture clipped about it.

A sound release clips every record to a ball ``||x - c||_2 <= B`` about a public centre ``c``
(:mod:`torchdpgmm.release.sound`); every block's noise scales with ``B`` (second moments with ``B^2``). With
public bounds the only centre known in advance is the box's middle, and on a skewed table (most records in one
corner of the box) a small ball about the middle pulls most records far toward it, while a ball wide enough to
hold them costs noise. This module spends a small public share of the budget on where the data sit:

1. **Centre stage**: the sound release of one class (``covariance_type="spherical"``, Gaussian or Laplace
   mechanism as the mixture's) of the records clipped to the ball that holds the box (``ball_radius`` about
   ``ball_center``, so nothing inside the bounds is clipped): a noisy count ``n~`` and a noisy sum ``s~``
   (the spherical second moment rides along at 1% of the stage). Its released mean offset is
   ``o = s~ / n~`` (the count floored as in the sound release).
2. **Shrinkage toward the box's middle** (post-processing of released values and public noise scales only,
   James & Stein 1961, positive part): with ``v = sigma_sums^2 / n~^2`` the per-coordinate noise variance of
   ``o``, the centre is ``c = ball_center + max(0, 1 - d v / ||o||^2) o``, projected onto the ball (the true
   mean of the clipped records lies in it). Where the noisy offset is no larger than its noise (a small table at
   small epsilon), ``c`` stays near the box's middle; where it is (a skewed table with enough rows), ``c``
   follows the data.
3. **Mixture stage**: the sound release of the class mixture with ``center=c`` and the caller's ``clip_bound``
   (its sensitivities do not depend on ``c``: every clipped record has ``||z|| <= B`` about any centre).

**Budget** (fixed in advance, public): the centre stage gets ``fraction`` of the budget and the mixture the rest,
composed adaptively: for discrete Gaussian noise in zCDP (``rho_1 + rho_2 <= rho(eps, delta)``, Bun & Steinke
2016), for continuous Gaussian noise in Gaussian DP (``mu_1^2 + mu_2^2 <= mu(eps, delta)^2``, Dong, Roth & Su
2019), for Laplace by basic composition (``eps_1 + eps_2 = eps``). Each stage is calibrated to its part by the
sound release itself, which rounds toward less privacy loss, so the composition never exceeds the target.
The release's one :class:`~torchdpgmm.privacy.PrivacyRecord` lists the centre stage's blocks (named
``centre_counts``, ``centre_sums``, ``centre_second_moments``) and the mixture's. The fraction
(:data:`CENTRE_FRACTION`) and the clip bound used with it (:data:`torchdpgmm.bounds.CENTRED_CLIP_RADIUS`) were
chosen on validation splits only (``scripts/clip_rule_validation.py --centre`` ->
``docs/results/centre-rule.json``).

**Private radius** (``clip_bound=None``; not the estimator's default, :data:`torchdpgmm.bounds.PRIVATE_RADIUS`
is False: on validation splits it did not beat the fixed radius, ``docs/results/radius-rule.json``): a stage between the two
spends :data:`RADIUS_FRACTION` of the budget on a noisy histogram of the records' distances ``||x - c||`` to the
released centre over a fixed public grid of radii (:func:`radius_grid`: from ``floor`` = :data:`torchdpgmm.bounds.
CENTRED_CLIP_RADIUS` up to ``2 ball_radius``, the largest distance of a point of the ball from its centre,
geometric with :data:`RADIUS_STEPS_PER_OCTAVE` steps per doubling). Each record falls in exactly one bin, so the
histogram's L2 sensitivity is 1 under add/remove and sqrt(2) under replace-one (L1: 1 and 2); one block
``radius_histogram`` (discrete Gaussian, Gaussian or Laplace noise as the other stages), calibrated directly to its
share (of rho, of mu^2, of epsilon). The radius is post-processing of released values (:func:`radius_from_histogram`):
the smallest grid radius beyond which the noisy tail count, less :data:`RADIUS_Z` of its public noise std, is at
most ``1 - RADIUS_QUANTILE`` of the noisy total, never below ``floor`` (a small table, whose tail counts are mostly
noise, keeps the floor). The mixture stage then releases the records scaled by ``1/R`` about ``c`` with clip bound 1
(identical to clipping at ``R`` with the noise scaled by ``R``, but ``R`` may differ across a batch), and the model is
mapped back (``mu = c + R (mu_s - c)``, ``Sigma = R^2 Sigma_s``), and so is the public noise summary
``extras["noise"]`` (:func:`noise_in_data_units`; the mixture stage's own is ``extras["noise_scaled"]``). The released
radius is ``extras["clip_radius"]``; the share of clipped records is never released. Budget: centre ``fraction``,
radius ``radius_fraction``, mixture the rest, composed as above.

Nothing here raises, branches, loops or prints on a private value: the stage budgets are functions of
``(epsilon, delta, fraction)``, the centre a torch function of released values.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch

from torchdpgmm.privacy import PrivacyRecord
from torchdpgmm.privacy.calibration import gdp_epsilon, gdp_mu, zcdp_epsilon, zcdp_rho

__all__ = ["CENTRE_FRACTION", "RADIUS_FRACTION", "RADIUS_QUANTILE", "RADIUS_Z", "RADIUS_STEPS_PER_OCTAVE",
           "release_centred", "stage_epsilons", "shrunk_centre", "radius_grid", "distance_histogram",
           "radius_from_histogram", "radius_noise", "noise_in_data_units"]

#: share of the budget spent on the centre stage (of rho, of mu^2, or of epsilon for Laplace)
CENTRE_FRACTION = 0.1
#: the centre stage's split over its three blocks is (1, sqrt(d), 0.01 sqrt(d)) (normalised): the offset's error
#: is ``d R^2 / share_sums + ||o||^2 / share_counts`` (over ``n^2 rho``) with ``||o|| <= R`` much below ``sqrt(d) R``,
#: minimised near ``share_sums / share_counts = sqrt(d)``; the second moment is not used
_SECOND_MOMENT_SHARE = 0.01
_PREFIX = "centre_"
#: share of the budget spent on the private clip radius (``clip_bound=None``), of rho, mu^2 or epsilon
RADIUS_FRACTION = 0.05
#: the share of the records the private radius aims to hold inside the ball about the released centre
RADIUS_QUANTILE = 0.9
#: how many public noise stds the tail count must exceed its target by before the radius grows past a grid point
RADIUS_Z = 1.0
#: grid points per doubling of the radius (steps of 2^(1/4), about 19%)
RADIUS_STEPS_PER_OCTAVE = 4
RADIUS_BLOCK = "radius_histogram"


def _eps_for_rho(rho: float, delta: float) -> float:
    """The epsilon whose calibration (``zcdp_rho(epsilon, delta)``) gives back ``rho`` less a relative 1e-6 margin
    (the two bisections round to opposite sides; the margin keeps the stage at or below its share)."""
    return float(zcdp_epsilon(rho * (1 - 1e-6), delta))


def stage_epsilons(epsilon: float, delta: float | None, fraction: float, *, mechanism: str = "kl",
                   noise: str = "discrete") -> tuple[float, float]:
    """``(epsilon_centre, epsilon_mixture)``: each stage's own target, so that the two compose to ``(epsilon, delta)``.

    Discrete Gaussian noise (the sound default) is accounted in zCDP: the stages get ``fraction`` and
    ``1 - fraction`` of ``rho = zcdp_rho(epsilon, delta)``; continuous Gaussian noise in GDP: of ``mu^2``; Laplace
    by basic composition: of ``epsilon``. Every returned epsilon is on the safe side (its stage spends at most its
    share)."""
    if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 < fraction < 1):
        raise ValueError(f"centre fraction must be a number in (0, 1), got {fraction!r}")
    f = float(fraction)
    if mechanism == "laplace":
        return f * float(epsilon), (1 - f) * float(epsilon)
    return _stage_epsilons(float(epsilon), float(delta), f, noise == "continuous")


@functools.lru_cache(maxsize=256)
def _stage_epsilons(epsilon: float, delta: float, f: float, continuous: bool) -> tuple[float, float]:
    """Memoised: a pure function of public floats (a study calls it once per release with the same few values)."""
    if continuous:
        mu = float(gdp_mu(float(epsilon), float(delta)))
        safe = 1 - 1e-9  # the round trip gdp_mu(gdp_epsilon(mu_i)) is exact up to rounding: stay below
        return (float(gdp_epsilon(float(delta), safe * math.sqrt(f) * mu)),
                float(gdp_epsilon(float(delta), safe * math.sqrt(1 - f) * mu)))
    rho = float(zcdp_rho(float(epsilon), float(delta)))
    return _eps_for_rho(f * rho, float(delta)), _eps_for_rho((1 - f) * rho, float(delta))


def _check_stage_epsilons(eps1: float, eps2: float, delta: float | None, noise: str) -> None:
    """Refuse, in one line and from public values only, a budget whose stage share ``delta`` alone already covers
    (the stage's epsilon is 0: a Gaussian mechanism that small is (0, delta)-DP and there is nothing to calibrate; a
    stage calibrated anyway would spend more than its share). The pipeline's twin is
    :func:`torchdpgmm.pipelines.class_mixture.check_stage_budgets`."""
    for name, e in (("centre", eps1), ("mixture", eps2)):
        if not e > 0:
            unit = "mu (Gaussian DP)" if noise == "continuous" else "rho (zCDP)"
            raise ValueError(f"the budget is too small for the two-stage release: its {name} stage's share of {unit} "
                             f"is one that delta = {float(delta):g} alone already covers (epsilon 0), so it has "
                             "nothing to calibrate; use a larger epsilon or a smaller delta, or the one-stage release "
                             "(center='box', --center box)")


def shrunk_centre(offset: torch.Tensor, count: torch.Tensor, sigma_sums: float, ball_center: torch.Tensor,
                  ball_radius: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Positive-part James-Stein centre (module docstring, step 2) from released values; batched over ``...``.

    ``offset`` (..., d) is the released mean minus ``ball_center``, ``count`` (...) the released (floored) count,
    ``sigma_sums`` the public noise std of each coordinate of the sum. Returns ``(centre (..., d), weight (...))``
    with ``weight = max(0, 1 - d v / ||offset||^2)``, ``v = sigma_sums^2 / count^2``, and the centre projected
    onto the ball ``||c - ball_center|| <= ball_radius``."""
    d = offset.shape[-1]
    v = (float(sigma_sums) / count) ** 2
    norm2 = offset.square().sum(-1)
    weight = (1 - d * v / norm2.clamp(min=torch.finfo(offset.dtype).tiny)).clamp(0.0, 1.0)
    shift = weight.unsqueeze(-1) * offset
    length = shift.norm(dim=-1, keepdim=True)
    shift = shift * (float(ball_radius) / length.clamp(min=float(ball_radius)))  # onto the ball, branch-free
    return ball_center + shift, weight


def radius_grid(floor: float, top: float, *, steps_per_octave: int = RADIUS_STEPS_PER_OCTAVE) -> list[float]:
    """The public grid of candidate radii: ``n + 1`` points from ``floor`` to ``top`` (inclusive), evenly spaced in
    ``log r`` with ``n = ceil(steps_per_octave log2(top / floor))`` (at least 1). Public: ``floor``, ``top`` only."""
    lo, hi = float(floor), float(top)
    if not (0 < lo and math.isfinite(hi) and lo < hi):
        raise ValueError(f"radius grid needs 0 < floor < top, got floor={floor!r}, top={top!r}")
    n = max(1, math.ceil(steps_per_octave * math.log2(hi / lo) - 1e-9))
    return [lo * (hi / lo) ** (j / n) for j in range(n + 1)]


def distance_histogram(X: torch.Tensor, y: torch.Tensor, num_classes: int, centre: torch.Tensor, edges: torch.Tensor,
                       mask: torch.Tensor | None = None) -> torch.Tensor:
    """How many kept records (finite, label in ``range(num_classes)``, ``mask``) lie at distance ``||x - centre||``
    in each bin ``[0, e_0), [e_0, e_1), ..., [e_n, inf)`` of the public ``edges (n+1,)``: int64 ``(..., n+2)``.
    Each record adds 1 to exactly one bin (the histogram the radius stage noises); fixed work, no branch."""
    from torchdpgmm.release.sound import kept_rows

    X = X.to(torch.float64)
    Z = X - centre.unsqueeze(-2)
    valid = kept_rows(Z, y, num_classes, mask)  # the rows the mixture stage keeps: the same filter
    Z = torch.where(valid.unsqueeze(-1), Z, torch.zeros((), dtype=X.dtype, device=X.device))
    dist = Z.norm(dim=-1)
    e = edges.to(dtype=torch.float64, device=X.device)
    bins = (dist.unsqueeze(-1) >= e).sum(-1)  # 0 .. n+1
    onehot = bins.unsqueeze(-1) == torch.arange(e.shape[-1] + 1, device=X.device)
    return (onehot & valid.unsqueeze(-1)).sum(-2).to(torch.int64)


def radius_noise(fraction: float, epsilon: float, delta: float | None, *, mechanism: str = "kl",
                 noise: str = "discrete", adjacency: Any = "add-remove") -> tuple[str, float, Any]:
    """``(kind, scale, block)``: the noise of the radius histogram at ``fraction`` of the budget (module docstring).

    ``kind`` is ``"gaussian"`` or ``"laplace"``; ``scale`` the requested std (Gaussian) or Laplace scale in counts;
    ``block`` the :class:`~torchdpgmm.privacy.NoisedBlock` with the noise actually used (never below the request).
    Discrete Gaussian: ``rho_r = fraction rho(eps, delta)`` and ``sigma = Delta / sqrt(2 rho_r)`` (at least 1/4, the
    sampler's smallest); continuous: ``mu_r = sqrt(fraction) mu(eps, delta)`` and ``sigma = Delta / mu_r``; Laplace:
    ``b = Delta_1 / (fraction eps)``. ``Delta`` = 1 (add/remove) or sqrt(2) (replace-one), ``Delta_1`` = 1 or 2."""
    from torchdpgmm.mechanisms.discrete import rational_gaussian_variance, rational_laplace_scale
    from torchdpgmm.privacy import Adjacency, NoisedBlock

    replace_one = Adjacency.parse(adjacency) == Adjacency.REPLACE_ONE
    f = float(fraction)
    if mechanism == "laplace":
        sens = 2.0 if replace_one else 1.0
        b = sens / (f * float(epsilon))
        if noise == "discrete":
            t, s_ = rational_laplace_scale(b)
            return "laplace", b, NoisedBlock(RADIUS_BLOCK, "discrete-laplace", sens, t / s_, norm="l1")
        return "laplace", b, NoisedBlock(RADIUS_BLOCK, "laplace", sens, b, norm="l1")
    sens = math.sqrt(2.0) if replace_one else 1.0
    if noise == "continuous":
        mu_r = (1 - 1e-9) * math.sqrt(f) * float(gdp_mu(float(epsilon), float(delta)))
        sigma = sens / mu_r
        return "gaussian", sigma, NoisedBlock(RADIUS_BLOCK, "gaussian", sens, sigma, norm="l2")
    rho_r = (1 - 1e-6) * f * float(zcdp_rho(float(epsilon), float(delta)))
    sigma = max(sens / math.sqrt(2 * rho_r), 0.25)
    t, q, den = rational_gaussian_variance(sigma)
    return "gaussian", sigma, NoisedBlock(RADIUS_BLOCK, "discrete-gaussian", sens, math.sqrt(t * q / den), norm="l2")


def radius_from_histogram(noisy: torch.Tensor, edges: torch.Tensor, count_std: float, *,
                          quantile: float = RADIUS_QUANTILE, z: float = RADIUS_Z) -> torch.Tensor:
    """The private radius from a released histogram ``noisy (..., n+2)`` over ``edges (n+1,)`` (post-processing):
    ``edges[j*]`` with ``j*`` the first ``j`` where the noisy tail ``T_j`` (bins ``j+1 ..``, records at distance
    ``>= e_j``) less ``z`` times its public noise std ``count_std sqrt(n+1-j)`` is at most ``(1 - quantile)`` of the
    noisy total (``edges[n]`` when none is); batched over ``...``, branch-free."""
    e = edges.to(dtype=torch.float64, device=noisy.device)
    h = noisy.to(torch.float64)
    m = e.shape[-1]  # n + 1 edges, n + 2 bins
    total = h.sum(-1, keepdim=True).clamp(min=1.0)
    tail = h.flip(-1).cumsum(-1).flip(-1)[..., 1:]  # T_j = sum_{i >= j+1} h_i, j = 0..n
    sd = float(count_std) * torch.arange(m, 0, -1, dtype=torch.float64, device=noisy.device).sqrt()
    ok = (tail - float(z) * sd) <= (1 - float(quantile)) * total
    ok = ok.to(torch.int64).cummax(-1).values  # once enough records lie inside, every larger radius holds them
    idx = (1 - ok).sum(-1).clamp(max=m - 1)
    return e[idx]


def _calibrate_stages(d, num_classes, epsilons, delta, split, ball_radius, ball_center, centre_mechanism, adjacency,
                      noise, clip_bound, options) -> None:
    """Both stages' noise calibrated before any data are read (memoised: the releases reuse it), so that a budget the
    exact samplers cannot serve is refused before the centre stage reads anything (public values only). The
    samplers' range does not depend on the clip bound: a private radius's stage is checked at 1."""
    from torchdpgmm.release.sound import _calibrate, sound_settings

    eps1, eps2 = epsilons  # (the centre stage's settings at eps1 are checked as sound_settings checks them)
    _check_stage_epsilons(eps1, eps2, delta, noise)
    _calibrate(sound_settings(d, 1, eps1, delta, clip_bound=ball_radius, center=ball_center, adjacency=adjacency,
                              noise=noise, covariance_type="spherical", mechanism=centre_mechanism, split=split), d)
    _calibrate(sound_settings(d, num_classes, eps2, delta, clip_bound=clip_bound, center=ball_center, **options), d)


def release_centred(X: torch.Tensor, y: torch.Tensor, num_classes: int, epsilon: float, delta: float | None, *,
                    clip_bound: float | None, ball_center: Any, ball_radius: float, fraction: float = CENTRE_FRACTION,
                    radius_fraction: float = RADIUS_FRACTION, radius_quantile: float = RADIUS_QUANTILE,
                    radius_floor: float = 0.5, radius_z: float = RADIUS_Z,
                    generator: torch.Generator | None = None, mask: torch.Tensor | None = None,
                    allow_weak_privacy: bool = False, **options: Any):
    """Two-stage sound release (module docstring), the budget rule first as ``release()``: one record for both stages.

    ``ball_center`` / ``ball_radius``: the public ball that holds every record the centre stage may see (with
    public bounds in the unit box: the box's middle and ``sqrt(d)/2``). ``clip_bound`` is the mixture stage's
    radius about the released centre; None: a private radius (module docstring: ``radius_fraction`` of the budget, the
    ``radius_quantile`` of the distances on the grid from ``radius_floor`` to ``2 ball_radius``, ``radius_z``; released
    as ``extras["clip_radius"]`` (...)). ``options`` go to the mixture stage
    (:func:`torchdpgmm.release.sound.release_sound`: ``mechanism``, ``adjacency``, ``covariance_type``, ``noise``,
    ...); the centre stage takes the same ``adjacency`` and ``noise`` and the Gaussian mechanism (Laplace when the
    mixture's is). ``extras["centre"]`` is the released centre and ``extras["centre_weight"]`` its shrinkage weight.
    """
    from torchdpgmm._validation import check_privacy_strength
    from torchdpgmm.release.diagnostics import block_noise_std
    from torchdpgmm.release.result import Release
    from torchdpgmm.release.sound import check_schema, release_sound, sound_settings

    check_privacy_strength(epsilon, delta, allow_weak_privacy=allow_weak_privacy)  # public values, before anything
    if "center" in options:
        raise ValueError("release_centred releases its own centre: pass ball_center, not center")
    if options.get("num_draws") not in (None, 1):
        raise ValueError("num_draws is not supported by the two-stage release (each draw needs its own centre): "
                         "batch the data instead")
    d = check_schema(X, y, num_classes, mask)
    private_radius = clip_bound is None
    if private_radius:
        for name, v, lo, hi in (("radius_fraction", radius_fraction, 0.0, 1.0 - float(fraction)),
                                ("radius_quantile", radius_quantile, 0.0, 1.0)):
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and lo < v < hi):
                raise ValueError(f"{name} must be a number in ({lo:g}, {hi:g}), got {v!r}")
        if not (isinstance(radius_z, (int, float)) and not isinstance(radius_z, bool) and 0 <= radius_z < math.inf):
            raise ValueError(f"radius_z must be a finite number >= 0, got {radius_z!r}")
        edges_list = radius_grid(radius_floor, 2 * float(ball_radius))
    mechanism = options.get("mechanism", "kl")
    noise = options.get("noise", "discrete")
    adjacency = options.get("adjacency", "add-remove")
    ball_center = torch.as_tensor(ball_center, dtype=torch.float64, device=X.device)
    centre_mechanism = "laplace" if mechanism == "laplace" else "gaussian"
    # every public setting of both stages is checked before any noise is drawn (and, below, both calibrated)
    sound_settings(d, num_classes, epsilon, delta, clip_bound=1.0 if private_radius else clip_bound,
                   center=ball_center, **options)
    eps1 = stage_epsilons(epsilon, delta, fraction, mechanism=mechanism, noise=noise)[0]
    eps2 = stage_epsilons(epsilon, delta, float(fraction) + (float(radius_fraction) if private_radius else 0.0),
                          mechanism=mechanism, noise=noise)[1]  # what the centre (and a private radius) leave
    if private_radius:
        r_kind, r_scale, r_block = radius_noise(radius_fraction, epsilon, delta, mechanism=mechanism, noise=noise,
                                                adjacency=adjacency)
        edges = torch.tensor(edges_list, dtype=torch.float64, device=X.device)
    r = math.sqrt(d)
    split = {"counts": 1.0, "sums": r, "second_moments": _SECOND_MOMENT_SHARE * r}
    _calibrate_stages(d, num_classes, (eps1, eps2), delta, split, ball_radius, ball_center, centre_mechanism,
                      adjacency, noise, 1.0 if private_radius else clip_bound, options)
    # ---- nothing below depends on private values for control flow ----
    inside = (y >= 0) & (y < num_classes)  # rows the mixture stage keeps; the others are dropped by both
    y1 = torch.where(inside, torch.zeros_like(y), torch.ones_like(y))  # label 1 is outside range(1): dropped
    first = release_sound(X, y1, 1, eps1, delta, clip_bound=ball_radius, center=ball_center,
                          covariance_type="spherical", mechanism=centre_mechanism, adjacency=adjacency, noise=noise,
                          split=split, generator=generator, mask=mask)
    noise1 = first.extras["noise"]
    sigma_sums = block_noise_std(noise1, "sums")  # public: Gaussian sigma or sqrt(2) x the Laplace scale
    count = first.model.counts[..., 0].to(torch.float64)
    offset = first.model.means[..., 0, :] - ball_center
    centre, weight = shrunk_centre(offset, count, sigma_sums, ball_center, ball_radius)
    if not private_radius:
        second = release_sound(X, y, num_classes, eps2, delta, clip_bound=clip_bound, center=centre,
                               generator=generator, mask=mask, **options)
        record = _composed_record(first.privacy, second.privacy, epsilon, delta, fraction, eps1, eps2, noise,
                                  centre_mechanism)
        extras = dict(second.extras) | {"centre": centre, "centre_weight": weight, "centre_fraction": float(fraction),
                                        "stage_epsilons": (eps1, eps2), "centre_noise": dict(noise1)}
        return Release(model=second.model, privacy=record, extras=extras)
    from torchdpgmm.mechanisms.discrete import add_noise, add_noise_tv
    from torchdpgmm.mixture import LabeledGMM

    hist = distance_histogram(X, y, num_classes, centre, edges, mask)
    noisy, _ = add_noise(hist, r_scale, kind=r_kind, noise=noise, grid=1.0, generator=generator)
    std = float(r_block.noise_scale) * (math.sqrt(2.0) if r_kind == "laplace" else 1.0)
    R = radius_from_histogram(noisy, edges, std, quantile=radius_quantile, z=radius_z)  # (...,), released
    c = centre.unsqueeze(-2)
    Xs = c + (X.to(torch.float64) - c) / R[..., None, None]  # records scaled by 1/R about the centre: clip at 1
    second = release_sound(Xs, y, num_classes, eps2, delta, clip_bound=1.0, center=centre, generator=generator,
                           mask=mask, **options)
    m = second.model
    R1, R2 = R[..., None, None], R[..., None, None, None]
    model = LabeledGMM(m.weights, c + R1 * (m.means - c), R2 * R2 * m.covariances, counts=m.counts,
                       validate_args=False)
    record = _composed_record(first.privacy, second.privacy, epsilon, delta, fraction, eps1, eps2, noise,
                              centre_mechanism, radius=(float(radius_fraction), r_block),
                              radius_tv=add_noise_tv(hist, r_scale, kind=r_kind) if noise == "discrete" else (0, 0.0))
    extras = dict(second.extras) | {
        "centre": centre, "centre_weight": weight, "centre_fraction": float(fraction), "clip_bound": R,
        "clip_radius": R, "radius_fraction": float(radius_fraction), "radius_quantile": float(radius_quantile),
        "radius_edges": edges, "radius_histogram": noisy, "stage_epsilons": (eps1, eps2),
        "centre_noise": dict(noise1)} | _scaled_noise_extras(second.extras["noise"], R)
    return Release(model=model, privacy=record, extras=extras)


def _scaled_noise_extras(noise: dict[str, Any], R: torch.Tensor) -> dict[str, Any]:
    """The private radius's noise entries of ``extras``: ``noise`` in the data's units, ``noise_scaled`` the mixture
    stage's own (records scaled by ``1/R``), and ``noise_units`` saying so."""
    return {"noise": noise_in_data_units(noise, R), "noise_scaled": noise,
            "noise_units": "noise: the data's units (the mixture stage's scales times clip_radius, squared for "
                           "second moments); noise_scaled: the mixture stage's own, in units of clip_radius"}


#: the power of the clip radius that maps each block's noise from the scaled records to the data's units
_RADIUS_POWER = {"counts": 0, "sums": 1, "second_moments": 2, "pooled_second_moment": 2}
#: the prefixes of a block's entries in a sound release's noise summary (torchdpgmm.release.sound._noise_summary)
_SCALE_PREFIXES = ("sigma_", "laplace_scale_", "grid_")


def noise_in_data_units(noise: dict[str, Any], R: torch.Tensor) -> dict[str, Any]:
    """A sound release's public noise summary (``extras["noise"]``) of records scaled by ``1/R`` about the centre,
    in the data's units: each block's ``sigma_`` / ``laplace_scale_`` / ``grid_`` entry times ``R`` to the power of
    :data:`_RADIUS_POWER` (a count is a count, a sum scales with ``R``, a second moment with ``R^2``); ``R (...)``
    is the released radius (a tensor, one per trial, on the release's device); other entries are kept."""
    out = dict(noise)
    for key, value in noise.items():
        block = next((key[len(p):] for p in _SCALE_PREFIXES if key.startswith(p)), None)
        if _RADIUS_POWER.get(block) and value is not None:
            out[key] = value * R ** _RADIUS_POWER[block]
    return out


@functools.lru_cache(maxsize=256)
def _public_budget(kind: str, epsilon: float, delta: float) -> float:
    """GDP mu or zCDP rho of a public (epsilon, delta), computed once per setting (host math the record quotes)."""
    return float(gdp_mu(epsilon, delta) if kind == "gdp" else zcdp_rho(epsilon, delta))


def _composed_record(first: PrivacyRecord, second: PrivacyRecord, epsilon: float, delta: float | None,
                     fraction: float, eps1: float, eps2: float, noise: str, centre_mechanism: str,
                     radius: tuple[float, Any] | None = None, radius_tv: tuple[int, float] = (0, 0.0)) -> PrivacyRecord:
    """One record for the stages: blocks, composition, notes; ``sampler_tv`` the sum of the stages' (and the radius
    histogram's ``radius_tv = (draws, tv)``): the TV of independent calls adds up."""
    from dataclasses import replace

    from torchdpgmm.privacy.record import SAMPLER_NOTE, with_sampler_tv

    mid = () if radius is None else (radius[1],)
    blocks = tuple(replace(b, name=_PREFIX + b.name) for b in first.blocks) + mid + tuple(second.blocks)
    if centre_mechanism == "laplace":
        how = f"basic composition of two stages: centre eps={eps1:.6g} + mixture eps={eps2:.6g}"
    elif noise == "continuous":
        how = ("Gaussian DP composition of two stages (Dong, Roth & Su 2019): mu_centre^2 + mu_mixture^2 <= mu^2 = "
               f"{_public_budget('gdp', float(epsilon), float(delta)) ** 2:.6g}")
    else:
        how = ("zCDP composition of two stages (Bun & Steinke 2016): rho_centre + rho_mixture <= rho = "
               f"{_public_budget('zcdp', float(epsilon), float(delta)):.6g}")
    if radius is not None:
        how = how.replace("two stages", "three stages").replace("mu_centre^2 + mu_mixture^2",
                                                                 "mu_centre^2 + mu_radius^2 + mu_mixture^2")
        how = how.replace("rho_centre + rho_mixture", "rho_centre + rho_radius + rho_mixture").replace(
            "+ mixture eps", f"+ radius eps={radius[0] * float(epsilon):.6g} + mixture eps")
    accountant = (f"{how}; centre stage ({fraction:g} of the budget, eps {eps1:.6g}): {first.accountant}; "
                  + ("" if radius is None else
                     f"radius stage ({radius[0]:g} of the budget): one histogram block '{RADIUS_BLOCK}' "
                     f"({radius[1].mechanism}, L{'1' if radius[1].norm == 'l1' else '2'} sensitivity "
                     f"{radius[1].sensitivity:.6g}, noise scale {radius[1].noise_scale:.6g}); ")
                  + f"mixture stage (eps {eps2:.6g}): {second.accountant}")
    # the centre stage's own notes (its clip radius, ...) say which stage they belong to
    notes = tuple(second.notes) + tuple(f"centre stage: {n}" for n in first.notes
                                        if n not in second.notes and not n.startswith(SAMPLER_NOTE)) + (
        f"two stages: a private centre ({fraction:g} of the budget; blocks named '{_PREFIX}*') released first, the "
        "mixture clipped about it (torchdpgmm.release.centring)",)
    if radius is not None:
        notes = notes + (
            f"private clip radius ({radius[0]:g} of the budget, block '{RADIUS_BLOCK}'): a noisy histogram of the "
            "records' distances to the released centre; the mixture stage saw the records scaled by 1/radius about "
            "the centre, so its clip bound 1 is the released radius (extras['clip_radius']) in the data's units",)
    rest = 1 - float(fraction) - (0.0 if radius is None else radius[0])
    split = {"centre": float(fraction)} | ({} if radius is None else {"radius": radius[0]}) | {"mixture": rest} | {
        f"mixture_{k}": v for k, v in second.split.items()}
    notes = tuple(n for n in notes if not n.startswith(SAMPLER_NOTE))  # one note for the stages together, below
    return with_sampler_tv(
        PrivacyRecord(epsilon=float(epsilon), delta=0.0 if delta is None else float(delta), adjacency=second.adjacency,
                      accountant=accountant, mode="sound", mechanism=second.mechanism, split=split, notes=notes,
                      blocks=blocks, covered=first.covered and second.covered),
        first.sampler_tv + second.sampler_tv + float(radius_tv[1]),
        first.sampler_draws + second.sampler_draws + int(radius_tv[0]))
