"""Small shared helpers for the noise mechanisms."""
from __future__ import annotations

from typing import Any

import torch


def as_param(x: Any, like: torch.Tensor | None = None, name: str = "parameter") -> torch.Tensor:
    """Turn a Python number or tensor into a floating tensor on ``like``'s device and dtype."""
    if torch.is_tensor(x):
        t = x
        if not t.dtype.is_floating_point:
            t = t.to(torch.float64 if like is None else like.dtype)
        if like is not None:
            t = t.to(device=like.device, dtype=like.dtype if like.dtype.is_floating_point else t.dtype)
        return t
    dtype = like.dtype if (like is not None and like.dtype.is_floating_point) else torch.float64
    device = like.device if like is not None else None
    return torch.as_tensor(x, dtype=dtype, device=device)


def check_nonneg_finite(t: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        raise ValueError(f"{name} must be finite and >= 0")


def check_pos_finite(t: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
        raise ValueError(f"{name} must be finite and > 0")
