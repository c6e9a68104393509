"""The two-stage release about a private centre (torchdpgmm.release.centring). References: an independent
zCDP -> (eps, delta) conversion and the GDP delta curve written here with numpy/scipy, numpy's James-Stein
centre and radially clipped class means, and the same release with a dropped row removed."""
import functools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import norm

from torchdpgmm.release import allow_weak_privacy
from torchdpgmm.release.centring import release_centred, shrunk_centre, stage_epsilons
from torchdpgmm.release.sound import release_sound

DELTA = 1e-5


def _zcdp_delta(eps: float, rho: float) -> float:
    """Canonne, Kamath & Steinke (2020) Cor. 13 by brute force over alpha (numpy grid), for a rho-zCDP mechanism."""
    a = np.linspace(1.0001, 2000.0, 400_000)
    log = (a - 1) * (a * rho - eps) + (a - 1) * np.log1p(-1 / a) - np.log(a)
    return float(np.exp(log.min()))


@functools.lru_cache(maxsize=None)
def _zcdp_delta_wide(eps: float, rho: float) -> float:
    """:func:`_zcdp_delta` over orders alpha - 1 from 1e-6 to 1e9 on a log grid: at rho near 1e-10 the best order is
    near 1e5, beyond the linear grid's 2000. Memoised: a pure function of two numbers, and the tests ask for the
    same (0, rho) under each delta."""
    a = 1 + np.logspace(-6, 9, 2_000_000)
    log = (a - 1) * (a * rho - eps) + (a - 1) * np.log1p(-1 / a) - np.log(a)
    return float(np.exp(log.min()))


def _gdp_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def _table(n=3000, d=6, seed=0):
    """Records in the unit box's lower corner (a skewed table): most lie far from the box's middle."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    U = np.clip(0.15 + 0.1 * y[:, None] + 0.05 * rng.normal(size=(n, d)), 0, 1)
    return torch.as_tensor(U), torch.as_tensor(y)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_stage_budgets_compose_to_the_target(eps):
    for f in (0.05, 0.1, 0.3):
        e1, e2 = stage_epsilons(eps, DELTA, f)  # discrete: zCDP shares of rho
        from torchdpgmm.privacy.calibration import zcdp_rho

        r1, r2 = zcdp_rho(e1, DELTA), zcdp_rho(e2, DELTA)
        assert r1 / (r1 + r2) == pytest.approx(f, rel=1e-3)
        assert _zcdp_delta(eps, r1 + r2) <= DELTA * (1 + 1e-3)  # the two stages together: (eps, delta)
        assert _zcdp_delta(eps * 1.02, (r1 + r2) * 1.05) > DELTA  # and not much looser than needed
        e1, e2 = stage_epsilons(eps, DELTA, f, noise="continuous")
        rel = [release_sound(*_table(200), 2, e, DELTA, clip_bound=1.0, noise="continuous",
                             generator=torch.Generator().manual_seed(0)) for e in (e1, e2)]
        mu = math.hypot(rel[0].extras["noise"]["mu"], rel[1].extras["noise"]["mu"])
        assert _gdp_delta(eps, mu) <= DELTA * (1 + 1e-6)
        assert rel[0].extras["noise"]["mu"] ** 2 / mu**2 == pytest.approx(f, rel=1e-6)
        assert stage_epsilons(eps, None, f, mechanism="laplace") == pytest.approx((f * eps, (1 - f) * eps))
    for bad in (0, 1, -0.1, 1.5, True, "0.1"):
        with pytest.raises(ValueError, match="centre fraction"):
            stage_epsilons(1.0, DELTA, bad)


def test_shrunk_centre_is_positive_part_james_stein_projected_onto_the_ball():
    rng = np.random.default_rng(3)
    c0 = np.full(5, 0.5)
    for _ in range(50):
        o, n, s = rng.normal(size=5) * rng.uniform(0.01, 2), rng.uniform(5, 500), rng.uniform(0.1, 50)
        w_ref = max(0.0, 1 - 5 * (s / n) ** 2 / np.sum(o * o))
        shift = w_ref * o
        shift *= min(1.0, 0.9 / np.linalg.norm(shift)) if w_ref > 0 else 1.0
        c, w = shrunk_centre(torch.as_tensor(o), torch.tensor(n, dtype=torch.float64), s, torch.as_tensor(c0), 0.9)
        assert float(w) == pytest.approx(w_ref, abs=1e-12)
        np.testing.assert_allclose(c.numpy(), c0 + shift, atol=1e-12)


def test_negligible_noise_centres_at_the_mean_and_clips_about_it():
    """At eps = 500 the released centre is numpy's mean of the records (weight 1) and the class means are numpy's
    means of the records pulled radially onto the ball about that centre."""
    U, y = _table()
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    r = 0.1
    rel = release_centred(U, y, 2, 500.0, DELTA, clip_bound=r, ball_center=c0, ball_radius=math.sqrt(6) / 2,
                          covariance_type="auto", generator=torch.Generator().manual_seed(0))
    c = rel.extras["centre"].numpy()
    assert float(rel.extras["centre_weight"]) > 0.999
    np.testing.assert_allclose(c, U.numpy().mean(0), atol=2e-3)
    Z = U.numpy() - c
    nz = np.linalg.norm(Z, axis=1, keepdims=True)
    assert 0.05 < np.mean(nz > r) < 0.95  # the ball clips some records
    Z = Z * np.minimum(1.0, r / nz)
    ref = np.stack([c + Z[y.numpy() == k].mean(0) for k in (0, 1)])
    np.testing.assert_allclose(rel.model.means.numpy(), ref, atol=2e-3)
    # the box's middle instead: the same radius pulls the records to the middle, far from the truth
    box = release_sound(U, y, 2, 500.0, DELTA, clip_bound=r, center=c0, covariance_type="auto",
                        generator=torch.Generator().manual_seed(0))
    assert np.abs(box.model.means.numpy() - ref).max() > 0.05


def test_tiny_budget_keeps_the_centre_near_the_box_middle():
    U, y = _table(n=100)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    w = []
    for seed in range(20):
        rel = release_centred(U, y, 2, 0.05, DELTA, clip_bound=0.3, ball_center=c0, ball_radius=math.sqrt(6) / 2,
                              generator=torch.Generator().manual_seed(seed))
        w.append(float(rel.extras["centre_weight"]))
        assert float((rel.extras["centre"] - c0).norm()) <= math.sqrt(6) / 2 + 1e-12  # inside the ball
    assert np.median(w) < 0.2  # a noisy offset is shrunk back to the box's middle


def test_record_lists_both_stages_and_dropped_rows_are_removals():
    U, y = _table(n=400)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    kw = dict(clip_bound=0.3, ball_center=c0, ball_radius=math.sqrt(6) / 2, covariance_type="auto")
    rel = release_centred(U, y, 2, 1.0, DELTA, generator=torch.Generator().manual_seed(5), **kw)
    rec = rel.privacy
    assert rec.epsilon == 1.0 and rec.delta == DELTA and rec.mode == "sound"
    names = [b.name for b in rec.blocks]
    assert names[:3] == ["centre_counts", "centre_sums", "centre_second_moments"]
    assert {"counts", "sums", "second_moments", "pooled_second_moment"} <= set(names[3:])
    assert "zCDP composition of two stages" in rec.accountant and rec.split["centre"] == 0.1
    # a row with a label outside the classes, or a NaN feature, is dropped by both stages: same release
    U2 = torch.cat([U, torch.full((1, 6), 0.9, dtype=torch.float64), torch.full((1, 6), float("nan"))])
    y2 = torch.cat([y, torch.tensor([7, 0])])
    rel2 = release_centred(U2, y2, 2, 1.0, DELTA, generator=torch.Generator().manual_seed(5), **kw)
    assert torch.equal(rel.extras["centre"], rel2.extras["centre"])
    assert torch.equal(rel.model.means, rel2.model.means) and torch.equal(rel.model.covariances, rel2.model.covariances)
    with pytest.raises(ValueError, match="ball_center, not center"):
        release_centred(U, y, 2, 1.0, DELTA, center=c0, **kw)
    with pytest.raises(ValueError, match="num_draws"):
        release_centred(U, y, 2, 1.0, DELTA, num_draws=3, **kw)
    with pytest.raises(ValueError, match="clip_bound"):  # public settings refused before any noise
        release_centred(U, y, 2, 1.0, DELTA, **(kw | {"clip_bound": -1.0}))


def test_laplace_and_replace_one_run_and_say_so():
    U, y = _table(n=300)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    kw = dict(clip_bound=0.3, ball_center=c0, ball_radius=math.sqrt(6) / 2)
    lap = release_centred(U, y, 2, 1.0, None, mechanism="laplace", generator=torch.Generator().manual_seed(0), **kw)
    assert "basic composition of two stages" in lap.privacy.accountant and lap.privacy.delta == 0.0
    assert lap.privacy.blocks[0].mechanism.endswith("laplace")
    ro = release_centred(U, y, 2, 1.0, DELTA, adjacency="replace-one", generator=torch.Generator().manual_seed(0), **kw)
    assert ro.privacy.adjacency.value == "replace-one"


def test_estimator_default_is_centred_and_box_is_the_one_stage_release():
    from torchdpgmm.bounds import Bounds
    from torchdpgmm.estimator import DPGaussianMixture

    U, y = _table(n=2000, d=3)
    bounds = [(0.0, 10.0)] * 3
    X = 10 * U.numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with allow_weak_privacy():  # epsilon 200: negligible noise, beyond a meaningful guarantee
            est = DPGaussianMixture(200.0, DELTA, classes=[0, 1], bounds=bounds, random_state=0).fit(X, y.numpy())
            box = DPGaussianMixture(200.0, DELTA, classes=[0, 1], bounds=bounds, center="box",
                                    random_state=0).fit(X, y.numpy())
    np.testing.assert_allclose(est.center_, X.mean(0), atol=0.05)  # released centre, user units
    np.testing.assert_allclose(box.center_, 5.0)
    assert [b.name for b in est.privacy_.blocks][0] == "centre_counts"
    assert all(not b.name.startswith("centre_") for b in box.privacy_.blocks)
    b = Bounds([0.0] * 3, [10.0] * 3)
    # "box" is exactly the one-stage sound release about the box's middle at the box's default radius
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = release_sound(torch.as_tensor(b.to_unit(X)), y, 2, 200.0, DELTA, clip_bound=b.release_clip_bound,
                            center=b.unit_center, covariance_type="auto",
                            generator=torch.Generator().manual_seed(box._seed()))
    np.testing.assert_allclose(box.means_, b.means_from_unit(ref.model.means).numpy(), rtol=0, atol=1e-12)
    truth = np.stack([X[y.numpy() == k].mean(0) for k in (0, 1)])
    assert np.abs(est.means_ - truth).max() < np.abs(box.means_ - truth).max()  # the centred default is closer
    for bad, msg in ((dict(center="middle"), "center must be one of"), (dict(center="box", bounds=None, clip_bound=1.0),
                                                                         "center= applies with public bounds only")):
        with pytest.raises(ValueError, match=msg):
            DPGaussianMixture(1.0, DELTA, classes=[0, 1], **({"bounds": bounds} | bad)).fit(X, y.numpy())


def _batched_release(device):
    """A batch of 4 tables in one call (batch shape first): the centre and the model stay on the input's device."""
    g = torch.Generator(device=device).manual_seed(0)
    U = (0.2 + 0.05 * torch.randn(4, 3000, 5, generator=g, device=device, dtype=torch.float64)).clamp(0, 1)
    y = (torch.arange(3000, device=device) % 2).expand(4, 3000)
    c0 = torch.full((5,), 0.5, dtype=torch.float64, device=device)
    return release_centred(U, y, 2, 2.0, DELTA, clip_bound=0.5, ball_center=c0, ball_radius=math.sqrt(5) / 2,
                           covariance_type="auto", generator=g)


def test_batched_centred_release_stays_on_the_input_device():
    rel = _batched_release("cpu")
    assert rel.extras["centre"].shape == (4, 5) and rel.extras["centre_weight"].shape == (4,)
    assert rel.model.means.shape == (4, 2, 5) and rel.extras["centre"].device.type == "cpu"
    assert float((rel.extras["centre"] - 0.2).abs().max()) < 0.1  # every table's centre found its corner


@pytest.mark.cuda
def test_batched_centred_release_on_cuda():
    rel = _batched_release("cuda")
    assert rel.extras["centre"].device.type == "cuda" and rel.model.means.device.type == "cuda"
    assert float((rel.extras["centre"] - 0.2).abs().max()) < 0.1


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_release_refuses_a_non_finite_user_centre_on_every_device(device):
    """A user's centre is public and read back at the front door on any device (release_sound checks host centres
    only, so that a first stage's released centre on an accelerator is never waited for)."""
    from torchdpgmm import release

    U, y = _table(n=50)
    bad = torch.full((U.shape[-1],), float("nan"), dtype=torch.float64, device=device)
    with pytest.raises(ValueError, match="center must be a finite tensor"):
        release(U.to(device), y.to(device), 2, 1.0, 1e-5, clip_bound=0.3, center=bad)


def test_check_center_reads_host_centres_and_leaves_released_device_centres_unread():
    """One check for every centre: host values are read (NaN refused), the last dimension must be d, and a centre
    on another device is not read back unless asked (the meta device stands in for an accelerator here)."""
    from torchdpgmm.release.sound import check_center

    assert torch.equal(check_center([0.5, 0.5], 2), torch.tensor([0.5, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="center must be a finite tensor with last dimension d=2"):
        check_center([0.5, float("nan")], 2)
    with pytest.raises(ValueError, match="last dimension d=3"):
        check_center([0.5, 0.5], 3)
    assert check_center(torch.empty(2, device="meta"), 2).device.type == "meta"  # not read back


def test_block_noise_std_reads_gaussian_sigma_and_laplace_scale():
    """The noise std of a block from a sound release's public summary: sigma for Gaussian noise, sqrt(2) b for a
    Laplace scale b (the Laplace variance 2 b^2), None when the summary has neither."""
    from torchdpgmm.release.diagnostics import block_noise_std

    assert block_noise_std({"sigma_sums": 3.0}, "sums") == 3.0
    assert block_noise_std({"laplace_scale_sums": 2.0}, "sums") == pytest.approx(math.sqrt(8.0))
    assert block_noise_std({"sigma_counts": 1.0}, "sums") is None
    U, y = _table(n=200)
    lap = release_sound(U, y, 2, 1.0, None, clip_bound=0.3, mechanism="laplace",
                        generator=torch.Generator().manual_seed(0))
    assert block_noise_std(lap.extras["noise"], "sums") == pytest.approx(
        math.sqrt(2.0) * lap.extras["noise"]["laplace_scale_sums"])


# ---------------------------------------------------------------------------------------------- the private radius
def _hist(X, y, K, c, edges):
    from torchdpgmm.release.centring import distance_histogram

    return distance_histogram(torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y), K,
                              torch.as_tensor(c, dtype=torch.float64), torch.as_tensor(edges)).numpy()


def test_radius_histogram_sensitivity_by_brute_force_over_neighbours():
    """Every neighbouring pair (a record removed, added, or replaced by any candidate, including rows that are dropped:
    NaN features or a label outside the classes) moves the histogram by at most the block's stated sensitivity (L2 1 /
    sqrt(2), L1 1 / 2), and some pair attains it."""
    from torchdpgmm.release.centring import radius_grid, radius_noise

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (6, 2))
    y = np.array([0, 1, 0, 1, 1, 0])
    c = np.array([0.3, 0.6])
    edges = np.array(radius_grid(0.2, 1.4))
    cand = [rng.uniform(-0.5, 1.5, 2) for _ in range(40)] + [c] + [c + [e, 0] for e in edges] + [np.array([np.nan, 0.1])]
    cand_y = [int(rng.integers(0, 3)) for _ in cand]  # label 2 lies outside range(2): dropped
    h0 = _hist(X, y, 2, c, edges)
    assert h0.sum() == 6 and len(h0) == len(edges) + 1
    worst = {"add-remove": [0.0, 0.0], "replace-one": [0.0, 0.0]}
    for i in range(6):  # remove record i
        h = _hist(np.delete(X, i, 0), np.delete(y, i), 2, c, edges)
        worst["add-remove"] = np.maximum(worst["add-remove"], [np.linalg.norm(h - h0), np.abs(h - h0).sum()])
    for x, yy in zip(cand, cand_y):  # add a record
        h = _hist(np.vstack([X, x]), np.append(y, yy), 2, c, edges)
        worst["add-remove"] = np.maximum(worst["add-remove"], [np.linalg.norm(h - h0), np.abs(h - h0).sum()])
        for i in range(6):  # replace record i by it
            X2, y2 = X.copy(), y.copy()
            X2[i], y2[i] = x, yy
            h = _hist(X2, y2, 2, c, edges)
            worst["replace-one"] = np.maximum(worst["replace-one"], [np.linalg.norm(h - h0), np.abs(h - h0).sum()])
    for adj, (l2, l1) in worst.items():
        g = radius_noise(0.05, 1.0, DELTA, adjacency=adj)[2]
        lap = radius_noise(0.05, 1.0, None, mechanism="laplace", adjacency=adj)[2]
        assert l2 == pytest.approx(g.sensitivity) and l1 == pytest.approx(lap.sensitivity)  # bound, attained
        assert g.norm == "l2" and lap.norm == "l1"


def _radius_ref(hist, edges, std, q, z):
    """numpy reference of the radius rule: the first grid radius whose noisy tail less z noise stds is at most
    (1 - q) of the noisy total (once true, kept), else the last."""
    total = max(hist.sum(), 1.0)
    ok = False
    for j in range(len(edges)):
        tail = hist[j + 1:].sum()
        ok = ok or tail - z * std * math.sqrt(len(hist) - 1 - j) <= (1 - q) * total
        if ok:
            return edges[j]
    return edges[-1]


def test_radius_from_histogram_matches_numpy_and_is_batched():
    from torchdpgmm.release.centring import radius_from_histogram, radius_grid

    rng = np.random.default_rng(1)
    edges = np.array(radius_grid(0.5, 4.0))
    H = rng.normal(200, 150, size=(300, len(edges) + 1))
    for z, q, std in ((0.0, 0.9, 10.0), (1.0, 0.8, 50.0), (2.0, 0.95, 3.0)):
        got = radius_from_histogram(torch.as_tensor(H), torch.as_tensor(edges), std, quantile=q, z=z).numpy()
        ref = np.array([_radius_ref(h, edges, std, q, z) for h in H])
        np.testing.assert_array_equal(got, ref)
    assert radius_grid(0.5, 1.0) == pytest.approx([0.5 * 2 ** (j / 4) for j in range(5)])
    with pytest.raises(ValueError, match="0 < floor < top"):
        radius_grid(0.5, 0.5)


@pytest.mark.parametrize("noise,mechanism,delta", [("discrete", "kl", DELTA), ("continuous", "kl", DELTA),
                                                   ("discrete", "laplace", None), ("continuous", "laplace", None)])
@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
def test_private_radius_record_lists_the_block_and_recomposes_to_the_target(noise, mechanism, delta, adjacency):
    """The record lists centre, radius and mixture blocks; recomposed from the blocks alone by an independent
    accountant (zCDP: rho = sum (Delta/sigma)^2/2 -> Cor. 13 by brute force; GDP: mu^2 = sum (Delta/sigma)^2 -> the
    delta curve; Laplace: eps = sum Delta_1/b) it meets (eps, delta), and the radius block spends its share."""
    U, y = _table(n=300)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    eps = 1.0
    rel = release_centred(U, y, 2, eps, delta, clip_bound=None, ball_center=c0, ball_radius=math.sqrt(6) / 2,
                          covariance_type="auto", noise=noise, mechanism=mechanism, adjacency=adjacency,
                          generator=torch.Generator().manual_seed(0))
    rec = rel.privacy
    names = [b.name for b in rec.blocks]
    assert names[:4] == ["centre_counts", "centre_sums", "centre_second_moments", "radius_histogram"]
    assert rec.split["radius"] == 0.05 and "three stages" in rec.accountant
    assert any("private clip radius" in n for n in rec.notes)
    r = rec.blocks[3]
    if mechanism == "laplace":
        total = sum(b.sensitivity / b.noise_scale for b in rec.blocks)
        assert total <= eps * (1 + 1e-9) and total > 0.95 * eps
        assert r.sensitivity / r.noise_scale == pytest.approx(0.05 * eps, rel=1e-5)
    elif noise == "continuous":
        mu2 = sum((b.sensitivity / b.noise_scale) ** 2 for b in rec.blocks)
        assert _gdp_delta(eps, math.sqrt(mu2)) <= DELTA * (1 + 1e-6)
        assert (r.sensitivity / r.noise_scale) ** 2 / mu2 == pytest.approx(0.05, rel=1e-5)
    else:
        rho = sum((b.sensitivity / b.noise_scale) ** 2 / 2 for b in rec.blocks)
        assert _zcdp_delta(eps, rho) <= DELTA * (1 + 1e-3)
        assert _zcdp_delta(eps * 1.02, rho * 1.1) > DELTA  # not much looser than needed
        assert (r.sensitivity / r.noise_scale) ** 2 / 2 / rho == pytest.approx(0.05, rel=1e-3)


def test_negligible_noise_radius_is_the_grid_quantile_and_the_model_is_clipped_there():
    """At eps = 500 the released radius is numpy's grid quantile of the distances to the released centre and the
    class means are numpy's means of the records pulled onto that ball."""
    from torchdpgmm.release.centring import RADIUS_QUANTILE, radius_grid

    rng = np.random.default_rng(2)
    n, d = 4000, 6
    yy = rng.integers(0, 2, n)
    U = torch.as_tensor(np.clip(0.5 + 0.3 * rng.normal(size=(n, d)) + 0.1 * yy[:, None], 0, 1))
    y = torch.as_tensor(yy)
    c0 = torch.full((d,), 0.5, dtype=torch.float64)
    rel = release_centred(U, y, 2, 500.0, DELTA, clip_bound=None, ball_center=c0, ball_radius=math.sqrt(d) / 2,
                          covariance_type="auto", generator=torch.Generator().manual_seed(0))
    c = rel.extras["centre"].numpy()
    dist = np.linalg.norm(U.numpy() - c, axis=1)
    edges = radius_grid(0.5, math.sqrt(d))
    ref = next((e for e in edges if np.mean(dist >= e) <= 1 - RADIUS_QUANTILE + 1e-3), edges[-1])
    R = float(rel.extras["clip_radius"])
    assert R == pytest.approx(ref) and R > 0.5  # the data need more than the fixed default
    assert np.mean(dist <= R) >= RADIUS_QUANTILE - 0.01
    Z = (U.numpy() - c) * np.minimum(1.0, R / dist)[:, None]
    truth = np.stack([c + Z[yy == k].mean(0) for k in (0, 1)])
    np.testing.assert_allclose(rel.model.means.numpy(), truth, atol=3e-3)
    cov = np.cov(Z[yy == 0].T)
    np.testing.assert_allclose(rel.model.covariances[0].numpy(), cov, atol=3e-3)


def test_private_radius_keeps_the_floor_on_a_small_table_and_refuses_bad_settings():
    U, y = _table(n=60)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    kw = dict(clip_bound=None, ball_center=c0, ball_radius=math.sqrt(6) / 2)
    R = [float(release_centred(U, y, 2, 0.5, DELTA, generator=torch.Generator().manual_seed(s), **kw)
               .extras["clip_radius"]) for s in range(10)]
    assert np.median(R) == pytest.approx(0.5)  # tail counts that are mostly noise keep the floor
    for bad, msg in ((dict(radius_fraction=0.95), "radius_fraction"), (dict(radius_quantile=1.0), "radius_quantile"),
                     (dict(radius_z=-1.0), "radius_z")):
        with pytest.raises(ValueError, match=msg):
            release_centred(U, y, 2, 1.0, DELTA, **(kw | bad))


def _batched_private_radius(device):
    g = torch.Generator(device=device).manual_seed(0)
    spread = torch.tensor([0.05, 0.3, 0.05, 0.3], dtype=torch.float64, device=device)[:, None, None]
    U = (0.5 + spread * torch.randn(4, 3000, 5, generator=g, dtype=torch.float64, device=device)).clamp(0, 1)
    y = (torch.arange(3000, device=device) % 2).expand(4, 3000)
    c0 = torch.full((5,), 0.5, dtype=torch.float64, device=device)
    rel = release_centred(U, y, 2, 2.0, DELTA, clip_bound=None, ball_center=c0, ball_radius=math.sqrt(5) / 2,
                          covariance_type="auto", generator=g)
    return U, rel


@pytest.mark.cuda
def test_batched_private_radius_on_cuda():
    U, rel = _batched_private_radius("cuda")
    R = rel.extras["clip_radius"]
    assert R.device.type == "cuda" and rel.model.means.device.type == "cuda" and R.shape == (4,)
    assert float(R[0]) == 0.5 and float(R[1]) > 0.5


def test_batched_private_radius_is_one_per_table():
    U, rel = _batched_private_radius("cpu")
    R = rel.extras["clip_radius"]
    assert R.shape == (4,) and rel.model.means.shape == (4, 2, 5)
    assert float(R[0]) == 0.5 and float(R[2]) == 0.5 and float(R[1]) > 0.5 and float(R[3]) > 0.5
    for b in range(4):  # each table's model is the same release run alone on its rows (its own radius)
        dist = (U[b] - rel.extras["centre"][b]).norm(dim=-1)
        assert float((dist <= R[b]).double().mean()) >= 0.85


def test_release_centred_applies_the_one_budget_rule_once():
    """Issue 38 item 2 at release_centred (a public function that skipped it): epsilon > 1e3 or delta >= 0.5 refused
    in one line before any noise (allow_weak_privacy=True releases with a warning), epsilon > 10 warned once; inside
    a front door that warned already (DPGaussianMixture.fit, whose default with bounds is this release) the warning
    is not given twice."""
    from torchdpgmm._validation import WeakPrivacyWarning
    from torchdpgmm.estimator import DPGaussianMixture

    U, y = _table(300, d=2)
    kw = dict(clip_bound=0.5, ball_center=torch.full((2,), 0.5, dtype=torch.float64), ball_radius=math.sqrt(2) / 2)
    for eps, dlt in ((2000.0, DELTA), (1.0, 0.5)):
        with pytest.raises(ValueError, match="meaningful guarantee") as e:
            release_centred(U, y, 2, eps, dlt, **kw)
        assert "\n" not in str(e.value)

    def weak(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        return [str(w.message) for w in caught if issubclass(w.category, WeakPrivacyWarning)]

    assert len(weak(lambda: release_centred(U, y, 2, 2000.0, DELTA, allow_weak_privacy=True, **kw))) == 1
    assert weak(lambda: release_centred(U, y, 2, 50.0, DELTA, **kw)) == ["epsilon = 50 > 10 protects little"]
    assert weak(lambda: release_centred(U, y, 2, 5.0, DELTA, **kw)) == []
    X = U.numpy() * 10
    with allow_weak_privacy():  # at epsilon 50 the samplers leave delta + delta_sampler >= 0.5: refused outside
        got = weak(lambda: DPGaussianMixture(50.0, 1e-2, classes=[0, 1], bounds=(0.0, 10.0)).fit(X, y.numpy()))
    sampler = [m for m in got if "delta_sampler" in m]  # at epsilon 50 the discrete samplers' share passes delta
    got = [m for m in got if "delta_sampler" not in m]
    assert len(sampler) == 1
    assert len(got) == 2 and sum("epsilon" in m for m in got) == 1  # one epsilon warning, one delta warning


@pytest.mark.parametrize("mechanism, noise", [("kl", "discrete"), ("kl", "continuous"), ("laplace", "discrete")])
def test_private_radius_reports_its_noise_in_the_data_units(mechanism, noise):
    """With the private radius the mixture stage releases records scaled by 1/R; extras["noise"] is nonetheless in
    the data's units: equal to what the sound release itself calibrates at clip bound R with the mixture stage's
    epsilon (sums scale with R, second moments with R^2, counts not), so the moments' diagnostics read it right."""
    from torchdpgmm.release.sound import release_sound

    rng = np.random.default_rng(2)
    yy = rng.integers(0, 2, 4000)
    U = torch.as_tensor(np.clip(0.5 + 0.3 * rng.normal(size=(4000, 6)) + 0.1 * yy[:, None], 0, 1))
    y = torch.as_tensor(yy)
    c0 = torch.full((6,), 0.5, dtype=torch.float64)
    rel = release_centred(U, y, 2, 5.0, DELTA, clip_bound=None, ball_center=c0, ball_radius=math.sqrt(6) / 2,
                          covariance_type="auto", mechanism=mechanism, noise=noise,
                          generator=torch.Generator().manual_seed(0))
    R = float(rel.extras["clip_radius"])
    assert R > 0.5  # the radius left its floor, so units matter
    ref = release_sound(U, y, 2, rel.extras["stage_epsilons"][1], DELTA, clip_bound=R, center=rel.extras["centre"],
                        covariance_type="auto", mechanism=mechanism, noise=noise,
                        generator=torch.Generator().manual_seed(0)).extras["noise"]
    got = rel.extras["noise"]
    scale_keys = [k for k in ref if k.startswith(("sigma_", "laplace_scale_", "grid_")) and ref[k] is not None]
    assert {k.split("_")[-1] for k in scale_keys} >= {"counts", "sums", "moment"}
    for k in scale_keys:
        assert float(got[k]) == pytest.approx(float(ref[k]), rel=1e-9), k
    assert float(rel.extras["noise_scaled"][scale_keys[0]]) > 0


def test_radius_histogram_keeps_the_mixture_stages_rows():
    """The radius histogram counts exactly the rows the mixture stage keeps (one filter, ``sound.kept_rows``), against
    a numpy reference: a NaN feature, an infinite one, a finite row that overflows once centred, a label outside the
    classes and a masked-out row are dropped; the rest are counted once."""
    from torchdpgmm.release.centring import distance_histogram, radius_grid
    from torchdpgmm.release.sound import kept_rows

    X = np.array([[0.1, 0.2], [np.nan, 0.3], [np.inf, 0.0], [1.7e308, 0.4], [0.5, 0.5], [0.9, 0.1], [0.3, 0.3]])
    y = np.array([0, 1, 0, 1, 2, 1, 0])
    mask = np.array([True, True, True, True, True, True, False])
    c = np.array([-1e308, 0.5])
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.isfinite(X - c).all(1) & (y >= 0) & (y < 2) & mask
    assert want.tolist() == [True, False, False, False, False, True, False]
    Xt, yt, ct, mt = (torch.as_tensor(a) for a in (X, y, c, mask))
    assert kept_rows(Xt - ct, yt, 2, mt).tolist() == want.tolist()
    h = distance_histogram(Xt, yt, 2, ct, torch.as_tensor(radius_grid(0.2, 1.4)), mt)
    assert int(h.sum()) == int(want.sum())


def test_the_two_stage_record_names_the_stage_of_each_clip_note():
    import numpy as np

    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 2)), rng.integers(0, 2, 100)
    notes = DPGaussianMixture(classes=[0, 1], bounds=(-4.0, 4.0), random_state=0).fit(X, y).privacy_.notes
    clips = [n for n in notes if "records clipped to" in n]
    assert len(clips) == 2 and sum(n.startswith("centre stage: ") for n in clips) == 1, clips
    assert sum(n.startswith("discrete samplers") for n in notes) == 1  # one sampler note for the stages together


@pytest.mark.parametrize("eps, delta", [(1e-5, 1e-5), (1e-4, 1e-5), (3e-3, 1e-3), (1e-2, 1e-3), (0.3, 0.1), (0.8, 0.1),
                                        (2.0, 0.4), (5.0, 0.4)])
def test_a_stage_share_that_delta_alone_covers_is_refused_never_overspent(eps, delta):
    """An audit found the two-stage release spending more than its budget where the centre's tenth of rho is one
    that delta alone covers: zcdp_epsilon gave a tiny positive epsilon there (not 0, as gdp_epsilon gives), and the
    stage calibrated to it got back a larger rho. Such a budget is now refused before any noise; every other one
    composes to at most (eps, delta) (brute-force conversion above)."""
    from torchdpgmm.bounds import Bounds, release_in_unit_box
    from torchdpgmm.estimator import DPGaussianMixture
    from torchdpgmm.privacy.calibration import zcdp_rho

    rho = float(zcdp_rho(eps, delta))
    U, y = _table(300, d=3)
    est = DPGaussianMixture(eps, delta, classes=[0, 1], bounds=(0.0, 1.0), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _zcdp_delta_wide(0.0, 0.1 * rho) <= delta:  # the centre's share: delta alone covers it
            with pytest.raises(ValueError, match="too small for the two-stage release: .* centre stage's share"):
                est.fit(U.numpy(), y.numpy())
            return
        est.fit(U.numpy(), y.numpy())
        rel = release_in_unit_box(U, y, 2, eps, delta, Bounds.parse((0.0, 1.0), n_features=3),
                                  generator=torch.Generator().manual_seed(0))  # the estimator's own path
    e1, e2 = rel.extras["stage_epsilons"]
    r1, r2 = float(zcdp_rho(e1, delta)), float(zcdp_rho(e2, delta))
    assert r1 + r2 <= rho and _zcdp_delta_wide(eps, r1 + r2) <= delta * (1 + 1e-3)


@pytest.mark.parametrize("delta", [1e-5, 1e-3, 0.1])
def test_zcdp_epsilon_is_zero_exactly_where_delta_alone_covers_rho(delta):
    """Smallest epsilon with delta(rho, epsilon) <= delta: 0 where the brute-force conversion at epsilon 0 is
    already below delta, positive where it is clearly above (float and tensor paths alike)."""
    from torchdpgmm.privacy.calibration import zcdp_epsilon

    f64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    rhos = [float(rho) for rho in np.logspace(-14, 0, 29)
            if abs(math.log(_zcdp_delta_wide(0.0, rho) / delta)) >= 0.01]  # else too close for a grid's resolution
    # the tensor path once for all of them (elementwise, as for one; one call is a 64-step bisection of ~50 ops a
    # step, most of its time per call whatever the size), and once with 0-d tensors at the first positive epsilon
    ets = zcdp_epsilon(f64(rhos), f64(delta)).tolist()
    first = next(i for i, rho in enumerate(rhos) if _zcdp_delta_wide(0.0, rho) > delta)
    assert float(zcdp_epsilon(f64(rhos[first]), f64(delta))) == pytest.approx(ets[first], rel=1e-12)
    for rho, et in zip(rhos, ets):
        d0 = _zcdp_delta_wide(0.0, rho)
        e = zcdp_epsilon(rho, delta)
        assert (e == 0.0) == (d0 <= delta) == (et == 0.0) and et == pytest.approx(e, rel=1e-12)
