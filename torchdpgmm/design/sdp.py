"""The covering SDP behind eq. (23) of Liu, Scaglione & Peisert (2025) and its solvers.

After the exact reduction of ``docs/design.md`` (reduction 1), the mean-noise step (23) of
Algorithm 1 needs, per class, only the solution of

    min_X  tr(A X)   s.t.   X >= v_m v_m^T  (m = 1..N),                                   (C)

with ``A = Sigma_k^{-1}`` and ``v_m`` the N label-flip differences of ``mu_k`` (``docs/design.md``, reduction 1); the
printed LMI (19)/(23) at ``eps_k^2 / (2 ln(2/delta)) = 1`` is exactly (C) by a Schur complement.

Solvers (all return an :class:`CoveringSDPResult` whose ``X`` is *feasible*: ``max_m v_m^T X^{-1} v_m < 1``
strictly, enforced by a final post-scaling by ``max(1, q (1 + 1e-12))`` on every path, a relative margin far
above the rounding of ``q``, because a too-small noise covariance is a privacy bug):

* ``"dual"`` — the dual (reduction 2) in pure torch, batched over leading dims, any device, with a certified
  relative duality gap: by default a log-barrier Newton method on a screened working set (``method="barrier"``),
  or the multiplicative iteration with Newton polishing on the identified support (``"multiplicative"``);
* ``"cvxpylayers"`` — a :class:`cvxpylayers.torch.CvxpyLayer` in the DPP "Gamma form"
  ``min tr(C^T Gamma^{-1} C) s.t. vec(v v^T) . vec(Gamma) <= 1`` (``matrix_frac``) with Clarabel;
* :func:`solve_lmi_cvxpy` — the literal printed LMI in plain cvxpy + Clarabel, one problem at a time
  (reference for tests and benchmarks only; it is ~100x slower than the other two).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm.mixture import one_hot

__all__ = [
    "CoveringSDPResult",
    "label_flip_differences",
    "solve_covering_sdp",
    "solve_lmi_cvxpy",
    "covering_violation",
]


@dataclass
class CoveringSDPResult:
    """Result of :func:`solve_covering_sdp` (shapes follow the leading batch dims ``...``).

    Attributes:
        opt: ``(...)`` the value ``tr(A X)`` of the returned feasible ``X`` (an upper bound on the optimum,
            within ``gap`` relative of it for the dual solver).
        X: ``(..., d, d)`` feasible primal point, ``X >= v_m v_m^T`` for every unmasked m.
        gap: ``(...)`` certified relative duality gap ``(opt - lower) / lower`` (dual solver); NaN for
            cvxpylayers (no certificate available through the layer).
        lower: ``(...)`` certified lower bound on the optimum (dual solver); NaN for cvxpylayers.
        iterations: number of multiplicative iterations run (dual) or 0.
        scale: ``(...)`` post-scaling factor ``max(1, q (1 + 1e-12))`` applied to make ``X`` feasible
            (q = max_m v_m^T X^{-1} v_m before scaling; the margin covers the rounding of q).
        solver: name of the solver used.
    """

    opt: torch.Tensor
    X: torch.Tensor
    gap: torch.Tensor
    lower: torch.Tensor
    iterations: int
    scale: torch.Tensor
    solver: str


def label_flip_differences(X: torch.Tensor, y: torch.Tensor, num_classes: int,
                           mask: torch.Tensor | None = None):
    """The N label-flip differences of every class mean (``docs/design.md``; the vectors of (10)/(19)).

    Flipping the label of point n changes ``mu_k`` by ``(x_n - mu_k)/(N_k - 1)`` if n is in class k
    (it leaves) and by ``(mu_k - x_n)/(N_k + 1)`` otherwise (it joins); the sign is irrelevant for (10).

    Args:
        X: ``(..., N, d)`` features. y: ``(..., N)`` integer labels. mask: ``(..., N)`` bool, True = real row.
    Returns:
        ``V (..., K, N, d)``, ``vmask (..., K, N)``, ``counts (..., K)``, ``means (..., K, d)``.
    """
    masked = mask is not None
    if not masked:
        mask = torch.ones(y.shape, dtype=torch.bool, device=y.device)
    else:  # padding rows may hold anything (NaN included): zero them before any arithmetic
        X = torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
    onehot = one_hot(y.clamp(0, num_classes - 1), num_classes, X.dtype)
    if masked:
        onehot = onehot * mask.unsqueeze(-1).to(X.dtype)                 # (..., N, K)
    counts = onehot.sum(-2)                                               # (..., K)
    means = (onehot.transpose(-1, -2) @ X) / counts.clamp_min(1).unsqueeze(-1)  # (..., K, d)
    inc = onehot.transpose(-1, -2).unsqueeze(-1) > 0                      # (..., K, N, 1)
    nk = counts.unsqueeze(-1).unsqueeze(-1)
    # one factor per (class, row): 1/(N_k - 1) for a member, -1/(N_k + 1) otherwise, 0 for padding
    fac = torch.where(inc, 1 / (nk - 1).clamp_min(1), -1 / (nk + 1))
    vmask = mask.unsqueeze(-2).expand(fac.shape[:-1])
    if masked:
        fac = fac * vmask.unsqueeze(-1).to(fac.dtype)
    V = (X.unsqueeze(-3) - means.unsqueeze(-2)) * fac                     # (..., K, N, d)
    return V, vmask, counts, means


def covering_violation(V: torch.Tensor, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``q = max_m v_m^T X^{-1} v_m`` over unmasked m, shape ``(...)``; X is feasible for (C) iff q <= 1."""
    Lx = torch.linalg.cholesky(X)
    # one triangular solve with the N vectors as right-hand sides (not N broadcast d x d solves)
    z = torch.linalg.solve_triangular(Lx, V.transpose(-1, -2), upper=False)
    q = (z * z).sum(-2)
    if mask is not None:
        q = torch.where(mask, q, torch.zeros_like(q))
    return q.amax(-1)


# relative safety margin of the post-scaling (far below any solver tolerance, far above the rounding of q
# however it is evaluated): after scaling by max(1, q (1 + margin)) the returned X satisfies (10) strictly
_MARGIN = 1e-12


def _post_scale(V, X, mask):
    q = covering_violation(V, X, mask)
    s = (q * (1 + _MARGIN)).clamp(min=1.0)
    return X * s.unsqueeze(-1).unsqueeze(-1), s


def _scatter(p, W):
    """sum_m p_m w_m w_m^T for W (..., n, d), p (..., n)."""
    return (W * p.unsqueeze(-1)).transpose(-1, -2) @ W


def _sym(M):
    return 0.5 * (M + M.transpose(-1, -2))


def _sum_last(x):
    """``x.sum(-1)`` for a short last dimension (<= ``_QUAD_D``) as unrolled adds: on CPU torch's reduction
    over an inner dimension of 3 costs about 10x the two adds (same value up to the order of the adds)."""
    n = x.shape[-1]
    if n > _QUAD_D:
        return x.sum(-1)
    out = x[..., 0]
    for i in range(1, n):
        out = out + x[..., i]
    return out


# ----------------------------------------------------------------------------------------------
# dual solver
# ----------------------------------------------------------------------------------------------

def _certificate(W, mask, p):
    """Dual value tr(M^{1/2})^2 (a lower bound), primal Y = c M^{1/2} (feasible) and its value c tr(M^{1/2})."""
    M = _scatter(p, W)
    e, U = torch.linalg.eigh(_sym(M))
    tiny = torch.finfo(W.dtype).tiny ** 0.5
    e = e.clamp_min(tiny)
    s = e.sqrt()
    tr = s.sum(-1)
    Wh = W @ U                                                          # (..., n, d)
    r = (Wh * Wh / s.unsqueeze(-2)).sum(-1)                             # w^T M^{-1/2} w
    r = torch.where(mask, r, torch.zeros_like(r))
    c = r.amax(-1)
    Y = (U * (c.unsqueeze(-1) * s).unsqueeze(-2)) @ U.transpose(-1, -2)
    return tr * tr, c * tr, Y, r, tr


def _newton_active_set(W, mask, p, k, steps, tol, sync_every=3):
    """Active-set Newton ascent of f(p) = tr(M(p)^{1/2}) on the simplex, on at most k support slots.

    Start: the top-k points of ``p``. Each step: (i) certificate against *all* N points (dual value f^2,
    feasible primal ``c M^{1/2}``); (ii) equality-constrained Newton step on the slots, with the Hessian of
    tr f(M) by the Daleckii-Krein formula, ``d^2 f[H_a, H_b] = sum_ij K_ij (H_a)_ij (H_b)_ji``, K_ij the divided
    difference of f' = e^{-1/2}/2; a coordinate driven to zero leaves the support; (iii) the most violated point
    (largest w^T M^{-1/2} w, if above f) enters a free slot (or replaces the lightest one). Correctness never depends on the iterates: every
    certificate is a valid bound. Every ``sync_every`` steps one host check stops when all gaps are <= tol.
    Returns the best (lower, upper, Y) found and the number of steps.
    """
    n, d = W.shape[-2:]
    k = min(k, n)
    dt = W.dtype
    pm = torch.where(mask, p, torch.full_like(p, -1.0))
    top = pm.topk(k, dim=-1)
    idx = top.indices
    ps = top.values.clamp_min(0)
    sm = ps > 1e-6 * ps.amax(-1, keepdim=True)
    ps = torch.where(sm, ps, torch.zeros_like(ps))
    ps = ps / ps.sum(-1, keepdim=True)
    eye_k = torch.eye(k, dtype=dt, device=W.device)
    tiny = torch.finfo(dt).tiny ** 0.5
    best_lower = torch.full(W.shape[:-2], -math.inf, dtype=dt, device=W.device)
    best_upper = torch.full(W.shape[:-2], math.inf, dtype=dt, device=W.device)
    best_Y = torch.zeros(*W.shape[:-2], d, d, dtype=dt, device=W.device)
    ar = torch.arange(k, device=W.device)
    halves = 0.5 ** torch.arange(6, dtype=dt, device=W.device)
    step = 0
    for step in range(steps + 1):
        Ws = torch.gather(W, -2, idx.unsqueeze(-1).expand(*idx.shape, d))
        M = _scatter(ps, Ws)
        e, U = torch.linalg.eigh(_sym(M))
        sq = e.clamp_min(tiny).sqrt()
        f = sq.sum(-1)
        if step % sync_every == 0 or step == steps:
            # certificate against all N points (the O(N d^2) part, so only every sync_every steps)
            Wh_all = W @ U
            r_all = torch.where(mask, (Wh_all * Wh_all / sq.unsqueeze(-2)).sum(-1), torch.zeros_like(p))
            cmax, jmax = r_all.max(-1)
            upper = cmax * f
            Y = (U * (cmax.unsqueeze(-1) * sq).unsqueeze(-2)) @ U.transpose(-1, -2)
            better = upper < best_upper
            best_Y = torch.where(better.unsqueeze(-1).unsqueeze(-1), Y, best_Y)
            best_upper = torch.minimum(best_upper, upper)
            best_lower = torch.maximum(best_lower, f * f)
            if step == steps or bool((best_upper / best_lower - 1 <= tol).all()):
                break
            # the most violated point enters the first free slot (if violated and not already in)
            inslot = (idx == jmax.unsqueeze(-1)) & sm
            viol = (cmax > f * (1 + 1e-12)) & ~inslot.any(-1)
            # a free slot, or else the lightest one
            free = torch.where(sm.all(-1), ps.argmin(-1),
                               torch.where(sm, torch.full_like(ar, k).expand_as(idx), ar.expand_as(idx)).amin(-1))
            put = viol.unsqueeze(-1) & (ar == free.unsqueeze(-1))
            if bool(put.any()):
                idx = torch.where(put, jmax.unsqueeze(-1), idx)
                ps = torch.where(put, torch.full_like(ps, 0.02), ps)
                sm = sm | put
                ps = ps / ps.sum(-1, keepdim=True)
                continue
        # Newton step on the slots
        Wh = Ws @ U
        g = 0.5 * (Wh * Wh / sq.unsqueeze(-2)).sum(-1)
        Kij = -0.5 / (sq.unsqueeze(-1) * sq.unsqueeze(-2) * (sq.unsqueeze(-1) + sq.unsqueeze(-2)))
        Z = (Wh.unsqueeze(-1) * Wh.unsqueeze(-2)).flatten(-2)          # (..., k, d*d)
        H = (Z * Kij.flatten(-2).unsqueeze(-2)) @ Z.transpose(-1, -2)
        smf = sm.to(dt)
        scale = (H.diagonal(dim1=-2, dim2=-1).abs() * smf).sum(-1) / smf.sum(-1).clamp_min(1)
        H = H * (smf.unsqueeze(-1) * smf.unsqueeze(-2))
        H = H - eye_k * (scale * 1e-10).unsqueeze(-1).unsqueeze(-1) - eye_k * (1 - smf).unsqueeze(-1)
        g = g * smf
        KKT = torch.cat([torch.cat([H, smf.unsqueeze(-1)], -1),
                         torch.cat([smf.unsqueeze(-2), torch.zeros_like(smf[..., :1]).unsqueeze(-1)], -1)], -2)
        rhs = torch.cat([-g, torch.zeros_like(g[..., :1])], -1)
        dp = torch.linalg.solve(KKT, rhs.unsqueeze(-1)).squeeze(-1)[..., :k] * smf
        dp = torch.where(torch.isfinite(dp), dp, torch.zeros_like(dp))
        ratio = torch.where(dp < 0, ps / (-dp).clamp_min(1e-300), torch.full_like(ps, math.inf))
        amax = ratio.amin(-1).clamp(max=1.0)
        # batched backtracking: evaluate f at 6 step lengths amax * 2^-j (one batched eigh), keep the best
        # (or no step if none increases f)
        alphas = amax.unsqueeze(-1) * halves                               # (..., J)
        cand = (ps.unsqueeze(-2) + alphas.unsqueeze(-1) * dp.unsqueeze(-2)).clamp_min(0)   # (..., J, k)
        fc = torch.linalg.eigvalsh(_sym(_scatter(cand, Ws.unsqueeze(-3)))).clamp_min(tiny).sqrt().sum(-1)
        jbest = fc.argmax(-1, keepdim=True)
        fbest = torch.gather(fc, -1, jbest).squeeze(-1)
        newp = torch.gather(cand, -2, jbest.unsqueeze(-1).expand(*jbest.shape[:-1], 1, k)).squeeze(-2)
        ps = torch.where((fbest > f).unsqueeze(-1), newp, ps)
        sm = sm & (ps > 1e-12 * ps.amax(-1, keepdim=True))
        ps = torch.where(sm, ps, torch.zeros_like(ps))
        ps = ps / ps.sum(-1, keepdim=True)
    return best_lower, best_upper, best_Y, step


def _multiplicative_step(Wk, mk, pk, p_prev, r_prev, f_prev, rho_t):
    """One safeguarded multiplicative step ``p_m <- p_m (w_m^T M^{-1/2} w_m / tr M^{1/2})^rho``: a step that
    lowered the dual objective is undone and that problem's exponent halved (rho = 1 is the classical,
    monotone update). Returns the new ``(p, p_prev, r_prev, f_prev, rho)``."""
    e, U = torch.linalg.eigh(_sym(_scatter(pk, Wk)))
    s = e.clamp_min(torch.finfo(Wk.dtype).tiny ** 0.5).sqrt()
    f = s.sum(-1)
    Wh = Wk @ U
    r = torch.where(mk, (Wh * Wh / s.unsqueeze(-2)).sum(-1), torch.zeros_like(pk))
    bad = f < f_prev * (1 - 1e-13)
    rho_t = torch.where(bad, (rho_t * 0.5).clamp_min(1.0), rho_t)
    bad1 = bad.unsqueeze(-1)
    pk = torch.where(bad1, p_prev, pk)
    r = torch.where(bad1, r_prev, r)
    f = torch.where(bad, f_prev, f)
    pr = pk * torch.exp(rho_t.unsqueeze(-1) * torch.log((r / f.unsqueeze(-1)).clamp_min(1e-300)))
    return pr / pr.sum(-1, keepdim=True), pk, r, f, rho_t


def _solve_dual(W, mask, tol, max_iter, check_every, rho, prune, newton_steps):
    batch = W.shape[:-2]
    n = W.shape[-2]
    d = W.shape[-1]
    W = W.reshape(-1, n, d)
    mask = mask.reshape(-1, n)
    B = W.shape[0]
    # global outputs; converged problems are written here and dropped from the working batch at checks
    out_Y = torch.zeros(B, d, d, dtype=W.dtype, device=W.device)
    out_upper = torch.full((B,), math.inf, dtype=W.dtype, device=W.device)
    out_lower = torch.full((B,), -math.inf, dtype=W.dtype, device=W.device)
    gidx = torch.arange(B, device=W.device)
    maskf = mask.to(W.dtype)
    p = maskf / maskf.sum(-1, keepdim=True)
    best_lower = torch.full(W.shape[:-2], -math.inf, dtype=W.dtype, device=W.device)
    best_upper = torch.full(W.shape[:-2], math.inf, dtype=W.dtype, device=W.device)
    best_Y = torch.zeros(*W.shape[:-2], d, d, dtype=W.dtype, device=W.device)
    ksupp = d * (d + 1) // 2 + d
    # working (possibly pruned) set: indices into the full set
    work_idx = None
    Wk, mk, pk = W, mask, p
    rho_t = torch.full(W.shape[:-2], float(rho), dtype=W.dtype, device=W.device)
    f_prev = torch.full(W.shape[:-2], -math.inf, dtype=W.dtype, device=W.device)
    p_prev, r_prev = pk, torch.zeros_like(pk)
    next_prune, unprunes = check_every, 0   # pruning backs off geometrically after every un-prune
    it = 0

    def update_best(pfull):
        nonlocal best_lower, best_upper, best_Y
        lower, upper, Y, _, _ = _certificate(W, mask, pfull)
        better = upper < best_upper
        best_Y = torch.where(better.unsqueeze(-1).unsqueeze(-1), Y, best_Y)
        best_upper = torch.minimum(best_upper, upper)
        best_lower = torch.maximum(best_lower, lower)

    def to_full(pw):
        if work_idx is None:
            return pw
        return torch.zeros(mask.shape, dtype=pw.dtype, device=pw.device).scatter(-1, work_idx, pw)

    while True:
        pk, p_prev, r_prev, f_prev, rho_t = _multiplicative_step(Wk, mk, pk, p_prev, r_prev, f_prev, rho_t)
        it += 1
        if it in (5, 10) or it % check_every == 0 or it >= max_iter:
            pfull = to_full(pk)
            update_best(pfull)
            if newton_steps > 0:
                lo_n, up_n, Y_n, _ = _newton_active_set(W, mask, pfull, ksupp, newton_steps, tol)
                better = up_n < best_upper
                best_Y = torch.where(better.unsqueeze(-1).unsqueeze(-1), Y_n, best_Y)
                best_upper = torch.minimum(best_upper, up_n)
                best_lower = torch.maximum(best_lower, lo_n)
            gap = best_upper / best_lower - 1
            conv = gap <= tol
            if it >= max_iter or bool(conv.all()):   # the one host sync per check
                break
            if bool(conv.any()):
                # retire converged problems: store them, keep iterating on the rest only
                done = conv.nonzero().squeeze(-1)
                out_Y[gidx[done]] = best_Y[done]
                out_upper[gidx[done]] = best_upper[done]
                out_lower[gidx[done]] = best_lower[done]
                keep = (~conv).nonzero().squeeze(-1)
                gidx, W, mask, maskf = gidx[keep], W[keep], mask[keep], maskf[keep]
                best_Y, best_upper, best_lower = best_Y[keep], best_upper[keep], best_lower[keep]
                rho_t, f_prev, p_prev, r_prev = rho_t[keep], f_prev[keep], p_prev[keep], r_prev[keep]
                Wk, mk, pk, pfull = Wk[keep], mk[keep], pk[keep], pfull[keep]
                if work_idx is not None:
                    work_idx = work_idx[keep]
            if prune and work_idx is None and n > 4 * ksupp and it >= next_prune:
                # active set: keep the 4*ksupp heaviest points. Exact: every certificate is computed
                # against all N points, and a pruned point that becomes the binding one un-prunes.
                kk = 4 * ksupp
                work_idx = torch.where(mask, pk, torch.full_like(pk, -1.0)).topk(kk, dim=-1).indices
                Wk = torch.gather(W, -2, work_idx.unsqueeze(-1).expand(*work_idx.shape, d))
                mk = torch.gather(mask, -1, work_idx)
                pk = torch.gather(pk, -1, work_idx) * mk
                pk = pk / pk.sum(-1, keepdim=True)
                p_prev, r_prev, f_prev = pk, torch.zeros_like(pk), torch.full_like(f_prev, -math.inf)
            elif work_idx is not None:
                # re-check the pruned points: if one is more violated than every kept point, un-prune
                _, _, _, r_full, tr_full = _certificate(W, mask, pfull)
                r_kept = torch.gather(r_full, -1, work_idx)
                if bool((r_full.amax(-1) > r_kept.amax(-1) * (1 + 1e-12)).any()):
                    pk = 0.5 * pfull + 0.5 * maskf / maskf.sum(-1, keepdim=True)
                    Wk, mk, work_idx = W, mask, None
                    unprunes += 1
                    next_prune = it + check_every * 4 ** unprunes   # no prune / un-prune cycles
                    p_prev, r_prev, f_prev = pk, torch.zeros_like(pk), torch.full_like(f_prev, -math.inf)
    out_Y[gidx] = best_Y
    out_upper[gidx] = best_upper
    out_lower[gidx] = best_lower
    gap = out_upper / out_lower - 1
    return (out_Y.reshape(*batch, d, d), out_upper.reshape(batch), out_lower.reshape(batch),
            gap.reshape(batch), it)


# ----------------------------------------------------------------------------------------------
# barrier solver (default): screening + log-barrier Newton on a small working set
# ----------------------------------------------------------------------------------------------

def _sqrt_eig(M):
    """Eigen-decomposition of the scatter M: (s = sqrt(max(e, 0)), s + eta, U), eta = 1e-10 max(s) + floor.

    ``S = U diag(s + eta) U^T >= M^{1/2}`` is positive definite even when M is singular (vectors in a proper
    subspace), so ``c S`` with ``c = max_m w_m^T S^{-1} w_m`` is a feasible primal point of value
    ``c tr S``, at most ``d eta / tr M^{1/2}`` (relative) above the classical ``c M^{1/2}``."""
    e, U = torch.linalg.eigh(_sym(M))
    s = e.clamp_min(0).sqrt()
    sr = s + (1e-10 * s.amax(-1, keepdim=True) + torch.finfo(M.dtype).tiny ** 0.25)
    return s, sr, U


_QUAD_D = 4   # up to this d, all-N quadratic forms use the d(d+1)/2 products w_a w_b (one matrix-vector product)


def _all_rows(W):
    """The N rows ``W (B, N, d)`` in the layout of the all-N forms: for d <= ``_QUAD_D`` the products
    ``w_a w_b`` (a <= b), ``(B, d(d+1)/2, N)``, so that ``w^T Q w`` for all N is one ``(1, d(d+1)/2)`` by
    ``(d(d+1)/2, N)`` product and the scatter ``sum_m p_m w_m w_m^T`` another; else ``W^T (B, d, N)``."""
    d = W.shape[-1]
    Wt = W.transpose(-1, -2).contiguous()
    if d > _QUAD_D:
        return Wt
    return torch.stack([Wt[..., a, :] * Wt[..., b, :] for a in range(d) for b in range(a, d)], -2)


def _scatter_all(p, W, Wall):
    """``sum_m p_m w_m w_m^T`` over all N rows (p ``(B, N)``), from the layout of :func:`_all_rows`."""
    d = W.shape[-1]
    if d > _QUAD_D:
        return _scatter(p, W)
    mv = (p.unsqueeze(-2) @ Wall.transpose(-1, -2)).squeeze(-2)          # (B, d(d+1)/2)
    a, b = torch.triu_indices(d, d, device=W.device)
    pos = torch.empty(d, d, dtype=torch.long, device=W.device)
    ar = torch.arange(a.numel(), device=W.device)
    pos[a, b] = ar
    pos[b, a] = ar
    return mv[..., pos.flatten()].unflatten(-1, (d, d))


def _forms_all(U, sr, Wall):
    """``r_m = w_m^T S^{-1} w_m`` for all N rows, ``S = U diag(sr) U^T``, from the layout of :func:`_all_rows`."""
    d = U.shape[-1]
    if d > _QUAD_D:
        Lt = U.transpose(-1, -2) * sr.rsqrt().unsqueeze(-1)             # S^{-1} = Lt^T Lt
        return (Lt @ Wall).square().sum(-2)
    return _forms_q((U / sr.unsqueeze(-2)) @ U.transpose(-1, -2), Wall)


def _forms_q(Sinv, Wall):
    """``w_m^T Sinv w_m`` for all N rows from the products layout of :func:`_all_rows` (d <= ``_QUAD_D``)."""
    d = Sinv.shape[-1]
    a, b = torch.triu_indices(d, d, device=Sinv.device)
    q = Sinv[..., a, b] * torch.where(a == b, 1.0, 2.0).to(Sinv.dtype)
    return (q.unsqueeze(-2) @ Wall).squeeze(-2)


def _certificate_reg(Ws, ps, Wall, mask, M=None):
    """Certificate of weights ``ps`` on rows ``Ws (B, k, d)`` (or of the scatter ``M`` when given) against
    all unmasked vectors (``Wall``, the rows in the layout of :func:`_all_rows`):
    ``(lower f^2, upper c tr S, Y = c S, r, f)`` with ``S = M^{1/2} + eta I``
    (:func:`_sqrt_eig`), ``r_m = w_m^T S^{-1} w_m`` and ``c = max_m r_m``. Valid for any ps >= 0."""
    s, sr, U = _sqrt_eig(_scatter(ps, Ws) if M is None else M)
    f = s.sum(-1)
    r = _forms_all(U, sr, Wall)
    r = torch.where(mask, r, torch.zeros_like(r))
    c = r.amax(-1)
    Y = (U * (c.unsqueeze(-1) * sr).unsqueeze(-2)) @ U.transpose(-1, -2)
    return f * f, c * sr.sum(-1), Y, r, f


def _barrier_newton_dir(Ws, sm, p, mu):
    """Newton direction of ``F(p) = tr M(p)^{1/2} + mu sum_i log p_i`` on the simplex of the slots ``sm``.

    The Hessian of tr M^{1/2} is ``-Z C Z^T`` (Daleckii-Krein in the eigenbasis of M: row i of Z holds the
    products ``w^_a w^_b`` (a <= b) of slot i, C the divided differences of ``e^{-1/2}/2``, doubled off the
    diagonal), so ``N = mu P^{-2} + Z C Z^T`` is inverted by Woodbury with one d(d+1)/2-square Cholesky.
    Returns ``(f, F, r_max on the slots, dp, Newton decrement^2 / mu, nu, dp/dmu)``; sync-free."""
    smf = sm.to(Ws.dtype)
    d = Ws.shape[-1]
    s, sr, U = _sqrt_eig(_scatter(p, Ws))
    f = _sum_last(s)
    pc = p.clamp_min(1e-300)
    logp = pc.log() * smf
    F = f + mu * logp.sum(-1)
    Wh = Ws @ U
    r = _sum_last(Wh * Wh / sr.unsqueeze(-2)) * smf
    muc = mu.unsqueeze(-1)
    pinv = smf / pc
    g = 0.5 * r + muc * pinv
    a, b = _triu(d, Ws.device)
    Z = Wh.index_select(-1, a) * Wh.index_select(-1, b)                   # (B, k, d(d+1)/2)
    sa, sb = sr.index_select(-1, a), sr.index_select(-1, b)
    Cinv = (sa * sb * (sa + sb)) * _offdiag_two(d, Ws.dtype, Ws.device)    # 1 / C (doubled off-diag)
    Dinv = p * p * smf / muc                                               # (mu P^-2)^-1 on the slots
    DZ = Dinv.unsqueeze(-1) * Z
    S = Z.transpose(-1, -2) @ DZ
    S.diagonal(dim1=-2, dim2=-1).add_(Cinv)
    dsc = S.diagonal(dim1=-2, dim2=-1).clamp_min(1e-300).rsqrt()
    S = S * (dsc.unsqueeze(-1) * dsc.unsqueeze(-2))
    S.diagonal(dim1=-2, dim2=-1).add_(1e-13)
    L, _ = torch.linalg.cholesky_ex(S)
    y = torch.stack([Dinv * g, Dinv, Dinv * pinv], -1)                     # D^-1 [g, 1, 1/p], (B, k, 3)
    t = torch.cholesky_solve((Z.transpose(-1, -2) @ y) * dsc.unsqueeze(-1), L) * dsc.unsqueeze(-1)
    R = y - DZ @ t                                                         # N^-1 [g, 1, 1/p]
    Rs = R.sum(-2)                                                         # (B, 3); R = 0 off the slots
    den = Rs[..., 1:2].clamp_min(1e-300)
    nu = Rs[..., 0] / den[..., 0]
    # Newton step, and the tangent of the central path dp/dmu = N^-1 (1/p - nu' 1) with sum = 0 (predictor)
    D2 = torch.nan_to_num(R[..., 0::2] - (Rs[..., 0::2] / den).unsqueeze(-2) * R[..., 1:2],
                          nan=0.0, posinf=0.0, neginf=0.0) * smf.unsqueeze(-1)
    dp, pt = D2[..., 0], D2[..., 1]
    dec2 = (dp * g).sum(-1) / mu
    rmax = r.amax(-1)
    return f, F, rmax, dp, dec2, nu, pt


_TRIU = {}
_TWO = {}


def _offdiag_two(d, dtype, device):
    """``(d(d+1)/2,)``: 2 on the diagonal pairs (a == b) of :func:`_triu`, 1 elsewhere (cached)."""
    key = (d, dtype, str(device))
    if key not in _TWO:
        a, b = _triu(d, device)
        _TWO[key] = torch.where(a == b, 2.0, 1.0).to(dtype)
    return _TWO[key]


def _triu(d, device):
    key = (d, str(device))
    if key not in _TRIU:
        _TRIU[key] = tuple(torch.triu_indices(d, d, device=device))
    return _TRIU[key]


def _barrier_step(state):
    """One safeguarded Newton step on every problem of the working batch (sync-free). A step that lowered
    F (at the current mu) is undone and retried at half length; a centred problem (decrement^2 < ``_CENTRED``)
    multiplies mu by ``_SIGMA`` (down to its target) and moves along the central path's tangent."""
    Ws, sm, p, mu = state["Ws"], state["sm"], state["p"], state["mu"]
    f, F, rmax, dp, dec2, nu, pt = _barrier_newton_dir(Ws, sm, p, mu)
    # compare with the previous point at the mu its direction was computed for (dp_prev ascends that F)
    mp = state["mu_prev"]
    logp = torch.where(sm, p.clamp_min(1e-300).log(), torch.zeros_like(p)).sum(-1)
    Fprev = state["f_prev"] + mp * state["L_prev"]
    bad = f + mp * logp < Fprev - 1e-13 * Fprev.abs()
    ratio = torch.where(dp < 0, p / (-dp).clamp_min(1e-300), torch.full_like(p, math.inf)).amin(-1)
    alpha = torch.minimum(torch.ones_like(mu), 0.95 * ratio)
    half = 0.5 * state["alpha"]
    retry = state["p_prev"] + half.unsqueeze(-1) * state["dp_prev"]
    ok = ~bad
    ok1 = ok.unsqueeze(-1)
    state["f_prev"] = torch.where(ok, f, state["f_prev"])
    state["mu_prev"] = torch.where(ok, mu, mp)
    state["L_prev"] = torch.where(ok, logp, state["L_prev"])
    state["p_prev"] = torch.where(ok1, p, state["p_prev"])
    state["dp_prev"] = torch.where(ok1, dp, state["dp_prev"])
    state["alpha"] = torch.where(ok, alpha, half)
    newp = torch.where(ok1, p + alpha.unsqueeze(-1) * dp, retry).clamp_min(0)
    newp = torch.where(sm, newp, torch.zeros_like(newp))
    mu_new = torch.where(ok & (dec2 < _CENTRED), torch.maximum(mu * _SIGMA, state["mu_end"]), mu)
    # predictor for a centred problem whose mu drops by sigma: first-order step along the central path
    # (dp/dmu from the same factorisation), floored at 0.2 sigma p so that the weights stay positive
    sig = (mu_new / mu).unsqueeze(-1)
    newp = torch.maximum(newp + (mu_new - mu).unsqueeze(-1) * pt, 0.2 * sig * newp)
    pred = mu_new < mu
    state["f_prev"] = torch.where(pred, torch.full_like(f, -math.inf), state["f_prev"])
    state["p"] = newp / newp.sum(-1, keepdim=True)
    state["mu"] = mu_new
    state["ready"] = ok & (mu <= state["mu_end"]) & (dec2 < 0.25) & (rmax <= f * (1 + 0.25 * state["tol"]))
    state["f"] = f


def _screen(W, Wall, mask, k, steps):
    """Start of the barrier solver: ``steps`` multiplicative steps (exponent 2) on all N vectors from the
    uniform p, then the working set = the k rows of largest ``w^T S^{-1} w`` (the candidates for the boundary
    of the optimal ellipsoid). Heuristic only: the working set is re-checked against all N later."""
    maskf = mask.to(W.dtype)
    p = maskf / maskf.sum(-1, keepdim=True).clamp_min(1)
    for it in range(steps + 1):
        lower, upper, Y, r, f = _certificate_reg(None, None, Wall, mask, M=_scatter_all(p, W, Wall))
        if it < steps:
            p = p * (r / f.unsqueeze(-1).clamp_min(1e-300)).square()
            p = p / p.sum(-1, keepdim=True).clamp_min(1e-300)
    top = torch.where(mask, r, torch.full_like(r, -1.0)).topk(k, dim=-1)
    idx = top.indices
    sm = top.values >= 0
    pS = torch.gather(p, -1, idx) * sm
    smf = sm.to(W.dtype)
    kv = smf.sum(-1).clamp_min(1)
    pS = 0.5 * pS / pS.sum(-1, keepdim=True).clamp_min(1e-300) + 0.5 * smf / kv.unsqueeze(-1)
    return {"idx": idx, "sm": sm, "p": pS, "f0": f, "kv": kv}, (lower, upper, Y)


def _barrier_state(W, start, tol):
    d = W.shape[-1]
    idx, sm, p, f0, kv = start["idx"], start["sm"], start["p"], start["f0"], start["kv"]
    f0 = f0.clamp_min(1e-300)
    mu = _MU0 * f0 / kv
    st = {"idx": idx, "sm": sm, "p": p, "mu": mu, "mu_end": tol * f0 / (32 * kv), "tol": tol,
          "mu_chk": 1e-3 * f0 / kv,
          "Ws": torch.gather(W, -2, idx.unsqueeze(-1).expand(*idx.shape, d)),
          "f_prev": torch.full_like(mu, -math.inf), "L_prev": torch.zeros_like(mu), "p_prev": p,
          "dp_prev": torch.zeros_like(p), "alpha": torch.ones_like(mu), "mu_prev": mu}
    return st


_SIGMA = 0.003
_CENTRED = 2.0
_TAIL_CHUNK = 2
_N_ADD = 8
_SCREEN_STEPS = 2
_MU0 = 0.1
_K_FACTOR = 4
_STATE_KEYS = ("idx", "sm", "p", "mu", "mu_end", "Ws", "f_prev", "L_prev", "p_prev", "dp_prev", "alpha", "ready", "f",
               "mu_prev", "mu_chk")


def _swap_in(st, rows, r_full, W, n_add, final):
    """For problems ``rows`` of the working batch whose certificate against all N failed: the ``n_add`` most
    violated rows outside the working set replace the lightest slots; with none violated (by more than
    tol/8), the problem instead aims at a 10x smaller mu."""
    d = W.shape[-1]
    idx, sm, p, f = st["idx"][rows], st["sm"][rows], st["p"][rows], st["f"][rows]
    r = r_full.scatter(-1, idx, torch.full_like(p, -1.0))
    top = r.topk(min(n_add, r.shape[-1]), dim=-1)
    acc = top.values > (f * (1 + st["tol"] / 8)).unsqueeze(-1)
    slots = torch.where(sm, p, torch.full_like(p, -1.0)).topk(top.values.shape[-1], dim=-1, largest=False).indices
    new_idx = idx.scatter(-1, slots, torch.where(acc, top.indices, torch.gather(idx, -1, slots)))
    new_sm = sm.scatter(-1, slots, acc | torch.gather(sm, -1, slots))
    kv = new_sm.sum(-1).clamp_min(1).to(p.dtype)
    added = acc.any(-1)
    newp = p.scatter(-1, slots, torch.where(acc, 0.5 / kv.unsqueeze(-1), torch.gather(p, -1, slots)))
    newp = torch.where(new_sm, newp.clamp_min(1e-3 / kv.unsqueeze(-1)), torch.zeros_like(newp))
    newp = newp / newp.sum(-1, keepdim=True)
    a1 = added.unsqueeze(-1)
    st["idx"][rows] = new_idx
    st["sm"][rows] = new_sm
    st["p"][rows] = torch.where(a1, newp, p)
    st["Ws"][rows] = torch.gather(W[rows], -2,
                                  new_idx.unsqueeze(-1).expand(*new_idx.shape, d))
    viol = (top.values[..., 0] / f.clamp_min(1e-300) - 1).clamp(0, 1e-2)   # re-centre at the violation's scale
    st["mu"][rows] = torch.where(added, torch.maximum(st["mu"][rows], viol * f / kv), st["mu"][rows])
    st["mu_end"][rows] = torch.where(added | ~final, st["mu_end"][rows], 0.1 * st["mu_end"][rows])
    st["f_prev"][rows] = torch.where(added, torch.full_like(f, -math.inf), st["f_prev"][rows])


def _solve_barrier(W, mask, tol, max_iter, screen_steps=None, k=None, chunk=6, n_add=None, Wall=None):
    """Default solver: screening (:func:`_screen`), then batched log-barrier Newton ascent of tr M(p)^{1/2} on
    the working set (:func:`_barrier_step`, one host sync per ``chunk`` steps), certified against all N
    vectors (:func:`_certificate_reg`); violated vectors are swapped in (:func:`_swap_in`). Problems still
    above ``tol`` after ``max_iter`` steps finish with the multiplicative solver :func:`_solve_dual`."""
    batch, (n, d) = W.shape[:-2], W.shape[-2:]
    W, mask = W.reshape(-1, n, d), mask.reshape(-1, n)
    B, dt, dev = W.shape[0], W.dtype, W.device
    if k is None:
        k = _K_FACTOR * (d * (d + 1) // 2)
    k = min(k, n)
    screen_steps = _SCREEN_STEPS if screen_steps is None else screen_steps
    n_add = min(_N_ADD if n_add is None else n_add, k)
    Wt = _all_rows(W) if Wall is None else Wall
    start, (lo0, up0, Y0) = _screen(W, Wt, mask, k, screen_steps)
    out_Y, out_upper, out_lower = Y0, up0, lo0
    st = _barrier_state(W, start, tol)
    gidx = torch.arange(B, device=dev)
    Wk, Wtk, mk = W, Wt, mask
    it = 0
    while gidx.numel() > 0:
        # a small remaining batch costs the same per step as one problem: check it more often
        ch = chunk if 8 * gidx.numel() > B else _TAIL_CHUNK
        for _ in range(ch):
            _barrier_step(st)
        it += ch
        last = it >= max_iter
        ready = torch.ones_like(st["ready"]) if last else st["ready"] | (st["mu"] <= st["mu_chk"])
        rows = ready.nonzero().squeeze(-1)                          # the one host sync per chunk
        if rows.numel() == 0:
            continue
        lower, upper, Y, r_full, _ = _certificate_reg(st["Ws"][rows], st["p"][rows], Wtk[rows], mk[rows])
        final = st["ready"][rows]
        st["mu_chk"][rows] = st["mu_chk"][rows] * 1e-2
        g = gidx[rows]
        better = upper < out_upper[g]
        out_Y[g] = torch.where(better.unsqueeze(-1).unsqueeze(-1), Y, out_Y[g])
        out_upper[g] = torch.minimum(out_upper[g], upper)
        out_lower[g] = torch.maximum(out_lower[g], lower)
        conv = out_upper[g] / out_lower[g] - 1 <= 0.5 * tol   # margin for the back-transform's rounding
        if last:
            break
        if not bool(conv.all()):
            _swap_in(st, rows[~conv], r_full[~conv], Wk, n_add, final[~conv])
        keep = torch.ones(gidx.numel(), dtype=torch.bool, device=dev)
        keep[rows[conv]] = False
        if not bool(keep.all()):
            kk = keep.nonzero().squeeze(-1)
            gidx, Wk, Wtk, mk = gidx[kk], Wk[kk], Wtk[kk], mk[kk]
            for key in _STATE_KEYS:
                st[key] = st[key][kk] if st[key].dim() > 0 else st[key]
    gap = out_upper / out_lower - 1
    left = (gap > 0.5 * tol).nonzero().squeeze(-1)
    if left.numel() > 0:    # rare: finish with the multiplicative + active-set Newton solver
        Y2, up2, lo2, _, it2 = _solve_dual(W[left], mask[left], tol, 20000, 20, 2.0, True, 24)
        better = up2 < out_upper[left]
        out_Y[left] = torch.where(better.unsqueeze(-1).unsqueeze(-1), Y2, out_Y[left])
        out_upper[left] = torch.minimum(out_upper[left], up2)
        out_lower[left] = torch.maximum(out_lower[left], lo2)
        it += it2
        gap = out_upper / out_lower - 1
    return (out_Y.reshape(*batch, d, d), out_upper.reshape(batch), out_lower.reshape(batch),
            gap.reshape(batch), it)


def _solve_cvxpylayers(W, mask, n_jobs=None):
    """Gamma form of (C) in w-coordinates (A = I after the change of variables) through a CvxpyLayer."""
    import cvxpy as cp
    from cvxpylayers.torch import CvxpyLayer

    batch = W.shape[:-2]
    n, d = W.shape[-2:]
    Wf = W.reshape(-1, n, d)
    mf = mask.reshape(-1, n)
    B = Wf.shape[0]
    G = cp.Variable((d, d), PSD=True)
    Wp = cp.Parameter((n, d * d))
    Cp = cp.Parameter((d, d))
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(Cp, G)), [Wp @ cp.vec(G, order="C") <= 1])
    assert prob.is_dpp()
    layer = CvxpyLayer(prob, parameters=[Wp, Cp], variables=[G])
    Wv = (Wf.unsqueeze(-1) * Wf.unsqueeze(-2)).reshape(B, n, d * d) * mf.unsqueeze(-1).to(W.dtype)
    C = torch.eye(d, dtype=W.dtype, device=W.device).expand(B, d, d)
    kwargs = {"solve_method": "Clarabel"}
    if n_jobs is not None:
        kwargs["n_jobs_forward"] = n_jobs
    with torch.no_grad():
        (Gam,) = layer(Wv.cpu().double(), C.cpu().double(), solver_args=kwargs)
    Gam = _sym(Gam.to(device=W.device, dtype=W.dtype))
    # Gamma may be indefinite at solver tolerance: repair to PD before inverting (the post-scaling
    # afterwards restores exact feasibility)
    e, U = torch.linalg.eigh(Gam)
    e = e.clamp_min(e.amax(-1, keepdim=True) * 1e-12)
    Y = (U / e.unsqueeze(-2)) @ U.transpose(-1, -2)
    return Y.reshape(*batch, d, d)


def _checked_inputs(V, A, mask):
    """``V, A, mask`` in float64 expanded to their common batch, the batch and ``chol(A)`` (one
    ValueError/TypeError for bad input); masked-out vectors may hold anything (NaN included): they are zeroed."""
    if not torch.is_tensor(V) or not torch.is_tensor(A):
        raise TypeError("V and A must be torch tensors")
    if V.dim() < 2 or A.dim() < 2 or A.shape[-1] != V.shape[-1] or A.shape[-2] != V.shape[-1]:
        raise ValueError(f"V must be (..., N, d) and A (..., d, d); got {tuple(V.shape)} and {tuple(A.shape)}")
    if mask is None:
        mask = torch.ones(V.shape[:-1], dtype=torch.bool, device=V.device)
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.dim() < 1 or mask.shape[-1] != V.shape[-2]:
        raise ValueError(f"mask must have shape (..., {V.shape[-2]}), got {tuple(mask.shape)}")
    try:
        batch = broadcast_shapes(V.shape[:-2], A.shape[:-2], mask.shape[:-1])
    except RuntimeError:
        raise ValueError(f"the batch shapes of V {tuple(V.shape[:-2])}, A {tuple(A.shape[:-2])} and mask "
                         f"{tuple(mask.shape[:-1])} do not broadcast") from None
    # always float64: a certified 1e-6 gap is out of reach in float32 (and feasibility is a privacy matter)
    n, d = V.shape[-2:]
    V = V.to(torch.float64).expand(*batch, n, d)
    A = A.to(torch.float64).expand(*batch, d, d)
    mask = mask.expand(*batch, n)
    V = torch.where(mask.unsqueeze(-1), V, torch.zeros((), dtype=V.dtype, device=V.device))
    if not bool(torch.isfinite(V).all() & torch.isfinite(A).all()):
        raise ValueError("V (on its unmasked rows) and A must be finite")
    if not bool(((V != 0).any(-1) & mask).any(-1).all()):
        raise ValueError("every problem needs at least one unmasked nonzero vector (else X = 0 is optimal and "
                         "no noise covariance exists)")
    La, info = torch.linalg.cholesky_ex(_sym(A))                        # A = La La^T, C = La^T
    if bool((info != 0).any()):
        raise ValueError("A must be symmetric positive definite")
    return V, A, mask, batch, La


def solve_covering_sdp(V: torch.Tensor, A: torch.Tensor, mask: torch.Tensor | None = None, *,
                       solver: str = "dual", tol: float = 1e-6, max_iter: int = 20000,
                       check_every: int = 20, rho: float = 2.0, prune: bool = True,
                       newton_steps: int = 24, n_jobs: int | None = None,
                       method: str = "barrier") -> CoveringSDPResult:
    """Solve ``min tr(A X) s.t. X >= v_m v_m^T`` for a batch of problems (the SDP (23) at t/L = 1).

    Args:
        V: ``(..., N, d)`` vectors ``v_m`` (for Algorithm 1: the label-flip differences of a class mean).
        A: ``(..., d, d)`` positive-definite weight (``Sigma_k^{-1}`` for (23); ``I`` for Ravi et al.'s MSE).
        mask: ``(..., N)`` bool, True for real vectors (ragged N is padded).
        solver: ``"dual"`` (batched torch, certified gap) or ``"cvxpylayers"`` (Clarabel through a CvxpyLayer).
        tol: target certified relative duality gap of the dual solver.
        max_iter, check_every: iteration cap and period of the convergence check. The check (certificate
            against all N vectors, Newton polishing on the support, and one ``bool(...)`` host sync) runs
            every ``check_every`` multiplicative steps (and after steps 5 and 10); nothing else synchronises.
        rho: exponent of the multiplicative update ``p_m <- p_m (w_m^T M^{-1/2} w_m / tr M^{1/2})^rho``
            (halved per problem, down to 1, whenever a step lowers the dual objective).
        prune: active-set pruning to the ``4 (d(d+1)/2 + d)`` heaviest points after warm-up; exact, because
            certificates use all N vectors and pruned points that become binding are restored.
        newton_steps: maximum active-set Newton steps per check (0 disables); they stop early (host check every
            4 steps) once every gap is below ``tol``.
        n_jobs: thread count for the cvxpylayers batch loop (``n_jobs_forward``).
        method: dual solver: ``"barrier"`` (default, :func:`_solve_barrier`: screened working set, log-barrier
            Newton, all-N certificates; ``max_iter`` capped at 240 barrier steps) or ``"multiplicative"`` (the
            previous default, :func:`_solve_dual`; ``check_every``, ``rho``, ``prune``, ``newton_steps`` apply to it).

    The change of variables ``w = C v`` with ``A = C^T C`` (C = chol(A)^T) turns (C) into
    ``min tr(Y) s.t. Y >= w_m w_m^T`` with ``X = C^{-1} Y C^{-T}``. Its dual (``docs/design.md``, reduction 2) is
    ``max_{p in simplex} tr(M(p)^{1/2})^2``, ``M(p) = sum_m p_m w_m w_m^T``; for any p,
    ``Y = (max_m w_m^T M^{-1/2} w_m) M^{1/2}`` is feasible, which certifies the gap.
    Vectors are rescaled to unit maximum norm internally (the optimum scales quadratically). Computation and
    results are float64 whatever the input dtype.
    """
    if solver not in ("dual", "cvxpylayers"):
        raise ValueError(f"solver must be 'dual' or 'cvxpylayers', got {solver!r}")
    if method not in ("barrier", "multiplicative"):
        raise ValueError(f"method must be 'barrier' or 'multiplicative', got {method!r}")
    V, A, mask, batch, La = _checked_inputs(V, A, mask)
    n, d = V.shape[-2:]
    W = V @ La                                                           # rows w_m^T = v_m^T La
    W = W * mask.unsqueeze(-1).to(W.dtype)
    sc = (W * W).sum(-1).amax(-1).sqrt().clamp_min(torch.finfo(W.dtype).tiny)   # (...)
    Wn = W / sc.unsqueeze(-1).unsqueeze(-1)
    nan = torch.full(batch, math.nan, dtype=W.dtype, device=W.device)
    Wall = None
    if solver == "dual":
        if method == "barrier":
            Wall = _all_rows(Wn.reshape(-1, n, d)) if d <= _QUAD_D else None
            Y, upper, lower, gap, it = _solve_barrier(Wn, mask, tol, max_iter=min(max_iter, 240), Wall=Wall)
        else:
            Y, upper, lower, gap, it = _solve_dual(Wn, mask, tol, max_iter, check_every, rho, prune, newton_steps)
        lower = lower * sc * sc
    else:
        Y = _solve_cvxpylayers(Wn, mask, n_jobs=n_jobs)
        gap, lower, it = nan, nan, 0
    # back to X: X = C^{-1} Y C^{-T} = La^{-T} Y La^{-1}, times the scale^2
    Z = torch.linalg.solve_triangular(La.transpose(-1, -2), Y, upper=True)
    X = torch.linalg.solve_triangular(La.transpose(-1, -2), Z.transpose(-1, -2), upper=True)
    X = _sym(X) * (sc * sc).unsqueeze(-1).unsqueeze(-1)
    if Wall is None:
        X, s = _post_scale(V, X, mask)
    else:   # the same q = max_m v_m^T X^-1 v_m, as w_m^T G w_m with G = (La^T X La / sc^2)^-1 (no pass over V)
        Xw = La.transpose(-1, -2) @ X @ La / (sc * sc).unsqueeze(-1).unsqueeze(-1)
        G = torch.cholesky_inverse(torch.linalg.cholesky(_sym(Xw)))
        q = _forms_q(G, Wall.reshape(*batch, *Wall.shape[-2:]))
        # the same relative margin as _post_scale: X stays feasible however q is evaluated
        s = (torch.where(mask, q, torch.zeros_like(q)).amax(-1) * (1 + _MARGIN)).clamp(min=1.0)
        X = X * s.unsqueeze(-1).unsqueeze(-1)
    opt = (A * X).sum((-1, -2))
    if solver == "dual":
        gap = opt / lower - 1
    return CoveringSDPResult(opt=opt, X=X, gap=gap, lower=lower, iterations=it, scale=s, solver=solver)


def solve_lmi_cvxpy(A, V, bound: float = 1.0, eps_sq_max: float | None = None, L: float = 1.0,
                    normalize: bool = True):
    """Reference: the literal LMI (19)/(23) of Liu, Scaglione & Peisert (2025) for one class, in plain cvxpy + Clarabel (numpy).

    ``min tr(A X)`` over ``X`` (= Gamma_k^{-1}) subject to ``[[t, v_m^T], [v_m, X]] >= 0`` for every row v_m of V.
    If ``eps_sq_max`` is None, ``t = bound`` is fixed (bound = 1 gives (C)); otherwise ``t = e / L`` with a
    variable ``e = eps_k^2`` in ``(0, eps_sq_max]`` — the literal (23) with ``L = 2 ln(2/delta)``.
    With ``normalize`` the vectors are rescaled to unit maximum norm before solving (Clarabel misjudges its
    tolerances on the raw ~1/N-sized data) and the solution scaled back; this is an exact rescaling.

    Returns ``(opt, X, eps_sq)`` as numpy values (eps_sq None when t is fixed).
    """
    import cvxpy as cp
    import numpy as np

    A = np.asarray(A, dtype=float)
    V = np.asarray(V, dtype=float)
    d = A.shape[0]
    sc = float(np.sqrt((V * V).sum(1).max())) if normalize else 1.0
    Vn = V / sc
    Xv = cp.Variable((d, d), symmetric=True)
    cons = [Xv >> 0]
    if eps_sq_max is None:
        t = bound
        e = None
    else:
        e = cp.Variable()
        t = e / L
        cons += [e <= eps_sq_max, e >= 0]
    for v in Vn:
        vv = v.reshape(d, 1)
        cons.append(cp.bmat([[cp.reshape(t, (1, 1), order="C") if e is not None else np.array([[t]]), vv.T],
                             [vv, Xv]]) >> 0)
    prob = cp.Problem(cp.Minimize(cp.trace(A @ Xv)), cons)
    prob.solve(solver=cp.CLARABEL)
    X = Xv.value * sc ** 2
    return float(np.trace(A @ X)), X, (None if e is None else float(e.value))
