"""Sound mode: validation, sensitivities, noise calibration and the accountant (checked against dp-accounting)."""
import math

import pytest
import torch

from torchdpgmm import sound


def _data(batch=(), n=300, d=2, K=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = 2 * torch.randn(batch + (n, d), dtype=torch.float64, generator=g)
    y = torch.randint(0, K, batch + (n,), generator=g)
    return X, y


@pytest.mark.parametrize("eps,delta", [(0.3, 1e-5), (1.0, 1e-5), (4.0, 1e-6), (10.0, 1e-5)])
def test_gdp_mu_matches_dp_accounting_pld(eps, delta):
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma = 1.0 / sound.gdp_mu(eps, delta)
    ref = pld.from_gaussian_mechanism(sigma, sensitivity=1.0, value_discretization_interval=1e-3)
    eps_ref = ref.get_epsilon_for_delta(delta)
    # PLD is pessimistic by a discretisation error; the analytic calibration is tight
    assert eps_ref == pytest.approx(eps, rel=1e-2)
    assert eps_ref >= eps - 1e-3


@pytest.mark.parametrize("mechanism", ["gaussian", "kl"])
@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
def test_whole_release_composes_to_claim(mechanism, adjacency):
    """Compose the three blocks' Gaussian mechanisms in dp-accounting (PLD and RDP): the total is the claim."""
    import dp_accounting
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    X, y = _data()
    eps, delta, B = 1.5, 1e-5, 3.0
    rel = sound.release_sound(X, y, 3, eps, delta, clip_bound=B, adjacency=adjacency, mechanism=mechanism,
                              generator=torch.Generator().manual_seed(0))
    sens = sound.sensitivities(B, 2, adjacency)
    noise = rel.extras["noise"]
    blocks = [(sens[k], noise[f"sigma_{k}"]) for k in ("counts", "sums", "second_moments")]
    total = None
    for s, sig in blocks:
        p = pld.from_gaussian_mechanism(sig, sensitivity=s, value_discretization_interval=1e-3)
        total = p if total is None else total.compose(p)
    eps_pld = total.get_epsilon_for_delta(delta)
    assert eps_pld == pytest.approx(eps, rel=1e-2)
    acc = rdp.RdpAccountant()
    for s, sig in blocks:
        acc.compose(dp_accounting.GaussianDpEvent(sig / s))
    eps_rdp = acc.get_epsilon(delta)
    assert eps_rdp >= eps  # RDP conversion is looser than the exact GDP conversion, never tighter
    assert eps_rdp < 1.5 * eps


def test_sensitivities_by_brute_force():
    """Max over random pairs of records in the ball of the block changes equals the stated sensitivity."""
    g = torch.Generator().manual_seed(3)
    d, B = 3, 2.0
    z = torch.randn(20000, d, generator=g, dtype=torch.float64)
    z = B * z / z.norm(dim=-1, keepdim=True)
    zp = torch.randn(20000, d, generator=g, dtype=torch.float64)
    zp = B * zp / zp.norm(dim=-1, keepdim=True)
    outer = lambda v: v[:, :, None] * v[:, None, :]
    ar = sound.sensitivities(B, d, "add-remove")
    assert z.norm(dim=-1).max().item() == pytest.approx(ar["sums"])
    assert outer(z).flatten(1).norm(dim=-1).max().item() == pytest.approx(ar["second_moments"])
    ro = sound.sensitivities(B, d, "replace-one")
    same_class_sum = (z - zp).norm(dim=-1).max().item()
    assert same_class_sum <= ro["sums"] + 1e-12 and same_class_sum > 0.99 * ro["sums"]
    q = (outer(z) - outer(zp)).flatten(1).norm(dim=-1).max().item()
    assert q <= ro["second_moments"] + 1e-12 and q > 0.99 * ro["second_moments"]
    # L1 (Laplace) versions: upper triangle of z z^T, and ||z||_1
    l1 = sound.sensitivities(B, d, "add-remove", norm="l1")
    iu = torch.triu_indices(d, d)
    u = torch.ones(d, dtype=torch.float64) * B / math.sqrt(d)  # maximiser of both
    assert u.abs().sum().item() == pytest.approx(l1["sums"])
    assert outer(u[None])[0][iu[0], iu[1]].abs().sum().item() == pytest.approx(l1["second_moments"])
    assert outer(z)[:, iu[0], iu[1]].abs().sum(-1).max().item() <= l1["second_moments"] + 1e-12


def test_refuses_missing_or_bad_clip_bound_before_drawing():
    X, y = _data()
    g = torch.Generator().manual_seed(0)
    state = g.get_state().clone()
    with pytest.raises(ValueError, match="clip_bound is required"):
        sound.release_sound(X, y, 3, 1.0, 1e-5, generator=g)
    for bad in (0.0, -1.0, float("inf"), float("nan"), "x"):
        with pytest.raises(ValueError, match="clip_bound"):
            sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=bad, generator=g)
    assert torch.equal(g.get_state(), state)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"adjacency": "label"}, "adjacency"),
        ({"mechanism": "wishart"}, "no sound mode"),
        ({"num_classes": 2}, "labels"),
        ({"split": {"counts": 1.0}}, "split"),
        ({"min_count": 0.5}, "min_count"),
    ],
)
def test_refuses_invalid_parameters(kwargs, match):
    X, y = _data()
    args = dict(X=X, y=y, num_classes=3, epsilon=1.0, delta=1e-5, clip_bound=3.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sound.release_sound(**args, generator=torch.Generator().manual_seed(0))


def test_refuses_nonfinite_and_shape_errors():
    X, y = _data()
    X[5, 0] = float("nan")
    with pytest.raises(ValueError, match="X"):
        sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0)
    X, y = _data()
    with pytest.raises(ValueError, match="y must"):
        sound.release_sound(X, y[:-1], 3, 1.0, 1e-5, clip_bound=3.0)


def test_large_epsilon_recovers_clipped_empirical_fit():
    X, y = _data(n=2000)
    B = 2.5
    out, _ = sound.sound_statistics(X, y, 3, 1e6, 1e-5, B, generator=torch.Generator().manual_seed(0))
    Z = X * torch.clamp(B / X.norm(dim=-1, keepdim=True), max=1.0)
    for k in range(3):
        zk = Z[y == k]
        assert torch.allclose(out["counts"][k], torch.tensor(float(len(zk)), dtype=torch.float64), atol=1e-2)
        assert torch.allclose(out["means"][k], zk.mean(0), atol=1e-4)
        assert torch.allclose(out["covariances"][k], torch.cov(zk.T), atol=1e-4)


def test_noise_scale_matches_record_and_mask_ignores_padding():
    X, y = _data(batch=(2000,), n=500, seed=5)
    eps, delta, B = 1.0, 1e-5, 3.0
    out, rec = sound.sound_statistics(X, y, 3, eps, delta, B, mechanism="gaussian", generator=torch.Generator().manual_seed(1))
    true_counts = torch.nn.functional.one_hot(y, 3).sum(-2).to(torch.float64)
    resid = out["counts"] - true_counts
    # counts are clamped at 2 only far below the true counts (~167), so the residual is the raw noise
    assert resid.std().item() == pytest.approx(rec.noise["sigma_counts"], rel=0.05)
    mu = sound.gdp_mu(eps, delta)
    assert rec.noise["sigma_counts"] == pytest.approx(math.sqrt(2) / (mu * math.sqrt(0.1)))
    # padding: extra rows masked out give the same release with the same generator
    Xs, ys = _data(batch=(3,), n=40, seed=7)
    pad = torch.cat([Xs, 100 * torch.ones(3, 10, 2, dtype=torch.float64)], -2)
    ypad = torch.cat([ys, torch.zeros(3, 10, dtype=torch.long)], -1)
    mask = torch.cat([torch.ones(3, 40, dtype=torch.bool), torch.zeros(3, 10, dtype=torch.bool)], -1)
    a, _ = sound.sound_statistics(Xs, ys, 3, eps, delta, B, generator=torch.Generator().manual_seed(2))
    b, _ = sound.sound_statistics(pad, ypad, 3, eps, delta, B, generator=torch.Generator().manual_seed(2), mask=mask)
    for k in a:
        assert torch.allclose(a[k], b[k])


def test_release_object_carries_privacy_record_and_psd_covariances():
    X, y = _data(batch=(5,))
    rel = sound.release_sound(X, y, 3, 0.5, 1e-5, clip_bound=3.0, mechanism="kl",
                              generator=torch.Generator().manual_seed(0))
    p = rel.privacy
    assert p.epsilon == 0.5 and p.delta == 1e-5 and p.adjacency == "replace-one" and p.mode == "sound"
    assert sum(p.split.values()) == pytest.approx(1.0)
    assert torch.linalg.eigvalsh(rel.model.covariances).min() > 0
    assert rel.kl.shape == (5,) and torch.isfinite(rel.kl).all()
    lap = sound.release_sound(X, y, 3, 0.5, None, clip_bound=3.0, mechanism="laplace",
                              generator=torch.Generator().manual_seed(0))
    assert lap.privacy.delta == 0.0 and "Laplace" in lap.privacy.accountant


def test_kl_split_is_the_minimiser():
    """The closed-form split minimises sum a_b / u_b on the simplex (checked against a grid search)."""
    import itertools

    B, d = 3.0, 4
    w = sound.kl_split(B, d, "replace-one")
    sens = sound.sensitivities(B, d, "replace-one")
    s = B / math.sqrt(d)
    a = [sens["counts"] ** 2 / 2, sens["sums"] ** 2 * d / (2 * s * s), sens["second_moments"] ** 2 * d * (d + 1) / (8 * s ** 4)]
    obj = lambda u: sum(ai / ui for ai, ui in zip(a, u))
    best = min((obj((x, yy, 1 - x - yy)), (x, yy)) for x, yy in itertools.product(
        [i / 400 for i in range(1, 400)], repeat=2) if x + yy < 1)
    assert obj((w["counts"], w["sums"], w["second_moments"])) <= best[0] + 1e-9


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-6), (7.0, 1e-3)])
def test_gdp_mu_agrees_with_core_analytic_gaussian(eps, delta):
    from torchdpgmm.accounting import gaussian_sigma

    assert 1.0 / sound.gdp_mu(eps, delta) == pytest.approx(gaussian_sigma(eps, delta, 1.0, rule="analytic"), rel=1e-6)
    assert sound.gdp_epsilon(delta, sound.gdp_mu(eps, delta)) == pytest.approx(eps, rel=1e-6)


def test_tiny_class_release_is_valid_with_nan_kl():
    X, y = _data(n=50)
    y[:] = 0
    y[0] = 1  # class 1 has one record, class 2 none: the release still works, KL is undefined
    rel = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0, generator=torch.Generator().manual_seed(0))
    assert torch.isnan(rel.kl) and torch.linalg.eigvalsh(rel.model.covariances).min() > 0
    assert (rel.model.counts >= 2).all()


def test_release_front_door_dispatches_to_sound_mode():
    from torchdpgmm.release import release

    X, y = _data(batch=(2,))
    a = release(X, y, 3, 1.0, 1e-5, mode="sound", clip_bound=3.0, generator=torch.Generator().manual_seed(4))
    b = sound.release_sound(X, y, 3, 1.0, 1e-5, clip_bound=3.0, mechanism="kl",
                            generator=torch.Generator().manual_seed(4))
    assert a.privacy.mode == "sound" and a.privacy.adjacency == "replace-one"
    assert torch.equal(a.model.means, b.model.means) and torch.equal(a.model.covariances, b.model.covariances)
    with pytest.raises(ValueError, match="clip_bound"):
        release(X, y, 3, 1.0, 1e-5, mode="sound", generator=torch.Generator())
