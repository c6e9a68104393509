"""Repairs that map a noisy symmetric matrix to a valid (positive definite) covariance.

All three are post-processing of an already-private matrix, so they cost no privacy.

- :func:`eigenvalue_floor`: clip eigenvalues at a floor (the Frobenius-nearest matrix with that floor).
- :func:`xi_repair`: Xi, Kantarcioglu & Inan (2011), Sec. 5 step 3(a)-(c): copy the noisy upper triangle
  to the lower one, replace every non-positive eigenvalue by the smallest positive one, repeat.
- :func:`shift_psd`: ``Lambda + rho I`` with ``rho = min{r >= 0 : Lambda + r I >= 0}`` (Wu et al. 2016,
  DP-MSNM eq. after (10)), plus an optional margin to make the result strictly positive definite.
"""
from __future__ import annotations

import torch

__all__ = ["symmetrize", "upper_to_symmetric", "eigenvalue_floor", "xi_repair", "shift_psd", "min_eigenvalue"]


def symmetrize(S: torch.Tensor) -> torch.Tensor:
    return 0.5 * (S + S.transpose(-1, -2))


def upper_to_symmetric(S: torch.Tensor) -> torch.Tensor:
    """Copy the upper triangle (with diagonal) onto the lower one (Xi et al. step 3a)."""
    upper = torch.triu(S)
    return upper + torch.triu(S, diagonal=1).transpose(-1, -2)


def min_eigenvalue(S: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvalsh(symmetrize(S))[..., 0]


def eigenvalue_floor(S: torch.Tensor, floor: float | torch.Tensor = 1e-6) -> torch.Tensor:
    """Symmetrise and clip the eigenvalues at ``floor`` (> 0 gives a positive definite result)."""
    evals, evecs = torch.linalg.eigh(symmetrize(S))
    floor_t = torch.as_tensor(floor, dtype=evals.dtype, device=evals.device)
    if floor_t.dim() > 0:
        floor_t = floor_t.unsqueeze(-1)
    evals = torch.maximum(evals, floor_t)
    return (evecs * evals.unsqueeze(-2)) @ evecs.transpose(-1, -2)


def xi_repair(S: torch.Tensor, max_iter: int = 10, rel_floor: float = 1e-12) -> torch.Tensor:
    """Xi et al.'s heuristic PD repair (Xi, Kantarcioglu & Inan 2011, Sec. 5, step 3 a-c), batched.

    (a) copy the upper triangle to the lower one; (b) eigen-decompose and replace each non-positive
    eigenvalue by the smallest positive eigenvalue; (c) repeat (b) until the matrix is positive
    definite (at most ``max_iter`` times; rounding can leave a tiny negative after recomposition).
    A matrix already positive definite is returned unchanged (up to the symmetrisation of step a).
    If a matrix has no positive eigenvalue at all, the paper's rule is undefined; we then use
    ``rel_floor * max|lambda|`` (or ``rel_floor`` for the zero matrix) as the replacement value.
    """
    M = upper_to_symmetric(S)
    for _ in range(max_iter):
        evals, evecs = torch.linalg.eigh(M)
        pos = evals > 0
        big = torch.finfo(evals.dtype).max
        min_pos = torch.where(pos, evals, torch.full_like(evals, big)).min(-1).values
        fallback = (evals.abs().max(-1).values * rel_floor).clamp_min(rel_floor)
        repl = torch.where(pos.any(-1), min_pos, fallback)
        needs = ~pos.all(-1)                                                 # (...)
        fixed = torch.where(pos, evals, repl.unsqueeze(-1))
        rebuilt = symmetrize((evecs * fixed.unsqueeze(-2)) @ evecs.transpose(-1, -2))
        M = torch.where(needs.unsqueeze(-1).unsqueeze(-1), rebuilt, M)
    return M


def shift_psd(S: torch.Tensor, margin: float = 0.0) -> torch.Tensor:
    """``S + rho I`` with ``rho = max(0, margin - lambda_min(S))`` (Wu et al.; DP-MSNM post-processing).

    ``margin = 0`` is the paper's ``rho = min{r >= 0 : S + r I >= 0}`` (positive semidefinite);
    a small positive ``margin`` makes the result positive definite.
    """
    Ss = symmetrize(S)
    lam_min = torch.linalg.eigvalsh(Ss)[..., 0]
    rho = (margin - lam_min).clamp_min(0)
    eye = torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)
    return Ss + rho.unsqueeze(-1).unsqueeze(-1) * eye
