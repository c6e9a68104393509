"""Bayes error of a plug-in Gaussian classifier: Monte Carlo on fresh test sets (Xi et al. Section 5,
step 4), the Bhattacharyya bound (eqs. 4-5, Duda-Hart-Stork 2.8.3), the Chernoff bound optimised over
``s``, and the closed form ``Phi(-Delta/2)`` of the equal-covariance, equal-prior case.

Models are any objects with ``weights (...,K)``, ``means (...,K,d)``, ``covariances (...,K,d,d)``
(:class:`~torchdpgmm.bayes.release.GaussianClasses`, the core's ``LabeledGMM``); batch dimensions of
the true and the plug-in model broadcast, so one call evaluates every trial of a study.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes

__all__ = [
    "gaussian_class_log_prob",
    "standardised_eigh",
    "plugin_predict",
    "sample_classes",
    "bayes_error_mc",
    "bhattacharyya_distance",
    "bhattacharyya_bound",
    "chernoff_exponent",
    "chernoff_bound",
    "equal_covariance_error",
]


def _params(model: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    try:
        return model.weights, model.means, model.covariances
    except AttributeError:
        raise TypeError("model must have weights, means and covariances attributes") from None


def _diag_scale(covariances: torch.Tensor) -> torch.Tensor:
    """Per-coordinate scales ``s = sqrt(diag Sigma)`` (1 where a diagonal entry is not positive)."""
    diag = torch.diagonal(covariances, dim1=-2, dim2=-1)
    return torch.where(diag > 0, diag, torch.ones_like(diag)).sqrt()


def standardised_eigh(covariances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eigendecomposition of ``Sigma`` in its own standardised coordinates, ``R = D^-1 Sigma D^-1`` with
    ``D = diag(s)``, ``s = sqrt(diag Sigma)``. Returns ``(s, evals, evecs, logdet)`` with ``evals, evecs``
    those of ``R`` (eigenvalues floored at the dtype's tiny) and ``logdet = log|Sigma| = log|R| + 2 sum log s``.

    Features on very different scales make ``Sigma`` badly conditioned (UCI Parkinsons: condition ~1e15,
    close to 1/eps in float64) although ``R`` is not (~1e8 there); ``eigh`` has an absolute error of about
    ``eps ||A||``, so decomposing ``R`` instead keeps the small eigenvalues, and hence the Mahalanobis
    distances, accurate. The Gaussian log-density is unchanged (a change of variables)."""
    s = _diag_scale(covariances)
    R = covariances / (s.unsqueeze(-1) * s.unsqueeze(-2))
    evals, evecs = torch.linalg.eigh(0.5 * (R + R.transpose(-1, -2)))
    evals = evals.clamp(min=torch.finfo(evals.dtype).tiny)
    return s, evals, evecs, evals.log().sum(-1) + 2.0 * s.log().sum(-1)


def gaussian_class_log_prob(x: torch.Tensor, weights, means, covariances) -> torch.Tensor:
    """``log pi_k + log N(x | mu_k, Sigma_k)`` for ``x (...,n,d)`` -> ``(...,n,K)``.

    Uses an eigendecomposition of each ``Sigma_k`` in standardised coordinates
    (:func:`standardised_eigh`), robust for badly scaled features and for the badly conditioned matrices
    the PD repair can produce; eigenvalues are floored at the dtype's tiny so the log stays finite.
    """
    s, evals, evecs, logdet = standardised_eigh(covariances)  # (...,K,d) x2, (...,K,d,d), (...,K)
    d = x.shape[-1]
    diff = (x.unsqueeze(-2) - means.unsqueeze(-3)) / s.unsqueeze(-3)  # (...,n,K,d)
    proj = torch.einsum("...nkd,...kde->...nke", diff, evecs)
    maha = (proj**2 / evals.unsqueeze(-3)).sum(-1)
    return torch.log(weights).unsqueeze(-2) - 0.5 * (maha + logdet.unsqueeze(-2) + d * math.log(2 * math.pi))


def plugin_predict(x: torch.Tensor, model: Any) -> torch.Tensor:
    """Bayes decision rule (eq. 3) of the plug-in model: ``argmax_k pi_k N(x | mu_k, Sigma_k)``."""
    return gaussian_class_log_prob(x, *_params(model)).argmax(-1)


def sample_classes(
    model: Any, n: int, generator: torch.Generator | None = None, batch_shape: torch.Size = torch.Size()
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` i.i.d. draws ``(x (...,n,d), y (...,n))`` from the labeled Gaussian mixture ``model``
    (labels from the weights, then ``mu_y + L_y z`` with ``L_y = D chol(D^-1 Sigma_y D^-1)``, ``D`` the
    diagonal of standard deviations: the Cholesky factor of ``Sigma_y`` computed in standardised
    coordinates); ``batch_shape`` adds leading trial dimensions."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    n = int(n)
    w, mu, cov = _params(model)
    batch = broadcast_shapes(tuple(batch_shape), w.shape[:-1], mu.shape[:-2], cov.shape[:-3])
    K, d = mu.shape[-2], mu.shape[-1]
    probs = w.expand(batch + (K,)).reshape(-1, K)
    y = torch.multinomial(probs, n, replacement=True, generator=generator).reshape(batch + (n,))
    z = torch.randn(batch + (n, d), dtype=mu.dtype, device=mu.device, generator=generator)
    # chol(D R D) = D chol(R): factor the standardised matrix R (well conditioned for badly scaled features)
    sc = _diag_scale(cov)
    L = sc.unsqueeze(-1) * torch.linalg.cholesky(cov / (sc.unsqueeze(-1) * sc.unsqueeze(-2)))
    x = torch.zeros(batch + (n, d), dtype=mu.dtype, device=mu.device)
    for k in range(K):  # one class at a time keeps memory at O(n d) per trial
        xk = mu[..., k, :].unsqueeze(-2) + z @ L[..., k, :, :].transpose(-1, -2)
        x = torch.where((y == k).unsqueeze(-1), xk, x)
    return x, y


def bayes_error_mc(
    true_model: Any,
    plugin_model: Any,
    num_test: int = 50_000,
    generator: torch.Generator | None = None,
    chunk_size: int = 10_000,
) -> torch.Tensor:
    """Misclassification rate of the plug-in rule of ``plugin_model`` on ``num_test`` fresh points from
    ``true_model`` (Xi et al. Section 5, step 4: 50,000 test points). Every batch element (trial) gets
    its own test set; returns ``(...)`` with the broadcast batch shape of the two models."""
    if isinstance(num_test, bool) or not isinstance(num_test, int) or num_test < 1:
        raise ValueError(f"num_test must be a positive int, got {num_test!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    tw, tm, tc = _params(true_model)
    pw, pm, pc = _params(plugin_model)
    if pm.shape[-2:] != tm.shape[-2:] or pw.shape[-1] != tw.shape[-1]:
        raise ValueError(f"the plug-in model has (K, d) = {tuple(pm.shape[-2:])}, the true model "
                         f"{tuple(tm.shape[-2:])}: the label spaces and features must agree")
    for name, v in (("true_model", (tw, tm, tc)), ("plugin_model", (pw, pm, pc))):
        if not all(bool(torch.isfinite(t).all()) for t in v):  # argmax would read a NaN score as the largest
            raise ValueError(f"{name} has non-finite weights, means or covariances")
    batch = broadcast_shapes(tw.shape[:-1], tm.shape[:-2], tc.shape[:-3],
                                   pw.shape[:-1], pm.shape[:-2], pc.shape[:-3])
    # eigendecompose the plug-in once (standardised coordinates), reuse across chunks
    sc, evals, evecs, logdet = standardised_eigh(pc)
    logw = torch.log(pw)
    errors = torch.zeros(batch, dtype=tm.dtype, device=tm.device)
    done = 0
    while done < num_test:
        m = min(chunk_size, num_test - done)
        x, y = sample_classes(true_model, m, generator, batch)
        diff = (x.unsqueeze(-2) - pm.unsqueeze(-3)) / sc.unsqueeze(-3)
        proj = torch.einsum("...nkd,...kde->...nke", diff, evecs)
        score = logw.unsqueeze(-2) - 0.5 * ((proj**2 / evals.unsqueeze(-3)).sum(-1) + logdet.unsqueeze(-2))
        errors = errors + (score.argmax(-1) != y).to(errors.dtype).sum(-1)
        done += m
    return errors / num_test


def bhattacharyya_distance(mean1, cov1, mean2, cov2) -> torch.Tensor:
    """Bhattacharyya distance ``K`` (eq. 5 in 1-D; Duda-Hart-Stork eq. 2.8.3 in general):
    ``K = 1/8 dmu' ((S1+S2)/2)^-1 dmu + 1/2 log(|(S1+S2)/2| / sqrt(|S1||S2|))``.
    Means ``(...,d)``, covariances ``(...,d,d)``; for scalars pass ``(...,1)`` and ``(...,1,1)``."""
    return chernoff_exponent(torch.as_tensor(0.5, dtype=mean1.dtype, device=mean1.device), mean1, cov1, mean2, cov2)


def _prior(prior1, like: torch.Tensor) -> torch.Tensor:
    p1 = torch.as_tensor(prior1, dtype=like.dtype, device=like.device)
    if not bool(((p1 >= 0) & (p1 <= 1)).all()):
        raise ValueError(f"prior1 must lie in [0, 1], got {prior1!r}")
    return p1


def bhattacharyya_bound(prior1, mean1, cov1, mean2, cov2) -> torch.Tensor:
    """Eq. (4): ``Bayes error <= sqrt(P1 P2) exp(-K)``."""
    p1 = _prior(prior1, mean1)
    return torch.sqrt(p1 * (1 - p1)) * torch.exp(-bhattacharyya_distance(mean1, cov1, mean2, cov2))


def chernoff_exponent(s, mean1, cov1, mean2, cov2) -> torch.Tensor:
    """Chernoff exponent with ``int p1^s p2^(1-s) dx = exp(-k(s))`` for Gaussians:
    ``k(s) = s(1-s)/2 dmu' ((1-s) S1 + s S2)^-1 dmu + 1/2 log(|(1-s) S1 + s S2| / (|S1|^(1-s) |S2|^s))``
    (Duda-Hart-Stork eq. 2.8.2 with ``beta = s``); ``k(1/2)`` is the Bhattacharyya distance ``K``."""
    s = torch.as_tensor(s, dtype=mean1.dtype, device=mean1.device)
    sm = s[..., None, None]
    A = (1 - sm) * cov1 + sm * cov2
    dmu = (mean2 - mean1).unsqueeze(-1)
    quad = (dmu.transpose(-1, -2) @ torch.linalg.solve(A, dmu)).squeeze(-1).squeeze(-1)
    ld = torch.linalg.slogdet(A)[1]
    l1 = torch.linalg.slogdet(cov1)[1]
    l2 = torch.linalg.slogdet(cov2)[1]
    return 0.5 * s * (1 - s) * quad + 0.5 * (ld - (1 - s) * l1 - s * l2)


def chernoff_bound(prior1, mean1, cov1, mean2, cov2, num_iter: int = 80) -> tuple[torch.Tensor, torch.Tensor]:
    """Chernoff bound ``min_s P1^s P2^(1-s) exp(-k(s))`` over ``s in [0, 1]`` (never looser than eq. 4).

    The log of the bound is convex in ``s`` (a log-moment generating function), so a fixed number of
    golden-section steps, batched and branch-free, finds the minimiser. Returns ``(bound, s_star)``.
    A prior of 0 or 1 gives the bound 0 (with ``0 log 0 = 0`` at the ends ``s = 0, 1``), the Bayes error."""
    p1 = _prior(prior1, mean1)
    batch = broadcast_shapes(p1.shape, mean1.shape[:-1], mean2.shape[:-1], cov1.shape[:-2], cov2.shape[:-2])

    def f(s):
        a, b = s * torch.log(p1), (1 - s) * torch.log1p(-p1)  # 0 * log 0 = 0 at s = 0 (or 1)
        a = torch.where(s == 0, torch.zeros_like(a), a)
        b = torch.where(s == 1, torch.zeros_like(b), b)
        return a + b - chernoff_exponent(s, mean1, cov1, mean2, cov2)

    g = (math.sqrt(5) - 1) / 2
    a = torch.zeros(batch, dtype=mean1.dtype, device=mean1.device)
    b = torch.ones_like(a)
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(num_iter):
        left = fc < fd
        b = torch.where(left, d, b)
        a = torch.where(left, a, c)
        c_new = b - g * (b - a)
        d_new = a + g * (b - a)
        c, d = c_new, d_new
        fc, fd = f(c), f(d)
    s_star = 0.5 * (a + b)
    cand = torch.stack([f(s_star), f(torch.zeros_like(s_star)), f(torch.ones_like(s_star))])
    return torch.exp(cand.amin(0)), s_star


def equal_covariance_error(mean1, mean2, cov) -> torch.Tensor:
    """Exact Bayes error ``Phi(-Delta/2)`` of two equally likely Gaussians with a common covariance,
    ``Delta`` the Mahalanobis distance between the means."""
    dmu = (mean2 - mean1).unsqueeze(-1)
    delta2 = (dmu.transpose(-1, -2) @ torch.linalg.solve(cov, dmu)).squeeze(-1).squeeze(-1)
    return torch.special.ndtr(-0.5 * delta2.sqrt())
