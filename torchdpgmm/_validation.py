"""Input checks shared by every public entry point.

Every check raises ``ValueError`` (or ``TypeError`` for wrong kinds) with a message that names the
argument, *before* any noise is drawn: a release never silently degrades to something non-private.
Checks that need a tensor's value (finiteness, label range, class sizes) synchronise with the host
once; they run at the API boundary, never inside the batched hot paths.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch

__all__ = [
    "check_clip_bound",
    "check_epsilon",
    "check_delta",
    "check_privacy_params",
    "check_finite",
    "check_labels",
    "as_float_tensor",
]


def _scalar_values(x: Any) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float64) if not torch.is_tensor(x) else x.detach()
    return t


def check_epsilon(epsilon: Any, name: str = "epsilon") -> None:
    """Raise ``ValueError`` unless every entry of ``epsilon`` is finite and > 0."""
    t = _scalar_values(epsilon)
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()) or not bool((t > 0).all()):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")


def check_delta(delta: Any, name: str = "delta") -> None:
    """Raise ``ValueError`` unless every entry of ``delta`` lies in the open interval (0, 1)."""
    t = _scalar_values(delta)
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()) or not bool(((t > 0) & (t < 1)).all()):
        raise ValueError(f"{name} must lie in (0, 1), got {delta!r}")


def check_privacy_params(epsilon: Any, delta: Any | None = None) -> None:
    """:func:`check_epsilon` and, when given, :func:`check_delta` ((epsilon, delta)-DP, Dwork & Roth 2014)."""
    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta)


def check_finite(x: torch.Tensor, name: str, mask: torch.Tensor | None = None) -> None:
    """Raise ``ValueError`` if ``x`` (restricted to ``mask`` rows when given) has NaN or inf."""
    if not torch.is_tensor(x):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    bad = ~torch.isfinite(x)
    if mask is not None:
        m = mask
        while m.dim() < bad.dim():
            m = m.unsqueeze(-1)
        bad = bad & m
    if bool(bad.any()):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")


def check_labels(y: torch.Tensor, num_classes: int, mask: torch.Tensor | None = None) -> None:
    """Raise unless ``y`` is an integer tensor with values in ``[0, num_classes)`` (on unmasked rows)."""
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    if not torch.is_tensor(y):
        raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
    if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise TypeError(f"y must hold integer labels, got dtype {y.dtype}")
    bad = (y < 0) | (y >= num_classes)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        raise ValueError(f"labels must lie in [0, {num_classes}); found values outside that range")


def as_float_tensor(x: Any, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Convert array-likes to a floating tensor (float64 unless ``x`` is already floating)."""
    if not torch.is_tensor(x):
        try:
            x = torch.as_tensor(x)
        except Exception as exc:  # pragma: no cover - message path
            raise TypeError(f"{name} must be a tensor or array-like: {exc}") from None
    if dtype is not None:
        return x.to(dtype)
    if not x.dtype.is_floating_point:
        x = x.to(torch.float64)
    return x


def _is_real_scalar(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.ndim(v) == 0


def check_clip_bound(clip_bound: Any, dim: int | None = None) -> float:
    """Validate a public L2 clipping bound ``B`` and return it as a float.

    ``B`` must be a real scalar with ``B**4`` a normal, finite float64 (about ``1e-77 < B < 1e77``):
    the second-moment block's sensitivity is ``B**2`` and the KL-driven budget split divides by ``B**4``
    (Liu, Scaglione & Peisert 2025 eq. (28) with the sound mode's global sensitivities), so a bound outside
    that range cannot be computed with. Rescale the features instead.
    """
    if not _is_real_scalar(clip_bound):
        raise TypeError(f"clip_bound must be a real number, got {type(clip_bound).__name__}")
    B = float(clip_bound)
    if not (math.isfinite(B) and B > 0):
        raise ValueError(f"clip_bound must be a positive finite number, got {clip_bound!r}")
    scale = B / math.sqrt(dim) if dim else B
    with np.errstate(over="ignore", under="ignore"):
        b4 = float(np.float64(min(scale, B)) ** 4), float(np.float64(B) ** 4)
    if not all(np.isfinite(v) and v >= np.finfo(np.float64).tiny for v in b4):
        raise ValueError(
            f"clip_bound={clip_bound!r} is outside the range the release computes with (B**4 must be a "
            "normal float64, about 1e-77 < B < 1e77); rescale the features (e.g. StandardScaler) and the bound"
        )
    return B
