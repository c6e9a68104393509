"""The core mechanisms used by the Xi et al. release, plus a literal re-implementation of the paper's
step 3(a)-(c) that the tests compare the core's :func:`torchdpgmm.mechanisms.psd.xi_repair` against."""
from __future__ import annotations

import torch

from torchdpgmm.mechanisms import laplace
from torchdpgmm.mechanisms.psd import xi_repair

__all__ = ["laplace", "xi_repair", "xi_repair_reference"]


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
