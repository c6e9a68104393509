"""Sound mode: public checks, branch-free data path, sensitivities (per block and joint, brute force),
calibration against dp-accounting, covariance types, and the #13 'Done when' properties."""
import json
import math
import pathlib

import numpy as np
import pytest
import torch

from torchdpgmm.release import sound

TYPES = ["full", "tied", "diag", "spherical"]


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _data(batch=(), n=300, d=2, K=3, seed=0):
    g = _g(seed)
    X = 2 * torch.randn(batch + (n, d), dtype=torch.float64, generator=g)
    y = torch.randint(0, K, batch + (n,), generator=g)
    return X, y


# ---------------------------------------------------------------------------------------------- calibration
@pytest.mark.parametrize("eps,delta", [(0.3, 1e-5), (1.0, 1e-5), (4.0, 1e-6), (10.0, 1e-5)])
def test_gdp_mu_matches_dp_accounting_pld(eps, delta):
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma = 1.0 / sound.gdp_mu(eps, delta)
    ref = pld.from_gaussian_mechanism(sigma, sensitivity=1.0, value_discretization_interval=1e-3)
    eps_ref = ref.get_epsilon_for_delta(delta)
    assert eps_ref == pytest.approx(eps, rel=1e-2)
    assert eps_ref >= eps - 1e-3


def _pld_eps(blocks, delta):
    from dp_accounting.pld import privacy_loss_distribution as pld

    total = None
    for s, sig in blocks:
        p = pld.from_gaussian_mechanism(sig, sensitivity=s, value_discretization_interval=1e-3)
        total = p if total is None else total.compose(p)
    return total.get_epsilon_for_delta(delta)


@pytest.mark.parametrize("mechanism", ["gaussian", "kl"])
@pytest.mark.parametrize("covariance_type", ["full", "spherical"])
def test_whole_release_composes_to_claim(mechanism, covariance_type):
    """dp-accounting's PLD: add/remove composes the three blocks to the claim; replace-one is one Gaussian
    mechanism whose whitened sensitivity is the joint worst case (brute-forced below); the per-block sum
    would overspend."""
    X, y = _data()
    eps, delta, B = 1.5, 1e-5, 3.0
    kw = dict(clip_bound=B, mechanism=mechanism, covariance_type=covariance_type, generator=_g(0), noise="continuous")
    ar = sound.release_sound(X, y, 3, eps, delta, **kw)
    assert ar.privacy.adjacency == "add-remove"  # the default
    sens = sound.sensitivities(B, 2, adjacency="add-remove")
    blocks = [(sens[k], ar.extras["noise"][f"sigma_{k}"]) for k in sound.BLOCKS]
    assert _pld_eps(blocks, delta) == pytest.approx(eps, rel=1e-2)
    ro = sound.release_sound(X, y, 3, eps, delta, adjacency="replace-one", **kw)
    sig = {k: ro.extras["noise"][f"sigma_{k}"] for k in sound.BLOCKS}
    mu = sound.joint_mu(sig, B, 2, adjacency="replace-one", covariance_type=covariance_type)
    assert mu == pytest.approx(sound.gdp_mu(eps, delta), rel=1e-12)
    assert _pld_eps([(mu, 1.0)], delta) == pytest.approx(eps, rel=1e-2)
    per_block = sound.sensitivities(B, 2, adjacency="replace-one")
    assert _pld_eps([(per_block[k], sig[k]) for k in sound.BLOCKS], delta) > 1.05 * eps
    assert ro.extras["noise"]["joint_factor"] < 1.0


# ---------------------------------------------------------------------------------------------- sensitivities
def _stats_np(X, y, K, ct):
    """Independent numpy statistics of clipped records (clipping applied by the caller)."""
    c = np.array([(y == k).sum() for k in range(K)], dtype=float)
    s = np.stack([X[y == k].sum(0) for k in range(K)])
    if ct == "full":
        q = np.stack([X[y == k].T @ X[y == k] for k in range(K)])
    elif ct == "tied":
        q = X.T @ X
    elif ct == "diag":
        q = np.stack([(X[y == k] ** 2).sum(0) for k in range(K)])
    else:
        q = np.array([(X[y == k] ** 2).sum() for k in range(K)])
    return c, s, q


def _whitened(D0, D1, K, ct, sig):
    a, b = _stats_np(*D0, K, ct), _stats_np(*D1, K, ct)
    return math.sqrt(sum(np.sum((u - v) ** 2) / sig[k] ** 2 for u, v, k in zip(a, b, sound.BLOCKS)))


def _neighbours(rng, n, d, K, B, adjacency):
    """Random and adversarial neighbouring pairs (one record changed) on a small dataset: the changed
    record runs over random points and grids of directions (in the plane of e1, e2) and radii."""
    X = rng.normal(size=(n, d))
    X *= np.minimum(1.0, B / np.linalg.norm(X, axis=1, keepdims=True))
    y = rng.integers(0, K, n)
    e1, e2 = np.eye(d)[0], np.eye(d)[1 % d]
    plane = lambda a, r=1.0: r * B * (math.cos(a) * e1 + math.sin(a) * e2) if d > 1 else r * B * math.cos(a) * e1  # noqa: E731
    rand = [B * v / np.linalg.norm(v) for v in rng.normal(size=(100, d))]
    olds = [plane(a) for a in np.linspace(0, math.pi / 2, 7)] + rand[:2]
    news = [plane(a) for a in np.linspace(0, 2 * math.pi, 97)] + [plane(math.pi, r) for r in np.linspace(0, 1, 31)]
    news += rand[:40] + [plane(0, r) for r in np.linspace(0, 1, 11)]
    for z1 in news:
        for k1 in range(K):
            X1, y1 = X.copy(), y.copy()
            X1[0], y1[0] = z1, k1
            if adjacency == "add-remove":
                yield (X[1:], y[1:]), (X1, y1)
                continue
            for z0 in olds:
                X0 = X.copy()
                X0[0] = z0
                yield (X0, y), (X1, y1)
    if adjacency == "replace-one":  # diagonal moments: z' = -(z reflected about the diagonal of (e1, e2))
        for a in np.linspace(0, math.pi / 2, 91):
            X0, X1 = X.copy(), X.copy()
            X0[0], X1[0] = plane(a), -plane(math.pi / 2 - a)
            yield (X0, y), (X1, y)


@pytest.mark.parametrize("ct", TYPES)
@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
@pytest.mark.parametrize("d", [1, 3])
def test_joint_sensitivity_by_brute_force(ct, adjacency, d):
    """Random and adversarial neighbours never exceed joint_mu, and the worst of them attains it, for noise
    shapes in both regimes of the within-class optimum (interior t* and t = -B^2)."""
    rng = np.random.default_rng(0)
    B, K = 1.5, 2
    for sig in ({"counts": 3.0, "sums": 1.0, "second_moments": 1.0},
                {"counts": 0.5, "sums": 1.0, "second_moments": 4.0},
                {"counts": 10.0, "sums": 0.7, "second_moments": 1.2}):
        bound = sound.joint_mu(sig, B, d, adjacency=adjacency, covariance_type=ct)
        worst = max(_whitened(D0, D1, K, ct, sig) for D0, D1 in _neighbours(rng, 6, d, K, B, adjacency))
        assert worst <= bound * (1 + 1e-9), (sig, worst, bound)
        assert worst >= 0.995 * bound, (sig, worst, bound)


def test_per_block_sensitivities_by_brute_force():
    g = _g(3)
    d, B = 3, 2.0
    z = torch.randn(20000, d, generator=g, dtype=torch.float64)
    z = B * z / z.norm(dim=-1, keepdim=True)
    zp = torch.randn(20000, d, generator=g, dtype=torch.float64)
    zp = B * zp / zp.norm(dim=-1, keepdim=True)
    outer = lambda v: v[:, :, None] * v[:, None, :]  # noqa: E731
    ar = sound.sensitivities(B, d, adjacency="add-remove")
    assert z.norm(dim=-1).max().item() == pytest.approx(ar["sums"])
    assert outer(z).flatten(1).norm(dim=-1).max().item() == pytest.approx(ar["second_moments"])
    ro = sound.sensitivities(B, d, adjacency="replace-one")
    same_class_sum = (z - zp).norm(dim=-1).max().item()
    assert ro["sums"] * 0.99 < same_class_sum <= ro["sums"] + 1e-12
    q = (outer(z) - outer(zp)).flatten(1).norm(dim=-1).max().item()
    assert ro["second_moments"] * 0.99 < q <= ro["second_moments"] + 1e-12
    l1 = sound.sensitivities(B, d, adjacency="add-remove", norm="l1")
    iu = torch.triu_indices(d, d)
    u = torch.ones(d, dtype=torch.float64) * B / math.sqrt(d)  # maximiser of both
    assert u.abs().sum().item() == pytest.approx(l1["sums"])
    assert outer(u[None])[0][iu[0], iu[1]].abs().sum().item() == pytest.approx(l1["second_moments"])
    assert outer(z)[:, iu[0], iu[1]].abs().sum(-1).max().item() <= l1["second_moments"] + 1e-12
    l1d = sound.sensitivities(B, d, adjacency="add-remove", norm="l1", covariance_type="diag")
    assert (z * z).sum(-1).max().item() == pytest.approx(l1d["second_moments"])


# ---------------------------------------------------------------------------------------------- public checks
def test_refuses_missing_or_bad_clip_bound_before_drawing():
    X, y = _data()
    g = _g(0)
    state = g.get_state().clone()
    with pytest.raises(ValueError, match="clip_bound is required"):
        sound.release_sound(X, y, 3, 1.0, 1e-5, generator=g)
    for bad in (0.0, -1.0, float("inf"), float("nan"), "x"):
        with pytest.raises(ValueError, match="clip_bound"):
            sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=bad, generator=g)
    assert torch.equal(g.get_state(), state)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"delta": None}, ValueError, "delta"),
        ({"adjacency": "label-flip"}, ValueError, "adjacency"),
        ({"mechanism": "wishart"}, ValueError, "no sound mode"),
        ({"mechanism": "r1smg"}, ValueError, "no sound mode"),
        ({"num_classes": 0}, ValueError, "num_classes"),
        ({"num_classes": 2.0}, ValueError, "num_classes"),
        ({"split": {"counts": 1.0}}, ValueError, "split"),
        ({"min_count": 0.5}, ValueError, "min_count"),
        ({"eig_floor": float("nan")}, ValueError, "eig_floor"),
        ({"eig_floor": float("inf")}, ValueError, "eig_floor"),
        ({"covariance_type": "banded"}, ValueError, "covariance_type"),
        ({"num_draws": 0}, ValueError, "num_draws"),
        ({"center": torch.zeros(3)}, ValueError, "center"),
        ({"y": torch.zeros(300)}, TypeError, "integer labels"),
        ({"y": torch.zeros(299, dtype=torch.long)}, ValueError, "y must have shape"),
        ({"X": [[1.0, 2.0]]}, TypeError, "X must be"),
        ({"mask": torch.ones(300)}, ValueError, "mask"),
    ],
)
def test_refuses_invalid_public_inputs_before_drawing(kwargs, exc, match):
    X, y = _data()
    args = dict(X=X, y=y, num_classes=3, epsilon=1.0, delta=1e-5, clip_bound=3.0)
    args.update(kwargs)
    g = _g(0)
    state = g.get_state().clone()
    with pytest.raises(exc, match=match):
        sound.release_sound(**args, generator=g)
    assert torch.equal(g.get_state(), state)


def test_data_path_has_no_data_dependent_control_flow():
    """Run every sound release on FakeTensors (shapes only, no values): any .item(), bool(tensor), Python
    branch or loop on a private value would raise DataDependentOutputException."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    X, y = _data(batch=(2,), n=40, d=3)
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # public numbers stay real, the data are fake
    fX, fy, fm = mode.from_tensor(X), mode.from_tensor(y), mode.from_tensor(torch.ones(2, 40, dtype=torch.bool))
    cases = [("gaussian", "discrete", "add-remove"), ("laplace", "discrete", "replace-one"),
             ("kl", "continuous", "replace-one"), ("laplace", "continuous", "add-remove")]
    for ct in TYPES:
        for mech, noise, adjacency in cases:
            r = sound.release_sound(fX, fy, 4, 1.0, 1e-5, clip_bound=2.0, mechanism=mech, mask=fm, noise=noise,
                                    covariance_type=ct, adjacency=adjacency, generator=_g(0))
            assert r.model.covariances.shape == (2, 4, 3, 3)
            assert isinstance(r.model.covariances, torch._subclasses.fake_tensor.FakeTensor)
    from torch._subclasses.fake_tensor import DataDependentOutputException

    with pytest.raises(DataDependentOutputException):  # the detector works
        bool((fX > 0).any())


def test_invalid_rows_are_dropped_without_error():
    """A label outside [0, K) or a non-finite row is dropped (an error would reveal it): same release."""
    X, y = _data(n=60)
    base = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(4))
    Xb = torch.cat([X, torch.tensor([[float("nan"), 1.0], [1.0, 2.0], [float("inf"), 0.0], [5.0, 5.0]],
                                    dtype=torch.float64)])
    yb = torch.cat([y, torch.tensor([0, 3, 1, -1])])
    bad = sound.release_sound(Xb, yb, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(4))
    for k in ("weights", "means", "covariances"):
        torch.testing.assert_close(getattr(bad.model, k), getattr(base.model, k), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------- #13 done-when
def test_relabelling_the_only_record_of_a_class_keeps_shape_and_classes():
    X, y = _data(n=40)
    y[:] = torch.where(y == 2, torch.zeros_like(y), y)
    y[0] = 2  # class 2 has exactly one record
    y2 = y.clone()
    y2[0] = 1  # its neighbour: class 2 is empty
    for ct in TYPES:
        a = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0, covariance_type=ct, generator=_g(1))
        b = sound.release_sound(X, y2, 3, 1.0, 1e-5, clip_bound=3.0, covariance_type=ct, generator=_g(1))
        assert a.model.num_classes == b.model.num_classes == 3
        assert a.model.means.shape == b.model.means.shape == (3, 2)
        assert bool(torch.isfinite(b.model.covariances).all()) and bool((b.model.counts >= 2).all())
        assert float(torch.linalg.eigvalsh(b.model.covariances).min()) > 0


def test_class_of_identical_records_and_empty_classes_release():
    X, y = _data(n=30)
    X[y == 1] = torch.tensor([0.5, -0.5], dtype=torch.float64)  # a class of identical records
    rel = sound.release_sound(X, y, 5, 1.0, 1e-5, clip_bound=3.0, generator=_g(2))  # classes 3, 4 empty
    assert rel.model.num_classes == 5 and rel.fitted is None and rel.kl is None
    assert float(torch.linalg.eigvalsh(rel.model.covariances).min()) > 0
    from torchdpgmm.release.evaluation import evaluate

    ev = evaluate(rel, X, y)  # non-private evaluation: NaN KL, never an error
    assert bool(torch.isnan(ev.kl))


def test_float32_and_float64_inputs_give_the_same_release():
    X, y = _data(batch=(3,), n=50)
    X32 = X.to(torch.float32)
    a = sound.release_sound(X32, y, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(3))
    b = sound.release_sound(X32.to(torch.float64), y, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(3))
    assert a.model.dtype == torch.float64
    for k in ("weights", "means", "covariances", "counts"):
        assert torch.equal(getattr(a.model, k), getattr(b.model, k))
    c = sound.release_sound(X.to(torch.int64), y, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(3))
    assert c.model.dtype == torch.float64


# ---------------------------------------------------------------------------------------------- estimates
@pytest.mark.parametrize("ct", TYPES)
def test_large_epsilon_recovers_clipped_fit_for_every_covariance_type(ct):
    X, y = _data(n=2000, d=3)
    B = 2.5
    out, _ = sound.sound_statistics(X, y, 3, 1e6, 1e-5, clip_bound=B, covariance_type=ct, generator=_g(0))
    Z = (X * torch.clamp(B / X.norm(dim=-1, keepdim=True), max=1.0)).numpy()
    yn = y.numpy()
    covs = [np.cov(Z[yn == k].T) for k in range(3)]
    pooled = sum((np.sum(yn == k) - 1) * covs[k] for k in range(3)) / (len(yn) - 3)
    for k in range(3):
        ref = {"full": covs[k], "tied": pooled, "diag": np.diag(np.diag(covs[k])),
               "spherical": np.trace(covs[k]) / 3 * np.eye(3)}[ct]
        np.testing.assert_allclose(out["counts"][k].item(), np.sum(yn == k), atol=1e-2)
        np.testing.assert_allclose(out["means"][k].numpy(), Z[yn == k].mean(0), atol=1e-4)
        np.testing.assert_allclose(out["covariances"][k].numpy(), ref, atol=1e-4)


@pytest.mark.parametrize("ct", TYPES)
def test_noise_scale_matches_record(ct):
    X, y = _data(batch=(3000,), n=200, seed=5)
    eps, delta, B = 1.0, 1e-5, 3.0
    out, rec = sound.sound_statistics(X, y, 3, eps, delta, clip_bound=B, mechanism="gaussian", covariance_type=ct,
                                      generator=_g(1), noise="continuous")
    true_counts = torch.nn.functional.one_hot(y, 3).sum(-2).to(torch.float64)
    resid = out["counts"] - true_counts  # the floor at 2 is far below the true counts (~67)
    mu = sound.gdp_mu(eps, delta)
    sigma_c = 1.0 / (mu * math.sqrt(0.1))  # add/remove: counts sensitivity 1, default split 0.1
    assert resid.std().item() == pytest.approx(sigma_c, rel=0.03)
    blocks = {b.name: b for b in rec.blocks}
    assert blocks["counts"].noise_scale == pytest.approx(sigma_c, rel=1e-12)
    assert blocks["counts"].mechanism == "gaussian" and rec.covered


@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
@pytest.mark.parametrize("ct", ["full", "diag"])
def test_record_blocks_recompose_to_the_claim(adjacency, ct):
    """The typed record's NoisedBlocks, composed by the GDP accountant (exact) and dp-accounting's PLD,
    give back the claimed epsilon (continuous noise); discrete noise composes by zCDP to at most the claim
    and within 3% of it; Laplace records sum to epsilon (at most, within 2% for the discrete one)."""
    from torchdpgmm.privacy import Adjacency, GDPAccountant, PLDAccountant, ZCDPAccountant, events_from_blocks

    X, y = _data()
    eps, delta = 0.8, 1e-6
    kw = dict(clip_bound=2.0, adjacency=adjacency, covariance_type=ct, generator=_g(0))
    rel = sound.release_sound(X, y, 3, eps, delta, noise="continuous", **kw)
    assert rel.privacy.adjacency is Adjacency.parse(adjacency) and len(rel.privacy.blocks) == 3
    for acc, tol in ((GDPAccountant(adjacency=adjacency), 1e-9), (PLDAccountant(adjacency=adjacency), 1e-2)):
        for ev, c in events_from_blocks(rel.privacy.blocks):
            acc.compose(ev, c)
        assert acc.get_epsilon(delta) == pytest.approx(eps, rel=tol)
    dis = sound.release_sound(X, y, 3, eps, delta, **kw)  # discrete by default
    assert {b.mechanism for b in dis.privacy.blocks} == {"discrete-gaussian"}
    acc = ZCDPAccountant(adjacency=adjacency)
    for ev, c in events_from_blocks(dis.privacy.blocks):
        acc.compose(ev, c)
    assert 0.97 * eps <= acc.get_epsilon(delta) <= eps * (1 + 1e-9)
    for noise, lo in (("continuous", 1 - 1e-12), ("discrete", 0.98)):
        lap = sound.release_sound(X, y, 3, eps, None, mechanism="laplace", noise=noise, **kw)
        total = sum(b.sensitivity / b.noise_scale for b in lap.privacy.blocks)
        assert lo * eps <= total <= eps * (1 + 1e-12)


def test_discrete_release_counts_are_integers_and_grids_are_public():
    X, y = _data(batch=(4,))
    out, rec = sound.sound_statistics(X, y, 3, 1.0, 1e-5, clip_bound=3.0, min_count=1, generator=_g(0))
    rel = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(0))
    assert rel.extras["noise"]["noise"] == "discrete" and rel.extras["noise"]["grid_counts"] == 1.0
    assert torch.equal(out["counts"], out["counts"].round())  # released counts are integers
    g = rel.extras["noise"]["grid_sums"]
    # means * counts = released sums, on the public grid
    s = (rel.model.means * rel.model.counts.unsqueeze(-1)) / g
    assert torch.allclose(s, s.round(), atol=1e-6)


def _round_stats(D, K, ct, grids):
    c, s, q = _stats_np(*D, K, ct)
    if ct in ("full", "tied"):  # Frobenius-isometric coordinates of the upper triangle, as the noise layer
        d = q.shape[-1]
        iu = np.triu_indices(d)
        q = np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0)) * q[..., iu[0], iu[1]]
    return c, np.round(s / grids["sums"]), np.round(q / grids["second_moments"])


@pytest.mark.parametrize("ct", TYPES)
@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
def test_discrete_rounding_sensitivity_by_brute_force(ct, adjacency):
    """Grid-snapped statistics of neighbouring datasets never differ by more than the record states: the
    whitened grid-unit change is at most W with sum_b (share_b / sigma_b)^2 = W^2 (brute force)."""
    rng = np.random.default_rng(1)
    B, K, d = 1.5, 2, 2
    st = sound.sound_settings(d, K, 3.0, 1e-3, clip_bound=B, adjacency=adjacency, covariance_type=ct,
                              mechanism="gaussian")
    scales, info = sound._calibrate(st, d)
    grids = info["grids"]
    W = math.sqrt(sum((b.sensitivity / b.noise_scale) ** 2 for b in info["blocks"]))
    sig = {b.name: b.noise_scale for b in info["blocks"]}  # grid units
    worst = 0.0
    for D0, D1 in _neighbours(rng, 5, d, K, B, adjacency):
        a, b = _round_stats(D0, K, ct, grids), _round_stats(D1, K, ct, grids)
        w = math.sqrt(sum(np.sum((u - v) ** 2) / sig[k] ** 2 for u, v, k in zip(a, b, sound.BLOCKS)))
        worst = max(worst, w)
    assert worst <= W * (1 + 1e-9)
    assert worst >= 0.95 * W


def test_mask_ignores_padding():
    Xs, ys = _data(batch=(3,), n=40, seed=7)
    pad = torch.cat([Xs, 100 * torch.ones(3, 10, 2, dtype=torch.float64)], -2)
    ypad = torch.cat([ys, torch.zeros(3, 10, dtype=torch.long)], -1)
    mask = torch.cat([torch.ones(3, 40, dtype=torch.bool), torch.zeros(3, 10, dtype=torch.bool)], -1)
    a, _ = sound.sound_statistics(Xs, ys, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(2))
    b, _ = sound.sound_statistics(pad, ypad, 3, 1.0, 1e-5, clip_bound=3.0, generator=_g(2), mask=mask)
    for k in a:
        assert torch.allclose(a[k], b[k])


@pytest.mark.parametrize("ct", TYPES)
def test_released_model_carries_expanded_covariances(ct):
    X, y = _data(batch=(4,), d=3)
    rel = sound.release_sound(X, y, 3, 0.5, 1e-5, clip_bound=3.0, covariance_type=ct, generator=_g(0))
    C = rel.model.covariances
    assert C.shape == (4, 3, 3, 3) and float(torch.linalg.eigvalsh(C).min()) > 0
    off = C - torch.diag_embed(torch.diagonal(C, dim1=-2, dim2=-1))
    if ct in ("diag", "spherical"):
        assert bool((off == 0).all())
    if ct == "spherical":
        dg = torch.diagonal(C, dim1=-2, dim2=-1)
        assert torch.allclose(dg, dg[..., :1].expand_as(dg))
    if ct == "tied":
        assert torch.equal(C[:, 0], C[:, 1]) and torch.equal(C[:, 0], C[:, 2])
    assert rel.extras["covariance_type"] == ct


def test_release_object_is_private_only_and_carries_record():
    X, y = _data(batch=(5,))
    rel = sound.release_sound(X, y, 3, 0.5, 1e-5, clip_bound=3.0, mechanism="kl", adjacency="replace-one",
                              generator=_g(0))
    p = rel.privacy
    assert p.epsilon == 0.5 and p.delta == 1e-5 and p.adjacency == "replace-one" and p.mode == "sound"
    assert p.covered and [b.name for b in p.blocks] == ["counts", "sums", "second_moments"]
    assert sum(p.split.values()) == pytest.approx(1.0)
    assert rel.fitted is None and rel.kl is None
    lap = sound.release_sound(X, y, 3, 0.5, None, clip_bound=3.0, mechanism="laplace", generator=_g(0))
    assert lap.privacy.delta == 0.0 and "Laplace" in lap.privacy.accountant


@pytest.mark.parametrize("ct", TYPES)
def test_kl_split_is_the_minimiser(ct):
    """The closed-form split minimises sum a_b / u_b on the simplex (grid search)."""
    import itertools

    B, d, K = 3.0, 4, 3
    w = sound.kl_split(B, d, adjacency="replace-one", covariance_type=ct, num_classes=K)
    sens = sound.sensitivities(B, d, adjacency="replace-one")
    s = B / math.sqrt(d)
    cq = {"full": d * (d + 1) / 8, "tied": d * (d + 1) / (8 * K * K), "diag": d / 4, "spherical": 1 / (4 * d)}[ct]
    a = [sens["counts"] ** 2 / 2, sens["sums"] ** 2 * d / (2 * s * s), sens["second_moments"] ** 2 * cq / s ** 4]
    obj = lambda u: sum(ai / ui for ai, ui in zip(a, u))  # noqa: E731
    best = min(obj((x, yy, 1 - x - yy)) for x, yy in itertools.product(
        [i / 400 for i in range(1, 400)], repeat=2) if x + yy < 1)
    assert obj((w["counts"], w["sums"], w["second_moments"])) <= best + 1e-9


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-6), (7.0, 1e-3)])
def test_gdp_mu_agrees_with_core_analytic_gaussian(eps, delta):
    from torchdpgmm.privacy import gaussian_sigma

    assert 1.0 / sound.gdp_mu(eps, delta) == pytest.approx(gaussian_sigma(eps, delta, 1.0, rule="analytic"), rel=1e-6)
    assert sound.gdp_epsilon(delta, sound.gdp_mu(eps, delta)) == pytest.approx(eps, rel=1e-6)


# ---------------------------------------------------------------------------------------------- unchanged mechanism
def test_seeded_outputs_match_the_previous_implementation():
    """Continuous noise against the implementation before the refactor (fixture written by it): the same
    noise scales (replace-one: scaled by the joint factor, the one intended change); under add/remove the
    same seeded counts and means (their Gaussian streams are kept). The second-moment noise and the
    Laplace sampler now come from the one noise layer (new streams): their law is checked by
    test_block_noise_moments."""
    ref = json.loads((pathlib.Path(__file__).parent / "fixtures" / "sound_seeded_v0.json").read_text())
    X, y = torch.tensor(ref["X"], dtype=torch.float64), torch.tensor(ref["y"])
    for key, case in ref["cases"].items():
        mech, adjacency = key.split("/")
        delta = None if mech == "laplace" else 1e-5
        rel = sound.release_sound(X, y, 3, 1.0, delta, clip_bound=3.0, adjacency=adjacency, mechanism=mech,
                                  generator=_g(7), noise="continuous")
        noise = rel.extras["noise"]
        f = noise.get("joint_factor", 1.0) if adjacency == "replace-one" else 1.0
        assert rel.privacy.split == pytest.approx(case["split"], rel=1e-12)
        for k, v in case["noise"].items():
            if k != "mu":
                assert noise[k] == pytest.approx(f * v, rel=1e-9), (key, k)
        if mech == "laplace":
            continue
        assert noise["mu"] == pytest.approx(case["noise"]["mu"], rel=1e-9)
        if adjacency == "add-remove":
            np.testing.assert_allclose(rel.model.counts.numpy(), np.array(case["counts"]), rtol=1e-12)
            np.testing.assert_allclose(rel.model.means.numpy(), np.array(case["means"]), rtol=1e-9, atol=1e-12)
        else:
            assert 0.8 < f < 1.0


@pytest.mark.parametrize("ct", TYPES)
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_block_noise_moments(ct, mechanism, noise):
    """The noise added to each released block has the calibrated law (moments over 20k draws): Gaussian
    std sigma (matrices: sigma on the diagonal, sigma/sqrt 2 off it), Laplace mean |noise| = b on the upper
    triangle; symmetric matrices. Streams may change with the noise layer, the law may not."""
    d, K, T = 3, 2, 20000
    st = sound.sound_settings(d, K, 1.0, None if mechanism == "laplace" else 1e-5, clip_bound=2.0,
                              covariance_type=ct, mechanism=mechanism, noise=noise)
    scales, info = sound._calibrate(st, d)
    q_shape = {"full": (T, K, d, d), "tied": (T, d, d), "diag": (T, K, d), "spherical": (T, K)}[ct]
    zeros = (torch.zeros(T, K, dtype=torch.float64), torch.zeros(T, K, d, dtype=torch.float64),
             torch.zeros(q_shape, dtype=torch.float64))
    noisy = sound._perturb(zeros, scales, st, info, _g(11))
    for block, x in zip(sound.BLOCKS, noisy):
        s = scales[block]
        if block == "second_moments" and ct in ("full", "tied"):
            assert torch.equal(x, x.transpose(-1, -2))
            iu = torch.triu_indices(d, d)
            rel = torch.where(iu[0] == iu[1], 1.0, 1 / math.sqrt(2) if mechanism == "gaussian" else 1.0)
            x = x[..., iu[0], iu[1]] / rel.to(torch.float64)
        x = x.reshape(T, -1) / s
        if mechanism == "gaussian":
            np.testing.assert_allclose(x.std(0).numpy(), 1.0, rtol=0.03)
        else:
            np.testing.assert_allclose(x.abs().mean(0).numpy(), 1.0, rtol=0.03)
            np.testing.assert_allclose(x.var(0).numpy(), 2.0, rtol=0.08)
        assert float(x.mean(0).abs().max()) < 5 * math.sqrt(2.0 / T)


@pytest.mark.parametrize("noise", ["discrete", "continuous"])
def test_release_never_fails_on_adversarial_data(noise):
    """Degenerate data never make a sound release raise: all rows masked, one row, identical rows, huge and
    non-finite values, every label out of range; the model is always finite and positive definite."""
    d = 3
    cases = {
        "all-masked": (torch.randn(5, d, dtype=torch.float64), torch.zeros(5, dtype=torch.long),
                       torch.zeros(5, dtype=torch.bool)),
        "one-row": (torch.ones(1, d, dtype=torch.float64), torch.zeros(1, dtype=torch.long), None),
        "identical": (torch.ones(50, d, dtype=torch.float64), torch.zeros(50, dtype=torch.long), None),
        "huge": (torch.full((20, d), 1e300, dtype=torch.float64), torch.arange(20) % 3, None),
        "non-finite": (torch.full((20, d), float("nan"), dtype=torch.float64), torch.arange(20) % 3, None),
        "labels-out": (torch.randn(20, d, dtype=torch.float64), torch.full((20,), 7), None),
        "int-features": (torch.arange(60).reshape(20, d), torch.arange(20) % 3, None),
    }
    for name, (X, y, mask) in cases.items():
        for mech, ct in [("kl", t) for t in TYPES] + [("laplace", "full"), ("laplace", "diag")]:
            rel = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=2.0, mechanism=mech, covariance_type=ct,
                                      noise=noise, mask=mask, adjacency="replace-one", generator=_g(0))
            m = rel.model
            assert m.means.shape == (3, d), name
            for t in (m.weights, m.means, m.covariances, m.counts):
                assert bool(torch.isfinite(t).all()), (name, mech, ct)
            assert float(torch.linalg.eigvalsh(m.covariances).min()) > 0, (name, mech, ct)


def test_rows_that_overflow_once_centred_are_dropped_not_turned_into_nan():
    # finite rows whose difference to a public centre overflows float64 are dropped like non-finite rows
    from torchdpgmm.release.sound import release_sound

    X = torch.tensor([[1.7e308, 0.0], [0.5, 0.5], [0.2, -0.1], [0.1, 0.3]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    g = torch.Generator().manual_seed(0)
    rel = release_sound(X, y, 2, 1.0, 1e-5, clip_bound=1.0, center=torch.tensor([-1e308, 0.0], dtype=torch.float64),
                        mechanism="gaussian", noise="continuous", generator=g)
    assert torch.isfinite(rel.model.means).all() and torch.isfinite(rel.model.covariances).all()


def test_several_draws_of_one_dataset_are_not_covered_by_one_release_record():
    from torchdpgmm.privacy import BudgetExceededError, BudgetOdometer
    from torchdpgmm.release.sound import release_sound

    X = torch.randn(40, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.arange(40) % 2
    one = release_sound(X, y, 2, 1.0, 1e-5, clip_bound=2.0, generator=torch.Generator().manual_seed(2))
    many = release_sound(X, y, 2, 1.0, 1e-5, clip_bound=2.0, num_draws=5, generator=torch.Generator().manual_seed(2))
    assert one.privacy.covered and not many.privacy.covered
    with pytest.raises((BudgetExceededError, ValueError)):
        BudgetOdometer(100.0, 1e-5).spend(many.privacy)
