"""Auditor: Clopper-Pearson bound, detection of a broken mechanism, no false alarm on correct ones,
and sound-mode releases on the shipped neighbour pairs."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm import audit as A
from torchdpgmm import sound


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
        out, _ = sound.sound_statistics(D[0], D[1], 3, eps, delta, B, adjacency, mechanism, g,
                                        noise_multiplier=noise_multiplier, num_draws=n)
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
    a, _ = sound.sound_statistics(P.X0, P.y0, 3, 1.0, 1e-5, 5.0, generator=torch.Generator().manual_seed(1), num_draws=7)
    b, _ = sound.sound_statistics(P.X0.expand(7, *P.X0.shape), P.y0.expand(7, *P.y0.shape), 3, 1.0, 1e-5, 5.0,
                                  generator=torch.Generator().manual_seed(1))
    for k in a:
        assert torch.allclose(a[k], b[k])


def test_neighbour_pairs_are_neighbours():
    g = torch.Generator().manual_seed(0)
    for name, make in PAIRS.items():
        P = make(g)
        assert P.X0.shape == P.X1.shape and P.y0.shape == P.y1.shape
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
