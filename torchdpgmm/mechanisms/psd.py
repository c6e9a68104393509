"""Repairs that map a noisy symmetric matrix to a valid (positive definite) covariance.

All three are post-processing of an already-private matrix, so they cost no privacy.

- :func:`eigenvalue_floor`: clip eigenvalues at a floor (the Frobenius-nearest matrix with that floor).
- :func:`xi_repair`: Xi, Kantarcioglu & Inan (2011), Sec. 5 step 3(a)-(c): copy the noisy upper triangle
  to the lower one, replace every non-positive eigenvalue by the smallest positive one, repeat.
- :func:`shift_psd`: ``Lambda + rho I`` with ``rho = min{r >= 0 : Lambda + r I >= 0}`` (Wu et al. 2016,
  DP-MSNM eq. after (10)), plus an optional margin to make the result strictly positive definite.
- :func:`jacobi_eigh`: the eigen-decomposition of small symmetric matrices by a fixed number of cyclic Jacobi
  sweeps, in torch ops: no host synchronisation and no solver workspace (``torch.linalg.eigh`` checks its
  convergence on the host and, on CUDA, allocates a workspace per matrix of the batch).
"""
from __future__ import annotations

import torch

__all__ = ["symmetrize", "upper_to_symmetric", "eigenvalue_floor", "xi_repair", "shift_psd", "min_eigenvalue",
           "jacobi_eigh", "JACOBI_MAX_DIM"]

#: the largest dimension :func:`jacobi_eigh` serves (its work grows as d^3 sweeps x d^2 / 2 rotations)
JACOBI_MAX_DIM = 8


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


def jacobi_eigh(S: torch.Tensor, sweeps: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues ``(..., d)`` (unsorted) and orthonormal eigenvectors ``(..., d, d)`` of symmetric ``S``, batched.

    Cyclic Jacobi (Golub & Van Loan, Matrix Computations, Sec. 8.5): each sweep rotates every pair ``(p, q)`` so
    that the rotated ``S_pq`` is zero (``t = sgn(theta) / (|theta| + sqrt(theta^2 + 1))``, ``theta = (S_qq - S_pp)
    / (2 S_pq)``, no rotation where ``S_pq = 0``). The number of sweeps is fixed from ``d`` alone (default
    ``max(6, d) + 4``; convergence is quadratic, and 6 sweeps reach float64 rounding at d <= 5, 8 at d = 8 on
    random matrices), so the work never depends on the values: no host synchronisation, no workspace, every step
    an elementwise torch op over the batch. ``S = V diag(w) V^T`` to about ``1e-14 max|S|`` for ``d <= 8``
    (tested against numpy); meant for ``d <= JACOBI_MAX_DIM``."""
    d = S.shape[-1]
    if sweeps is None:
        sweeps = max(6, d) + 4
    A = S.clone()
    V = torch.eye(d, dtype=S.dtype, device=S.device).expand_as(S).clone()
    one = torch.ones((), dtype=S.dtype, device=S.device)
    for _ in range(sweeps):  # public d only
        for p in range(d - 1):
            for q in range(p + 1, d):
                apq = A[..., p, q]
                theta = (A[..., q, q] - A[..., p, p]) / (2 * apq)
                t = torch.where(theta >= 0, one, -one) / (theta.abs() + torch.hypot(theta, one))
                t = torch.where(apq == 0, torch.zeros_like(t), t)
                c = torch.rsqrt(t * t + 1).unsqueeze(-1)
                s = t.unsqueeze(-1) * c
                for M, rows in ((A, False), (A, True), (V, False)):
                    if rows:
                        mp, mq = M[..., p, :].clone(), M[..., q, :]
                        M[..., p, :] = c * mp - s * mq
                        M[..., q, :] = s * mp + c * mq
                    else:
                        mp, mq = M[..., :, p].clone(), M[..., :, q]
                        M[..., :, p] = c * mp - s * mq
                        M[..., :, q] = s * mp + c * mq
                A[..., p, q] = 0.0
                A[..., q, p] = 0.0
    return torch.diagonal(A, dim1=-2, dim2=-1).clone(), V
