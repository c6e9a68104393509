"""Repairs that map a noisy symmetric matrix to a valid (positive definite) covariance.

All three are post-processing of an already-private matrix, so they cost no privacy.

- :func:`eigenvalue_floor`: clip eigenvalues at a floor (the Frobenius-nearest matrix with that floor).
- :func:`xi_repair`: Xi, Kantarcioglu & Inan (2011), Sec. 5 step 3(a)-(c): copy the noisy upper triangle
  to the lower one, replace every non-positive eigenvalue by the smallest positive one, repeat.
- :func:`shift_psd`: ``Lambda + rho I`` with ``rho = min{r >= 0 : Lambda + r I >= 0}`` (Wu et al. 2016,
  DP-MSNM eq. after (10)), plus an optional margin to make the result strictly positive definite.
- :func:`jacobi_eigh`: the eigen-decomposition of small symmetric matrices by a fixed number of Jacobi sweeps
  (Brent & Luk's parallel order from d = 4), in torch ops: no host synchronisation and no solver workspace
  (``torch.linalg.eigh`` checks its convergence on the host and, on CUDA, allocates a workspace per matrix of the
  batch).
"""
from __future__ import annotations

import torch

__all__ = ["symmetrize", "upper_to_symmetric", "eigenvalue_floor", "xi_repair", "shift_psd", "min_eigenvalue",
           "jacobi_eigh", "JACOBI_MAX_DIM", "JACOBI_PARALLEL_MIN_DIM"]

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

    Jacobi's method (Golub & Van Loan, Matrix Computations, Sec. 8.5): each rotation of a pair ``(p, q)`` makes the
    rotated ``S_pq`` zero (``t = sgn(theta) / (|theta| + sqrt(theta^2 + 1))``, ``theta = (S_qq - S_pp) / (2 S_pq)``,
    no rotation where ``S_pq = 0``). The number of sweeps is fixed from ``d`` alone (default ``max(6, d) + 4``;
    convergence is quadratic, and 6 sweeps reach float64 rounding at d <= 5, 8 at d = 8 on random matrices), so the
    work never depends on the values: no host synchronisation, no workspace, every step a torch op over the batch.
    ``S = V diag(w) V^T`` to about ``1e-14 max|S|`` for ``d <= 8`` (tested against numpy); meant for
    ``d <= JACOBI_MAX_DIM``.

    Order of the rotations: for ``d >= JACOBI_PARALLEL_MIN_DIM``, the parallel (round-robin) ordering of Brent &
    Luk (1985; Golub & Van Loan Sec. 8.5.4): a sweep is ``m - 1`` rounds of ``m / 2`` disjoint pairs rotated at once
    (``m = d`` rounded up to even; an odd ``d`` gets a zero row and column, never rotated), each round a few
    whole-matrix ops, so a sweep launches ``O(m)`` kernels instead of ``O(d^2)`` (a single release on a GPU is
    launch-bound: at d = 8 the cyclic order was 97% of a table release's ops). Smaller ``d``: the cyclic order
    (one pair at a time), whose elementwise updates touch fewer entries (the Monte Carlo sweep's d = 3 on 10^6
    trials is bandwidth-bound). The sound release calls it in float64; a float32 input on CUDA with TF32 matrix
    products allowed (``torch.backends.cuda.matmul.allow_tf32``) gets the round-robin order's products in TF32."""
    d = S.shape[-1]
    if sweeps is None:
        sweeps = max(6, d) + 4
    if d >= JACOBI_PARALLEL_MIN_DIM:
        return _jacobi_parallel(S, sweeps)
    A = S.clone()
    V = torch.eye(d, dtype=S.dtype, device=S.device).expand_as(S).clone()
    one = torch.ones((), dtype=S.dtype, device=S.device)
    for _ in range(sweeps):  # public d only
        for p in range(d - 1):
            for q in range(p + 1, d):
                apq = A[..., p, q]
                c, s = _rotation(A[..., p, p], A[..., q, q], apq, one)
                c, s = c.unsqueeze(-1), s.unsqueeze(-1)
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


#: the smallest dimension at which :func:`jacobi_eigh` rotates disjoint pairs together (Brent & Luk's ordering)
JACOBI_PARALLEL_MIN_DIM = 4


def _rotation(app: torch.Tensor, aqq: torch.Tensor, apq: torch.Tensor, one: torch.Tensor):
    """Cosine and sine of the Jacobi rotation that zeroes ``a_pq`` (elementwise over pairs and the batch)."""
    theta = (aqq - app) / (2 * apq)
    t = torch.where(theta >= 0, one, -one) / (theta.abs() + torch.hypot(theta, one))
    t = torch.where(apq == 0, torch.zeros_like(t), t)
    c = torch.rsqrt(t * t + 1)
    return c, t * c


def _round_robin(M: torch.Tensor, dim: int, h: int) -> torch.Tensor:
    """The next round's order along ``dim``: positions ``[0, h)`` are one side of the pairs, ``[h, 2h)`` the other
    (pair k is ``(k, k + h)``); position 0 stays, the others move one step around the circle (Brent & Luk):
    ``[0, h, 1, ..., h - 2 | h + 1, ..., 2h - 1, h - 1]``. Slices only: no index tensor, no host copy."""
    n = M.narrow
    return torch.cat([n(dim, 0, 1), n(dim, h, 1), n(dim, 1, h - 2), n(dim, h + 1, h - 1), n(dim, h - 1, 1)], dim)


def _jacobi_parallel(S: torch.Tensor, sweeps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`jacobi_eigh` in Brent & Luk's round-robin order (``d >= 2``). A round is one orthogonal matrix ``J``
    (the round's ``m / 2`` rotations) and three batched products, ``A <- J^T A J`` and ``V <- V J``; the rotated
    pairs' entries are then set to 0 (left at rounding, the sweeps converged slower: 1e-12 of ``max|S|`` instead of
    1e-14 on matrices with two clusters of eigenvalues), and every index moves to the next round's pairs
    (:func:`_round_robin`, slices only)."""
    d = S.shape[-1]
    m = d + d % 2
    h = m // 2
    A = torch.nn.functional.pad(S, (0, m - d, 0, m - d)) if m > d else S.clone()
    V = torch.eye(m, dtype=S.dtype, device=S.device).expand_as(A)
    one = torch.ones((), dtype=S.dtype, device=S.device)
    order = list(range(m))  # which original coordinate sits at each position (public: from d alone)
    for _ in range(sweeps):
        for _ in range(m - 1):
            diag = torch.diagonal(A, dim1=-2, dim2=-1)
            c, s = _rotation(diag[..., :h], diag[..., h:], torch.diagonal(A[..., :h, h:], dim1=-2, dim2=-1), one)
            C, Sn = torch.diag_embed(c), torch.diag_embed(s)  # columns p = k, q = k + h: p' = c p - s q, q' = s p + c q
            J = torch.cat([torch.cat([C, Sn], -1), torch.cat([-Sn, C], -1)], -2)
            A = J.mT @ A @ J
            torch.diagonal(A[..., :h, h:], dim1=-2, dim2=-1).zero_()  # the rotated pairs: exactly 0, not rounding
            torch.diagonal(A[..., h:, :h], dim1=-2, dim2=-1).zero_()
            A = _round_robin(_round_robin(A, -1, h), -2, h)
            V = _round_robin(V @ J, -1, h)
            order = [order[i] for i in [0, h, *range(1, h - 1), *range(h + 1, m), h - 1]]
    w = torch.diagonal(A, dim1=-2, dim2=-1)
    if m == d:
        return w.clone(), V
    k = order.index(d)  # the padding's column: its eigenvalue is 0 and its vector the padding's own axis
    keep = lambda t: torch.cat([t[..., :k], t[..., k + 1:]], -1)  # noqa: E731
    return keep(w), keep(V[..., :d, :])
