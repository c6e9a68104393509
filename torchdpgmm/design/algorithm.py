"""Algorithm 1 of Liu, Scaglione & Peisert (2025) and two variants, batched over trials.

``design_mechanism`` chooses the budget split ``(eps0, eps_k)``, the Wishart parameters ``gamma_k`` and the
mean-noise covariances ``Gamma_k^{-1}`` of the KL-optimal release (eqs. 5, 6, 9-12, 22-27):

* ``variant="as-published"`` — Algorithm 1 as printed: ``eps0 = eps_k = eps/3``; then repeat (22), (23) with
  ``eps_k^2`` at its bound, (25)-(27), stopping when the objective changes by at most ``tol``.
* ``variant="global"`` — the same objective (P2)/(12), optimised jointly over the split: per class a 1-D
  search over ``gamma_k`` (``eps_k`` then fills the rest of the class budget), and a 1-D search over ``eps0``.
* ``variant="exact-kl"`` — as "global", but with the exact expected Gaussian KL in place of the Wishart
  surrogate ``-E ln|W|`` of (12) (see ``docs/design.md``, "The surrogate misleads"), estimated with common random numbers.

Reductions used (proofs in ``docs/design.md``): (R1) ``Gamma_k^{-1}(eps_k) = (L / eps_k^2) X1_k`` with
``L = 2 ln(2/delta)`` and ``X1_k`` the solution of the covering SDP at t/L = 1, solved once per class; every
other step is closed form or a scalar search, so an epsilon sweep reuses the SDP (``MechanismDesign.at``).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes
from .._validation import check_delta, check_epsilon, check_finite, check_labels
from ..mechanisms.mapping import mapping_pmf as _core_mapping_pmf
from ..mechanisms.mapping import neighbour_counts
from ..mechanisms.noise import normal_noise
from .sdp import label_flip_differences, solve_covering_sdp

__all__ = ["MechanismDesign", "design_mechanism", "neighbour_counts", "mapping_pmf", "VARIANTS"]

VARIANTS = ("as-published", "global", "exact-kl")


# ----------------------------------------------------------------------------------------------
# random mapping of the weights (eqs. 14-15), "minimal valid reading"
# ----------------------------------------------------------------------------------------------

def mapping_pmf(counts: torch.Tensor, eps0: torch.Tensor, lam: float) -> torch.Tensor:
    """Probabilities of ``{pi(D)} u S'(D)`` under f (eq. 15) from its randomized-response part,
    ``(1 - lam) f'``, shape ``(..., 1 + K(K-1))``, column 0 = pi(D). f' is the core's reading of (26)-(27)
    (:func:`torchdpgmm.mechanisms.mapping.mapping_pmf`): ``pi(D)`` with mass ``e^eps0 / (e^eps0 + K(K-1))``,
    each neighbour ``1 / (e^eps0 + K(K-1))``. The uniform share ``lam / |S|`` per point is not included."""
    return (1 - lam) * _core_mapping_pmf(counts, eps0)


def _uniform_composition_kl(counts: torch.Tensor) -> torch.Tensor:
    """Closed form of ``E[sum_k pi~_k ln(pi~_k / pi_k)]`` for pi~ uniform on S (compositions of N into K
    positive parts): the marginal of one part is ``P(n = j) = C(N-j-1, K-2) / C(N-1, K-1)``, j = 1..N-K+1,
    and E[pi~_k] = 1/K, so the value is ``K E[(j/N) ln(j/N)] - (1/K) sum_k ln pi_k``."""
    K = counts.shape[-1]
    N = counts.sum(-1)                                                   # (...)
    nmax = int(N.max().item())                                           # shape only (host sync at setup)
    j = torch.arange(1, nmax + 1, dtype=counts.dtype, device=counts.device)
    Nn = N.unsqueeze(-1)
    valid = j <= Nn - K + 1
    lg = torch.lgamma
    # log C(N-j-1, K-2) - log C(N-1, K-1)
    a = (Nn - j).clamp_min(1)
    logp = (lg(a) - lg(torch.tensor(K - 1.0, dtype=counts.dtype)) - lg((a - K + 2).clamp_min(1))
            - (lg(Nn) - lg(torch.tensor(float(K), dtype=counts.dtype)) - lg(Nn - K + 1)))
    pj = torch.where(valid, torch.exp(logp), torch.zeros_like(logp))
    q = j / Nn
    ent = (pj * q * torch.log(q)).sum(-1)
    pi = counts / Nn
    return K * ent - torch.log(pi).sum(-1) / K


def _neighbour_kl_sum(counts: torch.Tensor) -> torch.Tensor:
    """``sum over S'(D) of sum_k pi'_k ln(pi'_k / pi_k)`` (the weights' KL of each label-flip neighbour)."""
    nb = neighbour_counts(counts)
    N = counts.sum(-1, keepdim=True).unsqueeze(-1)
    pin = nb / N
    val = torch.where(nb > 0, pin * torch.log(nb / counts.unsqueeze(-2)), torch.zeros_like(pin))
    return val.sum((-1, -2))


def _mvdigamma(a: float, d: int) -> float:
    return sum(float(torch.special.digamma(torch.tensor(a + (1 - i) / 2.0, dtype=torch.float64)))
               for i in range(1, d + 1))


# ----------------------------------------------------------------------------------------------
# exact Wishart KL term with common random numbers
# ----------------------------------------------------------------------------------------------

def _wishart_eigs(cov: torch.Tensor, draws: int, generator: torch.Generator | None) -> torch.Tensor:
    """Eigenvalues of ``Sigma^{-1/2} G G^T Sigma^{-1/2}`` for fixed draws G ~ N(0,1)^{d x (d+1)} (shared by all
    classes and trials: common random numbers), shape ``(..., K, draws, d)``. ``W = G G^T / gamma`` is an exact
    ``W_d(I/gamma, d+1)`` draw, so ``Sigma^{-1} W`` has eigenvalues ``lambda / gamma``."""
    d = cov.shape[-1]
    G = normal_noise((draws, d, d + 1), 1.0, generator, dtype=cov.dtype, device=cov.device)  # noise layer
    Lc = torch.linalg.cholesky(cov)                                      # (..., K, d, d)
    Z = torch.linalg.solve_triangular(Lc.unsqueeze(-3), G, upper=False)  # (..., K, S, d, d+1)
    if d == 3:   # closed form: one LAPACK call per 3 x 3 matrix costs more than the whole trigonometric formula
        return _eigvalsh3(Z @ Z.transpose(-1, -2)).clamp_min(0)
    return torch.linalg.eigvalsh(Z @ Z.transpose(-1, -2)).clamp_min(0)


def _eigvalsh3(A: torch.Tensor) -> torch.Tensor:
    """Ascending eigenvalues of symmetric 3 x 3 matrices ``(..., 3, 3)`` by the trigonometric formula
    (Smith 1961): ``lambda = q + 2 p cos(phi + 2 pi j / 3)`` with ``q = tr A / 3``,
    ``p^2 = |A - q I|_F^2 / 6``, ``cos(3 phi) = det((A - q I) / p) / 2``; absolute error ~ eps |A|."""
    a00, a11, a22 = A[..., 0, 0], A[..., 1, 1], A[..., 2, 2]
    a01, a02, a12 = A[..., 0, 1], A[..., 0, 2], A[..., 1, 2]
    q = (a00 + a11 + a22) / 3
    b00, b11, b22 = a00 - q, a11 - q, a22 - q
    off = a01 * a01 + a02 * a02 + a12 * a12
    p = ((b00 * b00 + b11 * b11 + b22 * b22 + 2 * off) / 6).sqrt()
    det = b00 * (b11 * b22 - a12 * a12) - a01 * (a01 * b22 - a12 * a02) + a02 * (a01 * a12 - b11 * a02)
    ps = torch.where(p > 0, p, torch.ones_like(p))
    r = (det / (2 * ps * ps * ps)).clamp(-1.0, 1.0)
    phi = torch.acos(r) / 3
    hi = q + 2 * p * torch.cos(phi)
    lo = q + 2 * p * torch.cos(phi + 2 * math.pi / 3)
    return torch.stack([lo, 3 * q - hi - lo, hi], -1)


def _exact_term_from_eigs(lam_eig: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """``0.5 E[tr(Sigma^{-1} W) - ln|I + Sigma^{-1} W|]`` at gamma (..., K) from eigenvalues (..., K, S, d)."""
    x = lam_eig / gamma.unsqueeze(-1).unsqueeze(-1)
    return 0.5 * (x - torch.log1p(x)).sum(-1).mean(-1)


class _HermiteTable:
    """Cubic Hermite interpolation of the exact term in ``t = ln gamma`` on a fixed grid, with exact derivatives
    from the same draws (error ~ 1e-8 relative); beyond the top of the grid the term decays like gamma^-2."""

    def __init__(self, lam_eig: torch.Tensor, tr_inv: torch.Tensor, n: int = 200, chunk: int = 25):
        # grid relative to the class scale tr(Sigma^{-1}): gamma in tr * [1e-6, 1e8] (Hermite error ~ 5e-5 rel.)
        self.t0 = torch.log(tr_inv) + math.log(1e-6)                     # (..., K)
        self.dt = math.log(1e14) / (n - 1)
        # below the grid, x = lambda/gamma is large and x - ln(1+x) ~ x - ln x: continue with that asymptote
        self.sum_lam = lam_eig.sum(-1).mean(-1)                          # E tr(Sigma^{-1} G G^T)  (..., K)
        self.d = lam_eig.shape[-1]
        self.n = n
        t = self.t0.unsqueeze(-1) + self.dt * torch.arange(n, dtype=tr_inv.dtype, device=tr_inv.device)
        g = torch.exp(t)                                                 # (..., K, n)
        hs, dhs = [], []
        for a in range(0, n, chunk):                                     # chunked to bound memory
            x = lam_eig.unsqueeze(-3) / g[..., a:a + chunk].unsqueeze(-1).unsqueeze(-1)   # (..., K, c, S, d)
            hs.append(0.5 * (x - torch.log1p(x)).sum(-1).mean(-1))
            # dh/dt = gamma dh/dgamma = -0.5 E sum x^2 / (1 + x)
            dhs.append(-0.5 * (x * x / (1 + x)).sum(-1).mean(-1))
        self.h = torch.cat(hs, -1)
        self.dh = torch.cat(dhs, -1)

    def __call__(self, gamma: torch.Tensor) -> torch.Tensor:
        """gamma: (..., K, R) with the same leading dims as the table -> (..., K, R)."""
        t0 = self.t0.unsqueeze(-1)
        t = torch.log(gamma)
        u = (t - t0) / self.dt
        i = u.floor().clamp(0, self.n - 2)
        s = (u - i).clamp(max=1.0)
        idx = i.long()
        h, dh = self.h, self.dh
        h0 = torch.gather(h, -1, idx)
        h1 = torch.gather(h, -1, idx + 1)
        d0 = torch.gather(dh, -1, idx) * self.dt
        d1 = torch.gather(dh, -1, idx + 1) * self.dt
        s2, s3 = s * s, s * s * s
        val = (2 * s3 - 3 * s2 + 1) * h0 + (s3 - 2 * s2 + s) * d0 + (-2 * s3 + 3 * s2) * h1 + (s3 - s2) * d1
        top = u > self.n - 1
        val_top = h[..., -1:] * torch.exp(-2 * (t - t0 - self.dt * (self.n - 1)))
        g0 = torch.exp(t0)
        val_low = h[..., :1] + 0.5 * (self.sum_lam.unsqueeze(-1) * (1 / gamma - 1 / g0) - self.d * (t0 - t))
        return torch.where(top, val_top, torch.where(u < 0, val_low, val))


    def deriv_t(self, gamma: torch.Tensor) -> torch.Tensor:
        """d/d(ln gamma) of the interpolant, same shapes as __call__."""
        t0 = self.t0.unsqueeze(-1)
        t = torch.log(gamma)
        u = (t - t0) / self.dt
        i = u.floor().clamp(0, self.n - 2)
        s = (u - i).clamp(0.0, 1.0)
        idx = i.long()
        h, dh = self.h, self.dh
        h0 = torch.gather(h, -1, idx)
        h1 = torch.gather(h, -1, idx + 1)
        d0 = torch.gather(dh, -1, idx) * self.dt
        d1 = torch.gather(dh, -1, idx + 1) * self.dt
        s2 = s * s
        val = ((6 * s2 - 6 * s) * h0 + (3 * s2 - 4 * s + 1) * d0 + (6 * s - 6 * s2) * h1
               + (3 * s2 - 2 * s) * d1) / self.dt
        top = u > self.n - 1
        val_top = -2 * h[..., -1:] * torch.exp(-2 * (t - t0 - self.dt * (self.n - 1)))
        val_low = 0.5 * (self.d - self.sum_lam.unsqueeze(-1) / gamma)
        return torch.where(top, val_top, torch.where(u < 0, val_low, val))


# ----------------------------------------------------------------------------------------------
# the design object
# ----------------------------------------------------------------------------------------------

@dataclass
class MechanismDesign:
    """Output of :func:`design_mechanism` (``...`` = broadcast of the data batch and ``epsilon``'s shape).

    Attributes:
        eps0: ``(...)`` budget of the weights' random mapping (eq. 9).
        eps_k: ``(..., K)`` budgets of the mean mechanisms (eq. 10).
        gamma: ``(..., K)`` Wishart parameters, ``W_k ~ W_d(I/gamma_k, d+1)`` (eq. 6), charged ``3 gamma_k/(2 N_k)``.
        mean_noise_cov: ``(..., K, d, d)`` ``Gamma_k^{-1} = (L / eps_k^2) X1_k`` (eq. 5; feasible for (10)).
        sdp_opt: ``(..., K)`` ``tr(Sigma_k^{-1} X1_k)``, the SDP (23) at t/L = 1 (feasible value).
        sdp_X: ``(..., K, d, d)`` ``X1_k``. sdp_gap: ``(..., K)`` certified relative gap (dual) or NaN.
        objective: ``(...)`` the optimised objective: eq. (12) for "as-published"/"global", the exact expected
            KL for "exact-kl".
        objective_eq12: ``(...)`` eq. (12) at the design (every variant).
        expected_kl: ``(...)`` exact expected KL at the design (common-random-number estimate of the Wishart
            part; NaN when ``kl_draws == 0``).
        mapping_p_true: ``(...)`` probability that the weights' mapping returns pi(D) from the RR block.
        iterations: ``(...)`` Algorithm 1 iterations until the early stop (as-published) or search stages.
        trace: per-iteration dicts (as-published): eps0, eps_k, gamma, objective, and the printed (26)
            column ``F'_{., j*}`` (its sum and ``sum_i g_i F'_{i,j*}``).
        fitted: the non-private :class:`torchdpgmm.mixture.LabeledGMM` (None if the core is not installed).
        counts, means, covariances: class statistics (eq. 2), ``(..., K)``, ``(..., K, d)``, ``(..., K, d, d)``.

    ``design.at(epsilon)`` re-designs for other epsilons without re-solving the SDP (reduction 1).
    """

    eps0: torch.Tensor
    eps_k: torch.Tensor
    gamma: torch.Tensor
    mean_noise_cov: torch.Tensor
    sdp_opt: torch.Tensor
    sdp_X: torch.Tensor
    sdp_gap: torch.Tensor
    objective: torch.Tensor
    objective_eq12: torch.Tensor
    expected_kl: torch.Tensor
    mapping_p_true: torch.Tensor
    epsilon: torch.Tensor
    delta: torch.Tensor
    lam: float
    variant: str
    solver: str
    iterations: torch.Tensor
    trace: list = field(default_factory=list, repr=False)
    fitted: Any = field(default=None, repr=False)
    counts: torch.Tensor | None = field(default=None, repr=False)
    means: torch.Tensor | None = field(default=None, repr=False)
    covariances: torch.Tensor | None = field(default=None, repr=False)
    _ctx: dict = field(default_factory=dict, repr=False)

    def at(self, epsilon, delta=None, variant: str | None = None) -> "MechanismDesign":
        """The design at other ``epsilon`` (float or tensor broadcastable against the data batch, e.g. shape
        ``(E, 1)`` for E epsilons over a ``(T,)`` trial batch gives ``(E, T)``), reusing the SDP solutions."""
        check_epsilon(epsilon)
        if delta is not None:
            check_delta(delta)
        v = self.variant if variant is None else variant
        if v not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {v!r}")
        _check_batch(epsilon, self.delta if delta is None else delta, self._ctx["batch"])
        return _design_from_ctx(self._ctx, epsilon, self.delta if delta is None else delta, v,
                                self.fitted, self.solver)

    @property
    def privacy_split(self) -> dict:
        """The per-part budget split (eq. 9), for a privacy record."""
        return {"eps0": self.eps0, "eps_k": self.eps_k, "wishart_k": 3 * self.gamma / (2 * self.counts)}


# ----------------------------------------------------------------------------------------------
# objective pieces
# ----------------------------------------------------------------------------------------------

def _class_cost_surrogate(d, gamma, eps_k, tr_inv, s, L):
    """Per-class bracket of (12): 0.5 (d ln gamma + (d+1) tr(Sigma^{-1}) / gamma + tr(Sigma^{-1} Gamma^{-1}))."""
    return 0.5 * (d * torch.log(gamma) + (d + 1) * tr_inv / gamma + L * s / (eps_k * eps_k))


def _weights_term(ctx, eps0):
    """E_f[sum_k pi~_k ln(pi~_k / pi_k)] under f = (1-lam) RR + lam Uniform(S)."""
    K = ctx["K"]
    lam = ctx["lam"]
    return (1 - lam) * ctx["nb_kl"] / (torch.exp(eps0) + K * (K - 1)) + lam * ctx["unif_kl"]


def _grid_zoom(fn, lo, hi, n_grid=12, n_zoom=9):
    """Batched 1-D minimisation of fn over the open interval (lo, hi): grid of cell centres, then zoom into
    the best cell's neighbours. fn maps candidates (..., G) to values (..., G)."""
    lo0, hi0 = lo, hi
    ar = (torch.arange(n_grid, dtype=lo.dtype, device=lo.device) + 0.5) / n_grid
    for _ in range(n_zoom):
        xs = lo.unsqueeze(-1) + (hi - lo).unsqueeze(-1) * ar
        vals = fn(xs)
        vals = torch.where(torch.isfinite(vals), vals, torch.full_like(vals, math.inf))
        i = vals.argmin(-1, keepdim=True)
        c = torch.gather(xs, -1, i).squeeze(-1)
        h = (hi - lo) / n_grid
        lo = torch.maximum(c - h, lo0)
        hi = torch.minimum(c + h, hi0)
    return c


def _best_gamma(ctx, b, exact):
    """Per-class optimum of the class cost for class budget b = eps - eps0 (shape (..., G)), over gamma in
    (0, 2 N_k b / 3) with eps_k = b - 3 gamma / (2 N_k) (the budget constraint (20b) is tight at the optimum
    because both terms fall as their own budget grows). Returns gamma, eps_k of shape (..., G, K)."""
    d, L = ctx["d"], ctx["L_b"]
    Nk, tr_inv, s = (ctx[k].unsqueeze(-2) for k in ("counts_b", "tr_inv_b", "s_b"))   # (..., 1, K)
    Lx = L.unsqueeze(-1).unsqueeze(-1).unsqueeze(-1)                                   # (..., 1, 1, 1)
    bk = b.unsqueeze(-1)                                                               # (..., G, 1)
    gmax = 2 * Nk * bk / 3                                                             # (..., G, K)

    def cost(u):  # u (..., G, K, G2)
        gam = u * gmax.unsqueeze(-1)
        ek = bk.unsqueeze(-1) * (1 - u)
        mean_term = 0.5 * Lx * s.unsqueeze(-1) / (ek * ek)
        if exact:
            G, K, G2 = gam.shape[-3:]
            gk = gam.movedim(-2, -3).reshape(*gam.shape[:-3], K, G * G2)
            w = ctx["table"](gk).reshape(*gam.shape[:-3], K, G, G2).movedim(-3, -2)
            return mean_term + w
        return mean_term + 0.5 * (d * torch.log(gam) + (d + 1) * tr_inv.unsqueeze(-1) / gam)

    zero = torch.zeros(gmax.shape, dtype=b.dtype, device=b.device)
    if exact:
        # the exact class cost is convex in u (mean term convex; the Wishart term is a convex increasing
        # function of lambda/gamma, itself convex in gamma), so bisect on the sign of its derivative
        lo, hi = zero, zero + 1
        G, K = gmax.shape[-2:]
        sb = s.expand_as(gmax)
        for _ in range(32):                                           # u to ~2e-10
            u = 0.5 * (lo + hi)
            gam = u * gmax
            gk = gam.movedim(-1, -2)                                   # (..., K, G)
            dh = ctx["table"].deriv_t(gk).movedim(-1, -2) / gam          # dh/dgamma
            dmean = Lx.squeeze(-1) * sb / (bk * bk * (1 - u) ** 3)
            pos = dmean + gmax * dh > 0
            hi = torch.where(pos, u, hi)
            lo = torch.where(pos, lo, u)
        u = 0.5 * (lo + hi)
    else:
        u = _grid_zoom(cost, zero, zero + 1)
    return u * gmax, bk * (1 - u)


def _total(ctx, eps0, gamma, eps_k, exact):
    """Objective at given parameters (shapes (...), (..., K), (..., K)): eq. (12), or exact expected KL."""
    w = ctx["wk_b"]
    L, s = ctx["L_b"], ctx["s_b"]
    if exact:
        cls = 0.5 * L.unsqueeze(-1) * s / (eps_k * eps_k) + _exact_term_from_eigs(ctx["eigs"], gamma) \
            if ctx.get("eigs") is not None else torch.full_like(gamma, math.nan)
        return _weights_term(ctx, eps0) + (w * cls).sum(-1)
    cls = _class_cost_surrogate(ctx["d"], gamma, eps_k, ctx["tr_inv_b"], s, L.unsqueeze(-1))
    return _weights_term(ctx, eps0) + (w * cls).sum(-1) - ctx["const12"]


def _printed_F(ctx, eps0, gamma, eps_k):
    """(26)-(27) as printed: F'_{i,j*} for the rows i of {pi(D)} u S'(D), from the sign of g_i."""
    K, d = ctx["K"], ctx["d"]
    counts = ctx["counts_b"]
    N = counts.sum(-1, keepdim=True)
    rows = torch.cat([counts.unsqueeze(-2), neighbour_counts(counts)], -2)      # (..., 1+m, K)
    pit = rows / N.unsqueeze(-1)
    c = _class_cost_surrogate(d, gamma, eps_k, ctx["tr_inv_b"], ctx["s_b"], ctx["L_b"].unsqueeze(-1))
    g = (pit * (torch.log(rows / counts.unsqueeze(-2)) + c.unsqueeze(-2))).sum(-1)  # (..., 1+m)
    m = K * (K - 1)
    e = torch.exp(eps0).unsqueeze(-1)
    F = torch.where(g >= 0, 1 / (1 + m * e), 1 / (1 + m / e))
    return F, g


def _masked_records(X: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None):
    """``(X, y)`` with masked-out rows zeroed and labelled -1 (``mask=None``: every row real), features in float64."""
    X, y = X.detach().to(torch.float64), y.detach().to(torch.int64)
    if mask is None:
        return X, y
    return torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device)), \
        torch.where(mask, y, torch.full_like(y, -1))


def same_records(design_data: tuple, data: tuple) -> bool:
    """Whether ``data = (X, y, mask)`` holds the records a design was solved on (``design_data``, kept by reference,
    no copy): equal after masking, where the design's batch may broadcast to ``data``'s (one design reused over
    trials of the same dataset). The design's noise meets condition (10) for these records' label-flip vectors;
    equal class counts and means are not enough. One comparison on the tensors' device, one host read."""
    Xa, ya = _masked_records(*design_data)
    Xb, yb = _masked_records(*data)
    if Xa.shape[-2:] != Xb.shape[-2:]:
        return False
    try:
        return bool((Xa.to(Xb.device) == Xb).all() & (ya.to(yb.device) == yb).all())
    except RuntimeError:  # batch shapes that do not broadcast
        return False


def _check_batch(epsilon, delta, batch) -> None:
    """Refuse an ``epsilon`` or ``delta`` whose shape does not broadcast against the data batch."""
    shapes = [tuple(torch.as_tensor(epsilon).shape), tuple(torch.as_tensor(delta).shape), tuple(batch)]
    try:
        broadcast_shapes(*shapes)
    except RuntimeError:
        raise ValueError(f"epsilon {shapes[0]} and delta {shapes[1]} must broadcast against the data's batch "
                         f"shape {shapes[2]}") from None


def _check_loop_args(max_iter, kl_draws) -> None:
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    if isinstance(kl_draws, bool) or not isinstance(kl_draws, numbers.Integral) or kl_draws < 0:
        raise ValueError(f"kl_draws must be an int >= 0, got {kl_draws!r}")


def _design_from_ctx(ctx, epsilon, delta, variant, fitted, solver, max_iter=None, tol=None):
    dtype, device = ctx["dtype"], ctx["device"]
    eps = torch.as_tensor(epsilon, dtype=dtype, device=device)
    dl = torch.as_tensor(delta, dtype=dtype, device=device)
    batch = ctx["batch"]
    out = broadcast_shapes(eps.shape, dl.shape, batch)
    K, d = ctx["K"], ctx["d"]
    eps = eps.expand(out)
    L = (2 * torch.log(2 / dl)).expand(out)
    c = dict(ctx)
    for key in ("counts", "tr_inv", "s", "wk"):
        c[key + "_b"] = ctx[key].expand(*out, K)
    c["nb_kl"] = ctx["nb_kl0"].expand(out)
    c["unif_kl"] = ctx["unif_kl0"].expand(out)
    c["L_b"] = L
    if ctx.get("eigs0") is not None:
        c["eigs"] = ctx["eigs0"].expand(*out, *ctx["eigs0"].shape[-3:])
    max_iter = ctx["max_iter"] if max_iter is None else max_iter
    tol = ctx["tol"] if tol is None else tol
    Nk = c["counts_b"]
    trace = []
    if variant == "as-published":
        gstar = (d + 1) / d * c["tr_inv_b"]
        eps0 = eps / 3
        eps_k = (eps / 3).unsqueeze(-1).expand(*out, K)
        obj_prev = None
        done = torch.zeros(out, dtype=torch.bool, device=device)
        iters = torch.zeros(out, dtype=torch.long, device=device)
        gamma = None
        for it in range(1, max_iter + 1):
            g_new = torch.minimum(gstar, 2 * Nk * ((eps - eps0).unsqueeze(-1) - eps_k) / 3)              # (22)
            ek_new = (eps - eps0).unsqueeze(-1) - 3 * g_new / (2 * Nk)                                      # (23)
            e0_new = eps - (ek_new + 3 * g_new / (2 * Nk)).amax(-1)                                          # (25)
            obj = _total(c, e0_new, g_new, ek_new, exact=False)
            dm = done.unsqueeze(-1)
            gamma = g_new if gamma is None else torch.where(dm, gamma, g_new)
            eps_k = torch.where(dm, eps_k, ek_new)
            eps0 = torch.where(done, eps0, e0_new)
            F, g = _printed_F(c, eps0, gamma, eps_k)
            trace.append({"iteration": it, "eps0": eps0, "eps_k": eps_k, "gamma": gamma,
                          "objective": obj, "printed_F_col_sum": F.sum(-1),
                          "printed_objective": (F * g).sum(-1)})
            iters = torch.where(done, iters, torch.full_like(iters, it))
            if obj_prev is not None:
                done = done | ((obj - obj_prev).abs() <= tol)
            obj_prev = torch.where(done, obj_prev, obj) if obj_prev is not None else obj
            if bool(done.all()):   # one host sync per iteration (the loop stops after 2 in practice)
                break
        objective = _total(c, eps0, gamma, eps_k, exact=False)
    else:
        exact = variant == "exact-kl"
        if exact and ctx.get("eigs0") is None:
            raise ValueError("variant='exact-kl' needs kl_draws > 0")
        if exact and ctx.get("table") is None:   # built lazily: only exact-kl needs the interpolation table
            ctx["table"] = _HermiteTable(ctx["eigs0"], ctx["tr_inv"])
        if exact:
            c["table"] = _HermiteTable.__new__(_HermiteTable)
            tab = ctx["table"]
            for a in ("dt", "n", "d"):
                setattr(c["table"], a, getattr(tab, a))
            c["table"].t0 = tab.t0.expand(*out, K)
            c["table"].sum_lam = tab.sum_lam.expand(*out, K)
            c["table"].h = tab.h.expand(*out, K, tab.n)
            c["table"].dh = tab.dh.expand(*out, K, tab.n)

        def outer(e0):  # e0 (..., G)
            b = eps.unsqueeze(-1) - e0
            gam, ek = _best_gamma(c, b, exact)
            w = c["wk_b"].unsqueeze(-2)
            Lx = L.unsqueeze(-1).unsqueeze(-1)
            if exact:
                cls = 0.5 * Lx * c["s_b"].unsqueeze(-2) / (ek * ek) + c["table"](gam.movedim(-2, -1)).movedim(-1, -2)
                val = (w * cls).sum(-1)
            else:
                cls = _class_cost_surrogate(d, gam, ek, c["tr_inv_b"].unsqueeze(-2), c["s_b"].unsqueeze(-2), Lx)
                val = (w * cls).sum(-1) - ctx["const12"]
            nb = c["nb_kl"].unsqueeze(-1)
            lam = ctx["lam"]
            return val + (1 - lam) * nb / (torch.exp(e0) + K * (K - 1)) + lam * c["unif_kl"].unsqueeze(-1)

        zero = torch.zeros(out, dtype=dtype, device=device)
        eps0 = _grid_zoom(outer, zero, eps)
        gam, ek = _best_gamma(c, (eps - eps0).unsqueeze(-1), exact)
        gamma, eps_k = gam.squeeze(-2), ek.squeeze(-2)
        objective = _total(c, eps0, gamma, eps_k, exact=exact)
        iters = torch.full(out, 9, dtype=torch.long, device=device)
    X1 = ctx["X1"].expand(*out, K, d, d)
    cov = (L.unsqueeze(-1) / (eps_k * eps_k)).unsqueeze(-1).unsqueeze(-1) * X1
    m = K * (K - 1)
    return MechanismDesign(
        eps0=eps0, eps_k=eps_k, gamma=gamma, mean_noise_cov=cov,
        sdp_opt=ctx["s"].expand(*out, K), sdp_X=X1, sdp_gap=ctx["gap"].expand(*out, K),
        objective=objective, objective_eq12=_total(c, eps0, gamma, eps_k, exact=False),
        expected_kl=_total(c, eps0, gamma, eps_k, exact=True),
        mapping_p_true=torch.exp(eps0) / (torch.exp(eps0) + m),
        epsilon=eps, delta=dl.expand(out), lam=ctx["lam"], variant=variant, solver=solver,
        iterations=iters, trace=trace, fitted=fitted,
        counts=ctx["counts"], means=ctx["means"], covariances=ctx["cov"], _ctx=ctx)


def design_mechanism(X: torch.Tensor, y: torch.Tensor, num_classes: int, epsilon, delta,
                     variant: str = "as-published", solver: str = "dual", mask: torch.Tensor | None = None,
                     lam: float = 1e-3, max_iter: int = 50, tol: float = 1e-3,
                     generator: torch.Generator | None = None, kl_draws: int = 128,
                     sdp_tol: float = 1e-6) -> MechanismDesign:
    """Design the KL-optimal release of Liu, Scaglione & Peisert (2025) (Algorithm 1 and variants) for a batch of labeled datasets.

    Args:
        X: ``(..., N, d)`` features; y: ``(..., N)`` labels in ``[0, num_classes)``; mask: ``(..., N)`` bool for
            ragged N (True = real row).
        epsilon: float or tensor broadcastable against the batch shape ``...`` (e.g. ``(E, 1)`` over ``(T,)``
            trials sweeps E epsilons; the SDP is solved once per class regardless, reduction 1).
        delta: in (0, 1), float or broadcastable tensor.
        variant: ``"as-published"`` | ``"global"`` | ``"exact-kl"`` (module docstring).
        solver: ``"dual"`` | ``"cvxpylayers"`` for the covering SDP (23).
        lam: smoothing weight of the mapping (eq. 15). max_iter, tol: Algorithm 1's loop and early stop (Step 9).
        generator: for the fixed Wishart draws of the exact KL term (None: an internal generator seeded 0,
            so designs are deterministic; the global RNG is never touched).
        kl_draws: number of common-random-number Wishart draws (0 disables ``expected_kl`` and "exact-kl").
        sdp_tol: certified relative gap of the dual solver.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if solver not in ("dual", "cvxpylayers"):
        raise ValueError(f"solver must be 'dual' or 'cvxpylayers', got {solver!r}")
    check_epsilon(epsilon)
    check_delta(delta)
    if not (0 < lam < 1):
        raise ValueError(f"lam must lie in (0, 1), got {lam!r}")
    _check_loop_args(max_iter, kl_draws)
    if not torch.is_tensor(X) or X.dim() < 2:
        raise ValueError("X must be a tensor of shape (..., N, d)")
    _check_batch(epsilon, delta, X.shape[:-2])
    X = X.to(torch.float64)   # statistics, the SDP and the split search run in float64 (a certified 1e-6 SDP gap needs it)
    if not torch.is_tensor(y) or y.shape != X.shape[:-1]:
        raise ValueError(f"y must be a tensor of shape {tuple(X.shape[:-1])}, got "
                         f"{tuple(y.shape) if torch.is_tensor(y) else type(y).__name__}")
    if mask is not None and (not torch.is_tensor(mask) or mask.shape != y.shape or mask.dtype != torch.bool):
        raise ValueError(f"mask must be a bool tensor of shape {tuple(y.shape)}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}")
    check_finite(X, "X", mask)
    check_labels(y, num_classes, mask)
    d = X.shape[-1]
    K = num_classes
    V, vmask, counts, _ = label_flip_differences(X, y, K, mask)
    if bool((counts < d + 1).any()):
        raise ValueError(f"every class needs at least d + 1 = {d + 1} points (to have an invertible "
                         f"covariance); smallest class has {int(counts.min().item())}")
    from ..mixture import fit_labeled

    fitted = fit_labeled(X, y, num_classes, mask=mask, min_count=d + 1)       # eq. (2), one implementation
    counts, means = fitted.counts.to(X.dtype), fitted.means
    cov = 0.5 * (fitted.covariances + fitted.covariances.transpose(-1, -2))
    chol, info = torch.linalg.cholesky_ex(cov)
    if bool((info != 0).any()):
        raise ValueError("a class covariance is singular (degenerate features); cannot design the mechanism")
    A = torch.cholesky_inverse(chol)
    res = solve_covering_sdp(V, A, vmask, solver=solver, tol=sdp_tol)
    dtype, device = X.dtype, X.device
    N = counts.sum(-1)
    ctx = {
        "data": (X, y, mask),  # the records, by reference: what design= is checked against (dispatch._check_design)
        "K": K, "d": d, "lam": float(lam), "dtype": dtype, "device": device, "batch": counts.shape[:-1],
        "counts": counts, "means": means, "cov": cov, "tr_inv": A.diagonal(dim1=-2, dim2=-1).sum(-1),
        "s": res.opt, "X1": res.X, "gap": res.gap,
        "wk": (1 - lam) * counts / N.unsqueeze(-1) + lam / K,            # E_f[pi~_k]
        "nb_kl0": _neighbour_kl_sum(counts), "unif_kl0": _uniform_composition_kl(counts),
        "const12": 0.5 * (d * math.log(2) + _mvdigamma((d + 1) / 2, d)),
        "max_iter": max_iter, "tol": tol, "eigs0": None, "table": None,
    }
    if kl_draws > 0:
        gen = generator
        if gen is None:
            gen = torch.Generator(device=device)
            gen.manual_seed(0)
        ctx["eigs0"] = _wishart_eigs(cov, kl_draws, gen)
    return _design_from_ctx(ctx, epsilon, delta, variant, fitted, solver)
