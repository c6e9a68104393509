"""Gaussian vector noise and symmetric-matrix noise, batched (batch dimensions first).

- :func:`normal_noise`: ``std * N(0, I)`` of a given shape.
- :func:`symmetric_noise`: symmetric ``(..., d, d)`` noise with i.i.d. entries on the upper triangle,
  mirrored. ``isometric=True`` divides the off-diagonal entries by ``sqrt 2``: the noise is then
  isotropic in the Frobenius-isometric coordinates of symmetric matrices, so a Frobenius sensitivity
  is exact (used by the sound release; Dwork, Talwar, Thakurta & Zhang 2014 "Analyze Gauss" use the
  same symmetric construction).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from torchdpgmm.mechanisms.laplace import _out_dtype_device, laplace_noise

__all__ = ["normal_noise", "symmetric_noise"]


def normal_noise(shape: torch.Size | tuple, std: torch.Tensor | float, generator: torch.Generator | None = None,
                 *, dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """``std * z`` with ``z ~ N(0, I)`` of ``shape`` (``std`` broadcasts). No validation (hot path)."""
    dtype, device = _out_dtype_device(std, dtype, device)
    z = torch.randn(tuple(shape), generator=generator, dtype=dtype, device=device)
    return z * (std.to(device=device, dtype=dtype) if torch.is_tensor(std) else std)


def symmetric_noise(batch_shape: torch.Size | tuple, d: int, scale: torch.Tensor | float, *, kind: str = "gaussian",
                    isometric: bool = False, generator: torch.Generator | None = None,
                    dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """Symmetric noise of shape ``batch_shape + (d, d)``.

    Draws a full ``(..., d, d)`` array (Gaussian with std ``scale`` or Laplace with scale ``scale``; a
    tensor ``scale`` has shape broadcastable to ``batch_shape``), keeps the upper triangle and mirrors
    it. ``isometric`` scales the off-diagonal entries by ``1/sqrt 2`` (module docstring).
    """
    if kind not in ("gaussian", "laplace"):
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    dtype, device = _out_dtype_device(scale, dtype, device)
    s = scale[..., None, None] if torch.is_tensor(scale) and scale.dim() > 0 else scale
    shape = tuple(batch_shape) + (d, d)
    draw = normal_noise if kind == "gaussian" else laplace_noise
    e = draw(shape, s, generator, dtype=dtype, device=device)
    if isometric:
        off = ~torch.eye(d, dtype=torch.bool, device=e.device)
        e = torch.where(off, e / math.sqrt(2.0), e)
    return torch.triu(e) + torch.triu(e, 1).transpose(-1, -2)
