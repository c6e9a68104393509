"""Batched GMM EM: E/M steps against numpy/scipy, full fits against scikit-learn with the same start."""
import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from torchdpgmm.em import e_step, fit_gmm, gaussian_log_prob, kmeans_plusplus, m_step, mixture_log_likelihood



def _random_params(rng, K, d):
    w = rng.dirichlet(np.ones(K))
    mu = rng.normal(size=(K, d)) * 2
    A = rng.normal(size=(K, d, d))
    cov = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(d)
    return w, mu, cov


def _data(seed=0, B=3, N=300, d=3):
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.0] * d, [4.0] * d, [-4.0] + [4.0] * (d - 1)], dtype=torch.float64)
    lab = torch.randint(0, 3, (B, N), generator=g)
    return centres[lab] + torch.randn(B, N, d, dtype=torch.float64, generator=g)


def test_log_prob_and_e_step_match_scipy():
    rng = np.random.default_rng(0)
    K, d, N = 3, 3, 50
    w, mu, cov = _random_params(rng, K, d)
    X = rng.normal(size=(N, d)) * 2
    ref = np.stack([multivariate_normal(mu[k], cov[k]).logpdf(X) for k in range(K)], -1)
    got = gaussian_log_prob(torch.tensor(X), torch.tensor(mu), torch.tensor(cov)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-11)
    joint = ref + np.log(w)
    ref_ll = logsumexp(joint, -1)
    log_resp, ll = e_step(torch.tensor(X), torch.tensor(w), torch.tensor(mu), torch.tensor(cov))
    np.testing.assert_allclose(log_resp.numpy(), joint - ref_ll[:, None], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ll.item(), ref_ll.sum(), rtol=1e-12)


def test_e_step_mask_ignores_padding():
    rng = np.random.default_rng(1)
    w, mu, cov = _random_params(rng, 2, 2)
    X = torch.tensor(rng.normal(size=(10, 2)))
    mask = torch.tensor([True] * 7 + [False] * 3)
    Xpad = X.clone()
    Xpad[7:] = 1e6  # garbage in padded rows must not matter
    _, ll_mask = e_step(Xpad, torch.tensor(w), torch.tensor(mu), torch.tensor(cov), mask)
    _, ll_ref = e_step(X[:7], torch.tensor(w), torch.tensor(mu), torch.tensor(cov))
    assert ll_mask.item() == pytest.approx(ll_ref.item(), rel=1e-13)


def test_m_step_matches_direct_formulas():
    rng = np.random.default_rng(2)
    N, K, d = 40, 3, 2
    X = rng.normal(size=(N, d))
    R = rng.dirichlet(np.ones(K), size=N)
    w, mu, cov = m_step(torch.tensor(X), torch.tensor(R), reg_covar=1e-3)
    for k in range(K):
        nk = R[:, k].sum()
        m = (R[:, k:k + 1] * X).sum(0) / nk
        c = sum(R[i, k] * np.outer(X[i] - m, X[i] - m) for i in range(N)) / nk + 1e-3 * np.eye(d)
        np.testing.assert_allclose(mu[k].numpy(), m, rtol=1e-10)
        np.testing.assert_allclose(cov[k].numpy(), c, rtol=1e-10)
        assert w[k].item() == pytest.approx(nk / N, rel=1e-10)


def test_fit_matches_sklearn_same_start():
    from sklearn.mixture import GaussianMixture

    X = _data(0, B=2, N=300, d=3)
    g = torch.Generator().manual_seed(3)
    start = fit_gmm(X, 3, max_iter=0, generator=g)
    iters = 25
    fit = fit_gmm(X, 3, max_iter=iters, init_params=(start.weights, start.means, start.covariances))
    for b in range(X.shape[0]):
        gm = GaussianMixture(3, covariance_type="full", max_iter=iters, tol=0.0, reg_covar=1e-6,
                             weights_init=start.weights[b].numpy(), means_init=start.means[b].numpy(),
                             precisions_init=np.linalg.inv(start.covariances[b].numpy()))
        with pytest.warns(Warning):  # tol=0: sklearn warns that it did not converge
            gm.fit(X[b].numpy())
        ref = gm.score(X[b].numpy()) * X.shape[1]
        assert fit.loglik[b].item() == pytest.approx(ref, rel=1e-6)
        np.testing.assert_allclose(np.sort(fit.weights[b].numpy()), np.sort(gm.weights_), rtol=1e-5, atol=1e-8)


def test_ragged_batch_with_mask_matches_separate_fits():
    X = _data(4, B=2, N=200, d=2)
    mask = torch.ones(2, 200, dtype=torch.bool)
    mask[1, 150:] = False
    g = torch.Generator().manual_seed(5)
    start = fit_gmm(X, 3, mask=mask, max_iter=0, generator=g)
    init = (start.weights, start.means, start.covariances)
    both = fit_gmm(X, 3, mask=mask, max_iter=15, init_params=init)
    second = fit_gmm(X[1, :150], 3, max_iter=15,
                     init_params=tuple(t[1] for t in init))
    assert both.loglik[1].item() == pytest.approx(second.loglik.item(), rel=1e-10)


def test_restarts_and_invariants():
    X = _data(6, B=2, N=200, d=2)
    fit = fit_gmm(X, 3, n_init=4, max_iter=30, generator=torch.Generator().manual_seed(0))
    assert fit.weights.shape == (2, 3) and fit.means.shape == (2, 3, 2) and fit.covariances.shape == (2, 3, 2, 2)
    torch.testing.assert_close(fit.weights.sum(-1), torch.ones(2, dtype=torch.float64))
    assert bool((torch.linalg.eigvalsh(fit.covariances) > 0).all())
    recomputed = mixture_log_likelihood(X, fit.weights, fit.means, fit.covariances)
    torch.testing.assert_close(recomputed, fit.loglik)


def test_tol_stops_early_and_matches():
    X = _data(7, B=2, N=300, d=2)
    g = torch.Generator().manual_seed(1)
    start = fit_gmm(X, 3, max_iter=0, generator=g)
    a = fit_gmm(X, 3, max_iter=500, tol=1e-10,
                init_params=(start.weights, start.means, start.covariances))
    assert a.n_iter < 500
    assert bool((a.loglik >= start.loglik).all())  # EM never decreases the likelihood


def test_kmeans_plusplus_seeded_and_on_data():
    X = _data(8, B=2, N=100, d=2)
    c1 = kmeans_plusplus(X, 3, generator=torch.Generator().manual_seed(9))
    c2 = kmeans_plusplus(X, 3, generator=torch.Generator().manual_seed(9))
    torch.testing.assert_close(c1, c2)
    for b in range(2):
        d = torch.cdist(c1[b], X[b]).amin(-1)
        assert bool((d < 1e-6).all())


def test_bad_input_raises():
    X = torch.randn(10, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="num_components"):
        fit_gmm(X, 0)
    Xn = X.clone()
    Xn[0, 0] = float("nan")
    with pytest.raises(ValueError, match="X"):
        fit_gmm(Xn, 2)
    with pytest.raises(ValueError, match="mask"):
        fit_gmm(X, 2, mask=torch.ones(9, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least"):
        fit_gmm(X[:1], 2)


def test_em_doc_quotes_no_unsourced_observed_numbers_and_no_false_dtype_claim():
    """A probe (finding 9): docs/em.md quoted three "observed" numbers (~1e-16, ~1e-15, |diff| < 1e-9) that come from
    no committed JSON, and said "float64 throughout" while a float32 X was fitted in float32. The numbers are gone (the
    page states the tests' tolerances), and the dtype sentence says what the DP fits do (tests/test_em_private_count.py
    checks it)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "em.md").read_text()
    assert not re.search(r"observed[^.]*\d", text), re.findall(r"\(observed[^)]*\)", text)
    assert "float64 throughout" not in text and "compute in float64" in text
