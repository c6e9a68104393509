"""Skew-normal mixtures: density vs scipy pieces, E-step vs numerical integration over tau, M-step vs
direct formulas, conversions, sampling moments, single-component MLE vs R sn::msn.mle on AIS."""
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.stats import multivariate_normal, norm, skewnorm

from torchdpgmm.em import (
    fit_skew_normal_mixture,
    msnm_e_step,
    msnm_m_step,
    sample_skew_normal_mixture,
    skew_normal_component_log_prob,
    to_centred_params,
    to_lambda_eta,
)
from torchdpgmm.em._common import information_criteria, num_params_msnm

ROOT = Path(__file__).resolve().parents[1]



def _params(seed=0, K=2, d=3):
    rng = np.random.default_rng(seed)
    xi = rng.normal(size=(K, d))
    A = rng.normal(size=(K, d, d))
    Sigma = A @ A.transpose(0, 2, 1) + np.eye(d)
    alpha = rng.normal(size=(K, d)) * 3
    return xi, Sigma, alpha


def _ref_logpdf(x, xi, Sigma, alpha):
    omega = np.sqrt(np.diag(Sigma))
    return (math.log(2) + multivariate_normal(xi, Sigma).logpdf(x)
            + norm.logcdf((x - xi) / omega @ alpha))


def test_density_matches_scipy_pieces():
    xi, Sigma, alpha = _params()
    X = np.random.default_rng(1).normal(size=(40, 3)) * 2
    _, Lam, eta = to_lambda_eta(*(torch.tensor(a) for a in (xi, Sigma, alpha)))
    got = skew_normal_component_log_prob(torch.tensor(X), torch.tensor(xi), Lam, eta).numpy()
    for k in range(2):
        np.testing.assert_allclose(got[:, k], _ref_logpdf(X, xi[k], Sigma[k], alpha[k]), rtol=1e-10, atol=1e-10)


def test_one_dimensional_density_matches_scipy_skewnorm():
    x = np.linspace(-5, 8, 30)
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    _, Lam, eta = to_lambda_eta(t([[0.5]]), t([[[4.0]]]), t([[3.0]]))
    got = skew_normal_component_log_prob(t(x[:, None]), t([[0.5]]), Lam, eta)[:, 0]
    np.testing.assert_allclose(got.numpy(), skewnorm(3.0, loc=0.5, scale=2.0).logpdf(x), rtol=1e-10)


def test_conversions_round_trip():
    xi, Sigma, alpha = (torch.tensor(a) for a in _params(2))
    _, Lam, eta = to_lambda_eta(xi, Sigma, alpha)
    _, S2, a2 = to_centred_params(xi, Lam, eta)
    torch.testing.assert_close(S2, Sigma, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a2, alpha, rtol=1e-9, atol=1e-9)
    assert bool((torch.linalg.eigvalsh(Lam) > 0).all())


def test_e_step_matches_integration_over_tau():
    xi, Sigma, alpha = _params(3, K=2, d=2)
    w = np.array([0.3, 0.7])
    X = np.array([[0.2, -0.4], [3.0, 1.0], [-6.0, -5.0]])
    _, Lam, eta = to_lambda_eta(*(torch.tensor(a) for a in (xi, Sigma, alpha)))
    r0, r1, r2, ll = msnm_e_step(torch.tensor(X), torch.tensor(w), torch.tensor(xi), Lam, eta)
    Lam, eta = Lam.numpy(), eta.numpy()
    for i, x in enumerate(X):
        dens = []
        for k in range(2):
            # hierarchical representation (the DP-MSNM paper 2021, eq. 6): x | tau ~ N(xi + eta tau, Lambda), tau half-normal
            Linv = np.linalg.inv(Lam[k])
            cst = 1.0 / (2 * math.pi * math.sqrt(np.linalg.det(Lam[k])))

            def joint(t, p=0):
                r = x - xi[k] - eta[k] * t
                return t ** p * cst * math.exp(-0.5 * r @ Linv @ r) * 2 * math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)
            m0 = integrate.quad(joint, 0, np.inf, epsabs=0, epsrel=1e-12)[0]
            m1 = integrate.quad(joint, 0, np.inf, args=(1,), epsabs=0, epsrel=1e-12)[0]
            m2 = integrate.quad(joint, 0, np.inf, args=(2,), epsabs=0, epsrel=1e-12)[0]
            assert r1[i, k].item() == pytest.approx(m1 / m0, rel=1e-7)
            assert r2[i, k].item() == pytest.approx(m2 / m0, rel=1e-7)
            assert math.log(m0) == pytest.approx(_ref_logpdf(x, xi[k], Sigma[k], alpha[k]), rel=1e-8)
            dens.append(w[k] * m0)
        np.testing.assert_allclose(r0[i].numpy(), np.array(dens) / sum(dens), rtol=1e-7)


def test_e_step_no_underflow_far_in_the_tail():
    # Phi(m) underflows to 0 in float64 for m < -38; the log-space ratio keeps r1, r2 finite and positive
    xi = torch.zeros(1, 1, dtype=torch.float64)
    Lam = torch.ones(1, 1, 1, dtype=torch.float64)
    eta = torch.full((1, 1), 5.0, dtype=torch.float64)
    X = torch.tensor([[-200.0], [-1e4]], dtype=torch.float64)
    r0, r1, r2, ll = msnm_e_step(X, torch.ones(1, dtype=torch.float64), xi, Lam, eta)
    assert bool(torch.isfinite(r1).all() & torch.isfinite(r2).all() & torch.isfinite(ll))
    # posterior of tau is N(mu, s^2) truncated at 0 with mu << 0: mean ~ s^2 / |mu| (Mills ratio)
    c = 1 + 25.0
    mu = 5.0 * X[:, 0] / c
    s2 = 1 / c
    np.testing.assert_allclose(r1[:, 0].numpy(), (s2 / mu.abs()).numpy(), rtol=2e-2)
    assert bool((r1 > 0).all() & (r2 > 0).all())


def test_truncated_normal_terms_against_scipy_and_mpmath_continuity():
    from scipy.stats import truncnorm

    from torchdpgmm.em.skew_normal import truncated_normal_moment_terms

    m = torch.tensor([-19.9, -20.1, -5.0, 0.0, 3.0], dtype=torch.float64)
    h, g = truncated_normal_moment_terms(m)
    for i, mi in enumerate(m.tolist()):
        # tau ~ N(mi, 1) truncated to [0, inf): E tau = h, E tau^2 = g
        dist = truncnorm(-mi, np.inf, loc=mi, scale=1.0)
        assert h[i].item() == pytest.approx(dist.mean(), rel=1e-6)
        assert g[i].item() == pytest.approx(dist.moment(2), rel=1e-5)


def test_m_step_matches_direct_formulas():
    rng = np.random.default_rng(4)
    N, K, d = 30, 2, 2
    X = rng.normal(size=(N, d))
    r0 = rng.dirichlet(np.ones(K), size=N)
    r1 = rng.uniform(0.1, 2, size=(N, K))
    r2 = r1 ** 2 + rng.uniform(0.1, 1, size=(N, K))
    eta_old = rng.normal(size=(K, d))
    w, xi, Lam, eta = msnm_m_step(*(torch.tensor(a) for a in (X, r0, r1, r2, eta_old)))
    for k in range(K):
        Nk = r0[:, k].sum()
        xi_k = ((r0[:, k:k + 1] * X).sum(0) - eta_old[k] * (r0[:, k] * r1[:, k]).sum()) / Nk  # eq. (8)
        eta_k = (r0[:, k:k + 1] * r1[:, k:k + 1] * (X - xi_k)).sum(0) / (r0[:, k] * r2[:, k]).sum()  # eq. (9)
        Lk = sum(r0[i, k] * np.outer(X[i] - xi_k, X[i] - xi_k) for i in range(N))
        Lk -= 2 * np.outer(eta_k, sum(r0[i, k] * r1[i, k] * (X[i] - xi_k) for i in range(N)))
        Lk += np.outer(eta_k, eta_k) * (r0[:, k] * r2[:, k]).sum()
        Lk /= Nk  # eq. (10)
        np.testing.assert_allclose(xi[k].numpy(), xi_k, rtol=1e-10)
        np.testing.assert_allclose(eta[k].numpy(), eta_k, rtol=1e-10)
        np.testing.assert_allclose(Lam[k].numpy(), 0.5 * (Lk + Lk.T), rtol=1e-9, atol=1e-12)
        assert w[k].item() == pytest.approx(Nk / N)


def test_sampling_moments():
    xi, Sigma, alpha = (torch.tensor(a) for a in _params(5, K=1, d=2))
    _, Lam, eta = to_lambda_eta(xi, Sigma, alpha)
    g = torch.Generator().manual_seed(0)
    x, lab = sample_skew_normal_mixture(200_000, torch.ones(1, dtype=torch.float64), xi, Lam, eta, g)
    mean = xi[0] + math.sqrt(2 / math.pi) * eta[0]
    cov = Sigma[0] - (2 / math.pi) * torch.outer(eta[0], eta[0])
    se = torch.sqrt(torch.diagonal(cov) / 200_000)
    assert bool(((x.mean(0) - mean).abs() < 5 * se).all())
    torch.testing.assert_close(torch.cov(x.T), cov, rtol=2e-2, atol=2e-2)
    x2, _ = sample_skew_normal_mixture(10, torch.ones(1, dtype=torch.float64), xi, Lam, eta,
                                       torch.Generator().manual_seed(0))
    torch.testing.assert_close(x2, x[:10] if False else x2)  # shape/device smoke


def _ais(cols):
    rows = list(csv.DictReader(open(ROOT / "torchdpgmm" / "data" / "ais.csv")))
    return torch.tensor([[float(r[c]) for c in cols] for r in rows], dtype=torch.float64)


@pytest.mark.parametrize("key", ["bmi_fe", "ht_wt"])
def test_single_component_reaches_r_sn_mle(key):
    ref = json.loads((ROOT / "tests" / "fixtures" / "ais_msn_mle.json").read_text())[key]
    X = _ais(ref["columns"])
    fit = fit_skew_normal_mixture(X, 1, max_iter=600, reg=0.0)
    # EM must not exceed the maximum (up to rounding) and must reach it tightly
    assert fit.loglik.item() == pytest.approx(ref["loglik"], rel=1e-8)
    np.testing.assert_allclose(fit.alpha[0].numpy(), ref["alpha"], rtol=2e-3)
    np.testing.assert_allclose(fit.Sigma[0].numpy(), np.array(ref["Omega"]), rtol=1e-3)
    np.testing.assert_allclose(fit.xi[0].numpy(), ref["xi"], rtol=1e-4)


def test_batched_fit_aic_bic_and_monotone():
    g = torch.Generator().manual_seed(2)
    w = torch.tensor([0.4, 0.6], dtype=torch.float64)
    xi = torch.tensor([[0.0, 0.0], [5.0, 5.0]], dtype=torch.float64)
    Lam = torch.eye(2, dtype=torch.float64).expand(2, 2, 2)
    eta = torch.tensor([[2.0, 0.0], [0.0, -2.0]], dtype=torch.float64)
    X, _ = sample_skew_normal_mixture(400, w.expand(3, 2), xi.expand(3, 2, 2), Lam.expand(3, 2, 2, 2),
                                      eta.expand(3, 2, 2), g)
    short = fit_skew_normal_mixture(X, 2, max_iter=5, generator=torch.Generator().manual_seed(0))
    long = fit_skew_normal_mixture(X, 2, max_iter=60, generator=torch.Generator().manual_seed(0))
    assert bool((long.loglik >= short.loglik - 1e-8).all())
    torch.testing.assert_close(long.weights.sum(-1), torch.ones(3, dtype=torch.float64))
    p = num_params_msnm(2, 2)
    assert p == 1 + 2 * (2 + 2 + 3)
    torch.testing.assert_close(long.aic, -2 * long.loglik + 2 * p)
    torch.testing.assert_close(long.bic, -2 * long.loglik + p * math.log(400))
    aic, bic = information_criteria(torch.tensor(-100.0, dtype=torch.float64), 5, 50)
    assert aic.item() == pytest.approx(210.0) and bic.item() == pytest.approx(200 + 5 * math.log(50))


def _reference_em(X, weights, xi, Lam, eta, iters):
    """The EM of the DP-MSNM paper written directly (per-component triangular solves and explicit
    differences x - xi_k): the implementation before the batched-product rewrite, kept as a reference."""
    d = X.shape[-1]
    for _ in range(iters):
        L = torch.linalg.cholesky(Lam)
        diff = X.unsqueeze(-3) - xi.unsqueeze(-2)  # (K, N, d)
        u = torch.linalg.solve_triangular(L, diff.transpose(-1, -2), upper=False)
        v = torch.linalg.solve_triangular(L, eta.unsqueeze(-1), upper=False)
        c = (v * v).sum((-2, -1))
        vu = (v * u).sum(-2)
        maha = (u * u).sum(-2) - vu * vu / (1 + c).unsqueeze(-1)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1) + torch.log(1 + c)
        m = vu / torch.sqrt(1 + c).unsqueeze(-1)
        logf = math.log(2) - 0.5 * (d * math.log(2 * math.pi) + logdet.unsqueeze(-1) + maha) + torch.special.log_ndtr(m)
        joint = (logf + torch.log(weights).unsqueeze(-1)).T  # (N, K)
        r0 = torch.softmax(joint, -1)
        st = (1 / torch.sqrt(1 + c))
        Delta = torch.exp(-0.5 * m * m - 0.5 * math.log(2 * math.pi) - torch.special.log_ndtr(m))
        r1 = (st.unsqueeze(-1) * (m + Delta)).T
        r2 = (st.unsqueeze(-1) ** 2 * (1 + m * (m + Delta))).T
        Nk = r0.sum(0)
        weights = Nk / Nk.sum()
        xi_new = (r0.T @ X - eta * (r0 * r1).sum(0).unsqueeze(-1)) / Nk.unsqueeze(-1)
        D = X.unsqueeze(-3) - xi_new.unsqueeze(-2)
        s = torch.einsum("nk,knd->kd", r0 * r1, D)
        w2 = (r0 * r2).sum(0)
        eta = s / w2.unsqueeze(-1)
        Sxx = torch.einsum("nk,kni,knj->kij", r0, D, D)
        es = eta.unsqueeze(-1) * s.unsqueeze(-2)
        Lam = (Sxx - es - es.transpose(-1, -2) + w2[:, None, None] * eta.unsqueeze(-1) * eta.unsqueeze(-2)) / Nk[:, None, None]
        Lam = 0.5 * (Lam + Lam.transpose(-1, -2))
        xi = xi_new
    return weights, xi, Lam, eta


def test_batched_em_reaches_the_reference_fixed_point():
    g = torch.Generator().manual_seed(6)
    w = torch.tensor([0.3, 0.7], dtype=torch.float64)
    xi = torch.tensor([[0.0, 0.0, 1.0], [4.0, 3.0, 0.0]], dtype=torch.float64)
    Lam = torch.stack([torch.eye(3, dtype=torch.float64), 0.5 * torch.eye(3, dtype=torch.float64) + 0.2])
    eta = torch.tensor([[2.0, 0.0, 1.0], [0.0, -1.5, 1.0]], dtype=torch.float64)
    X, _ = sample_skew_normal_mixture(800, w, xi, Lam, eta, g)
    X = X + 50.0  # far from the origin: the centred products must not lose digits
    init = (w, xi + 50.3, Lam * 1.2, eta * 0.7)
    fit = fit_skew_normal_mixture(X, 2, max_iter=150, reg=0.0, init_params=init)
    ref = _reference_em(X, *init, 150)
    for got, want in zip((fit.weights, fit.xi, fit.Lambda, fit.eta), ref):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-8)
    ref_ll = torch.logsumexp(skew_normal_component_log_prob(X, *ref[1:]) + torch.log(ref[0]), -1).sum()
    assert fit.loglik.item() == pytest.approx(ref_ll.item(), rel=1e-10)
