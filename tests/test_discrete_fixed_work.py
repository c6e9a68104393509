"""The exact discrete samplers do a fixed amount of work that does not depend on the noise they draw, with no
host synchronisation, and their caps and pool sizes hold the tail bounds they claim (checked against
independent computations: exact rationals, scipy's distributions, brute-force sums)."""
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import special, stats
from torch.utils._python_dispatch import TorchDispatchMode

from torchdpgmm.mechanisms import discrete as D

SYNC_OPS = {"nonzero", "_local_scalar_dense", "item", "is_nonzero", "masked_select", "masked_scatter",
            "_unique", "_unique2", "unique_dim", "unique_consecutive", "repeat_interleave", "equal"}


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        shapes = tuple(tuple(a.shape) for a in args if torch.is_tensor(a))
        bool_index = name == "index" and any(torch.is_tensor(i) and i.dtype == torch.bool
                                             for i in (args[1] if len(args) > 1 else ()) if i is not None)
        self.ops.append((name, shapes, bool_index))
        return func(*args, **kwargs)


def _record(fn):
    D._tables("cpu")  # the constant tables are put on a device once (a copy, not part of a call's work)
    with _Recorder() as rec:
        out = fn()
    return rec.ops, out


@pytest.mark.parametrize("draw", [
    lambda g: D.discrete_gaussian_noise((300,), 2.0, g),
    lambda g: D.discrete_gaussian_noise((2500,), 2.0, g),  # a larger pool (the same round-by-round layout on the CPU)
    lambda g: D.discrete_laplace_noise((300,), 1.5, g),
    lambda g: D.discrete_laplace_noise((2500,), 1.5, g),
    lambda g: D.bernoulli_exp_neg(torch.arange(40, dtype=torch.int64), 7, g),
])
def test_dispatched_work_is_identical_for_different_seeds_and_has_no_sync(draw):
    ops_a, a = _record(lambda: draw(torch.Generator().manual_seed(1)))
    ops_b, b = _record(lambda: draw(torch.Generator().manual_seed(2)))
    assert not torch.equal(a, b)  # different noise ...
    assert ops_a == ops_b  # ... same ops, same shapes, same order
    names = Counter(n for n, _, _ in ops_a)
    assert not SYNC_OPS & set(names), SYNC_OPS & set(names)
    assert not any(bi for _, _, bi in ops_a)
    drawn = sum(math.prod(shapes[0]) for n, shapes, _ in ops_a if n == "random_")
    assert drawn > 40 * a.numel()  # the fixed rounds are really drawn (over 40 uniforms per output)


def test_work_does_not_depend_on_sigma_beyond_the_public_pool_size():
    # sigma 20 and 200 have (nearly) the same acceptance bound; the sequence of ops is the same, and with the
    # same pool size the shapes are the same too
    ops = {}
    for sigma in (20.0, 200.0, 0.3):
        ops[sigma], _ = _record(lambda: D.discrete_gaussian_noise((500,), sigma, torch.Generator().manual_seed(0)))
    names = {s: [n for n, _, _ in o] for s, o in ops.items()}
    assert names[20.0] == names[200.0] == names[0.3]
    p20 = D._acceptance(("gaussian",) + D.rational_gaussian_variance(20.0))
    p200 = D._acceptance(("gaussian",) + D.rational_gaussian_variance(200.0))
    if D._pool_size(500, p20) == D._pool_size(500, p200):
        assert ops[20.0] == ops[200.0]


def test_work_is_the_same_whatever_the_draws_are_far_in_the_tail():
    # condition on the realised noise: calls whose draws include |z| > 3 sigma do exactly the same work
    sigma, works = 1.0, {}
    for seed in range(12):
        ops, z = _record(lambda: D.discrete_gaussian_noise((8,), sigma, torch.Generator().manual_seed(seed)))
        works.setdefault(bool((z.abs() > 3 * sigma).any()), set()).add(tuple(ops))
    assert len(works.get(False, set()) | works.get(True, set())) == 1


def test_geometric_table_is_floor_of_2_to_126_times_e_to_minus_v():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(80):
        for v, s_v in enumerate(D._S, start=1):
            assert s_v == int(mpmath.floor(mpmath.mpf(2) ** 126 * mpmath.exp(-v)))
    assert len(D._S) == 53 and all(a > b > 0 for a, b in zip(D._S, D._S[1:]))
    assert all((h << 63) + l == s_v for h, l, s_v in zip(D._H, D._L, D._S))


def test_geometric_count_matches_scipy_and_reads_the_table_exactly():
    # V = #{v: X < S_v} for X on 126 bits: against scipy's geometric (P(V >= v) = e^-v), capped
    v = D._geometric_exp_neg1(200_000, 6, torch.Generator().manual_seed(9), torch.device("cpu")).numpy()
    geo = stats.geom(1 - math.exp(-1), loc=-1)  # number of successes before the first failure
    pmf = np.append(geo.pmf(np.arange(6)), geo.sf(5))
    obs = np.array([(v == k).sum() for k in range(7)])
    assert stats.chisquare(obs, pmf * v.size).pvalue > 1e-3
    # the lookup against a brute-force count over the 53 thresholds, including the hi = 0 and tie branches
    g = torch.Generator().manual_seed(1)
    m = 4000
    hi = torch.empty(m, dtype=torch.int64).random_(generator=g)
    lo = torch.empty(m, dtype=torch.int64).random_(generator=g)
    hi[:600] = torch.tensor(D._H)[torch.arange(600) % 53]  # ties with every high word (and hi = 0)
    hi[600:700] = 0
    lo[700:753] = torch.tensor(D._L)  # exact threshold values: X == S_v is not below S_v
    hi[700:753] = torch.tensor(D._H)
    seq = iter([hi, lo])

    def fake_uniform(m_, generator, device, dtype=torch.int64):
        return next(seq)

    orig = D._uniform
    D._uniform = fake_uniform
    try:
        got = D._geometric_exp_neg1(m, 53, g, torch.device("cpu"))
    finally:
        D._uniform = orig
    X = [(int(h) << 63) + int(l) for h, l in zip(hi, lo)]
    ref = [sum(x < s_v for s_v in D._S) for x in X]
    assert got.tolist() == ref


def test_caps_hold_their_tail_bounds_independently_computed():
    two76 = 2.0 ** -76
    # Algorithm 1 (gamma <= 1): all 24 coins one with probability gamma^24/24!, and 23 would not do
    assert 1 / special.factorial(D._EXP_STEPS) < 2.0 ** -79 < 1 / special.factorial(D._EXP_STEPS - 1)
    # Laplace proposal count V (successes before a failure, success e^-1): P(V >= v) = sf of a geometric
    geo = stats.geom(1 - math.exp(-1), loc=-1)  # support 0, 1, ...: P(V >= v) = sf(v - 1)
    assert geo.sf(D._V_LAPLACE - 1) <= two76 < geo.sf(D._V_LAPLACE - 2)
    # integer part of Algorithm 3's exponent: the coin is one with probability e^-k <= e^-53 when k > 52
    assert math.exp(-(D._INT_CAP + 1)) <= two76 < math.exp(-D._INT_CAP)
    # Gaussian proposal count: P(V >= 11 and the Gaussian coin) by brute force over the proposal's PMF
    for sigma in (0.25, 1.0, 3.7, 40.0, 1000.0):
        t, q, den = D.rational_gaussian_variance(sigma)
        s2 = t * q / den
        y = np.arange(D._V_GAUSS * t, 60 * t + 400, dtype=float)
        log_lap = math.log(math.tanh(1 / (2 * t))) - y / t  # P(Y = y) = tanh(1/2t) e^-|y|/t, both signs below
        log_acc = -((y - s2 / t) ** 2) / (2 * s2)
        tail = 2 * np.exp(special.logsumexp(log_lap + log_acc))
        assert tail <= math.exp(-D._V_GAUSS - (D._V_GAUSS - 1) ** 2 / 2) <= two76


@pytest.mark.parametrize("sigma", [0.25, 0.7, 2.0, 17.0, 3000.0])
def test_acceptance_bound_against_brute_force_sum(sigma):
    # Algorithm 3's acceptance of a discrete Laplace(t) proposal, summed over y with numpy, is at least the
    # closed form used to size the pools (which also multiplies in exact in-range probabilities <= 1)
    t, q, den = D.rational_gaussian_variance(sigma)
    s2 = t * q / den
    y = np.arange(-(40 * t + 200), 40 * t + 201, dtype=float)
    lap = np.exp(-np.abs(y) / t) * math.tanh(1 / (2 * t))
    acc_g = float((lap * np.exp(-((np.abs(y) - s2 / t) ** 2) / (2 * s2))).sum())
    u = np.arange(t)
    p_d = float(np.exp(-u / t).mean())
    p_sign = 1 - (1 - math.exp(-1 / t)) / 2
    exact = p_d * p_sign * acc_g
    p = D._acceptance(("gaussian", t, q, den))
    assert p <= exact and p >= 0.9 * exact


@pytest.mark.parametrize("sigma,scale", [(2.0, None), (None, 0.4), (0.25, None)])
def test_empirical_acceptance_is_above_the_bound(sigma, scale):
    params = (("gaussian",) + D.rational_gaussian_variance(sigma) if sigma
              else ("laplace",) + D.rational_laplace_scale(scale))
    _, acc = D._candidates(60_000, params, torch.Generator().manual_seed(5), torch.device("cpu"))
    rate, p = acc.double().mean().item(), D._acceptance(params)
    assert rate > p - 4 * math.sqrt(p * (1 - p) / 60_000)


@pytest.mark.parametrize("n", [1, 2, 15, 1000, 2 ** 16])
def test_pool_sizes_run_out_with_probability_below_2_to_the_minus_64(n):
    for params in [("gaussian",) + D.rational_gaussian_variance(s) for s in (0.25, 2.0, 2.0 ** 25)] + \
                  [("laplace",) + D.rational_laplace_scale(b) for b in (2.0 ** -20, 1.0, 2.0 ** 40)]:
        p = D._acceptance(params)
        m = D._pool_size(n, p)
        assert stats.binom.logcdf(n - 1, m, p) <= -64 * math.log(2)  # scipy, not the Chernoff bound
        assert m <= n / p * 1.6 + 200  # and the pool is not wasteful


def test_total_variation_bound_per_draw():
    for n in (1, 3, 1000, 10 ** 6):
        for chunk in (D._CHUNK, D._CHUNK_ACCEL):
            for sigma in (0.25, 1.0, 2.0, 1e4, 2.0 ** 25):
                assert D.tv_bound(n, sigma, chunk=chunk) <= n * 2.0 ** -64
            for b in (2.0 ** -20, 0.4, 3.0, 2.0 ** 40):
                assert D.tv_bound(n, laplace_scale=b, chunk=chunk) <= n * 2.0 ** -64
    with pytest.raises(ValueError, match="exactly one"):
        D.tv_bound(3)


def test_a_pool_that_runs_out_returns_the_fixed_fallback(monkeypatch):
    # force pools far too small: the outputs past the accepted candidates are 0 (no retry, same shapes)
    monkeypatch.setattr(D, "_pool_size", lambda n, p: n)
    z = D.discrete_gaussian_noise((4000,), 50.0, torch.Generator().manual_seed(0))
    assert z.shape == (4000,) and z.dtype == torch.int64
    zeros = (z == 0).double().mean().item()
    assert 0.3 < zeros < 0.8  # ~ half the slots unfilled; the discrete Gaussian itself puts 0.008 at 0


def test_bernoulli_exp_neg_validates_den_and_accepts_tensor_den():
    with pytest.raises(ValueError, match="den"):
        D.bernoulli_exp_neg(torch.tensor([1]), 0)
    with pytest.raises(ValueError, match="den"):
        D.bernoulli_exp_neg(torch.tensor([1]), 2 ** 50)
    with pytest.raises(ValueError, match="den"):
        D.bernoulli_exp_neg(torch.tensor([1, 2]), torch.tensor([3, 0]))
    n = 40_000
    num = torch.full((n,), 3, dtype=torch.int64)
    den = torch.full((n,), 4, dtype=torch.int64)
    b = D.bernoulli_exp_neg(num, den, torch.Generator().manual_seed(3))
    assert stats.binomtest(int(b.sum()), n, math.exp(-0.75)).pvalue > 1e-3


def test_draws_follow_the_device_argument_and_generator():
    g = torch.Generator().manual_seed(0)
    x = D.discrete_gaussian_noise((10,), 2.0, g, device="cpu")
    y = D.discrete_gaussian_noise((10,), 2.0, torch.Generator().manual_seed(0))
    assert torch.equal(x, y) and x.device.type == "cpu"


@pytest.mark.cuda
def test_cuda_draws_do_not_synchronise():
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    D.discrete_gaussian_noise((1000,), 2.0, g, device=dev)  # warm up
    torch.cuda.set_sync_debug_mode("error")
    try:
        z = D.discrete_gaussian_noise((10_000,), 2.0, g, device=dev)
        w = D.discrete_laplace_noise((10_000,), 2.0, g, device=dev)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert z.device.type == "cuda" and w.device.type == "cuda"
    assert abs(z.double().std().item() - 2.0) < 0.1


@pytest.fixture
def vectorised(monkeypatch):
    """Run the accelerator layout (all rounds of a stage in one tensor) on the CPU."""
    monkeypatch.setattr(D, "_vectorised", lambda device, m: True)


@pytest.mark.parametrize("sigma", [0.25, 2.3])
def test_accelerator_layout_matches_the_pmf_and_does_fixed_work(vectorised, sigma):
    x = D.discrete_gaussian_noise((30_000,), sigma, torch.Generator().manual_seed(11))
    t, q, den = D.rational_gaussian_variance(sigma)
    k = np.arange(-(12 * int(sigma) + 12), 12 * int(sigma) + 13)
    w = np.exp(-(k.astype(float) ** 2) / (2 * t * q / den))
    obs = np.array([(x.numpy() == j).sum() for j in k])
    keep = w / w.sum() * x.numel() >= 5
    exp = w / w.sum() * x.numel()
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3
    ops_a, _ = _record(lambda: D.discrete_gaussian_noise((200,), sigma, torch.Generator().manual_seed(1)))
    ops_b, _ = _record(lambda: D.discrete_gaussian_noise((200,), sigma, torch.Generator().manual_seed(2)))
    assert ops_a == ops_b and not SYNC_OPS & {n for n, _, _ in ops_a}
    assert len(ops_a) < 200  # a few big ops, not one per round (the CPU layout dispatches over 1,500)


def test_accelerator_layout_laplace_and_bernoulli(vectorised):
    x = D.discrete_laplace_noise((30_000,), 1.5, torch.Generator().manual_seed(12))
    t, s = D.rational_laplace_scale(1.5)
    k = np.arange(-80, 81)
    pmf = stats.dlaplace(s / t).pmf(k)
    obs = np.array([(x.numpy() == j).sum() for j in k])
    keep = pmf * x.numel() >= 5
    exp = pmf[keep] * obs[keep].sum() / pmf[keep].sum()
    assert stats.chisquare(obs[keep], exp).pvalue > 1e-3
    b = D.bernoulli_exp_neg(torch.full((40_000,), 7, dtype=torch.int64), 3, torch.Generator().manual_seed(4))
    assert stats.binomtest(int(b.sum()), 40_000, math.exp(-7 / 3)).pvalue > 1e-3


def _binned_pvalue(x: np.ndarray, k: np.ndarray, pmf: np.ndarray, bins: int = 50) -> float:
    """Chi-square of draws ``x`` against ``pmf`` on support ``k`` in about ``bins`` equal-probability bins."""
    pmf = pmf / pmf.sum()
    edges = np.unique(k[np.searchsorted(np.cumsum(pmf), np.linspace(0, 1, bins + 1)[1:-1])])
    expected = np.bincount(np.searchsorted(edges, k, side="right"), weights=pmf, minlength=edges.size + 1)
    observed = np.bincount(np.searchsorted(edges, x, side="right"), minlength=edges.size + 1)
    return stats.chisquare(observed, expected * x.size).pvalue


@pytest.mark.parametrize("sigma", [300.0, 5000.0])
def test_discrete_gaussian_large_sigma_matches_the_pmf(sigma):
    x = D.discrete_gaussian_noise((40_000,), sigma, torch.Generator().manual_seed(21)).numpy()
    t, q, den = D.rational_gaussian_variance(sigma)
    k = np.arange(-int(14 * sigma), int(14 * sigma) + 1)
    pmf = np.exp(-(k.astype(float) ** 2) / (2 * t * q / den))
    assert _binned_pvalue(x, k, pmf) > 1e-3


@pytest.mark.parametrize("scale", [300.0, 2.0 ** -20])
def test_discrete_laplace_large_and_tiny_scales_match_scipy(scale):
    x = D.discrete_laplace_noise((40_000,), scale, torch.Generator().manual_seed(22)).numpy()
    t, s = D.rational_laplace_scale(scale)
    if scale < 1e-3:  # P(k != 0) = 2 e^(-s/t) / (1 + e^(-s/t)): about e^(-2^20)
        assert (x == 0).all()
        return
    k = np.arange(-int(40 * scale), int(40 * scale) + 1)
    assert _binned_pvalue(x, k, stats.dlaplace(s / t).pmf(k)) > 1e-3


def test_bernoulli_exp_neg_refuses_a_negative_num_given_on_the_host():
    """A probe (finding 8): num = -3, den = 5 returned a coin of mean 0.669, Bernoulli(e^-0.4) (exp(+0.6) is no
    probability). num given as Python integers is checked up front; a tensor num is not read back (the fixed-work test
    above: in a sampler it is a function of the draws), so its range stays the caller's promise (docstring)."""
    for num in (-3, [1, -2], (0, -1)):
        with pytest.raises(ValueError, match="num must be >= 0"):
            D.bernoulli_exp_neg(num, 5, torch.Generator().manual_seed(0))
    b = D.bernoulli_exp_neg([0, 7], 3, torch.Generator().manual_seed(0))
    assert b.shape == (2,) and bool(b[0])  # exp(0) = 1
    ops, _ = _record(lambda: D.bernoulli_exp_neg(torch.tensor([-3]), 5, torch.Generator().manual_seed(0)))
    assert not SYNC_OPS & {n for n, _, _ in ops}  # a tensor num: no host read
