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
Then ``sum_k (c_k - floor) <= sum_k max(e_k, 0)``, whose mean is at most ``K s / sqrt(2 pi)`` (Gaussian;
``K s / (2 sqrt 2)`` for Laplace) and whose standard deviation is below ``s sqrt(K)``. The release is called
mostly noise when its released total is within three such standard deviations of what an empty table
releases on average: ``sum_k c_k <= K floor + s (K / sqrt(2 pi) + 3 sqrt(K))``. A table whose true total is
of that size is mostly noise too (each class count is within a few noise scales of zero), so the warning
is right in both cases; it is a hint, never a refusal.

Every front door calls it: ``torchdpgmm release`` and ``torchdpgmm synthesize`` (printed as one line on
stderr), :class:`~torchdpgmm.estimator.DPGaussianMixture` and
:class:`~torchdpgmm.estimator.DPSyntheticClassifier` (``fit`` issues a :class:`MostlyNoiseWarning`).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import torch

__all__ = ["MostlyNoiseWarning", "mostly_noise", "warn_if_mostly_noise", "sound_count_noise", "block_noise_std",
           "pipeline_count_noise", "CLI_CAUSES", "ESTIMATOR_CAUSES"]

MOSTLY_NOISE = "the release is mostly noise: the released class counts are within a few noise scales of zero"
CLI_CAUSES = ("--classes not matching the labels (case?), wrong label column, features that are not numbers, "
              "or too few rows for this epsilon")
ESTIMATOR_CAUSES = ("classes= not matching the labels of y (case? type?), feature cells that are not numbers "
                    "(their rows are dropped), or too few rows for this epsilon")


class MostlyNoiseWarning(UserWarning):
    """A sound release whose released class counts are within a few noise scales of zero (module docstring)."""


def mostly_noise(counts: Any, count_std: float, *, floor: float = 0.0) -> bool:
    """True when the released ``counts (K,)`` are consistent with an empty table (module docstring's test);
    ``count_std`` is the public standard deviation of one count's noise, ``floor`` the public floor of a count."""
    c = torch.as_tensor(counts, dtype=torch.float64).detach().cpu().reshape(-1)
    k = max(int(c.numel()), 1)
    s = float(count_std)
    if not (math.isfinite(s) and s >= 0):
        return False
    return float(c.sum()) <= k * float(floor) + s * (k / math.sqrt(2 * math.pi) + 3.0 * math.sqrt(k))


def warn_if_mostly_noise(counts: Any, count_std: float | None, *, floor: float = 0.0, causes: str = ESTIMATOR_CAUSES,
                         stacklevel: int = 2) -> bool:
    """Issue one :class:`MostlyNoiseWarning` naming ``causes`` when :func:`mostly_noise` holds; returns whether
    it did. ``counts`` or ``count_std`` None (nothing released to judge from): no warning."""
    if counts is None or count_std is None or not mostly_noise(counts, count_std, floor=floor):
        return False
    warnings.warn(f"{MOSTLY_NOISE}; likely causes: {causes}", MostlyNoiseWarning, stacklevel=stacklevel + 1)
    return True


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
