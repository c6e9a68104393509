"""Kullback-Leibler divergences between Gaussians and between labeled GMMs (Liu, Scaglione & Peisert 2025, Appendix B).

For two labeled GMMs ``p(x, y) = pi_y N(x; mu_y, Sigma_y)`` and ``q(x, y) = rho_y N(x; m_y, S_y)`` the
joint KL has the closed form (Appendix B)

.. math::
    KL(p \\| q) = \\sum_k \\pi_k \\Big(\\ln\\frac{\\pi_k}{\\rho_k} + KL(N(\\mu_k, \\Sigma_k) \\| N(m_k, S_k))\\Big),

with the convention ``0 ln 0 = 0``. All computations are Cholesky based and batched.
"""
from __future__ import annotations

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm.mixture import LabeledGMM

__all__ = ["gaussian_kl", "kl_divergence", "mvdigamma", "log_mvgamma"]


def gaussian_kl(
    mean_p: torch.Tensor, cov_p: torch.Tensor, mean_q: torch.Tensor, cov_q: torch.Tensor
) -> torch.Tensor:
    """``KL(N(mean_p, cov_p) || N(mean_q, cov_q))`` over broadcast batch dims.

    .. math::
        \\tfrac12\\big[\\operatorname{tr}(S_q^{-1} S_p) + (m_q - m_p)^T S_q^{-1} (m_q - m_p) - d
        + \\ln|S_q| - \\ln|S_p|\\big]

    Shapes: means ``(..., d)``, covariances ``(..., d, d)``; returns ``(...)``.
    """
    d = mean_p.shape[-1]
    Lp = torch.linalg.cholesky(cov_p)
    Lq = torch.linalg.cholesky(cov_q)
    batch = broadcast_shapes(Lp.shape[:-2], Lq.shape[:-2], mean_p.shape[:-1], mean_q.shape[:-1])
    Lp = Lp.expand(*batch, d, d)
    Lq = Lq.expand(*batch, d, d)
    M = torch.linalg.solve_triangular(Lq, Lp, upper=False)          # Lq^{-1} Lp
    trace = M.pow(2).sum((-1, -2))
    diff = (mean_q - mean_p).expand(*batch, d).unsqueeze(-1)
    z = torch.linalg.solve_triangular(Lq, diff, upper=False).squeeze(-1)
    maha = z.pow(2).sum(-1)
    logdet_q = 2.0 * torch.diagonal(Lq, dim1=-2, dim2=-1).log().sum(-1)
    logdet_p = 2.0 * torch.diagonal(Lp, dim1=-2, dim2=-1).log().sum(-1)
    # KL >= 0; clamp only the rounding error of identical arguments
    return (0.5 * (trace + maha - d + logdet_q - logdet_p)).clamp_min(0)


def kl_divergence(p: LabeledGMM, q: LabeledGMM) -> torch.Tensor:
    """``KL(p(x, y) || q(x, y))`` of two batches of labeled GMMs (Appendix B); returns ``batch_shape``.

    A class that ``p`` gives weight 0 contributes nothing; one that ``q`` gives weight 0 while ``p``
    does not gives ``+inf``. The paper's utility is ``kl_divergence(released, fitted)``.
    """
    if p.num_classes != q.num_classes or p.dim != q.dim:
        raise ValueError(
            f"models differ in shape: K={p.num_classes}, d={p.dim} vs K={q.num_classes}, d={q.dim}")
    dtype = torch.promote_types(p.dtype, q.dtype)
    wp, wq = p.weights.to(dtype), q.weights.to(dtype)
    # a class whose Gaussian term is not used (p weight 0; or q weight 0, +inf from the weights) may carry any
    # covariance (fit_labeled's 0 for an empty class): an identity stands in so the Cholesky factor exists
    skip_p = (wp == 0).unsqueeze(-1)
    skip_q = skip_p | (wq == 0).unsqueeze(-1)
    eye = torch.eye(p.dim, dtype=dtype, device=wp.device)
    zero = torch.zeros((), dtype=dtype, device=wp.device)
    comp = gaussian_kl(torch.where(skip_p, zero, p.means.to(dtype)),
                       torch.where(skip_p.unsqueeze(-1), eye, p.covariances.to(dtype)),
                       torch.where(skip_q, zero, q.means.to(dtype)),
                       torch.where(skip_q.unsqueeze(-1), eye, q.covariances.to(dtype)))
    # xlogy gives 0 * log(0 / .) = 0; p > 0 with q = 0 gives +inf as it should
    wterm = torch.xlogy(wp, wp) - torch.xlogy(wp, wq)
    wterm = torch.where(wp > 0, wterm, torch.zeros_like(wterm))
    return (wterm + torch.where(wp > 0, wp * comp, torch.zeros_like(comp))).sum(-1)


def mvdigamma(a: torch.Tensor, d: int) -> torch.Tensor:
    """Multivariate digamma ``psi_d(a) = sum_{i=1}^d psi(a + (1 - i)/2)`` (used in eq. 12)."""
    a = torch.as_tensor(a, dtype=torch.float64) if not torch.is_tensor(a) else a
    i = torch.arange(d, dtype=a.dtype, device=a.device)
    return torch.special.digamma(a.unsqueeze(-1) - i / 2).sum(-1)


def log_mvgamma(a: torch.Tensor, d: int) -> torch.Tensor:
    """Log multivariate gamma ``ln Gamma_d(a)``."""
    a = torch.as_tensor(a, dtype=torch.float64) if not torch.is_tensor(a) else a
    return torch.special.multigammaln(a, d)
