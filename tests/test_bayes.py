"""Tests of torchdpgmm.bayes (Xi, Kantarcioglu & Inan 2011). Reference values come from brute force
over sibling databases (numpy), scipy.integrate / scipy.stats, and closed forms."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate, optimize, stats

from torchdpgmm import bayes as B

DT = torch.float64


# ----------------------------------------------------------------------------------- sensitivities
def _cov_upper(X: np.ndarray) -> np.ndarray:
    m = X.mean(0)
    C = (X - m).T @ (X - m) / len(X)  # the paper's 1/n divisor
    return C[np.triu_indices(X.shape[1])]


def _brute(query, n: int, d: int, grid=(0.0, 0.5, 1.0)):
    """max L1 change of ``query`` over sibling databases of size n with records on a grid of [0,1]^d."""
    pts = [np.array(p) for p in itertools.product(grid, repeat=d)]
    best = 0.0
    for common in itertools.combinations_with_replacement(range(len(pts)), n - 1):
        C = [pts[i] for i in common]
        for a, b in itertools.combinations(pts, 2):
            v = np.abs(query(np.array(C + [a])) - query(np.array(C + [b]))).sum()
            best = max(best, v)
    return best


@pytest.mark.parametrize("n,d", [(1, 1), (2, 2), (3, 2)])
def test_mean_and_sum_sensitivity_brute_force(n, d):
    assert _brute(lambda X: X.mean(0), n, d) == pytest.approx(float(B.mean_sensitivity(n, d)))
    assert _brute(lambda X: X.sum(0), n, d) == pytest.approx(B.sum_sensitivity(d))
    assert B.sum_and_size_sensitivity(d) == d
    # Corollary 3.1: n = 1 is the worst case over all sizes
    assert _brute(lambda X: X.mean(0), 1, d) == pytest.approx(B.mean_sensitivity_all_n(d))


def test_median_sensitivity_reaches_d():
    # proof of Theorem 3.3: m+1 zero records and m one records; flipping one zero record shifts every median by 1
    d, m = 2, 2
    D1 = np.array([[0.0] * d] * (m + 1) + [[1.0] * d] * m)
    D2 = D1.copy()
    D2[m] = 1.0
    assert np.abs(np.median(D1, 0) - np.median(D2, 0)).sum() == B.median_sensitivity(d)
    assert _brute(lambda X: np.median(X, 0), 3, d) == pytest.approx(B.median_sensitivity(d))


@pytest.mark.parametrize("n,d", [(2, 1), (3, 1), (4, 1), (2, 2), (3, 2)])
def test_covariance_sensitivity_bounds_brute_force(n, d):
    lo, hi = (float(t) for t in B.covariance_matrix_sensitivity_bounds(n, d))
    assert lo == pytest.approx((1 / n - 1 / n**2) * d * (d + 1) / 2)
    assert hi == pytest.approx(3 * lo)
    best = _brute(_cov_upper, n, d)
    assert lo - 1e-12 <= best <= hi + 1e-12
    # the extreme configuration of the proof (common records 0, x1 = 1, x2 = 0) attains the lower bound,
    # and no grid configuration exceeds it: the lower bound is the exact sensitivity
    C = np.zeros((n - 1, d))
    ext = np.abs(_cov_upper(np.vstack([C, np.ones(d)])) - _cov_upper(np.vstack([C, np.zeros(d)]))).sum()
    assert ext == pytest.approx(lo)
    assert best == pytest.approx(float(B.covariance_matrix_sensitivity(n, d, "exact")))
    if d == 1:
        assert tuple(float(t) for t in B.variance_sensitivity_bounds(n)) == pytest.approx((lo, hi))
        assert tuple(float(t) for t in B.covariance_sensitivity_bounds(n)) == pytest.approx((lo, hi))


def test_exact_covariance_sensitivity_random_search():
    rng = np.random.default_rng(0)
    n, d = 3, 3
    exact = float(B.covariance_matrix_sensitivity(n, d, "exact"))
    X = rng.random((20000, n + 1, d))
    X[::3] = np.round(X[::3])  # include many vertex configurations
    diffs = []
    for D in X:
        diffs.append(np.abs(_cov_upper(D[:n]) - _cov_upper(np.vstack([D[: n - 1], D[n:]]))).sum())
    assert max(diffs) <= exact + 1e-12
    assert B.covariance_matrix_sensitivity_all_n(d) == pytest.approx(float(B.covariance_matrix_sensitivity_bounds(2, d)[1]))


def test_range_adjusted_sensitivities_match_rescaled_brute_force():
    w = np.array([2.0, 0.5])
    n = 3
    ms, cs = B.range_adjusted_sensitivities(torch.tensor(float(n)), torch.tensor(w), bound="exact")
    mean_bf = _brute(lambda X: (X * w).mean(0), n, 2)
    cov_bf = _brute(lambda X: _cov_upper(X * w), n, 2)
    assert float(ms) == pytest.approx(mean_bf)
    assert float(cs) == pytest.approx(cov_bf)
    _, cu = B.range_adjusted_sensitivities(torch.tensor(float(n)), torch.tensor(w), bound="upper")
    assert float(cu) == pytest.approx(3 * cov_bf)


def test_sensitivity_bad_input():
    with pytest.raises(ValueError, match="n"):
        B.variance_sensitivity_bounds(1)
    with pytest.raises(ValueError, match="d"):
        B.mean_sensitivity(10, 0)
    with pytest.raises(ValueError, match="bound"):
        B.covariance_matrix_sensitivity(10, 2, "loose")


# ---------------------------------------------------------------------- truncation, release, repair
def _two_class(d=3):
    mu = torch.tensor([[0.0] * d, [2.0] * d], dtype=DT)
    cov = torch.stack([torch.eye(d, dtype=DT), 2 * torch.eye(d, dtype=DT)])
    return B.GaussianClasses(torch.tensor([0.4, 0.6], dtype=DT), mu, cov)


def test_truncation_and_normalisation_invariants():
    m = _two_class()
    g = torch.Generator().manual_seed(1)
    x, y = B.sample_classes(m, 400, g, (3,))
    lo, hi = B.truncation_box(m.means, m.covariances, k=1.0)  # narrow box so clamping happens
    assert torch.allclose(hi - lo, 2 * torch.diagonal(m.covariances, dim1=-2, dim2=-1).sqrt())
    xt = B.truncate(x, y, lo, hi)
    lo_r, hi_r = lo[y], hi[y]
    assert bool(((xt >= lo_r) & (xt <= hi_r)).all())
    inside = (x >= lo_r) & (x <= hi_r)
    assert bool(inside.any()) and bool((~inside).any())
    assert torch.equal(xt[inside], x[inside])
    u = B.normalize(xt, y, lo, hi)
    assert float(u.min()) >= 0.0 and float(u.max()) <= 1.0


def _random_noisy(batch=200, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(batch, d, d, dtype=DT, generator=g)
    S = A @ A.transpose(-1, -2) / d
    return S + 0.8 * torch.randn(batch, d, d, dtype=DT, generator=g)  # asymmetric noise, many indefinite


@pytest.mark.parametrize("repair", [B.xi_repair_reference, B.xi_repair])
def test_repair_invariants(repair):
    S = _random_noisy()
    upper = torch.triu(S)
    mirrored = upper + upper.transpose(-1, -2) - torch.diag_embed(torch.diagonal(S, dim1=-2, dim2=-1))
    ev = torch.linalg.eigvalsh(mirrored)
    assert bool((ev <= 0).any(-1).any()) and bool((ev > 0).all(-1).any())
    R = repair(mirrored)
    assert torch.allclose(R, R.transpose(-1, -2), atol=0, rtol=0) or torch.allclose(R, R.transpose(-1, -2), atol=1e-12)
    assert bool((torch.linalg.eigvalsh(R) > 0).all())
    # step 3(b): negative eigenvalues become the smallest positive one, positive ones stay
    minpos = torch.where(ev > 0, ev, torch.full_like(ev, float("inf"))).amin(-1, keepdim=True)
    expect = torch.sort(torch.where(ev > 0, ev, minpos), -1).values
    assert torch.allclose(torch.linalg.eigvalsh(R), expect, atol=1e-10)
    # already positive definite -> unchanged
    pd = (ev > 0).all(-1)
    assert torch.allclose(R[pd], mirrored[pd], atol=1e-12)


def test_reference_repair_uses_upper_triangle():
    S = torch.tensor([[2.0, 5.0], [-7.0, 3.0]], dtype=DT)  # lower triangle is ignored (step 3(a))
    R = B.xi_repair_reference(S)
    ev = np.linalg.eigvalsh(np.array([[2.0, 5.0], [5.0, 3.0]]))
    assert ev[0] < 0
    assert np.allclose(np.linalg.eigvalsh(R.numpy()), [ev[1], ev[1]])


def test_class_statistics_match_numpy():
    m = _two_class()
    g = torch.Generator().manual_seed(2)
    x, y = B.sample_classes(m, 300, g, (2,))
    counts, means, covs = B.class_statistics(x, y, 2)
    for t in range(2):
        for k in range(2):
            xk = x[t][y[t] == k].numpy()
            assert counts[t, k] == len(xk)
            assert np.allclose(means[t, k].numpy(), xk.mean(0))
            assert np.allclose(covs[t, k].numpy(), np.cov(xk.T, bias=True))


def test_xi_release_noise_scale_and_validation():
    m = _two_class(d=2)
    g = torch.Generator().manual_seed(3)
    T, n, eps = 3000, 40, 2.0
    x, y = B.sample_classes(m, n, g, (T,))
    lo, hi = B.truncation_box(m.means, m.covariances)
    rel = B.xi_release(x, y, 2, eps, lo, hi, generator=g)
    w = hi - lo
    # released mean - noise-free mean, in normalised units, is Laplace(0, (d/n_k) / (eps/2)): E|L| = scale
    err = (rel.model.means - rel.nonprivate.means) / w
    scale = rel.mean_scale.unsqueeze(-1)
    assert torch.allclose(scale, (2 / rel.counts / (eps / 2)).unsqueeze(-1))
    ratio = (err.abs() / scale).mean()
    assert abs(float(ratio) - 1.0) < 0.03
    # covariance sensitivity: Theorem 3.7 upper bound, d(d+1)/2 = 3 entries
    n_k = rel.counts
    assert torch.allclose(rel.cov_scale, (3 / n_k - 3 / n_k**2) * 3 / (eps / 2))
    assert bool((torch.linalg.eigvalsh(rel.model.covariances) > 0).all())
    assert torch.allclose(rel.model.weights, rel.counts / n)
    gen_state = g.get_state()
    for kwargs, msg in [({"epsilon": 0.0}, "epsilon"), ({"mean_fraction": 1.0}, "mean_fraction"),
                        ({"cov_bound": "x"}, "cov_bound")]:
        args = {"epsilon": 1.0, **kwargs}
        with pytest.raises(ValueError, match=msg):
            B.xi_release(x, y, 2, args.pop("epsilon"), lo, hi, generator=g, **args)
    with pytest.raises(ValueError, match="labels"):
        B.xi_release(x, y + 5, 2, 1.0, lo, hi, generator=g)
    assert torch.equal(g.get_state(), gen_state)  # no noise drawn before the checks


# ------------------------------------------------------------------------------------------ bounds
def _integrals_1d(p1, m1, v1, m2, v2):
    f1 = lambda x: p1 * stats.norm.pdf(x, m1, math.sqrt(v1))  # noqa: E731
    f2 = lambda x: (1 - p1) * stats.norm.pdf(x, m2, math.sqrt(v2))  # noqa: E731
    kw = dict(points=[m1, m2], limit=200, epsabs=1e-12, epsrel=1e-10)
    lo, hi = min(m1, m2) - 40, max(m1, m2) + 40
    bayes = integrate.quad(lambda x: min(f1(x), f2(x)), lo, hi, **kw)[0]
    bhat = integrate.quad(lambda x: math.sqrt(f1(x) * f2(x)), lo, hi, **kw)[0]
    ch = optimize.minimize_scalar(lambda s: integrate.quad(lambda x: f1(x) ** s * f2(x) ** (1 - s), lo, hi, **kw)[0],
                                  bounds=(0, 1), method="bounded", options={"xatol": 1e-10})
    return bayes, bhat, ch.fun


@pytest.mark.parametrize("p1,m1,v1,m2,v2", [(0.5, 0.0, 1.0, 2.0, 1.0), (0.7, 0.0, 1.0, 1.5, 4.0),
                                            (0.3, 1.0, 0.25, -0.5, 2.0)])
def test_bounds_against_integration_1d(p1, m1, v1, m2, v2):
    bayes, bhat, ch = _integrals_1d(p1, m1, v1, m2, v2)
    t = lambda v: torch.tensor([v], dtype=DT)  # noqa: E731
    c = lambda v: torch.tensor([[v]], dtype=DT)  # noqa: E731
    bb = float(B.bhattacharyya_bound(p1, t(m1), c(v1), t(m2), c(v2)))
    cb, s = B.chernoff_bound(p1, t(m1), c(v1), t(m2), c(v2))
    assert bb == pytest.approx(bhat, rel=1e-8)
    assert float(cb) == pytest.approx(ch, rel=1e-6)
    assert bayes <= float(cb) <= bb + 1e-15
    # eq. (5) written for 1-D agrees with the matrix form
    K1 = B.bhattacharyya_distance_1d(*(torch.tensor(v, dtype=DT) for v in (m1, v1, m2, v2)))
    assert float(K1) == pytest.approx(float(B.bhattacharyya_distance(t(m1), c(v1), t(m2), c(v2))), rel=1e-12)
    # the Monte Carlo error of the true Bayes rule matches the integral
    model = B.GaussianClasses(torch.tensor([p1, 1 - p1], dtype=DT), torch.tensor([[m1], [m2]], dtype=DT),
                              torch.tensor([[[v1]], [[v2]]], dtype=DT))
    g = torch.Generator().manual_seed(4)
    e = float(B.bayes_error_mc(model, model, 200_000, g))
    assert abs(e - bayes) < 4 * math.sqrt(bayes * (1 - bayes) / 200_000)


def test_monte_carlo_bayes_error_equal_covariance_closed_form():
    g = torch.Generator().manual_seed(5)
    d, T = 3, 4
    A = torch.randn(T, d, d, dtype=DT, generator=g)
    cov = A @ A.transpose(-1, -2) + 0.5 * torch.eye(d, dtype=DT)
    mu1 = torch.randn(T, d, dtype=DT, generator=g)
    mu2 = mu1 + torch.randn(T, d, dtype=DT, generator=g)
    model = B.GaussianClasses(torch.full((T, 2), 0.5, dtype=DT), torch.stack([mu1, mu2], 1),
                              torch.stack([cov, cov], 1))
    N = 100_000
    e = B.bayes_error_mc(model, model, N, g, chunk_size=30_000)  # trial-batched, chunked
    delta = np.array([np.sqrt((b - a) @ np.linalg.solve(S, b - a)) for a, b, S in
                      zip(mu1.numpy(), mu2.numpy(), cov.numpy())])
    ref = stats.norm.cdf(-delta / 2)
    assert np.all(np.abs(e.numpy() - ref) < 4 * np.sqrt(ref * (1 - ref) / N))
    assert torch.allclose(B.equal_covariance_error(mu1, mu2, cov), torch.tensor(ref, dtype=DT))
    # Chernoff and Bhattacharyya bounds coincide (s* = 1/2) for equal covariances and priors
    cb, s = B.chernoff_bound(0.5, mu1, cov, mu2, cov)
    assert torch.allclose(s, torch.full_like(s, 0.5), atol=1e-6)
    assert torch.allclose(cb, B.bhattacharyya_bound(0.5, mu1, cov, mu2, cov))
    assert bool((cb >= torch.tensor(ref)).all())


def test_plugin_classifier_matches_scipy():
    m = _two_class(d=2)
    x = torch.randn(50, 2, dtype=DT, generator=torch.Generator().manual_seed(6))
    lp = B.gaussian_class_log_prob(x, m.weights, m.means, m.covariances)
    ref = np.stack([np.log(m.weights[k].item()) + stats.multivariate_normal(m.means[k].numpy(),
                    m.covariances[k].numpy()).logpdf(x.numpy()) for k in range(2)], -1)
    assert np.allclose(lp.numpy(), ref)
    assert torch.equal(B.plugin_predict(x, m), torch.as_tensor(ref.argmax(-1)))


# -------------------------------------------------------------------------------------- Theorem 4.1
def _theorem_sim(T=20000, seed=7):
    g = torch.Generator().manual_seed(seed)
    mu = torch.tensor([1.0, 2.0], dtype=DT)
    var = torch.tensor([1.0, 1.5], dtype=DT)
    n = torch.tensor([30, 40])
    lam = torch.tensor([0.05, 0.05, 0.1, 0.1], dtype=DT)
    xs = [mu[i] + var[i].sqrt() * torch.randn(T, int(n[i]), dtype=DT, generator=g) for i in range(2)]
    xbar = torch.stack([v.mean(-1) for v in xs], -1)
    s2 = torch.stack([v.var(-1, unbiased=False) for v in xs], -1)
    u = torch.rand(T, 4, dtype=DT, generator=g) - 0.5
    r = -lam * torch.sign(u) * torch.log1p(-2 * u.abs())
    m_hat, v_hat = xbar + r[:, :2], s2 + r[:, 2:]
    ok = (v_hat > 0).all(-1)
    K = B.bhattacharyya_distance_1d(m_hat[:, 0], v_hat[:, 0].clamp(min=1e-300), m_hat[:, 1],
                                    v_hat[:, 1].clamp(min=1e-300))
    return mu, var, n, lam, K, ok


@pytest.mark.parametrize("form", ["interval", "paper"])
def test_theorem41_holds_with_probability_p8(form):
    mu, var, n, lam, K, ok = _theorem_sim()
    p = 0.9
    kl, ku = B.theorem41_bounds(mu, var, n, lam, p, quantiles="corrected", form=form)
    assert float(kl) < float(ku)
    freq = float((ok & (K > kl) & (K < ku)).to(DT).mean())
    assert freq >= p**8 - 3 * math.sqrt(p**8 * (1 - p**8) / K.numel())
    eb = B.theorem41_error_bound(0.5, mu, var, n, lam, p, form=form)
    assert float(eb) == pytest.approx(0.5 * math.exp(-float(kl)))


@pytest.mark.parametrize("form", ["interval", "paper"])
def test_theorem41_printed_quantiles_have_probability_1_minus_p(form):
    mu, var, n, lam, K, ok = _theorem_sim()
    p = 0.95
    mlo, mhi, vlo, vhi = B.theorem41_intervals(mu, var, n, lam, p, quantiles="paper")
    # the printed interval for a sample mean (noise part removed) is the central 1 - p interval
    half = float((mhi - mlo)[0] / 2 - lam[0] * (-math.log(p)))
    assert half == pytest.approx(math.sqrt(1.0 / 30) * stats.norm.ppf(1 - p / 2))
    assert stats.norm.cdf(half * math.sqrt(30)) - stats.norm.cdf(-half * math.sqrt(30)) == pytest.approx(1 - p)
    kl, ku = B.theorem41_bounds(mu, var, n, lam, p, quantiles="paper", form=form)
    freq = float((ok & (K > kl) & (K < ku)).to(DT).mean())
    se = math.sqrt(p**8 * (1 - p**8) / K.numel())
    assert freq < p**8 - 4 * se  # the printed version does not deliver its claimed probability


def test_theorem41_bad_input():
    with pytest.raises(ValueError, match="p must"):
        B.theorem41_bounds([0.0, 1.0], [1.0, 1.0], [10, 10], [0.1] * 4, 1.5)
    with pytest.raises(ValueError, match="quantiles"):
        B.theorem41_bounds([0.0, 1.0], [1.0, 1.0], [10, 10], [0.1] * 4, 0.5, quantiles="x")


def test_core_xi_repair_equals_literal_reference():
    S = _random_noisy(batch=100, d=5, seed=11)
    assert torch.allclose(B.xi_repair(S), B.xi_repair_reference(S), atol=1e-10)


@pytest.mark.parametrize("repair", ["xi", "floor", "shift"])
def test_release_repairs_give_pd_and_agree_when_pd(repair):
    m = _two_class(d=3)
    g = torch.Generator().manual_seed(12)
    x, y = B.sample_classes(m, 60, g, (50,))
    lo, hi = B.truncation_box(m.means, m.covariances)
    rel = B.xi_release(x, y, 2, 1.0, lo, hi, repair=repair, generator=torch.Generator().manual_seed(0))
    ref = B.xi_release(x, y, 2, 1.0, lo, hi, repair="xi", generator=torch.Generator().manual_seed(0))
    assert bool((torch.linalg.eigvalsh(rel.model.covariances) > 0).all())
    assert bool((~rel.was_pd).any()) and bool(rel.was_pd.any())
    # same noise; matrices that were already PD are left alone by every repair (shift/floor: up to 1e-6 margin)
    w = (hi - lo)
    scale = (w.unsqueeze(-1) * w.unsqueeze(-2))
    diff = ((rel.model.covariances - ref.model.covariances) / scale).abs().amax((-1, -2))
    assert float(diff[rel.was_pd].max()) < 1e-5
    assert torch.allclose(rel.model.means, ref.model.means)


@pytest.mark.cuda
def test_theorem41_and_bayes_error_on_cuda_match_cpu():
    """Inputs on CUDA: no .numpy() on device tensors; results equal the CPU ones (same numbers)."""
    args = (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.5]), torch.tensor([30, 40]),
            torch.tensor([0.05, 0.05, 0.1, 0.1]))
    cpu = B.theorem41_bounds(*args, 0.9)
    gpu = B.theorem41_bounds(*(a.cuda() for a in args), 0.9)
    assert gpu[0].device.type == "cuda"
    torch.testing.assert_close(gpu[0].cpu(), cpu[0])
    torch.testing.assert_close(gpu[1].cpu(), cpu[1])
    mu = torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64, device="cuda")
    model = B.GaussianClasses(torch.tensor([0.5, 0.5], dtype=torch.float64, device="cuda"), mu,
                              torch.eye(2, dtype=torch.float64, device="cuda").expand(2, 2, 2))
    err = B.bayes_error_mc(model, model, 200_000, torch.Generator(device="cuda").manual_seed(0))
    assert err.device.type == "cuda" and abs(float(err) - 0.1587) < 0.005  # Phi(-1)


# ------------------------------------------------------------------- padding and bad input (probe)
def test_masked_nan_rows_are_ignored_by_class_statistics_and_xi_release():
    """Padding rows (mask False) may hold NaN and any label: they used to poison every class's
    statistics (NaN * 0 = NaN) and make xi_release fail. Reference: numpy on the unmasked rows."""
    m = _two_class(d=2)
    x, y = B.sample_classes(m, 60, torch.Generator().manual_seed(11))
    mask = torch.ones(60, dtype=torch.bool)
    mask[:5] = False
    xm, ym = x.clone(), y.clone()
    xm[:5] = float("nan")
    ym[:2] = -1  # a padding label outside [0, K)
    counts, means, covs = B.class_statistics(xm, ym, 2, mask)
    xr, yr = x[5:].numpy(), y[5:].numpy()
    for k in range(2):
        assert counts[k] == (yr == k).sum()
        assert np.allclose(means[k].numpy(), xr[yr == k].mean(0))
        assert np.allclose(covs[k].numpy(), np.cov(xr[yr == k].T, bias=True))
    lo, hi = B.truncation_box(m.means, m.covariances, k=1.5)
    rel = B.xi_release(xm, ym, 2, 1.0, lo, hi, mask=mask, generator=torch.Generator().manual_seed(1))
    for k in range(2):  # the noise-free model is the 1/n statistics of the records clamped to their box
        xk = np.clip(xr[yr == k], lo[k].numpy(), hi[k].numpy())
        assert np.allclose(rel.nonprivate.means[k].numpy(), xk.mean(0))
        assert np.allclose(rel.nonprivate.covariances[k].numpy(), np.cov(xk.T, bias=True))
    assert bool(torch.isfinite(rel.model.means).all() and torch.isfinite(rel.model.covariances).all())
    sub = B.xi_release(x[5:], y[5:], 2, 1.0, lo, hi, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(rel.model.means, sub.model.means) and torch.allclose(rel.counts, sub.counts)


def test_sample_size_and_chunk_size_are_checked():
    """n = 0 and chunk_size = 0 gave torch's 'cannot sample n_sample <= 0 samples'; a numpy int is fine."""
    m = _two_class(d=2)
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    for n in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="n must be a positive int"):
            B.sample_classes(m, n, g)
    for cs in (0, -1, 100.0):
        with pytest.raises(ValueError, match="chunk_size must be a positive int"):
            B.bayes_error_mc(m, m, num_test=10, generator=g, chunk_size=cs)
    assert torch.equal(g.get_state(), state)
    x, y = B.sample_classes(m, np.int64(7), g)
    assert x.shape == (7, 2) and y.shape == (7,)


def test_bayes_error_helpers_refuse_invalid_models_and_priors():
    """A NaN in the plug-in's mean gave 0.5 (argmax reads NaN as the largest score), a K = 3 plug-in against a
    K = 2 truth a plausible 0.503; chernoff_bound gave NaN at prior 0 (the Bayes error, and the bound, is 0)
    and NaN instead of an error at prior 1.2, bhattacharyya_bound NaN at prior 1.5."""
    eye = torch.eye(2, dtype=DT)
    true = B.GaussianClasses(torch.tensor([0.5, 0.5], dtype=DT), torch.tensor([[0.0, 0.0], [2.0, 1.0]], dtype=DT),
                             eye.expand(2, 2, 2))
    nan_plugin = B.GaussianClasses(true.weights, torch.tensor([[math.nan, 0.0], [2.0, 1.0]], dtype=DT),
                                   true.covariances)
    k3 = B.GaussianClasses(torch.full((3,), 1 / 3, dtype=DT), torch.zeros(3, 2, dtype=DT), eye.expand(3, 2, 2))
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    with pytest.raises(ValueError, match="plugin_model has non-finite"):
        B.bayes_error_mc(true, nan_plugin, num_test=100, generator=g)
    with pytest.raises(ValueError, match="label spaces"):
        B.bayes_error_mc(true, k3, num_test=100, generator=g)
    assert torch.equal(g.get_state(), state)
    one, two, var = torch.tensor([0.0], dtype=DT), torch.tensor([1.0], dtype=DT), torch.tensor([[1.0]], dtype=DT)
    for p in (0.0, 1.0):  # one class has all the mass: the Bayes error is 0, and so is the Chernoff minimum
        bound, _ = B.chernoff_bound(p, one, var, two, var)
        assert float(bound) == 0.0
    # an interior prior: scipy's minimum of P1^s P2^(1-s) exp(-k(s)), k(s) = 9 s(1-s)/2 (means 3 apart, unit
    # variances; the minimiser is interior)
    three = torch.tensor([3.0], dtype=DT)
    ref = optimize.minimize_scalar(lambda s: 0.3**s * 0.7 ** (1 - s) * math.exp(-4.5 * s * (1 - s)), bounds=(0, 1),
                                   method="bounded", options={"xatol": 1e-10})
    assert 0.1 < ref.x < 0.9
    assert float(B.chernoff_bound(0.3, one, var, three, var)[0]) == pytest.approx(ref.fun, rel=1e-9)
    for p in (1.2, -0.1, math.nan):
        with pytest.raises(ValueError, match="prior1 must lie in"):
            B.chernoff_bound(p, one, var, two, var)
        with pytest.raises(ValueError, match="prior1 must lie in"):
            B.bhattacharyya_bound(p + 0.3 if p == 1.2 else p, one, var, two, var)


def test_theorem41_scales_and_sizes_and_plain_number_distance():
    """theorem41_bounds accepted negative Laplace scales (narrower bounds, silently) and n = 1 (a chi-square
    with 0 degrees of freedom: NaN); bhattacharyya_distance_1d refused Python floats (torch.log's TypeError)."""
    t = lambda v: torch.tensor(v, dtype=DT)  # noqa: E731
    with pytest.raises(ValueError, match="lam .* must be finite and >= 0"):
        B.theorem41_bounds(t([1.0, 2.0]), t([1.0, 1.5]), t([50.0, 80.0]), -t([0.05, 0.04, 0.1, 0.08]), 0.9)
    with pytest.raises(ValueError, match="lam .* must be finite and >= 0"):
        B.theorem41_intervals([1.0, 2.0], [1.0, 1.5], [50, 80], [0.05, math.nan, 0.1, 0.1], 0.9)
    with pytest.raises(ValueError, match="n .* must be >= 2"):
        B.theorem41_bounds([1.0, 2.0], [1.0, 1.5], [1, 80], [0.05] * 4, 0.9)
    # eq. (5) by hand: (mu1 - mu2)^2 / (4 (s1 + s2)) + log(s1 + s2)/2 - log(4 s1 s2)/4
    ref = (0.0 - 1.0) ** 2 / (4 * 3.0) + 0.5 * math.log(3.0) - 0.25 * math.log(4 * 1.0 * 2.0)
    got = B.bhattacharyya_distance_1d(0.0, 1.0, 1.0, 2.0)
    assert got.dtype == DT and float(got) == pytest.approx(ref, rel=1e-15)
    assert B.bhattacharyya_distance_1d(t(0.0), 1.0, 1.0, 2.0).dtype == DT
