"""Exact discrete samplers (Canonne, Kamath & Steinke 2020) against their PMFs, computed independently."""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchdpgmm import mechanisms as M
from torchdpgmm import privacy as P
from torchdpgmm.mechanisms import discrete as D


def _chi2_pvalue(draws: np.ndarray, support: np.ndarray, pmf: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square goodness of fit. Cells with small expectation are pooled into the two tails, and the
    tails are widened inward until each also expects at least ``min_expected`` draws (a tail expecting 0.1
    draws would turn one unlucky draw into a chi-square of about 10 and make the test anti-conservative)."""
    n = draws.size
    keep = pmf * n >= min_expected
    lo, hi = support[keep].min(), support[keep].max()
    while n * pmf[support < lo].sum() < min_expected and lo < hi:
        lo += 1
    while n * pmf[support > hi].sum() < min_expected and hi > lo:
        hi -= 1
    inner = np.arange(lo, hi + 1)
    obs = np.array([(draws < lo).sum()] + [(draws == k).sum() for k in inner] + [(draws > hi).sum()])
    p_in = np.array([pmf[support == k][0] for k in inner])
    exp = n * np.concatenate([[pmf[support < lo].sum()], p_in, [pmf[support > hi].sum()]])
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


def _dgauss_pmf(sigma2: float, half_width: int):
    k = np.arange(-half_width, half_width + 1)
    w = np.exp(-(k.astype(float) ** 2) / (2 * sigma2))
    return k, w / w.sum()


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.3, 17.0])
def test_discrete_gaussian_matches_pmf(sigma):
    x = D.discrete_gaussian_noise((40_000,), sigma, torch.Generator().manual_seed(int(sigma * 10)))
    assert x.dtype == torch.int64
    t, q, den = D.rational_gaussian_variance(sigma)
    s2 = t * q / den
    assert sigma ** 2 <= s2 <= sigma ** 2 * (1 + 1e-5)
    k, pmf = _dgauss_pmf(s2, int(12 * sigma) + 12)
    assert _chi2_pvalue(x.numpy(), k, pmf) > 1e-3


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.5])
def test_discrete_laplace_matches_scipy_dlaplace(scale):
    x = D.discrete_laplace_noise((40_000,), scale, torch.Generator().manual_seed(7))
    t, s = D.rational_laplace_scale(scale)
    assert scale <= t / s <= scale * (1 + 1e-5)
    k = np.arange(-int(40 * scale) - 20, int(40 * scale) + 21)
    pmf = stats.dlaplace(s / t).pmf(k)  # P(k) ∝ exp(-a |k|), a = 1/b
    assert _chi2_pvalue(x.numpy(), k, pmf) > 1e-3


@pytest.mark.parametrize("num,den", [(0, 1), (3, 10), (1, 1), (5, 2), (7, 3), (9, 1)])
def test_bernoulli_exp_neg_rate(num, den):
    n = 100_000
    b = D.bernoulli_exp_neg(torch.full((n,), num, dtype=torch.int64), den, torch.Generator().manual_seed(num + den))
    assert b.dtype == torch.bool
    assert stats.binomtest(int(b.sum()), n, math.exp(-num / den)).pvalue > 1e-3


def test_discrete_gaussian_moments_close_to_continuous():
    # the discrete Gaussian's variance is below sigma^2 but within 1e-6 relative for sigma >= 2 (CKS 2020)
    sigma = 4.0
    x = D.discrete_gaussian_noise((60_000,), sigma, torch.Generator().manual_seed(3)).double().numpy()
    y = torch.randn(60_000, generator=torch.Generator().manual_seed(4), dtype=torch.float64).numpy() * sigma
    assert abs(x.mean()) < 0.06 and abs(x.var() / sigma ** 2 - 1) < 0.03
    assert abs(x.var() / y.var() - 1) < 0.04
    assert abs(stats.kurtosis(x)) < 0.1


def test_seeded_and_batched_shapes():
    a = D.discrete_gaussian_noise((3, 4, 5), 2.0, torch.Generator().manual_seed(0))
    b = D.discrete_gaussian_noise((3, 4, 5), 2.0, torch.Generator().manual_seed(0))
    assert a.shape == (3, 4, 5) and torch.equal(a, b)
    assert D.discrete_laplace_noise((0,), 1.0).shape == (0,)


@pytest.mark.parametrize("bad", [0.1, float("nan"), 2.0 ** 26])
def test_out_of_range_sigma_refused(bad):
    with pytest.raises(ValueError, match="sigma"):
        D.discrete_gaussian_noise((3,), bad)


def test_add_noise_integer_statistics_stay_integers():
    counts = torch.tensor([[3, 0, 12]], dtype=torch.int64)
    out, used = M.add_noise(counts, 2.0, kind="gaussian", noise="discrete", generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.int64 and out.shape == counts.shape and used >= 2.0
    out, _ = M.add_noise(counts, 2.0, kind="laplace", noise="discrete", generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.int64


def test_add_noise_discretised_real_statistics_lie_on_the_grid():
    x = torch.randn(4, 6, dtype=torch.float64)
    out, used = M.add_noise(x, 0.5, noise="discrete", grid=0.01, generator=torch.Generator().manual_seed(1))
    k = out / 0.01
    assert torch.allclose(k, k.round(), atol=1e-6) and abs(used - 0.5) < 1e-5
    Q = torch.randn(3, 4, 4, dtype=torch.float64)
    Q = Q @ Q.transpose(-1, -2)
    outQ, _ = M.add_noise(Q, 0.3, noise="discrete", grid=0.05, symmetric=True,
                          generator=torch.Generator().manual_seed(2))
    assert torch.equal(outQ, outQ.transpose(-1, -2))
    diag = torch.diagonal(outQ, dim1=-2, dim2=-1) / 0.05
    assert torch.allclose(diag, diag.round(), atol=1e-6)
    off = outQ[..., 0, 1] * math.sqrt(2) / 0.05  # isometric coordinates lie on the grid
    assert torch.allclose(off, off.round(), atol=1e-6)


def test_add_noise_continuous_matches_samplers():
    x = torch.zeros(5, dtype=torch.float32)
    out, used = M.add_noise(x, 1.5, generator=torch.Generator().manual_seed(0))
    ref = M.normal_noise((5,), 1.5, torch.Generator().manual_seed(0), dtype=torch.float64)
    assert out.dtype == torch.float64 and torch.equal(out, ref) and used == 1.5
    with pytest.raises(ValueError, match="noise"):
        M.add_noise(x, 1.0, noise="exact")


def test_discrete_sensitivity_bound_holds_by_brute_force():
    rng = np.random.default_rng(0)
    m, delta, grid = 6, 1.0, 0.37
    bound2 = M.discrete_sensitivity(delta, grid=grid, dim=m)
    bound1 = M.discrete_sensitivity(delta, grid=grid, dim=m, norm="l1")
    worst2 = worst1 = 0.0
    for _ in range(20_000):
        x = rng.normal(size=m) * 5
        v = rng.normal(size=m)
        x2 = x + delta * v / np.linalg.norm(v) * rng.uniform(0.9, 1.0)
        d = np.round(x / grid) - np.round(x2 / grid)
        worst2 = max(worst2, np.linalg.norm(d))
        v1 = rng.laplace(size=m)
        x1 = x + delta * v1 / np.abs(v1).sum()
        worst1 = max(worst1, np.abs(np.round(x / grid) - np.round(x1 / grid)).sum())
    assert worst2 <= bound2 and worst1 <= bound1
    assert worst2 > delta / grid  # rounding does inflate the sensitivity
    assert M.discrete_sensitivity(3.0, integer=True) == 3.0


def test_discrete_events_accounting():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    # 1-D discrete Gaussian: PLD accountant equals dp-accounting's exact discrete PLD; the zCDP bound is above
    ev = P.DiscreteGaussianEvent(1, 3.0)
    ours = P.PLDAccountant().compose(ev).get_epsilon(1e-5)
    ref = pld.from_discrete_gaussian_mechanism(3.0, sensitivity=1).get_epsilon_for_delta(1e-5)
    assert ours == pytest.approx(ref, abs=1e-6)
    zc = P.ZCDPAccountant().compose(ev).get_epsilon(1e-5)
    assert zc >= ours and zc == pytest.approx(P.zcdp_epsilon(1 / 18, 1e-5), rel=1e-9)
    # multi-dimensional: only the zCDP-based accountants price it
    with pytest.raises(TypeError, match="zCDP"):
        P.PLDAccountant().compose(P.DiscreteGaussianEvent(2.0, 3.0, dim=4))
    rdp = P.RDPAccountant().compose(P.DiscreteGaussianEvent(2.0, 3.0, dim=4)).get_epsilon(1e-5)
    assert rdp == pytest.approx(P.ZCDPAccountant().compose(P.DiscreteGaussianEvent(2.0, 3.0, dim=4)).get_epsilon(1e-5),
                                rel=0.05)
    # discrete Laplace: pure (Delta/b)-DP
    lap = P.PLDAccountant().compose(P.DiscreteLaplaceEvent(2, 4.0))
    assert lap.get_epsilon(1e-12) <= 0.5 + 1e-3


@pytest.mark.cuda
def test_samplers_and_calibration_run_on_cuda():
    dev = torch.device("cuda")
    x = D.discrete_gaussian_noise((1000,), 2.0, torch.Generator(device=dev).manual_seed(0), device=dev)
    assert x.device.type == "cuda" and x.dtype == torch.int64
    y = D.discrete_laplace_noise((1000,), 2.0, torch.Generator(device=dev).manual_seed(0), device=dev)
    assert y.device.type == "cuda"
    mu = P.gdp_mu(torch.tensor([0.5, 1.0], device=dev), 1e-5)
    assert mu.device.type == "cuda"
    assert float(mu[1]) == pytest.approx(P.gdp_mu(1.0, 1e-5), rel=1e-12)
    n = M.laplace_noise((10,), torch.tensor(1.0, device=dev, dtype=torch.float32))
    assert n.device.type == "cuda" and n.dtype == torch.float32


def test_accounting_doc_describes_the_fixed_work_samplers_the_code_runs():
    """A probe (finding 9): docs/accounting.md still said the samplers' "rejection loops repeat over fresh random
    draws" and that a Bernoulli(n/d) is "U < n with U exactly uniform on {0..d-1}"; the code (and docs/privacy.md) has
    fixed work with no retry, a pool read by a gather, and the 63-bit coin u < c n given u < c m."""
    import inspect
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "accounting.md").read_text().split())
    module = " ".join(inspect.getdoc(D).split())
    assert "repeat over fresh random draws" not in text and "`U < n`" not in text
    for phrase in ("`u < c n`", "`c = floor((2^63 - 1) / m)`", "given `u < c m`", "no retry", "gather",
                   "`n 2^-64`"):
        assert phrase in text, phrase
    assert "``u < c n``" in module and "``c = floor((2^63 - 1) / m)``" in module and "gather" in module
