"""Rank-one singular multivariate Gaussian mechanism R1SMG (Ji & Li, 2024), used as a baseline.

Noise ``sqrt(sigma) z u`` with ``z ~ N(0, 1)`` and ``u`` uniform on the unit sphere of ``R^M``, where
``sigma = 2 Delta^2 / (epsilon psi)`` and
``psi = (delta Gamma((M-1)/2) / (sqrt(pi) Gamma(M/2)))^(2/(M-2))`` (requires ``M > 2``); ``Delta`` is the
L2 sensitivity of the released vector.
"""
from __future__ import annotations

import math

import torch

from torchdpgmm._validation import check_delta, check_epsilon, check_finite
from torchdpgmm.mechanisms._common import as_param, check_nonneg_finite

__all__ = ["r1smg", "r1smg_sigma"]


def r1smg_sigma(epsilon: torch.Tensor | float, delta: float, sensitivity: torch.Tensor | float, dim: int) -> torch.Tensor:
    """The R1SMG variance ``sigma = 2 Delta^2 / (epsilon psi)`` for vectors in ``R^dim``."""
    if dim <= 2:
        raise ValueError(f"R1SMG needs dimension M > 2, got {dim}")
    check_epsilon(epsilon)
    check_delta(delta)
    eps = as_param(epsilon, None)
    sens = as_param(sensitivity, eps)
    log_psi = (2.0 / (dim - 2)) * (math.log(delta) + math.lgamma((dim - 1) / 2) - 0.5 * math.log(math.pi)
                                   - math.lgamma(dim / 2))
    return 2.0 * sens.pow(2) / eps * math.exp(-log_psi)


def r1smg(x: torch.Tensor, sensitivity: torch.Tensor | float, epsilon: torch.Tensor | float, delta: float,
          generator: torch.Generator | None = None) -> torch.Tensor:
    """Release ``x + sqrt(sigma) z u`` (R1SMG) for ``x (..., M)``; parameters broadcast over ``...``."""
    check_finite(x, "x")
    M = x.shape[-1]
    sigma = as_param(r1smg_sigma(epsilon, delta, sensitivity, M), x)
    check_nonneg_finite(sigma, "sigma")
    u = torch.randn(x.shape, dtype=x.dtype, device=x.device, generator=generator)
    u = u / u.norm(dim=-1, keepdim=True)
    z = torch.randn(x.shape[:-1] + (1,), dtype=x.dtype, device=x.device, generator=generator)
    return x + sigma.sqrt().unsqueeze(-1) * z * u if sigma.dim() > 0 else x + sigma.sqrt() * z * u
