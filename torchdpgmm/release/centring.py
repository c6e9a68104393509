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

__all__ = ["CENTRE_FRACTION", "release_centred", "stage_epsilons", "shrunk_centre"]

#: share of the budget spent on the centre stage (of rho, of mu^2, or of epsilon for Laplace)
CENTRE_FRACTION = 0.1
#: the centre stage's split over its three blocks is (1, sqrt(d), 0.01 sqrt(d)) (normalised): the offset's error
#: is ``d R^2 / share_sums + ||o||^2 / share_counts`` (over ``n^2 rho``) with ``||o|| <= R`` much below ``sqrt(d) R``,
#: minimised near ``share_sums / share_counts = sqrt(d)``; the second moment is not used
_SECOND_MOMENT_SHARE = 0.01
_PREFIX = "centre_"


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


def release_centred(X: torch.Tensor, y: torch.Tensor, num_classes: int, epsilon: float, delta: float | None, *,
                    clip_bound: float, ball_center: Any, ball_radius: float, fraction: float = CENTRE_FRACTION,
                    generator: torch.Generator | None = None, mask: torch.Tensor | None = None,
                    **options: Any):
    """Two-stage sound release (module docstring); returns a ``Release`` with one record for both stages.

    ``ball_center`` / ``ball_radius``: the public ball that holds every record the centre stage may see (with
    public bounds in the unit box: the box's middle and ``sqrt(d)/2``). ``clip_bound`` is the mixture stage's
    radius about the released centre. ``options`` go to the mixture stage
    (:func:`torchdpgmm.release.sound.release_sound`: ``mechanism``, ``adjacency``, ``covariance_type``, ``noise``,
    ...); the centre stage takes the same ``adjacency`` and ``noise`` and the Gaussian mechanism (Laplace when the
    mixture's is). ``extras["centre"]`` is the released centre and ``extras["centre_weight"]`` its shrinkage weight.
    """
    from torchdpgmm.release.diagnostics import block_noise_std
    from torchdpgmm.release.result import Release
    from torchdpgmm.release.sound import check_schema, release_sound, sound_settings

    if "center" in options:
        raise ValueError("release_centred releases its own centre: pass ball_center, not center")
    if options.get("num_draws") not in (None, 1):
        raise ValueError("num_draws is not supported by the two-stage release (each draw needs its own centre): "
                         "batch the data instead")
    d = check_schema(X, y, num_classes, mask)
    mechanism = options.get("mechanism", "kl")
    noise = options.get("noise", "discrete")
    adjacency = options.get("adjacency", "add-remove")
    ball_center = torch.as_tensor(ball_center, dtype=torch.float64, device=X.device)
    centre_mechanism = "laplace" if mechanism == "laplace" else "gaussian"
    # every public setting of both stages is checked before any noise is drawn
    sound_settings(d, num_classes, epsilon, delta, clip_bound=clip_bound, center=ball_center, **options)
    sound_settings(d, 1, epsilon, delta, clip_bound=ball_radius, center=ball_center, adjacency=adjacency,
                   noise=noise, covariance_type="spherical", mechanism=centre_mechanism)
    eps1, eps2 = stage_epsilons(epsilon, delta, fraction, mechanism=mechanism, noise=noise)
    r = math.sqrt(d)
    split = {"counts": 1.0, "sums": r, "second_moments": _SECOND_MOMENT_SHARE * r}
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
    second = release_sound(X, y, num_classes, eps2, delta, clip_bound=clip_bound, center=centre,
                           generator=generator, mask=mask, **options)
    record = _composed_record(first.privacy, second.privacy, epsilon, delta, fraction, eps1, eps2, noise,
                              centre_mechanism)
    extras = dict(second.extras) | {"centre": centre, "centre_weight": weight, "centre_fraction": float(fraction),
                                    "stage_epsilons": (eps1, eps2), "centre_noise": dict(noise1)}
    return Release(model=second.model, privacy=record, extras=extras)


def _composed_record(first: PrivacyRecord, second: PrivacyRecord, epsilon: float, delta: float | None,
                     fraction: float, eps1: float, eps2: float, noise: str, centre_mechanism: str) -> PrivacyRecord:
    from dataclasses import replace

    blocks = tuple(replace(b, name=_PREFIX + b.name) for b in first.blocks) + tuple(second.blocks)
    if centre_mechanism == "laplace":
        how = f"basic composition of two stages: centre eps={eps1:.6g} + mixture eps={eps2:.6g}"
    elif noise == "continuous":
        how = ("Gaussian DP composition of two stages (Dong, Roth & Su 2019): mu_centre^2 + mu_mixture^2 <= mu^2 = "
               f"{float(gdp_mu(float(epsilon), float(delta))) ** 2:.6g}")
    else:
        how = ("zCDP composition of two stages (Bun & Steinke 2016): rho_centre + rho_mixture <= rho = "
               f"{float(zcdp_rho(float(epsilon), float(delta))):.6g}")
    accountant = (f"{how}; centre stage ({fraction:g} of the budget, eps {eps1:.6g}): {first.accountant}; "
                  f"mixture stage (eps {eps2:.6g}): {second.accountant}")
    notes = tuple(second.notes) + tuple(n for n in first.notes if n not in second.notes) + (
        f"two stages: a private centre ({fraction:g} of the budget; blocks named '{_PREFIX}*') released first, the "
        "mixture clipped about it (torchdpgmm.release.centring)",)
    split = {"centre": float(fraction), "mixture": 1 - float(fraction)} | {
        f"mixture_{k}": v for k, v in second.split.items()}
    return PrivacyRecord(epsilon=float(epsilon), delta=0.0 if delta is None else float(delta),
                         adjacency=second.adjacency, accountant=accountant, mode="sound", mechanism=second.mechanism,
                         split=split, notes=notes, blocks=blocks, covered=first.covered and second.covered)
