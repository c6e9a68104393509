"""Wishart noise for covariances (Liu, Scaglione & Peisert 2025, eq. 6):
``Sigma~_k = Sigma_k + W_k``, ``W_k ~ W_d(I/gamma_k, d+1)``.

A draw is ``W = G G^T`` with ``G`` a ``d x (d+1)`` matrix of i.i.d. ``N(0, 1/gamma)`` entries, which is
exactly ``W_d(I/gamma, d+1)`` and keeps the explicit-generator contract (``torch.distributions.Wishart``
samples from the global RNG). Moments: ``E W = (d+1)/gamma I``,
``Var W_ij = (d+1)(1 + [i=j])/gamma^2``.

Caveat (docs/privacy.md): the Wishart mechanism of Jiang et al. (2016) whose privacy charge
``3 gamma / (2 N_k)`` eq. (9) uses was later shown not to be differentially private.
"""
from __future__ import annotations

import torch

from torchdpgmm.mechanisms._common import as_param, check_pos_finite

__all__ = ["wishart", "wishart_noise"]


def wishart_noise(gamma: torch.Tensor, d: int, generator: torch.Generator | None = None, df: int | None = None) -> torch.Tensor:
    """``W_d(I/gamma, df)`` draws (default ``df = d + 1``), shape ``gamma.shape + (d, d)``. No validation."""
    df = d + 1 if df is None else df
    G = torch.randn(*gamma.shape, d, df, dtype=gamma.dtype, device=gamma.device, generator=generator)
    G = G * gamma.rsqrt().unsqueeze(-1).unsqueeze(-1)
    return G @ G.transpose(-1, -2)


def wishart(gamma: torch.Tensor | float, d: int, generator: torch.Generator | None = None,
            df: int | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Draw Wishart noise ``W ~ W_d(I/gamma, d+1)`` for a batch of precisions ``gamma (...)``.

    Returns a tensor of shape ``gamma.shape + (d, d)`` on ``gamma``'s device.
    """
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ValueError(f"d must be a positive int, got {d!r}")
    if df is not None and (not isinstance(df, int) or df < d):
        raise ValueError(f"df must be an int >= d, got {df!r}")
    g = as_param(gamma, None, "gamma")
    if dtype is not None:
        g = g.to(dtype)
    check_pos_finite(g, "gamma")
    return wishart_noise(g, d, generator, df)
