"""Multivariate skew-normal mixtures (MSNM) in the ``(xi, Lambda, eta)`` parametrisation of the DP-MSNM paper (2021).

Density of one component (the DP-MSNM paper (2021) eq. 1; its eq. 2 has a typo, ``phi_d(x; xi, Sigma, alpha)`` should read
``phi_d(x; xi, Sigma)``):

    f(x) = 2 phi_d(x; xi, Sigma) Phi(alpha^T omega^{-1} (x - xi)),   omega = diag(Sigma)^{1/2}.

With ``delta = Sigma_bar alpha / sqrt(1 + alpha^T Sigma_bar alpha)`` (``Sigma_bar = omega^-1 Sigma omega^-1``),
``eta = omega delta`` and ``Lambda = Sigma - eta eta^T`` (eq. 7), the stochastic representation is
``X = xi + eta tau + Lambda^{1/2} Z``, ``tau = |N(0,1)|``, ``Z ~ N(0, I)`` (eq. 6), and

    alpha = omega Lambda^{-1} eta / sqrt(1 + eta^T Lambda^{-1} eta),
    alpha^T omega^{-1}(x - xi) = mu_tau / sigma_tau,
    mu_tau = eta^T Lambda^{-1}(x - xi) / (1 + eta^T Lambda^{-1} eta),  sigma_tau^2 = 1 / (1 + eta^T Lambda^{-1} eta).

E-step (the DP-MSNM paper (2021), "E-step"): ``r0`` the responsibilities, ``r1 = mu_tau + sigma_tau Delta``,
``r2 = mu_tau^2 + sigma_tau^2 + mu_tau sigma_tau Delta``, ``Delta = phi(m)/Phi(m)``, ``m = mu_tau/sigma_tau``;
``Delta`` is computed as ``exp(log phi(m) - log Phi(m))`` with ``torch.special.log_ndtr`` because Phi
underflows for very negative ``m``.

M-step eqs. (8)-(10). Eq. (9) as printed divides by ``sum_i r0_ik``; maximising the Q function in ``eta``
gives ``sum_i r0_ik r2_ik`` (the proof of Lemma 3 also uses that denominator), which is what we use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm.em._common import information_criteria, num_params_msnm
from torchdpgmm.em.gmm import check_data, kmeans, kmeans_plusplus, _select_best
from torchdpgmm.mixture import one_hot

__all__ = [
    "SkewNormalMixtureFit",
    "to_centred_params",
    "to_lambda_eta",
    "skew_normal_component_log_prob",
    "skew_normal_mixture_log_prob",
    "sample_skew_normal_mixture",
    "msnm_e_step",
    "msnm_m_step",
    "init_skew_normal_params",
    "fit_skew_normal_mixture",
]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def to_centred_params(xi: torch.Tensor, Lambda: torch.Tensor, eta: torch.Tensor):
    """``(xi, Lambda, eta) -> (xi, Sigma, alpha)`` with ``Sigma = Lambda + eta eta^T`` (eq. 7) and
    ``alpha = omega Lambda^{-1} eta / sqrt(1 + eta^T Lambda^{-1} eta)`` (from eq. 5)."""
    Sigma = Lambda + eta.unsqueeze(-1) * eta.unsqueeze(-2)
    Linv_eta = torch.linalg.solve(Lambda, eta.unsqueeze(-1)).squeeze(-1)
    c = (eta * Linv_eta).sum(-1, keepdim=True)
    omega = torch.sqrt(torch.diagonal(Sigma, dim1=-2, dim2=-1))
    alpha = omega * Linv_eta / torch.sqrt(1.0 + c)
    return xi, Sigma, alpha


def to_lambda_eta(xi: torch.Tensor, Sigma: torch.Tensor, alpha: torch.Tensor):
    """``(xi, Sigma, alpha) -> (xi, Lambda, eta)``: ``delta = Sigma_bar alpha / sqrt(1 + alpha^T Sigma_bar
    alpha)`` (eq. 5), ``eta = omega delta``, ``Lambda = Sigma - eta eta^T`` (eq. 7)."""
    omega = torch.sqrt(torch.diagonal(Sigma, dim1=-2, dim2=-1))
    Sbar = Sigma / (omega.unsqueeze(-1) * omega.unsqueeze(-2))
    Sa = (Sbar @ alpha.unsqueeze(-1)).squeeze(-1)
    delta = Sa / torch.sqrt(1.0 + (alpha * Sa).sum(-1, keepdim=True))
    eta = omega * delta
    Lambda = Sigma - eta.unsqueeze(-1) * eta.unsqueeze(-2)
    return xi, Lambda, eta


def _component_terms(X, xi, Lambda, eta, weights=None):
    """Shared pieces, all in the ``(..., N, K)`` layout: ``log f_k(x_i)`` (plus ``log pi_k`` when
    ``weights`` are given), ``mu_tau``, ``sigma_tau (..., K)``, ``m = mu_tau / sigma_tau``, ``log Phi(m)``
    and ``log phi(m) - log Phi(m)``.

    The quadratic forms are one batched matrix product, as in the GMM E-step: with ``P = Lambda^-1`` (from
    a Cholesky factor), ``z = x - xbar`` and ``m_k = xi_k - xbar`` (``xbar`` the rows' mean, to keep the
    cancellation small), the features ``[vec(z z^T), z, 1]`` of each row times per-component coefficients
    give ``A = const_k - (x - xi)^T P (x - xi) / 2`` and ``v = eta^T P (x - xi)``. With ``c = eta^T P eta``
    and Sherman-Morrison for ``Sigma = Lambda + eta eta^T``, eq. (1) becomes
    ``log f = A + m^2/2 + log Phi(m)`` with ``m = v / sqrt(1 + c) = alpha^T omega^-1 (x - xi)``,
    ``const_k = log 2 - (d log 2 pi + log|Lambda| + log(1 + c))/2``."""
    d = X.shape[-1]
    L = torch.linalg.cholesky(Lambda)  # (..., K, d, d)
    P = torch.cholesky_inverse(L)
    xbar = X.mean(-2, keepdim=True)
    Z = X - xbar  # (..., N, d)
    M = xi - xbar  # (..., K, d)
    F = torch.cat([(Z.unsqueeze(-1) * Z.unsqueeze(-2)).reshape(*Z.shape[:-1], d * d), Z,
                   torch.ones_like(Z[..., :1])], dim=-1)  # (..., N, d^2 + d + 1)
    PM = (P @ M.unsqueeze(-1)).squeeze(-1)  # (..., K, d)
    a = (P @ eta.unsqueeze(-1)).squeeze(-1)  # Lambda^-1 eta, (..., K, d)
    c = (eta * a).sum(-1)  # eta^T Lambda^-1 eta, (..., K)
    const = _LOG_2 - 0.5 * (d * _LOG_2PI + 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
                            + torch.log1p(c) + (M * PM).sum(-1))
    if weights is not None:
        const = const + torch.log(weights)
    coef_A = torch.cat([-0.5 * P.reshape(*P.shape[:-2], d * d), PM, const.unsqueeze(-1)], -1)
    coef_v = torch.cat([torch.zeros_like(P.reshape(*P.shape[:-2], d * d)), a, -(M * a).sum(-1, keepdim=True)], -1)
    Av = F @ torch.cat([coef_A, coef_v], -2).transpose(-1, -2)  # (..., N, 2K)
    K = xi.shape[-2]
    A, v = Av[..., :K], Av[..., K:]
    sig = torch.rsqrt(1.0 + c)  # sigma_tau, (..., K)
    m = v * sig.unsqueeze(-2)
    log_Phi = torch.special.log_ndtr(m)
    half_m2 = 0.5 * m * m
    logf = A + half_m2 + log_Phi
    log_ratio = -half_m2 - 0.5 * _LOG_2PI - log_Phi  # log(phi(m) / Phi(m))
    return logf, m * sig.unsqueeze(-2), sig, m, log_Phi, log_ratio


def skew_normal_component_log_prob(X, xi, Lambda, eta) -> torch.Tensor:
    """``log f_MSN(x_i; theta_k)`` for ``X (..., N, d)`` and components ``(..., K, ...)`` -> ``(..., N, K)``."""
    return _component_terms(X, xi, Lambda, eta)[0]


def skew_normal_mixture_log_prob(X, weights, xi, Lambda, eta) -> torch.Tensor:
    """``log sum_k pi_k f_MSN(x_i; theta_k)`` -> ``(..., N)`` (the DP-MSNM paper (2021) eq. 1)."""
    return torch.logsumexp(skew_normal_component_log_prob(X, xi, Lambda, eta) + torch.log(weights).unsqueeze(-2), -1)


def sample_skew_normal_mixture(
    n: int,
    weights: torch.Tensor,
    xi: torch.Tensor,
    Lambda: torch.Tensor,
    eta: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` points per batch element by the stochastic representation ``x = xi_k + eta_k tau +
    Lambda_k^{1/2} z`` (eq. 6), ``tau = |N(0,1)|``, component ``k ~ pi``. Returns ``(x (..., n, d),
    labels (..., n))``."""
    batch = weights.shape[:-1]
    K = weights.shape[-1]
    d = xi.shape[-1]
    flatw = weights.reshape(-1, K)
    lab = torch.multinomial(flatw, n, replacement=True, generator=generator).reshape(*batch, n)
    idx = lab[..., None].expand(*batch, n, d)
    xi_n = torch.gather(xi, -2, idx)
    eta_n = torch.gather(eta, -2, idx)
    L = torch.linalg.cholesky(Lambda)
    L_n = torch.gather(L, -3, lab[..., None, None].expand(*batch, n, d, d))
    tau = torch.randn(*batch, n, 1, dtype=xi.dtype, device=xi.device, generator=generator).abs()
    z = torch.randn(*batch, n, d, 1, dtype=xi.dtype, device=xi.device, generator=generator)
    x = xi_n + eta_n * tau + (L_n @ z).squeeze(-1)
    return x, lab


# Asymptotic series of m + phi(m)/Phi(m) for m -> -inf: with z = -m, u = 1/z^2,
# phi(m)/Phi(m) = z * sum_j c_j u^j (inverse of the Mills-ratio series), c = 1, 1, -2, 10, -74, ...
_MILLS_INV = (1.0, 1.0, -2.0, 10.0, -74.0, 706.0, -8162.0, 110410.0, -1708394.0, 29752066.0)
_TAIL = 20.0


def truncated_normal_moment_terms(m: torch.Tensor, log_Phi: torch.Tensor | None = None,
                                  log_ratio: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = m + Delta(m)`` and ``g = 1 + m h`` with ``Delta = phi(m)/Phi(m)``, accurate for all ``m``.

    For a normal ``N(mu, s^2)`` truncated to ``[0, inf)`` and ``m = mu/s``: ``E tau = s h`` and
    ``E tau^2 = s^2 g``, i.e. ``r1 = sigma_tau h`` and ``r2 = sigma_tau^2 g``. ``Delta`` comes from
    ``log phi(m) - log_ndtr(m)`` (Phi underflows; pass ``log_Phi`` or that difference, ``log_ratio``, when
    already computed); for ``m < -20``
    both ``h`` and ``g`` would lose all digits to cancellation, so the asymptotic series is used there
    (error < 1e-14 relative)."""
    if log_ratio is None:
        log_Phi = torch.special.log_ndtr(m) if log_Phi is None else log_Phi
        log_ratio = -0.5 * m * m - 0.5 * _LOG_2PI - log_Phi
    Delta = torch.exp(log_ratio)
    h_direct = m + Delta
    g_direct = 1.0 + m * h_direct
    z = (-m).clamp(min=_TAIL)
    u = 1.0 / (z * z)
    # S(u) - 1 = sum_{j>=1} c_j u^j = u (1 + q), q = sum_{j>=2} c_j u^{j-1} (c_1 = 1): h = z (S - 1) = (1 + q)/z,
    # g = 1 - (S - 1)/u = -q. One Horner pass for q gives both.
    q = torch.full_like(u, _MILLS_INV[-1]).mul_(u)
    for c in reversed(_MILLS_INV[2:-1]):
        q.add_(c).mul_(u)
    h_tail = (1.0 + q) / z
    g_tail = -q
    tail = m < -_TAIL
    return torch.where(tail, h_tail, h_direct), torch.where(tail, g_tail, g_direct)


def msnm_e_step(X, weights, xi, Lambda, eta, mask=None):
    """E-step of the DP-MSNM paper (2021): returns ``r0, r1, r2`` (each ``(..., N, K)``) and the total log-likelihood ``(...)``.

    Masked rows get ``r0 = 0``."""
    joint, _, sigma_tau, m, log_Phi, log_ratio = _component_terms(X, xi, Lambda, eta, weights)
    lse = torch.logsumexp(joint, -1)
    r0 = torch.exp(joint - lse.unsqueeze(-1))
    # r1 = mu + s Delta = s (m + Delta); r2 = mu^2 + s^2 + mu s Delta = s^2 (1 + m (m + Delta))
    h, g = truncated_normal_moment_terms(m, log_Phi, log_ratio)
    s = sigma_tau.unsqueeze(-2)
    r1 = s * h
    r2 = s * s * g
    if mask is not None:
        r0 = r0 * mask.unsqueeze(-1).to(r0.dtype)
        lse = torch.where(mask, lse, torch.zeros_like(lse))
    return r0, r1, r2, lse.sum(-1)


def msnm_m_step(X, r0, r1, r2, eta_old, reg: float = 0.0, return_stats: bool = False):
    """M-step eqs. (8)-(10) of the DP-MSNM paper (2021) (with the ``sum r0 r2`` denominator in eq. 9, see module doc).

    ``pi_k = N_k / n``; ``xi_k = (sum r0 x - eta_old sum r0 r1) / N_k``;
    ``eta_k = sum r0 r1 (x - xi_k) / sum r0 r2``;
    ``Lambda_k = [sum r0 (x-xi)(x-xi)^T - (eta s^T + s eta^T) + eta eta^T sum r0 r2] / N_k + reg I``
    with ``s = sum r0 r1 (x - xi_k)``. Rows with ``r0 = 0`` (masked) do not contribute."""
    Nk = r0.sum(-2)  # (..., K)
    tiny = torch.finfo(X.dtype).tiny
    Nk_safe = Nk.clamp(min=tiny).unsqueeze(-1)
    weights = Nk / Nk.sum(-1, keepdim=True)
    # every sum over rows is one batched product with the centred rows z = x - xbar (and z z^T)
    d = X.shape[-1]
    xbar = X.mean(-2, keepdim=True)
    Z = X - xbar
    r0T = r0.transpose(-1, -2)  # (..., K, N)
    w1T = (r0 * r1).transpose(-1, -2)
    W1 = w1T.sum(-1).unsqueeze(-1)  # sum r0 r1, (..., K, 1)
    w2 = (r0 * r2).sum(-2).clamp(min=tiny)  # sum r0 r2, (..., K)
    Sz = r0T @ Z  # sum r0 z, (..., K, d)
    xi_c = (Sz - eta_old * W1) / Nk_safe  # eq. (8), centred
    s = w1T @ Z - xi_c * W1  # sum r0 r1 (x - xi)
    eta = s / w2.unsqueeze(-1)  # eq. (9)
    ZZ = (Z.unsqueeze(-1) * Z.unsqueeze(-2)).reshape(*Z.shape[:-1], d * d)
    Szz = (r0T @ ZZ).reshape(*Sz.shape, d)  # sum r0 z z^T
    xs = xi_c.unsqueeze(-1) * Sz.unsqueeze(-2)
    Sxx = Szz - xs - xs.transpose(-1, -2) + Nk_safe.unsqueeze(-1) * xi_c.unsqueeze(-1) * xi_c.unsqueeze(-2)
    outer_es = eta.unsqueeze(-1) * s.unsqueeze(-2)
    Lam = (Sxx - outer_es - outer_es.transpose(-1, -2)
           + w2[..., None, None] * eta.unsqueeze(-1) * eta.unsqueeze(-2)) / Nk_safe.unsqueeze(-1)  # eq. (10)
    Lam = 0.5 * (Lam + Lam.transpose(-1, -2))
    xi = xi_c + xbar
    if reg:
        Lam = Lam + reg * torch.eye(d, dtype=X.dtype, device=X.device)
    if return_stats:
        return weights, xi, Lam, eta, Nk
    return weights, xi, Lam, eta


def init_skew_normal_params(X, resp, mask=None, reg: float = 1e-6, shrink: float = 0.5):
    """Moment-based start from (hard or soft) responsibilities: per component, mean ``m``, covariance
    ``C`` and marginal skewness signs ``s``; ``eta = shrink * s * sqrt(diag C)`` scaled so that
    ``eta^T C^{-1} eta <= 1``, ``xi = m - sqrt(2/pi) eta``, ``Lambda = C - (1 - 2/pi) eta eta^T``
    (these match the skew-normal mean and covariance, and ``eta != 0`` avoids the symmetric fixed point
    ``eta = 0`` of the EM map)."""
    from torchdpgmm.em.gmm import m_step

    weights, m, C = m_step(X, resp, mask, reg)
    if mask is not None:
        resp = resp * mask.unsqueeze(-1).to(resp.dtype)
    diff = X.unsqueeze(-3) - m.unsqueeze(-2)  # (..., K, N, d)
    third = torch.einsum("...nk,...knd->...kd", resp, diff ** 3)
    sgn = torch.where(third >= 0, torch.ones_like(third), -torch.ones_like(third))
    eta = shrink * sgn * torch.sqrt(torch.diagonal(C, dim1=-2, dim2=-1))
    q = (eta * torch.linalg.solve(C, eta.unsqueeze(-1)).squeeze(-1)).sum(-1, keepdim=True)
    eta = eta * torch.where(q > 1.0, torch.rsqrt(q), torch.ones_like(q))
    xi = m - math.sqrt(2.0 / math.pi) * eta
    Lam = C - (1.0 - 2.0 / math.pi) * eta.unsqueeze(-1) * eta.unsqueeze(-2)
    return weights, xi, Lam, eta


@dataclass
class SkewNormalMixtureFit:
    """Fitted skew-normal mixture in the ``(xi, Lambda, eta)`` parametrisation; ``Sigma``/``alpha``
    give the ``(xi, Sigma, alpha)`` form. ``loglik`` is the total log-likelihood (natural log)."""

    weights: torch.Tensor
    xi: torch.Tensor
    Lambda: torch.Tensor
    eta: torch.Tensor
    loglik: torch.Tensor
    n: torch.Tensor
    n_iter: int = 0
    privacy: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def Sigma(self) -> torch.Tensor:
        return to_centred_params(self.xi, self.Lambda, self.eta)[1]

    @property
    def alpha(self) -> torch.Tensor:
        return to_centred_params(self.xi, self.Lambda, self.eta)[2]

    @property
    def num_components(self) -> int:
        return self.weights.shape[-1]

    @property
    def num_params(self) -> int:
        return num_params_msnm(self.weights.shape[-1], self.xi.shape[-1])

    @property
    def loglik_mean(self) -> torch.Tensor:
        return self.loglik / self.n

    @property
    def aic(self) -> torch.Tensor:
        return information_criteria(self.loglik, self.num_params, self.n)[0]

    @property
    def bic(self) -> torch.Tensor:
        return information_criteria(self.loglik, self.num_params, self.n)[1]

    def log_prob(self, X: torch.Tensor) -> torch.Tensor:
        """Per-row log density, in the wider of ``X``'s and the fit's dtypes (a DP fit is float64 whatever X's)."""
        dt = torch.promote_types(X.dtype, self.xi.dtype)
        return skew_normal_mixture_log_prob(X.to(dt), self.weights.to(dt), self.xi.to(dt), self.Lambda.to(dt),
                                            self.eta.to(dt))


def fit_skew_normal_mixture(
    X: torch.Tensor,
    num_components: int,
    *,
    mask: torch.Tensor | None = None,
    max_iter: int = 500,
    tol: float | None = None,
    reg: float = 1e-8,
    n_init: int = 1,
    kmeans_iter: int = 10,
    init_params: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> SkewNormalMixtureFit:
    """Fit skew-normal mixtures by the EM of the DP-MSNM paper (2021) (E-step r0/r1/r2, M-step eqs. 8-10), batched over
    the leading dims of ``X (..., N, d)``.

    Args:
        max_iter, tol: as :func:`torchdpgmm.em.fit_gmm` (``tol`` on the change of the mean log-likelihood).
        reg: added to ``Lambda``'s diagonal after each M-step (keeps it invertible).
        n_init: restarts (k-means++ seeds) fitted in the same batch; best log-likelihood returned.
        init_params: ``(weights, xi, Lambda, eta)`` to start from instead of the k-means start.
    """
    mask = check_data(X, num_components, mask)
    if not isinstance(n_init, int) or n_init < 1:
        raise ValueError(f"n_init must be a positive int, got {n_init!r}")
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))
    batch_ndim = X.dim() - 2
    K, d = num_components, X.shape[-1]
    Xr = X.unsqueeze(batch_ndim).expand(*X.shape[:-2], n_init, *X.shape[-2:])
    mr = mask.unsqueeze(batch_ndim).expand(*mask.shape[:-1], n_init, mask.shape[-1])
    bs = Xr.shape[:-2]
    if init_params is not None:
        w0, x0, L0, e0 = (torch.as_tensor(t, dtype=X.dtype, device=X.device) for t in init_params)

        def _b(t, tail):
            if t.dim() > len(tail):
                t = t.unsqueeze(batch_ndim)
            return t.expand(*bs, *tail)

        weights, xi, Lam, eta = _b(w0, (K,)), _b(x0, (K, d)), _b(L0, (K, d, d)), _b(e0, (K, d))
    else:
        centres = kmeans(Xr, kmeans_plusplus(Xr, K, mr, generator), mr, kmeans_iter)
        from torchdpgmm.em.gmm import _nearest

        resp = one_hot(_nearest(Xr, centres), K, X.dtype)
        weights, xi, Lam, eta = init_skew_normal_params(Xr, resp, mr)
    n = mr.sum(-1).to(X.dtype)
    prev = torch.full(bs, -math.inf, dtype=X.dtype, device=X.device)
    done = torch.zeros(bs, dtype=torch.bool, device=X.device)
    it = 0
    for it in range(1, max_iter + 1):
        r0, r1, r2, ll = msnm_e_step(Xr, weights, xi, Lam, eta, mr)
        w_n, xi_n, L_n, e_n = msnm_m_step(Xr, r0, r1, r2, eta, reg)
        if tol is None:
            weights, xi, Lam, eta = w_n, xi_n, L_n, e_n
            continue
        weights = torch.where(done[..., None], weights, w_n)
        xi = torch.where(done[..., None, None], xi, xi_n)
        Lam = torch.where(done[..., None, None, None], Lam, L_n)
        eta = torch.where(done[..., None, None], eta, e_n)
        cur = ll / n
        done = done | ((cur - prev).abs() < tol)
        prev = cur
        if bool(done.all()):
            break
    ll = msnm_e_step(Xr, weights, xi, Lam, eta, mr)[3]
    best = ll.argmax(-1)
    weights, xi, Lam, eta = (_select_best(t, best, batch_ndim) for t in (weights, xi, Lam, eta))
    ll = torch.gather(ll, -1, best.unsqueeze(-1)).squeeze(-1)
    return SkewNormalMixtureFit(weights, xi, Lam, eta, ll, mask.sum(-1).to(X.dtype), n_iter=it)
