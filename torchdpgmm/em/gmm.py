"""Batched EM for full-covariance Gaussian mixtures (unlabelled data).

One call fits many datasets (leading dims ``...``) and many restarts at once. Ragged datasets are padded
and described by a boolean ``mask`` of shape ``(..., N)``. Responsibilities are computed in log space
(log-sum-exp), covariances are regularised by ``reg_covar * I`` exactly as scikit-learn's
``GaussianMixture`` does, so with the same initial parameters both produce the same iterates.

E-step: ``log r_ik = log pi_k + log N(x_i | mu_k, Sigma_k) - log sum_j pi_j N(x_i | mu_j, Sigma_j)``.
M-step (MLE): ``N_k = sum_i r_ik``, ``pi_k = N_k / n``, ``mu_k = sum_i r_ik x_i / N_k``,
``Sigma_k = sum_i r_ik (x_i - mu_k)(x_i - mu_k)^T / N_k + reg I``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm.mixture import one_hot

__all__ = [
    "GMMFit",
    "gaussian_log_prob",
    "e_step",
    "m_step",
    "mixture_log_likelihood",
    "kmeans_plusplus",
    "kmeans",
    "init_from_centers",
    "fit_gmm",
    "check_data",
    "finite_rows",
    "private_data",
]

_LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class GMMFit:
    """Fitted mixture: ``weights (..., K)``, ``means (..., K, d)``, ``covariances (..., K, d, d)``,
    ``loglik (...)`` the total log-likelihood (natural log) over the unmasked points under the returned
    parameters, ``n_iter`` the number of EM iterations run, and (for DP fits) the privacy record."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    loglik: torch.Tensor
    n_iter: int = 0
    privacy: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def loglik_mean(self) -> torch.Tensor:
        """``loglik / n``; a fit that does not return its number of records ``n`` (SAGMM under add/remove adjacency,
        where it is private) refuses instead of returning the total."""
        n = self.extras.get("n")
        if n is None:
            raise ValueError("this fit does not return its number of records (private under its adjacency): divide "
                             ".loglik by your own count")
        return self.loglik / n


def check_data(X: torch.Tensor, num_components: int, mask: torch.Tensor | None = None, *,
               private: bool = False) -> torch.Tensor:
    """Validate ``X (..., N, d)`` and ``mask (..., N)``; return the boolean mask (all True if None).

    The non-private fits also refuse a non-finite value in an unmasked row and a dataset with fewer than
    ``num_components`` unmasked rows. The DP entry points pass ``private=True``: only public facts (types, shapes,
    ``num_components``) are checked, never a value or the count, and they run at every count, 0 included (SAGMM's
    number of records is private under add/remove adjacency, and the replace-one fits, where it is public, need no
    ``K`` records either); they read a non-finite row as the origin (:func:`finite_rows`)."""
    from torchdpgmm._validation import check_finite

    if not torch.is_tensor(X):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.dim() < 2:
        raise ValueError(f"X must have shape (..., N, d), got {tuple(X.shape)}")
    if not X.dtype.is_floating_point:
        raise TypeError(f"X must be floating point, got {X.dtype}")
    if not isinstance(num_components, int) or isinstance(num_components, bool) or num_components < 1:
        raise ValueError(f"num_components must be a positive int, got {num_components!r}")
    if mask is None:
        mask = torch.ones(X.shape[:-1], dtype=torch.bool, device=X.device)
    else:
        if mask.shape != X.shape[:-1]:
            raise ValueError(f"mask must have shape {tuple(X.shape[:-1])}, got {tuple(mask.shape)}")
        mask = mask.to(torch.bool)
    if private:
        return mask
    check_finite(X, "X", mask)
    if bool((mask.sum(-1) < num_components).any()):
        raise ValueError(f"every dataset needs at least num_components={num_components} unmasked points")
    return mask


def private_data(X: torch.Tensor, num_components: int, mask: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """How every DP fit reads its data: ``(X, mask)`` after :func:`check_data` with ``private=True`` (public facts
    only: any count, any value), ``X`` in float64 whatever its floating dtype (the fits compute, noise and return in
    float64: float32 sums of 2^24 and more records do not move by one record's bound, so a stated sensitivity would
    not hold; a float32 X was fitted in float32 until 2026-12-02) with a record holding a non-finite value read as the
    origin (:func:`finite_rows`, no refusal)."""
    mask = check_data(X, num_components, mask, private=True)
    return finite_rows(X.to(torch.float64)), mask


def finite_rows(X: torch.Tensor) -> torch.Tensor:
    """``X (..., N, d)`` with every row that holds a NaN or an infinity replaced by the origin: a map of each record
    alone (the DP fits' reading of a record they cannot use; an error would reveal that it exists, and dropping it
    would change the public count of the replace-one fits). No branch, no host read."""
    return torch.where(torch.isfinite(X).all(-1, keepdim=True), X, torch.zeros((), dtype=X.dtype, device=X.device))


def gaussian_log_prob(X: torch.Tensor, means: torch.Tensor, covariances: torch.Tensor,
                      center: torch.Tensor | None = None) -> torch.Tensor:
    """``log N(x_i | mu_k, Sigma_k)`` for ``X (..., N, d)``, ``means (..., K, d)``, ``covariances
    (..., K, d, d)``; returns ``(..., N, K)``.

    The Mahalanobis term is expanded as a quadratic form so that all K components are two batched
    matrix products with outputs of shape ``(..., N, K)``:
    ``(z - m)^T P (z - m) = vec(z z^T) . vec(P) - 2 z^T P m + m^T P m`` with ``P = Sigma^{-1}``,
    ``z = x - xbar``, ``m = mu - xbar`` (``xbar`` the dataset mean, which keeps the cancellation small).
    ``P`` and ``log|Sigma|`` come from a batched Cholesky factorisation. ``center (..., 1, d)`` overrides
    ``xbar`` (any point works; a central one is most accurate)."""
    d = X.shape[-1]
    L = torch.linalg.cholesky(covariances)  # (..., K, d, d)
    P = torch.cholesky_inverse(L)  # (..., K, d, d)
    xbar = X.mean(-2, keepdim=True) if center is None else center
    Z = X - xbar
    M = means - xbar  # (..., K, d)
    ZZ = (Z.unsqueeze(-1) * Z.unsqueeze(-2)).reshape(*Z.shape[:-1], d * d)  # (..., N, d^2)
    Pf = P.reshape(*P.shape[:-2], d * d)  # (..., K, d^2)
    PM = (P @ M.unsqueeze(-1)).squeeze(-1)  # (..., K, d)
    quad = ZZ @ Pf.transpose(-1, -2) - 2.0 * (Z @ PM.transpose(-1, -2))  # (..., N, K)
    mPm = (M * PM).sum(-1)  # (..., K)
    maha = (quad + mPm.unsqueeze(-2)).clamp(min=0.0)
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)  # (..., K)
    return -0.5 * (d * _LOG_2PI + logdet.unsqueeze(-2) + maha)


def _pairs(d: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Upper-triangle index pairs (i <= j) and the 0/1 matrix ``E (d(d+1)/2, d*d)`` that scatters them back
    to a symmetric, flattened d x d matrix."""
    iu = torch.triu_indices(d, d, device=device)
    E = torch.zeros(iu.shape[1], d * d, device=device, dtype=torch.float64)
    t = torch.arange(iu.shape[1], device=device)
    E[t, iu[0] * d + iu[1]] = 1.0
    E[t, iu[1] * d + iu[0]] = 1.0
    return iu[0], iu[1], E


def _features(X: torch.Tensor, mask: torch.Tensor | None):
    """Per-row features ``F = [z_i z_j (i <= j), z, m]`` (``z = x - xbar``; ``m`` = 1 for real rows and 0
    for padding, where also z = 0), as ``F (..., N, f)`` and its transpose ``Ft (..., f, N)``, and ``xbar``
    (the masked mean). The joint log-densities of all K components are then one product ``C @ Ft`` and
    the M-step's sufficient statistics one product ``resp @ F``."""
    if mask is not None:
        mf = mask.to(X.dtype).unsqueeze(-1)
        X = X * mf
        xbar = X.sum(-2, keepdim=True) / mf.sum(-2, keepdim=True).clamp(min=1.0)
        Z = (X - xbar) * mf
    else:
        mf = torch.ones(*X.shape[:-1], 1, dtype=X.dtype, device=X.device)
        xbar = X.mean(-2, keepdim=True)
        Z = X - xbar
    i0, i1, _ = _pairs(X.shape[-1], X.device)
    F = torch.cat([Z[..., i0] * Z[..., i1], Z, mf], dim=-1)
    return F, F.transpose(-1, -2).contiguous(), xbar


def _factor(covariances: torch.Tensor, fallback_var: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Cholesky factor ``L`` and inverse ``P`` of ``covariances (..., d, d)``. Without ``fallback_var``
    ``torch.linalg.cholesky`` (raises on a matrix that is not positive definite). With it (a DP fit's noise-free block
    fits): ``cholesky_ex`` and, for every matrix whose factor fails (not positive definite, a zero or non-finite
    pivot, a non-finite inverse), the factor of the data-independent ``fallback_var * I`` instead, by ``torch.where``:
    no raise and no host read on any input, and the factors that succeed are used unchanged (bit-identical)."""
    if fallback_var is None:
        L = torch.linalg.cholesky(covariances)
        return L, torch.cholesky_inverse(L)
    L, info = torch.linalg.cholesky_ex(covariances)
    eye = torch.eye(covariances.shape[-1], dtype=covariances.dtype, device=covariances.device)
    diag = torch.diagonal(L, dim1=-2, dim2=-1)
    ok = ((info == 0) & torch.isfinite(L).flatten(-2).all(-1) & (diag > 0).all(-1))[..., None, None]
    L = torch.where(ok, L, eye * math.sqrt(fallback_var))  # cholesky_inverse raises on a zero pivot
    P = torch.cholesky_inverse(L)
    ok = torch.isfinite(P).flatten(-2).all(-1)[..., None, None]
    return torch.where(ok, L, eye * math.sqrt(fallback_var)), torch.where(ok, P, eye / fallback_var)


def _joint_pre(Ft, weights, M, covariances, fallback_var: float | None = None):
    """``log pi_k + log N(x_n | mu_k, Sigma_k)`` as ``(..., K, N)`` = ``C @ Ft`` (``M`` = means - xbar):
    ``-1/2 (z-m)^T P (z-m) = sum_{i<=j} c_ij z_i z_j + (P m)^T z - 1/2 m^T P m`` with ``c_ii = -P_ii/2``,
    ``c_ij = -P_ij`` (i < j). Padded rows (all-zero features) give 0. ``fallback_var``: :func:`_factor`."""
    d = M.shape[-1]
    L, P = _factor(covariances, fallback_var)  # P = Sigma^{-1}
    PM = (P @ M.unsqueeze(-1)).squeeze(-1)  # (..., K, d)
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    const = torch.log(weights) - 0.5 * (d * _LOG_2PI + logdet + (M * PM).sum(-1))  # (..., K)
    i0, i1, _ = _pairs(d, M.device)
    quad = -P[..., i0, i1] * torch.where(i0 == i1, 0.5, 1.0).to(P.dtype)
    C = torch.cat([quad, PM, const.unsqueeze(-1)], dim=-1)  # (..., K, f)
    return C @ Ft


def _loglik_pre(joint, mf):
    """Total log-likelihood from K-major joint log-densities; ``mf (..., N)`` float mask."""
    return (torch.logsumexp(joint, dim=-2) * mf).sum(-1)


def _m_step_pre(F, resp, d, reg_covar):
    """M-step from ``resp (..., K, N)``: ``G = resp @ F`` holds ``(S2 upper triangle, S1, N_k)``; padded
    rows have all-zero features so they drop out. Means are relative to xbar."""
    G = resp @ F  # (..., K, f)
    _, _, E = _pairs(d, F.device)
    nu = E.shape[0]
    eps = torch.finfo(resp.dtype).eps
    Nk = G[..., -1] + 10.0 * eps
    mc = G[..., nu:nu + d] / Nk.unsqueeze(-1)
    S2 = (G[..., :nu] @ E.to(F.dtype)).reshape(*Nk.shape, d, d) / Nk[..., None, None]
    cov = S2 - mc.unsqueeze(-1) * mc.unsqueeze(-2)
    cov = 0.5 * (cov + cov.transpose(-1, -2)) + reg_covar * torch.eye(d, dtype=F.dtype, device=F.device)
    return Nk / Nk.sum(-1, keepdim=True), mc, cov


def e_step(
    X: torch.Tensor,
    weights: torch.Tensor,
    means: torch.Tensor,
    covariances: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log responsibilities ``(..., N, K)`` and total log-likelihood ``(...)`` over unmasked points.

    Masked rows get responsibilities ``-inf`` in log space (zero weight)."""
    _, Ft, xbar = _features(X, mask)
    joint = _joint_pre(Ft, weights, means - xbar, covariances).transpose(-1, -2)
    lse = torch.logsumexp(joint, dim=-1)
    log_resp = joint - lse.unsqueeze(-1)
    if mask is not None:
        lse = torch.where(mask, lse, torch.zeros_like(lse))
        log_resp = torch.where(mask.unsqueeze(-1), log_resp, torch.full_like(log_resp, -math.inf))
    return log_resp, lse.sum(-1)


def mixture_log_likelihood(X, weights, means, covariances, mask=None) -> torch.Tensor:
    """Total log-likelihood ``sum_i log sum_k pi_k N(x_i | mu_k, Sigma_k)`` over unmasked rows, in the wider of the
    data's and the parameters' dtypes (a DP fit's parameters are float64 whatever X's dtype)."""
    dt = torch.promote_types(X.dtype, means.dtype)
    return e_step(X.to(dt), weights.to(dt), means.to(dt), covariances.to(dt), mask)[1]


def weighted_moments(X: torch.Tensor, resp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Expected sufficient statistics ``N_k (..., K)``, ``S1_k = sum r x (..., K, d)``,
    ``S2_k = sum r x x^T (..., K, d, d)`` (masked rows must carry zero responsibility)."""
    Nk = resp.sum(-2)
    S1 = torch.einsum("...nk,...nd->...kd", resp, X)
    S2 = torch.einsum("...nk,...nd,...ne->...kde", resp, X, X)
    return Nk, S1, S2


def m_step(
    X: torch.Tensor,
    resp: torch.Tensor,
    mask: torch.Tensor | None = None,
    reg_covar: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MLE M-step from responsibilities ``resp (..., N, K)`` (not log), as scikit-learn's
    ``_estimate_gaussian_parameters``: ``N_k + 10 eps``, ``Sigma_k = sum r (x - mu)(x - mu)^T / N_k +
    reg I``, weights ``N_k / sum N_k``.

    The scatter is accumulated as ``sum r z z^T`` with ``z = x - xbar`` (``xbar`` the dataset mean) by
    two batched matrix products and then centred, ``S2/N_k - m m^T``: shifting by ``xbar`` first keeps
    the cancellation small."""
    F, _, xbar = _features(X, mask)
    if mask is not None:
        resp = resp * mask.unsqueeze(-1).to(resp.dtype)
    weights, mc, cov = _m_step_pre(F, resp.transpose(-1, -2), X.shape[-1], reg_covar)
    return weights, mc + xbar, cov


def _batched_multinomial(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One categorical draw per row of ``probs (..., N)`` -> ``(...,)`` indices."""
    flat = probs.reshape(-1, probs.shape[-1])
    idx = torch.multinomial(flat, 1, generator=generator).squeeze(-1)
    return idx.reshape(probs.shape[:-1])


def kmeans_plusplus(
    X: torch.Tensor,
    num_components: int,
    mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """k-means++ seeding (Arthur & Vassilvitskii 2007), batched: first centre uniform among unmasked
    points, then each next centre drawn with probability proportional to the squared distance to the
    nearest chosen centre. Returns ``(..., K, d)``.

    A dataset with fewer than K unmasked points repeats centres (the draw falls back to uniform over its points); one
    with none draws over all slots and gets zero centres, so that the DP fits that start here run at every count
    without a branch on it."""
    if X.shape[-2] == 0:  # no slot at all (a public shape): zero centres, as for a dataset with no unmasked point
        return X.new_zeros(*X.shape[:-2], num_components, X.shape[-1])
    if mask is None:
        mask = torch.ones(X.shape[:-1], dtype=torch.bool, device=X.device)
    w = mask.to(X.dtype)
    some = w.sum(-1, keepdim=True) > 0  # (..., 1): False only for a dataset with no unmasked point
    w = torch.where(some, w, torch.ones_like(w))  # multinomial refuses an all-zero row
    idx = _batched_multinomial(w, generator)
    centres = [torch.gather(X, -2, idx[..., None, None].expand(*idx.shape, 1, X.shape[-1]))]
    d2 = ((X - centres[0]) ** 2).sum(-1)
    for _ in range(1, num_components):
        p = d2 * w
        # all-zero rows (duplicate points): fall back to uniform over unmasked points
        p = torch.where(p.sum(-1, keepdim=True) > 0, p, w)
        idx = _batched_multinomial(p, generator)
        c = torch.gather(X, -2, idx[..., None, None].expand(*idx.shape, 1, X.shape[-1]))
        centres.append(c)
        d2 = torch.minimum(d2, ((X - c) ** 2).sum(-1))
    return torch.where(some.unsqueeze(-1), torch.cat(centres, dim=-2), torch.zeros((), dtype=X.dtype, device=X.device))


def _nearest(X: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    d2 = torch.cdist(X, centres) if X.dtype == torch.float64 else torch.cdist(X, centres)
    return d2.argmin(-1)


def kmeans(
    X: torch.Tensor,
    centres: torch.Tensor,
    mask: torch.Tensor | None = None,
    iters: int = 10,
) -> torch.Tensor:
    """Batched Lloyd iterations from ``centres (..., K, d)``; empty clusters keep their centre."""
    K = centres.shape[-2]
    for _ in range(iters):
        lab = _nearest(X, centres)
        onehot = one_hot(lab, K, X.dtype)
        if mask is not None:
            onehot = onehot * mask.unsqueeze(-1).to(X.dtype)
        cnt = onehot.sum(-2)
        s = torch.einsum("...nk,...nd->...kd", onehot, X)
        new = s / cnt.clamp(min=1.0).unsqueeze(-1)
        centres = torch.where((cnt > 0).unsqueeze(-1), new, centres)
    return centres


def init_from_centers(
    X: torch.Tensor,
    centres: torch.Tensor,
    mask: torch.Tensor | None = None,
    reg_covar: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Initial parameters from hard assignment to the nearest centre (scikit-learn's ``init_params=
    'kmeans'`` does the same with its own k-means labels)."""
    K = centres.shape[-2]
    resp = one_hot(_nearest(X, centres), K, X.dtype)
    return m_step(X, resp, mask, reg_covar)


def _select_best(t: torch.Tensor, best: torch.Tensor, batch_ndim: int) -> torch.Tensor:
    """Pick restart ``best (...)`` along the restart dim placed at position ``batch_ndim``."""
    idx = best.reshape(*best.shape, *([1] * (t.dim() - batch_ndim)))
    idx = idx.expand(*best.shape, 1, *t.shape[batch_ndim + 1:])
    return torch.gather(t, batch_ndim, idx).squeeze(batch_ndim)


def _gmm_start(Xr, mr, K, init, init_params, kmeans_iter, reg_covar, generator, batch_ndim):
    """:func:`fit_gmm`'s start for ``Xr (..., n_init, N, d)``: ``init_params`` broadcast over the restarts, k-means++
    and Lloyd steps (hard assignment), or random responsibilities."""
    d = Xr.shape[-1]
    lead = Xr.shape[:-2]
    if init_params is not None:
        w0, m0, c0 = (torch.as_tensor(t, dtype=Xr.dtype, device=Xr.device) for t in init_params)
        weights = w0.unsqueeze(batch_ndim).expand(*lead, K) if w0.dim() > 1 else w0.expand(*lead, K)
        means = m0.unsqueeze(batch_ndim).expand(*lead, K, d) if m0.dim() > 2 else m0.expand(*lead, K, d)
        covs = c0.unsqueeze(batch_ndim).expand(*lead, K, d, d) if c0.dim() > 3 else c0.expand(*lead, K, d, d)
        return weights, means, covs
    if init == "kmeans++":
        centres = kmeans(Xr, kmeans_plusplus(Xr, K, mr, generator), mr, kmeans_iter)
        return init_from_centers(Xr, centres, mr, reg_covar)
    u = torch.rand(*Xr.shape[:-1], K, dtype=Xr.dtype, device=Xr.device, generator=generator)
    return m_step(Xr, u / u.sum(-1, keepdim=True), mr, reg_covar)


def fit_gmm(
    X: torch.Tensor,
    num_components: int,
    *,
    mask: torch.Tensor | None = None,
    max_iter: int = 100,
    tol: float | None = None,
    reg_covar: float = 1e-6,
    n_init: int = 1,
    init: str = "kmeans++",
    kmeans_iter: int = 10,
    init_params: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
    _private: bool = False,
    _fallback_var: float = 1.0,
) -> GMMFit:
    """Fit full-covariance GMMs by EM to every dataset in ``X (..., N, d)`` in one batched call.

    Args:
        X: data, padded to a common N; ``mask (..., N)`` marks the real rows.
        num_components: K.
        max_iter: number of EM iterations (each = E-step then M-step). With ``tol=None`` exactly
            ``max_iter`` iterations run for every dataset, without any host synchronisation.
        tol: if given, a dataset stops updating once its mean log-likelihood changes by less than ``tol``
            (scikit-learn's rule); the loop ends when all have stopped (one host sync per iteration).
        reg_covar: added to covariance diagonals (as scikit-learn).
        n_init: restarts per dataset, fitted in the same batch; the best log-likelihood is returned.
        init: ``"kmeans++"`` (k-means++ seeding then ``kmeans_iter`` Lloyd steps, hard assignment) or
            ``"random"`` (random responsibilities). Ignored when ``init_params`` is given.
        init_params: ``(weights, means, covariances)`` to start from (broadcast over restarts).
        generator: the only source of randomness.
        _private: internal, for a DP fit's own use (SAGMM's block fits, on finite records): only public facts are
            checked (:func:`check_data` with ``private=True``), no host read of a count or a value; it adds no
            noise, and ``tol`` (a host read per iteration) is refused with it. Nothing in such a fit raises on a value:
            a covariance whose Cholesky factor fails (a far record alone in a component: ``S2/N_k - m m^T`` loses its
            ``reg_covar`` to cancellation) is replaced for that E-step by ``_fallback_var * I`` (public), and a row
            whose joint densities overflow is shared uniformly (:func:`_factor`; both by ``torch.where``).

    Returns:
        :class:`GMMFit` with ``loglik`` the total log-likelihood under the returned parameters.
    """
    if _private and tol is not None:
        raise ValueError("tol reads the fit's log-likelihood back every iteration: not inside a DP fit (_private)")
    mask = check_data(X, num_components, mask, private=_private)
    if not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative int, got {max_iter!r}")
    if not isinstance(n_init, int) or n_init < 1:
        raise ValueError(f"n_init must be a positive int, got {n_init!r}")
    if init not in ("kmeans++", "random"):
        raise ValueError(f"init must be 'kmeans++' or 'random', got {init!r}")
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))  # padding never reaches the sums
    batch_ndim = X.dim() - 2
    K = num_components
    # restarts become one more batch dimension, right after the user's batch dims
    Xr = X.unsqueeze(batch_ndim).expand(*X.shape[:-2], n_init, *X.shape[-2:])
    mr = mask.unsqueeze(batch_ndim).expand(*mask.shape[:-1], n_init, mask.shape[-1])
    weights, means, covs = _gmm_start(Xr, mr, K, init, init_params, kmeans_iter, reg_covar, generator, batch_ndim)
    n = mr.sum(-1).to(X.dtype)
    prev = torch.full(Xr.shape[:-2], -math.inf, dtype=X.dtype, device=X.device)
    done = torch.zeros(Xr.shape[:-2], dtype=torch.bool, device=X.device)
    it = 0
    F, Ft, xbar = _features(Xr, mr)  # computed once: every E- and M-step reuses them
    mf = mr.to(X.dtype)
    d = X.shape[-1]
    means = means - xbar
    fb = float(_fallback_var) if _private else None
    for it in range(1, max_iter + 1):
        joint = _joint_pre(Ft, weights, means, covs, fb)  # (..., K, N)
        resp = torch.softmax(joint, dim=-2)  # padded rows: uniform, but their features are 0
        if fb is not None:  # a DP block fit: a row whose densities overflowed (NaN) is shared uniformly, no read
            resp = torch.where(torch.isfinite(resp).all(-2, keepdim=True), resp, torch.full_like(resp, 1.0 / K))
        w_new, m_new, c_new = _m_step_pre(F, resp, d, reg_covar)
        if tol is None:
            weights, means, covs = w_new, m_new, c_new
            continue
        keep = done
        weights = torch.where(keep[..., None], weights, w_new)
        means = torch.where(keep[..., None, None], means, m_new)
        covs = torch.where(keep[..., None, None, None], covs, c_new)
        cur = _loglik_pre(joint, mf) / n
        done = done | ((cur - prev).abs() < tol)
        prev = cur
        if bool(done.all()):
            break
    ll = _loglik_pre(_joint_pre(Ft, weights, means, covs, fb), mf)
    means = means + xbar
    best = ll.argmax(-1)  # (...,)
    weights = _select_best(weights, best, batch_ndim)
    means = _select_best(means, best, batch_ndim)
    covs = _select_best(covs, best, batch_ndim)
    ll = torch.gather(ll, -1, best.unsqueeze(-1)).squeeze(-1)
    return GMMFit(weights, means, covs, ll, n_iter=it, extras={"n": mask.sum(-1).to(X.dtype)})
