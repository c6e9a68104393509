"""Auditor: Clopper-Pearson bound, detection of a broken mechanism, no false alarm on correct ones,
and sound-mode releases on the shipped neighbour pairs."""
import inspect
import math

import pytest
import torch

from torchdpgmm import audit as A
from torchdpgmm.release import sound


def _laplace(scale):
    def mech(D, n, g):
        u = torch.rand(n, generator=g, dtype=torch.float64) - 0.5
        return D - scale * torch.sign(u) * torch.log1p(-2 * u.abs())
    return mech


def _gauss(sigma):
    return lambda D, n, g: D + sigma * torch.randn(n, generator=g, dtype=torch.float64)


def test_clopper_pearson_matches_scipy_binomtest():
    from scipy.stats import binomtest

    for k, n in [(0, 50), (3, 50), (17, 200), (200, 200)]:
        # a one-sided bound at alpha equals the upper end of the two-sided exact interval at 2 alpha
        ref = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact").high
        assert A.clopper_pearson_upper(k, n, 0.05) == pytest.approx(ref, rel=1e-9)


def test_epsilon_bound_formula():
    eps, fpr_u, fnr_u = A.epsilon_lower_bound(10, 100, 1000, 1000, 1e-5, 0.95)
    expect = max(math.log((1 - 1e-5 - fnr_u) / fpr_u), math.log((1 - 1e-5 - fpr_u) / fnr_u))
    assert float(eps) == pytest.approx(expect)
    assert float(A.epsilon_lower_bound(500, 500, 1000, 1000, 1e-5)[0]) == 0.0


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_flags_noise_scaled_down_4x_and_not_correct_mechanisms(eps):
    delta, n = 1e-5, 20000
    g = torch.Generator().manual_seed(int(10 * eps))
    sigma = 1.0 / sound.gdp_mu(eps, delta)
    ident = lambda s: s
    ok_lap = A.audit(_laplace(1 / eps), 0.0, 1.0, ident, num_draws=n, delta=delta, generator=g)
    ok_gau = A.audit(_gauss(sigma), 0.0, 1.0, ident, num_draws=n, delta=delta, generator=g)
    bad_lap = A.audit(_laplace(0.25 / eps), 0.0, 1.0, ident, num_draws=n, delta=delta, generator=g)
    bad_gau = A.audit(_gauss(0.25 * sigma), 0.0, 1.0, ident, num_draws=n, delta=delta, generator=g)
    assert ok_lap.epsilon_lower <= eps and ok_gau.epsilon_lower <= eps
    assert bad_lap.epsilon_lower > eps and bad_gau.epsilon_lower > eps
    # a correct Laplace mechanism is nearly tight: the audit should get close to its epsilon
    assert ok_lap.epsilon_lower > 0.6 * eps
    h = bad_gau.histogram
    assert len(h["edges"]) == len(h["counts0"]) + 1 and sum(h["counts0"]) == n and sum(h["counts1"]) == n


def test_false_alarm_rate_of_correct_laplace_is_at_most_alpha():
    """Over repeated audits of a correct mechanism, the bound exceeds the truth in <= ~5% of runs."""
    eps, exceed = 1.0, 0
    g = torch.Generator().manual_seed(123)
    runs = 40
    for _ in range(runs):
        r = A.audit(_laplace(1 / eps), 0.0, 1.0, lambda s: s, num_draws=2000, delta=1e-5, generator=g)
        exceed += r.epsilon_lower > eps
    assert exceed <= 6  # binomial(40, 0.05): P[X >= 7] < 0.01


def _sound_mech(mechanism, adjacency, eps, delta, B, noise_multiplier=1.0):
    def mech(D, n, g):
        out, _ = sound.sound_statistics(D[0], D[1], 3, eps, delta, clip_bound=B, adjacency=adjacency,
                                        mechanism=mechanism, generator=g, noise_multiplier=noise_multiplier,
                                        num_draws=n)
        return out
    return mech


PAIRS = {
    "outlier-flip": lambda g: A.outlier_label_flip(num_per_class=30, generator=g),
    "hull-point": lambda g: A.hull_moving_point(num_per_class=30, generator=g),
    "tiny-class": lambda g: A.tiny_class(num_per_class=30, generator=g),
    "extreme-clip": lambda g: A.extreme_clipping(num_per_class=30, clip_bound=5.0, generator=g),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_sound_mode_passes_auditor_on_shipped_pairs(pair, mechanism):
    eps, delta, B = 1.0, 1e-5, 5.0
    g = torch.Generator().manual_seed(7)
    P = PAIRS[pair](g)
    assert P.relation in ("label-flip", "replace-one")  # all shipped pairs are replace-one neighbours
    r = A.audit(_sound_mech(mechanism, "replace-one", eps, delta, B), P.dataset0, P.dataset1,
                num_draws=2000, delta=delta, generator=g)
    assert r.epsilon_lower <= eps


@pytest.mark.parametrize("seed", [8])
def test_broken_sound_release_is_flagged_on_extreme_clipping_pair(seed):
    """Same release with all noise scaled down 4x: the auditor sees more than the claimed epsilon."""
    eps, delta, B = 2.0, 1e-5, 5.0
    g = torch.Generator().manual_seed(seed)
    P = PAIRS["extreme-clip"](g)
    r = A.audit(_sound_mech("gaussian", "replace-one", eps, delta, B, noise_multiplier=0.25),
                P.dataset0, P.dataset1, num_draws=8000, delta=delta, generator=g)
    assert r.epsilon_lower > eps


def test_num_draws_fast_path_equals_expanded_batch():
    P = PAIRS["outlier-flip"](torch.Generator().manual_seed(0))
    a, _ = sound.sound_statistics(P.X0, P.y0, 3, 1.0, 1e-5, clip_bound=5.0,
                                  generator=torch.Generator().manual_seed(1), num_draws=7)
    b, _ = sound.sound_statistics(P.X0.expand(7, *P.X0.shape), P.y0.expand(7, *P.y0.shape), 3, 1.0, 1e-5,
                                  clip_bound=5.0, generator=torch.Generator().manual_seed(1))
    for k in a:
        assert torch.allclose(a[k], b[k])


def test_neighbour_pairs_are_neighbours():
    g = torch.Generator().manual_seed(0)
    pairs = dict(PAIRS)
    pairs["worst-add-remove"] = lambda g: A.worst_case_add_remove(generator=g)
    pairs["worst-label-flip"] = lambda g: A.worst_case_replace_one(generator=g)
    pairs["worst-same-class"] = lambda g: A.worst_case_replace_one(kind="same-class", generator=g)
    for name, make in pairs.items():
        P = make(g)
        assert P.X0.shape == P.X1.shape and P.y0.shape == P.y1.shape
        if P.relation == "add-remove":
            # same rows, one of them present in D1 only
            assert torch.equal(P.X0, P.X1) and torch.equal(P.y0, P.y1)
            assert (P.mask0 != P.mask1).nonzero().flatten().tolist() == [P.index] and bool(P.mask1[P.index])
            continue
        rows = ((P.X0 != P.X1).any(-1) | (P.y0 != P.y1)).nonzero().flatten().tolist()
        assert rows == [P.index], name
        if P.relation == "label-flip":
            assert torch.equal(P.X0, P.X1) and P.y0[P.index] == P.class_from and P.y1[P.index] == P.class_to


def test_support_escape_statistic_counts():
    counts0 = torch.tensor([11.0, 4.0, 5.0])
    counts1 = torch.tensor([10.0, 5.0, 5.0])  # one record of class 0 flipped to class 1
    stat = A.support_escape_statistic(counts0, counts1, 20)
    w = torch.tensor([[10, 5, 5], [11, 4, 5], [12, 3, 5], [9, 6, 5], [2, 9, 9]], dtype=torch.float64) / 20
    # [12,3,5] is reachable from D0 only; [9,6,5] from D1 only; [2,9,9] from neither
    assert stat({"weights": w}).tolist() == [0.0, 0.0, 1.0, -1.0, 0.0]


def test_psd_escape_statistic_sign():
    c0 = torch.diag(torch.tensor([2.0, 1.0], dtype=torch.float64))[None]
    c1 = torch.eye(2, dtype=torch.float64)[None]
    stat = A.psd_escape_statistic(c0, c1)
    small = 0.01 * torch.eye(2, dtype=torch.float64)
    out = {"covariances": torch.stack([c0 + small, c1 + small])}
    s = stat(out)
    # D0-like output: nothing escapes (c0 >= c1); D1-like: S~ - Sigma(D0) has a negative eigenvalue
    assert s[0].item() == pytest.approx(0.0, abs=1e-12) and s[1] > 0


def test_r1smg_as_published_is_flagged_and_exact_event_agrees():
    """R1SMG (Ji & Li 2024) calibrated for (1, 1e-5) in R^18: the auditor's bound exceeds the claim, and an
    exact quadrature of one event (a ball around f(D0)) shows the delta needed at eps=1 is > 0.1."""
    from torchdpgmm.mechanisms import r1smg

    M, eps, delta = 18, 1.0, 1e-5
    ex = A.r1smg_ball_delta(eps, delta, M, num_radii=60)
    assert ex["delta_lower"] > 0.1
    x0 = torch.zeros(M, dtype=torch.float64)

    def mech(D, n, g):
        x = torch.zeros(n, M, dtype=torch.float64)
        x[:, 0] = D
        return r1smg(x, 1.0, eps, delta, generator=g)

    r = A.audit(mech, 0.0, 1.0, lambda y: (y - x0).norm(dim=-1), num_draws=4000, delta=delta,
                generator=torch.Generator().manual_seed(0))
    assert r.epsilon_lower > eps
    # the empirical frequency of the ball event under D0 matches the quadrature
    g = torch.Generator().manual_seed(1)
    y = mech(0.0, 20000, g)
    freq = ((y - x0).norm(dim=-1) < ex["radius"]).double().mean().item()
    assert freq == pytest.approx(ex["p0"], abs=0.02)


def test_sound_mode_refuses_r1smg():
    X = torch.randn(30, 2, dtype=torch.float64)
    y = torch.arange(30) % 3
    with pytest.raises(ValueError, match="r1smg"):
        sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=1.0, mechanism="r1smg")


def test_mean_distance_statistic_sign():
    m0 = torch.zeros(2, 3, dtype=torch.float64)
    m1 = torch.ones(2, 3, dtype=torch.float64)
    stat = A.mean_distance_statistic(m0, m1)
    out = {"means": torch.stack([m0 + 0.01, m1 - 0.01])}
    s = stat(out)
    assert s[0] > 0 and s[1] < 0 and s[0].item() == pytest.approx(-s[1].item())


# ----------------------------------------------------------------------------------------------------
# the likelihood-ratio auditor against the sound mode's worst-case pair; references from scipy only
# ----------------------------------------------------------------------------------------------------

def _scipy_gdp_delta(eps, mu):
    from scipy.stats import norm

    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def _scipy_mu(eps, delta):
    """mu of the mu-GDP curve that is exactly (eps, delta)-DP (Dong, Roth & Su 2019, Cor. 2.13)."""
    from scipy.optimize import brentq

    return brentq(lambda m: _scipy_gdp_delta(eps, m) - delta, 1e-6, 20.0, xtol=1e-14)


def _scipy_eps(delta, mu):
    from scipy.optimize import brentq

    return brentq(lambda e: _scipy_gdp_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-12)


def _scipy_ceiling(mu, n, delta, alpha=0.05):
    """Best CP bound at n draws against the exact mu-GDP curve (expected counts), with scipy.stats.beta."""
    from scipy.stats import beta, norm

    fpr = np.geomspace(0.1 / n, 0.5, 3000)
    fnr = norm.cdf(norm.isf(fpr) - mu)
    fp_u = beta.ppf(1 - alpha / 2, n * fpr + 1, n - n * fpr)
    fn_u = beta.ppf(1 - alpha / 2, n * fnr + 1, n - n * fnr)
    return float(np.max(np.log(np.clip(1 - delta - fn_u, 1e-300, None)) - np.log(fp_u)))


np = pytest.importorskip("numpy")
EPS, DELTA, CLIP = 1.0, 1e-5, 1.0
# the sound mode's noise flavours: continuous float64 (GDP-exact) and, where this build has it, exact
# discrete noise on public grids (zCDP-accounted, slightly more noise)
_SIG = inspect.signature(sound.sound_statistics).parameters
_HAS_NOISE_OPTION = "noise" in _SIG or any(p.kind is p.VAR_KEYWORD for p in _SIG.values())
CONTINUOUS = {"noise": "continuous"} if _HAS_NOISE_OPTION else {}
NOISES = [CONTINUOUS, {"noise": "discrete"}] if _HAS_NOISE_OPTION else [CONTINUOUS]
# the exact discrete sampler is several times slower: its 400k-draw power test is marked slow
NOISES_SLOW_DISCRETE = [pytest.param(o, marks=pytest.mark.slow) if o.get("noise") == "discrete" else o
                        for o in NOISES]


def _worst_pair_setup(noise_multiplier, mechanism="gaussian", **options):
    """The worst-case add/remove pair, the sound release as a batched mechanism (PSD repair off, so the
    noisy blocks read back) and the release's public noise scales (data units)."""
    P = A.worst_case_add_remove(num_per_class=200, num_classes=2, clip_bound=CLIP,
                                generator=torch.Generator().manual_seed(0))
    opts = dict(clip_bound=CLIP, adjacency="add-remove", mechanism=mechanism, noise_multiplier=noise_multiplier,
                **options)

    def mech(D, n, g):
        out, _ = sound.sound_statistics(D[0], D[1], 2, EPS, DELTA, generator=g, mask=D[2],
                                        eig_floor=float("-inf"), num_draws=n, **opts)
        return out

    rel = sound.release_sound(P.X0, P.y0, 2, EPS, DELTA, mask=P.mask0, **opts)
    return P, mech, rel


def test_worst_case_add_remove_pair_is_exactly_at_the_claim():
    """The pair attains every add/remove sensitivity, so its mu equals the claim's mu (scipy)."""
    P, _, rel = _worst_pair_setup(1.0, **CONTINUOUS)
    mu = A.sound_pair_mu(P.dataset0, P.dataset1, 2, CLIP, rel)
    assert mu == pytest.approx(_scipy_mu(EPS, DELTA), rel=1e-9)
    assert _scipy_eps(DELTA, mu) == pytest.approx(EPS, rel=1e-6)


@pytest.mark.parametrize("options", NOISES_SLOW_DISCRETE, ids=lambda o: o.get("noise", "default"))
def test_lr_auditor_certifies_half_the_claim_on_the_worst_case_pair(options):
    """Continuous noise: the pair sits exactly at the claim, and the auditor certifies at least half of it. Discrete
    noise (zCDP-accounted, a little more noise): the pair's exact epsilon is about 0.905 and what any auditor of
    this size can certify about 0.581 (the pair's ceiling), so half the claim would be 86% of that ceiling, and
    seeds 1-8 of the generator gave 0.459 to 0.565; there the test asks for 70% of the pair's ceiling, which a
    broken likelihood ratio (a bound near 0) still fails."""
    P, mech, rel = _worst_pair_setup(1.0, **options)
    lr = A.sound_log_ratio(P.dataset0, P.dataset1, 2, CLIP, rel)
    r = A.audit(mech, P.dataset0, P.dataset1, lr, num_draws=400_000, delta=DELTA,
                generator=torch.Generator().manual_seed(1))
    # the power report: the ceiling of this test against the exact mechanism, reference from scipy
    ceiling = _scipy_ceiling(_scipy_mu(EPS, DELTA), r.num_evaluation, DELTA)
    pair_mu = A.sound_pair_mu(P.dataset0, P.dataset1, 2, CLIP, rel)
    rep = A.power_report(EPS, DELTA, r.num_evaluation, pair_mu=pair_mu)
    assert rep["claim_ceiling_epsilon"] == pytest.approx(ceiling, abs=2e-3)
    assert rep["pair_ceiling_epsilon"] == pytest.approx(_scipy_ceiling(pair_mu, r.num_evaluation, DELTA), abs=2e-3)
    assert rep["pair_exact_epsilon"] <= EPS * (1 + 1e-6)
    floor = 0.5 * EPS if options.get("noise") != "discrete" else 0.7 * rep["pair_ceiling_epsilon"]
    assert floor <= r.epsilon_lower <= EPS
    assert r.epsilon_lower <= ceiling + 0.15  # the realised bound sits near (below, up to noise) the ceiling


@pytest.mark.parametrize("options", NOISES, ids=lambda o: o.get("noise", "default"))
def test_lr_auditor_flags_the_sound_release_with_noise_halved(options):
    P, mech, rel = _worst_pair_setup(0.5, **options)
    lr = A.sound_log_ratio(P.dataset0, P.dataset1, 2, CLIP, rel)
    # 60,000 discrete draws refuted the claim for only some seeds (lower bounds 0.93-1.11 against a truth of
    # 2.15); at 240,000 five seeds gave 1.13-1.35
    draws = 240_000 if options.get("noise") == "discrete" else 200_000
    r = A.audit(mech, P.dataset0, P.dataset1, lr, num_draws=draws, delta=DELTA,
                generator=torch.Generator().manual_seed(2))
    assert r.epsilon_lower > EPS  # the claim (1, 1e-5) is refuted at 95% confidence
    assert r.epsilon_lower <= _scipy_eps(DELTA, 2 * _scipy_mu(EPS, DELTA))  # and the truth is not exceeded


@pytest.mark.parametrize("noise_multiplier", [1.0, 0.5])
def test_lr_auditor_on_sound_laplace(noise_multiplier):
    """Pure eps-DP Laplace blocks: the exact LR certifies at least half the claim and flags halved noise."""
    P, mech, rel = _worst_pair_setup(noise_multiplier, "laplace", **CONTINUOUS)
    lr = A.sound_log_ratio(P.dataset0, P.dataset1, 2, CLIP, rel)
    r = A.audit(mech, P.dataset0, P.dataset1, lr, num_draws=200_000, delta=DELTA,
                generator=torch.Generator().manual_seed(3))
    if noise_multiplier == 1.0:
        assert 0.5 * EPS <= r.epsilon_lower <= EPS
    else:
        assert r.epsilon_lower > EPS


def test_log_ratio_formulas_match_scipy_densities():
    from scipy.stats import laplace, norm

    g = torch.Generator().manual_seed(0)
    v = torch.randn(50, 3, 2, generator=g, dtype=torch.float64)
    m0, m1 = torch.randn(3, 2, generator=g, dtype=torch.float64), torch.randn(3, 2, generator=g, dtype=torch.float64)
    s = torch.rand(3, 2, generator=g, dtype=torch.float64) + 0.5
    ref = (norm.logpdf(v, m1, s) - norm.logpdf(v, m0, s)).reshape(50, -1).sum(-1)
    assert np.allclose(A.gaussian_log_ratio(v, m0, m1, s).numpy(), ref)
    ref = (laplace.logpdf(v, m1, s) - laplace.logpdf(v, m0, s)).reshape(50, -1).sum(-1)
    assert np.allclose(A.laplace_log_ratio(v, m0, m1, s).numpy(), ref)
    # symmetric noise: upper-triangle coordinates, std sigma on the diagonal, sigma/sqrt(2) off it
    V = v[:, :2, :]
    V = V @ V.transpose(-1, -2)
    M0, M1 = torch.eye(2, dtype=torch.float64), torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    sig, iu = 0.7, np.triu_indices(2)
    sd = np.where(iu[0] == iu[1], sig, sig / math.sqrt(2))
    ref = (norm.logpdf(V.numpy()[:, iu[0], iu[1]], M1.numpy()[iu], sd)
           - norm.logpdf(V.numpy()[:, iu[0], iu[1]], M0.numpy()[iu], sd)).sum(-1)
    assert np.allclose(A.symmetric_gaussian_log_ratio(V, M0, M1, sig).numpy(), ref)
    ref = (laplace.logpdf(V.numpy()[:, iu[0], iu[1]], M1.numpy()[iu], sig)
           - laplace.logpdf(V.numpy()[:, iu[0], iu[1]], M0.numpy()[iu], sig)).sum(-1)
    assert np.allclose(A.symmetric_laplace_log_ratio(V, M0, M1, sig).numpy(), ref)


def test_log_ratio_is_exact_for_discrete_gaussian_and_laplace_with_integer_means():
    """Brute-force normalised PMFs on a wide integer range (Canonne, Kamath & Steinke 2020)."""
    z = np.arange(-400, 401)
    x = torch.arange(-20, 21, dtype=torch.float64)[:, None]
    for unnorm, fn, scale in ((lambda t, m: np.exp(-(t - m) ** 2 / (2 * 3.0 ** 2)), A.gaussian_log_ratio, 3.0),
                              (lambda t, m: np.exp(-np.abs(t - m) / 2.5), A.laplace_log_ratio, 2.5)):
        lp0 = np.log(unnorm(x.numpy()[:, 0], 3)) - np.log(unnorm(z, 3).sum())
        lp1 = np.log(unnorm(x.numpy()[:, 0], 5)) - np.log(unnorm(z, 5).sum())
        assert np.allclose(fn(x, 3.0, 5.0, scale).numpy(), lp1 - lp0)


def test_sound_blocks_read_back_the_released_statistics():
    """With (almost) no noise and the eigenvalue floor off, the blocks read back from the release equal
    an independent computation of the clipped statistics, padding mask included."""
    P = A.worst_case_add_remove(num_per_class=20, num_classes=3, dim=3, clip_bound=2.0,
                                generator=torch.Generator().manual_seed(0))
    for ds in (P.dataset0, P.dataset1):
        out, _ = sound.sound_statistics(ds[0], ds[1], 3, 1.0, 1e-5, clip_bound=2.0, adjacency="add-remove",
                                        mechanism="gaussian", generator=torch.Generator().manual_seed(0),
                                        mask=ds[2], eig_floor=float("-inf"), noise_multiplier=1e-9, num_draws=2,
                                        **CONTINUOUS)
        got = A.sound_blocks(out)
        X, y, mask = ds[0].numpy(), ds[1].numpy(), ds[2].numpy()
        Z = X * np.minimum(1.0, 2.0 / np.linalg.norm(X, axis=-1, keepdims=True))
        for k in range(3):
            sel = (y == k) & mask
            assert np.allclose(got["counts"][:, k].numpy(), sel.sum(), atol=1e-6)
            assert np.allclose(got["sums"][:, k].numpy(), Z[sel].sum(0), atol=1e-6)
            assert np.allclose(got["second_moments"][:, k].numpy(), Z[sel].T @ Z[sel], atol=1e-5)


def test_audit_ceiling_matches_scipy_and_exact_gdp_epsilon():
    mu = _scipy_mu(1.0, 1e-5)
    assert A.gdp_mu_exact(1.0, 1e-5) == pytest.approx(mu, rel=1e-9)
    assert A.gdp_epsilon_exact(1e-5, 2 * mu) == pytest.approx(_scipy_eps(1e-5, 2 * mu), rel=1e-8)
    for n in (1000, 100_000):
        got = A.audit_ceiling(lambda a: A.gdp_tradeoff(a, mu), n, 1e-5)["epsilon"]
        assert got == pytest.approx(_scipy_ceiling(mu, n, 1e-5), abs=2e-3)
    # more draws, higher ceiling; never above the truth
    c = [A.audit_ceiling(lambda a: A.gdp_tradeoff(a, mu), n, 1e-5)["epsilon"] for n in (10**3, 10**5, 10**7)]
    assert c[0] < c[1] < c[2] < 1.0


def test_draws_are_chunked_under_the_memory_budget():
    sizes = []

    def mech(D, n, g):
        sizes.append(n)
        return torch.zeros(n, 1000, dtype=torch.float64) + D  # 8 kB per draw

    r = A.audit(mech, 0.0, 1.0, lambda o: o[:, 0], num_draws=3000, delta=1e-5, memory_bytes=8 * 8000 * 100)
    # per dataset: 256 draws first, then chunks of budget / (8 x 8 kB) = 100 draws
    assert sum(sizes) == 6000 and sizes.count(256) == 2 and max(s for s in sizes if s != 256) == 100
    assert r.epsilon_lower > 5  # a deterministic mechanism: the bound is limited by the draws only


def test_noise_scales_read_from_typed_record_blocks():
    """A typed PrivacyRecord (NoisedBlock per block) gives the same statistic as the legacy noise dict."""
    from torchdpgmm.audit.likelihood import _noise_scales
    from torchdpgmm.privacy import NoisedBlock, PrivacyRecord

    P, mech, rec = _worst_pair_setup(1.0, **CONTINUOUS)
    scales = _noise_scales(rec)
    blocks = tuple(NoisedBlock(name=k, mechanism="gaussian", sensitivity=1.0, noise_scale=scales[k][1])
                   for k in ("counts", "sums", "second_moments"))
    typed = PrivacyRecord(epsilon=EPS, delta=DELTA, adjacency="add-remove", accountant="GDP", mode="sound",
                          blocks=blocks)
    out = mech(P.dataset0, 50, torch.Generator().manual_seed(0))
    a = A.sound_log_ratio(P.dataset0, P.dataset1, 2, CLIP, rec).log_ratio(out)
    b = A.sound_log_ratio(P.dataset0, P.dataset1, 2, CLIP, typed).log_ratio(out)
    assert torch.allclose(a, b)
    assert A.sound_pair_mu(P.dataset0, P.dataset1, 2, CLIP, typed) == pytest.approx(
        A.sound_pair_mu(P.dataset0, P.dataset1, 2, CLIP, rec))


# ------------------------------------------------------------------ calibration edges (probe)
def _mp_gdp_delta(eps, mu):
    """Cor. 2.13 of Dong, Roth & Su (2019) in 50-digit arithmetic (mpmath): no overflow, no underflow."""
    import mpmath as mp

    mp.mp.dps = 50
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def test_gdp_epsilon_exact_edges():
    """delta = 0 returned 64 (the doubling stopped once Phi underflowed); mu = 50 overflowed math.exp;
    mu = 0 divided by zero; mu = -1 returned 0 silently."""
    import mpmath as mp

    assert A.gdp_epsilon_exact(0.0, 1.0) == math.inf  # mu > 0 is (eps, 0)-DP for no finite eps
    assert A.gdp_epsilon_exact(1e-5, 0.0) == 0.0      # identical outputs
    assert A.gdp_epsilon_exact(1.0, 1.0) == 0.0
    got = A.gdp_epsilon_exact(1e-5, 50.0)             # eps near 1462: e^eps is past a float's range
    mp.mp.dps = 50
    ref = mp.findroot(lambda e: _mp_gdp_delta(e, 50) - mp.mpf("1e-5"), 1460)
    assert got == pytest.approx(float(ref), rel=1e-10)
    for delta, mu in ((1e-5, -1.0), (1e-5, math.nan), (1e-5, math.inf), (-1e-5, 1.0), (1.5, 1.0), (math.nan, 1.0)):
        with pytest.raises(ValueError, match="mu must be|delta must"):
            A.gdp_epsilon_exact(delta, mu)


def test_gdp_mu_exact_edges():
    """delta > 1 looped forever, delta = 1 returned an arbitrary 32, a negative epsilon or delta gave scipy's
    sign error; epsilon = 0 with a tiny delta has its root below the old bracket's 1e-9."""
    from scipy.special import erfinv

    for eps, delta in ((1.0, 1.0), (1.0, 0.0), (1.0, -1e-5), (-1.0, 1e-5), (math.inf, 1e-5), (math.nan, 1e-5),
                       (1.0, 1.5)):
        with pytest.raises(ValueError, match="epsilon must be|delta must"):
            A.gdp_mu_exact(eps, delta)
    # epsilon = 0: delta(0, mu) = 2 Phi(mu/2) - 1 = erf(mu / (2 sqrt 2)), so mu = 2 sqrt(2) erfinv(delta)
    assert A.gdp_mu_exact(0.0, 1e-12) == pytest.approx(2 * math.sqrt(2) * erfinv(1e-12), rel=1e-8)
    assert A.gdp_mu_exact(0.0, 0.3) == pytest.approx(2 * math.sqrt(2) * erfinv(0.3), rel=1e-10)


def test_audit_ceiling_and_power_report_check_their_arguments():
    """num_evaluation = 0 raised ZeroDivisionError."""
    for n in (0, -5, 2.5):
        with pytest.raises(ValueError, match="num_evaluation must be a positive int"):
            A.audit_ceiling(lambda a: A.gdp_tradeoff(a, 1.0), n, 1e-5)
        with pytest.raises(ValueError, match="num_evaluation must be a positive int"):
            A.power_report(1.0, 1e-5, n)
    with pytest.raises(ValueError, match="confidence"):
        A.audit_ceiling(lambda a: A.gdp_tradeoff(a, 1.0), 100, 1e-5, confidence=1.0)
    with pytest.raises(ValueError, match="delta"):
        A.audit_ceiling(lambda a: A.gdp_tradeoff(a, 1.0), 100, 1.0)
    assert A.power_report(1.0, 1e-5, 1000.0)["num_evaluation"] == 1000


def test_audit_docstring_states_the_selection_rule_the_code_uses():
    """audit()'s docstring described the selection bound as 'counts rescaled to the evaluation size'; the code
    maximises the Clopper-Pearson bound on the selection counts themselves, simultaneous over the m candidate
    thresholds of both directions (docs/audit.md). Reference: scipy's beta quantiles by brute force."""
    import numpy as np
    from scipy.stats import beta

    from torchdpgmm.audit.engine import _select_threshold

    doc = A.audit.__doc__
    assert "rescaled" not in doc and "simultaneous" in doc
    rng = np.random.default_rng(0)
    s0, s1 = rng.normal(0, 1, 40), rng.normal(2.5, 1, 40)
    delta, conf, n = 1e-5, 0.95, 40
    u = np.unique(np.concatenate([s0, s1]))
    cand = np.concatenate([[u[0] - 1], (u[1:] + u[:-1]) / 2, [u[-1] + 1]])
    a = (1 - conf) / (2 * cand.size) / 2  # each of the two one-sided CP bounds

    def cp(k):
        return 1.0 if k >= n else beta.ppf(1 - a, k + 1, n - k)

    best = 0.0
    for t in cand:
        for fp, fn in (((s0 > t).sum(), (s1 <= t).sum()), ((s0 < t).sum(), (s1 >= t).sum())):
            fpr, fnr = cp(fp), cp(fn)
            for num, den in ((1 - delta - fnr, fpr), (1 - delta - fpr, fnr)):
                if num > 0:
                    best = max(best, math.log(num / den))
    assert _select_threshold(s0, s1, delta, conf)[2] == pytest.approx(best, rel=1e-9)


def test_pair_arguments_and_blocks_of_invalid_rows():
    """worst_case_replace_one(kind='same-class', dim=1) and tiny_class(tiny > num_per_class) gave IndexErrors;
    tiny_class(tiny=0) silently flipped a class-1 record under a 'class 2 has 0 points' description;
    noiseless_sound_blocks raised torch's one_hot error on a label out of range, a row the sound release drops."""
    import numpy as np

    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="needs dim >= 2"):
        A.worst_case_replace_one(dim=1, kind="same-class", generator=g)
    with pytest.raises(ValueError, match="cosine must lie"):
        A.worst_case_replace_one(kind="same-class", cosine=1.5, generator=g)
    for tiny in (0, 8, -1):
        with pytest.raises(ValueError, match="tiny must be an int in"):
            A.tiny_class(num_per_class=5, tiny=tiny, generator=g)
    P = A.tiny_class(num_per_class=5, tiny=5, generator=g)
    assert int(P.y0[P.index]) == 2 and int(P.y1[P.index]) == 0 and int((P.y0 == 2).sum()) == 5
    X = torch.randn(30, 2, dtype=torch.float64, generator=g) * 3
    y = torch.arange(30) % 3
    y[4], y[7] = 7, -1                       # out of range: dropped
    mask = torch.ones(30, dtype=torch.bool)
    mask[10] = False
    X[10] = math.nan                         # masked: dropped, NaN and all
    got = A.noiseless_sound_blocks(X, y, 3, 2.0, mask=mask)
    keep = (y >= 0).numpy() & (y < 3).numpy() & mask.numpy()
    Z, lab = X.numpy()[keep], y.numpy()[keep]
    nrm = np.linalg.norm(Z, axis=1, keepdims=True)
    Z = np.where(nrm > 2.0, Z * 2.0 / nrm, Z)
    for k in range(3):
        Zk = Z[lab == k]
        assert float(got["counts"][k]) == len(Zk)
        assert np.allclose(got["sums"][k].numpy(), Zk.sum(0))
        assert np.allclose(got["second_moments"][k].numpy(), Zk.T @ Zk)
