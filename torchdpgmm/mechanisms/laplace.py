"""Laplace mechanism ``x + Lap(0, b)`` (Dwork, McSherry, Nissim & Smith 2006): the noise of Xi,
Kantarcioglu & Inan (2011), Wu et al. (2016), the DP-MSNM paper (2021) and the sound ``laplace`` flavour.

:func:`laplace_noise` is the package's one continuous Laplace sampler: the inverse CDF
``-b sgn(u) log(1 - 2|u|)`` of one ``u ~ U[-1/2, 1/2)`` per value, **computed in float64 whatever the
requested dtype**: in float32 the guard ``|u| <= 1/2 - 2^-54`` would round to 1/2 and ``u = -1/2``
(probability 2^-24) would give an infinite draw; in float64 the guard is exact, so every draw is finite.
The result is then cast to the requested dtype. Like every floating-point sampler it is exposed to
Mironov's (2012) attack on the low-order bits; the exact alternative is
:func:`torchdpgmm.mechanisms.discrete.discrete_laplace_noise`.
"""
from __future__ import annotations

from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import check_finite
from torchdpgmm.mechanisms._common import as_param, check_nonneg_finite

__all__ = ["laplace", "laplace_noise"]

_U_MAX = 0.5 - 2.0 ** -54  # the largest float64 below 1/2: keeps log1p(-2|u|) finite


def _out_dtype_device(scale: Any, dtype: torch.dtype | None, device: Any) -> tuple[torch.dtype, Any]:
    if dtype is None:
        dtype = scale.dtype if torch.is_tensor(scale) and scale.dtype.is_floating_point else torch.float64
    if device is None and torch.is_tensor(scale):
        device = scale.device
    return dtype, device


def laplace_noise(shape: torch.Size | tuple, scale: torch.Tensor | float, generator: torch.Generator | None = None,
                  *, dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """Draw Laplace(0, scale) noise of ``shape`` (``scale`` broadcasts). No validation (hot path).

    Sampled in float64 (see module docstring) and returned in ``dtype`` (default: ``scale``'s floating
    dtype, else float64) on ``device`` (default: ``scale``'s).
    """
    dtype, device = _out_dtype_device(scale, dtype, device)
    u = torch.rand(tuple(shape), generator=generator, dtype=torch.float64, device=device) - 0.5
    e = -torch.sign(u) * torch.log1p(-2.0 * u.abs().clamp(max=_U_MAX))
    s = scale.to(device=device, dtype=torch.float64) if torch.is_tensor(scale) else scale
    return (e * s).to(dtype)


def laplace(x: torch.Tensor, scale: torch.Tensor | float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Release ``x + Lap(0, scale)`` elementwise; ``scale`` (``b = sensitivity / epsilon``) broadcasts."""
    if not torch.is_tensor(x):
        raise TypeError("x must be a torch.Tensor")
    if not x.dtype.is_floating_point:
        x = x.to(torch.float64)
    check_finite(x, "x")
    scale = as_param(scale, x, "scale")
    check_nonneg_finite(scale, "scale")
    shape = broadcast_shapes(x.shape, scale.shape)
    return x + laplace_noise(shape, scale, generator, dtype=x.dtype, device=x.device)
