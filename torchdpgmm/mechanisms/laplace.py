"""Laplace mechanism: ``x + Lap(0, b)``, the noise of Xi et al. (paper 001), Wu et al. and DP-MSNM (004).

Draws are ``b (E1 - E2)`` with ``E = -log1p(-U)``, ``U ~ U[0, 1)``: an exact Laplace variable that is
always finite (``-log(U)`` would give ``inf`` at ``U = 0``). Like every textbook floating-point
implementation it does not address Mironov's (2012) floating-point attack on the low-order bits.
"""
from __future__ import annotations

import torch

from torchdpgmm._validation import check_finite
from torchdpgmm.mechanisms._common import as_param, check_nonneg_finite

__all__ = ["laplace", "laplace_noise"]


def laplace_noise(shape: torch.Size | tuple, scale: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw Laplace(0, scale) noise of ``shape`` (``scale`` broadcasts). No validation (hot path)."""
    u = torch.rand(2, *shape, dtype=scale.dtype, device=scale.device, generator=generator)
    e = -torch.log1p(-u)
    return scale * (e[0] - e[1])


def laplace(x: torch.Tensor, scale: torch.Tensor | float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Release ``x + Lap(0, scale)`` elementwise; ``scale`` (``b = sensitivity / epsilon``) broadcasts."""
    if not torch.is_tensor(x):
        raise TypeError("x must be a torch.Tensor")
    if not x.dtype.is_floating_point:
        x = x.to(torch.float64)
    check_finite(x, "x")
    scale = as_param(scale, x, "scale")
    check_nonneg_finite(scale, "scale")
    shape = torch.broadcast_shapes(x.shape, scale.shape)
    return x + laplace_noise(shape, scale, generator)
