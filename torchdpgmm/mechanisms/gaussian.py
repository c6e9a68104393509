"""Gaussian noise: i.i.d. and colored (Liu, Scaglione & Peisert 2025, eq. 5:
``mu~_k = mu_k + w_k``, ``w_k ~ N(0, Gamma_k^{-1})``)."""
from __future__ import annotations

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import check_finite
from torchdpgmm.mechanisms._common import as_param, check_nonneg_finite

__all__ = ["gaussian", "gaussian_noise", "psd_sqrt"]


def psd_sqrt(cov: torch.Tensor) -> torch.Tensor:
    """A factor ``B`` with ``B B^T = cov`` for symmetric PSD ``cov`` (eigen-decomposition, so singular
    noise covariances such as rank-one ones are allowed)."""
    evals, evecs = torch.linalg.eigh(0.5 * (cov + cov.transpose(-1, -2)))
    return evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)


def gaussian_noise(cov: torch.Tensor, generator: torch.Generator | None = None,
                   sample_shape: torch.Size | tuple = ()) -> torch.Tensor:
    """Draw ``w ~ N(0, cov)`` of shape ``sample_shape + cov.shape[:-1]``. No validation (hot path)."""
    B = psd_sqrt(cov)
    z = torch.randn(*sample_shape, *cov.shape[:-1], 1, dtype=cov.dtype, device=cov.device, generator=generator)
    return (B @ z).squeeze(-1)


def gaussian(mean: torch.Tensor, cov: torch.Tensor | float, generator: torch.Generator | None = None, *,
             check_mean: bool = True) -> torch.Tensor:
    """Release ``mean + w`` with ``w ~ N(0, cov)`` (colored Gaussian mechanism, eq. 5).

    Args:
        mean: values to privatise, ``(..., d)``.
        cov: noise covariance ``(..., d, d)`` (broadcast against ``mean``), or a scalar variance
            ``sigma^2`` for i.i.d. noise.
        generator: the source of randomness.
        check_mean: refuse a non-finite ``mean`` (a host read of it, and an error that depends on it). A sound release
            passes ``False``: its statistics are private (the rule: nothing before the release may branch or raise
            on them) and finite by construction (non-finite rows zeroed, records clipped).
    """
    if check_mean:
        check_finite(mean, "mean")
    cov = as_param(cov, mean, "cov")
    if cov.dim() < 2:  # scalar / per-batch variance -> i.i.d. noise
        check_nonneg_finite(cov, "cov (variance)")
        z = torch.randn(mean.shape, dtype=mean.dtype, device=mean.device, generator=generator)
        return mean + cov.sqrt().unsqueeze(-1) * z if cov.dim() > 0 else mean + cov.sqrt() * z
    d = mean.shape[-1]
    if cov.shape[-2:] != (d, d):
        raise ValueError(f"cov must have shape (..., {d}, {d}) to match mean, got {tuple(cov.shape)}")
    check_finite(cov, "cov")
    batch = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    cov = cov.expand(*batch, d, d)
    return mean + gaussian_noise(cov, generator)
