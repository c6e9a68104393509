"""NON-private evaluation of a release against the data it was computed from, and setting checks.

Nothing in this module is differentially private. :func:`evaluate` reads the raw data to compute the
empirical labeled GMM of eq. (2) and ``KL(released || fitted)`` (Appendix B of Liu, Scaglione & Peisert
2025); :func:`check_settings` reads the raw data to warn the data owner about meaningless privacy
settings. Their results are for the data owner (or a simulation study) only: publishing them spends
privacy that no record accounts for. The sound release itself (:func:`torchdpgmm.release.release` with
``mode="sound"``) returns nothing computed from the data without noise.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

from torchdpgmm.kl import kl_divergence
from torchdpgmm.mixture import LabeledGMM, fit_labeled

__all__ = ["Evaluation", "evaluate", "check_settings", "SettingsWarning"]


@dataclass
class Evaluation:
    """Non-private evaluation of one release (batched like the release).

    Attributes:
        fitted: the empirical labeled GMM of eq. (2) on the raw data (classes with fewer than two records
            get a zero covariance; classes with none a zero mean).
        kl: ``KL(release.model || fitted)`` per trial, ``batch_shape``; NaN for a trial in which some
            class of the data has a singular empirical covariance (fewer than d + 1 distinct records),
            where eq. (2c) gives no density.
    """

    fitted: LabeledGMM
    kl: torch.Tensor


def evaluate(release: Any, X: torch.Tensor, y: torch.Tensor, *, mask: torch.Tensor | None = None) -> Evaluation:
    """Fit eq. (2) to ``(X, y)`` and compute ``KL(release.model || fitted)`` (NOT private; see module doc).

    ``release`` is a :class:`~torchdpgmm.release.result.Release` (or anything with ``.model``); ``X (..., N, d)``,
    ``y (..., N)`` are the data it was computed from, ``mask (..., N)`` marks real rows. Raises
    ``ValueError`` for labels outside ``[0, K)`` or non-finite features (this is not a release: errors
    may depend on the data).
    """
    model = release.model
    X = X.to(model.dtype) if torch.is_tensor(X) and X.dtype.is_floating_point else torch.as_tensor(X, dtype=model.dtype)
    fitted = fit_labeled(X, y, model.num_classes, mask=mask, min_count=0)
    _, info = torch.linalg.cholesky_ex(fitted.covariances)
    ok = (info == 0).all(-1)
    eye = torch.eye(model.dim, dtype=model.dtype, device=model.device)
    safe = torch.where(ok[..., None, None, None], fitted.covariances, eye)
    kl = kl_divergence(model, LabeledGMM(fitted.weights, fitted.means, safe, validate_args=False))
    kl = torch.where(ok.expand_as(kl), kl, torch.full_like(kl, float("nan")))
    return Evaluation(fitted=fitted, kl=kl)


class SettingsWarning(UserWarning):
    """A privacy setting that is legal but meaningless for these data (to the data owner only)."""


def check_settings(
    X: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    num_classes: int | None = None,
    epsilon: float,
    delta: float | None = None,
    clip_bound: float | None = None,
    center: Any = None,
    mask: torch.Tensor | None = None,
) -> list[str]:
    """Warn the data owner about meaningless settings (Dwork & Roth 2014 Sec. 2.3 on delta; NOT private).

    Issues one :class:`SettingsWarning` per finding, each with a one-line suggestion, and returns the
    messages: ``delta >= 1/N`` (a mechanism may then publish a whole record), ``epsilon > 10`` (little
    protection), a ``clip_bound`` that clips more than half of the rows (statistics biased towards
    the ball) or less than 1% (noise larger than needed), and (given ``y`` and ``num_classes``) rows that
    the sound release will drop without an error: labels outside ``[0, num_classes)`` or non-finite
    features. This is a separate call, not part of
    :func:`~torchdpgmm.release.release`, because the findings depend on the raw data: printing them from
    inside the release would make its visible behaviour data dependent, and a log of warnings is easily
    published with the model. Call it before releasing; never publish its output.
    """
    msgs = []
    X = torch.as_tensor(X).to(torch.float64)
    valid = torch.isfinite(X).all(-1) if mask is None else mask & torch.isfinite(X).all(-1)
    n = float(valid.sum(-1).to(torch.float64).min()) if X.dim() >= 2 else 0.0
    if delta is not None and n > 0 and float(delta) >= 1.0 / n:
        msgs.append(f"delta = {float(delta):g} >= 1/N: choose delta well below 1/N, e.g. 1/N^1.1 or 1e-6")
    if float(epsilon) > 10:
        msgs.append(f"epsilon = {float(epsilon):g} > 10 protects little: choose epsilon <= 10 (typically <= 2)")
    if clip_bound is not None:
        Z = X if center is None else X - torch.as_tensor(center, dtype=X.dtype)
        clipped = (torch.linalg.vector_norm(torch.nan_to_num(Z), dim=-1) > float(clip_bound)) & valid
        frac = float(clipped.sum()) / max(float(valid.sum()), 1.0)
        if frac > 0.5:
            msgs.append(f"clip_bound = {float(clip_bound):g} clips {frac:.0%} of rows (> 50%): choose a larger "
                        "bound, e.g. from public knowledge of the feature ranges")
        elif frac < 0.01:
            msgs.append(f"clip_bound = {float(clip_bound):g} clips {frac:.1%} of rows (< 1%): a smaller public bound "
                        "would need less noise")
    finite = torch.isfinite(X).all(-1) if X.dim() >= 1 else torch.ones((), dtype=torch.bool)
    nonfinite = ~finite if mask is None else mask & ~finite
    if bool(nonfinite.any()):
        msgs.append(f"{int(nonfinite.sum())} row(s) have features that are not finite numbers: the sound release "
                    "drops them; fix or remove them")
    if y is not None and num_classes is not None:
        yy = torch.as_tensor(y)
        out = ((yy < 0) | (yy >= num_classes)) & finite
        out = out if mask is None else out & mask
        if bool(out.any()):
            msgs.append(f"{int(out.sum())} row(s) have a label that is not one of the {num_classes} classes: the "
                        "sound release drops them; check --classes (spelling, case) and the label column")
    for m in msgs:
        warnings.warn(m, SettingsWarning, stacklevel=2)
    return msgs
