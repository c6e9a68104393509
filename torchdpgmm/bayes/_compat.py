"""Bridges to the core mechanisms (``torchdpgmm.mechanisms``), with a local fallback of the same
signature while the core is not yet importable. Both follow the same maths; only the random stream
may differ."""
from __future__ import annotations

import torch

__all__ = ["laplace", "xi_repair", "xi_repair_reference"]


def _local_laplace(x: torch.Tensor, scale, generator: torch.Generator | None = None) -> torch.Tensor:
    scale = torch.as_tensor(scale, dtype=x.dtype, device=x.device)
    shape = torch.broadcast_shapes(x.shape, scale.shape)
    u = torch.rand(shape, dtype=x.dtype, device=x.device, generator=generator) - 0.5
    # inverse CDF of Laplace(0, b): -b sgn(u) log(1 - 2|u|); clamp keeps log finite at u = -1/2
    noise = -scale * torch.sign(u) * torch.log1p(-2.0 * u.abs()).clamp(min=-745.0)
    return x + noise


def laplace(x: torch.Tensor, scale, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x + Laplace(0, scale)`` noise (scale broadcasts); the core's mechanism when available."""
    try:
        from torchdpgmm.mechanisms import laplace as core_laplace
    except ImportError:
        return _local_laplace(x, scale, generator)
    return core_laplace(x, scale, generator=generator)


def xi_repair_reference(S: torch.Tensor, max_iter: int = 10) -> torch.Tensor:
    """Step 3(a)-(c) of Xi et al. Section 5, written out literally (reference for tests and fallback).

    (a) copy the upper triangle onto the lower one; (b) eigen-decompose ``M = V D V'`` and replace every
    non-positive eigenvalue by the smallest positive eigenvalue; (c) repeat (b) until ``M`` is positive
    definite (a fixed ``max_iter`` passes; a pass leaves an already positive definite matrix unchanged up
    to rounding). A matrix with no positive eigenvalue at all (which the paper does not cover) is mapped
    to ``tiny * I`` with ``tiny = eps * max(1, max |eigenvalue|)`` (``eps`` the dtype's machine epsilon),
    so that the step is defined and the result positive definite.
    """
    upper = torch.triu(S)
    M = upper + upper.transpose(-1, -2) - torch.diag_embed(torch.diagonal(S, dim1=-2, dim2=-1))
    for _ in range(max_iter):
        evals, evecs = torch.linalg.eigh(M)
        pos = evals > 0
        inf = torch.full_like(evals, float("inf"))
        min_pos = torch.where(pos, evals, inf).amin(-1, keepdim=True)
        fallback = evals.abs().amax(-1, keepdim=True).clamp(min=1.0) * torch.finfo(S.dtype).eps
        min_pos = torch.where(torch.isfinite(min_pos), min_pos, fallback)
        new = torch.where(pos, evals, min_pos)
        M2 = (evecs * new.unsqueeze(-2)) @ evecs.transpose(-1, -2)
        M2 = 0.5 * (M2 + M2.transpose(-1, -2))
        # leave already positive definite matrices exactly as they are
        M = torch.where(pos.all(-1)[..., None, None], M, M2)
    return M


def xi_repair(S: torch.Tensor) -> torch.Tensor:
    """The core's ``torchdpgmm.mechanisms.psd.xi_repair`` when available, else :func:`xi_repair_reference`."""
    try:
        from torchdpgmm.mechanisms.psd import xi_repair as core_repair
    except ImportError:
        return xi_repair_reference(S)
    return core_repair(S)
