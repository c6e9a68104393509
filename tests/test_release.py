"""release(): batching, seeding, privacy records, noise calibration, projections, validation before noise."""
import math
import numpy as np
import pytest
import torch

import torchdpgmm.design as design_mod
from torchdpgmm.montecarlo import synthetic_data
from torchdpgmm.release import release

BASELINES = ["laplace", "gaussian", "colored", "r1smg"]
HAS_DESIGN = hasattr(design_mod, "design_mechanism")


def _g(seed):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def data():
    b = synthetic_data(3, 150, num_classes=3, dim=3, generator=_g(0))
    return b.X, b.y


def _np_fit(X, y, K):
    out = []
    for k in range(K):
        xk = X[y == k]
        out.append((len(xk) / len(X), xk.mean(0), np.cov(xk.T, ddof=1)))
    return out


@pytest.mark.parametrize("mech", BASELINES)
def test_baseline_shapes_seeding_and_record(data, mech):
    X, y = data
    r1 = release(X, y, 3, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(5))
    r2 = release(X, y, 3, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(5))
    r3 = release(X, y, 3, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(6))
    assert r1.model.batch_shape == (3,) and r1.kl.shape == (3,)
    assert r1.model.means.shape == (3, 3, 3) and r1.model.covariances.shape == (3, 3, 3, 3)
    assert torch.equal(r1.model.means, r2.model.means) and torch.equal(r1.kl, r2.kl)
    assert not torch.equal(r1.model.means, r3.model.means)
    assert bool(torch.isfinite(r1.kl).all()) and bool((r1.kl > 0).all())
    # the same dataset in two trials of one batch gets independent noise
    Xr, yr = _replicated(X, y, 2)
    rr = release(Xr, yr, 3, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(5))
    assert not torch.allclose(rr.model.means[0], rr.model.means[1])
    assert not torch.allclose(rr.model.covariances[0], rr.model.covariances[1])
    # the KL is the labeled-GMM KL of the released vs the non-private model (independent numpy check)
    Xn, yn = X[0].numpy(), y[0].numpy()
    fit = _np_fit(Xn, yn, 3)
    np.testing.assert_allclose(r1.fitted.means[0].numpy(), np.stack([f[1] for f in fit]), atol=1e-12)
    kl = 0.0
    for k in range(3):
        p = float(r1.model.weights[0, k]); q = fit[k][0]
        Sp = r1.model.covariances[0, k].numpy(); Sq = fit[k][2]
        dm = fit[k][1] - r1.model.means[0, k].numpy()
        Sqi = np.linalg.inv(Sq)
        g = 0.5 * (np.trace(Sqi @ Sp) + dm @ Sqi @ dm - 3 + np.linalg.slogdet(Sq)[1] - np.linalg.slogdet(Sp)[1])
        kl += p * (math.log(p / q) + g)
    assert float(r1.kl[0]) == pytest.approx(kl, rel=1e-8)
    rec = r1.privacy
    assert rec.adjacency == "label-flip" and rec.mode == "as-published" and rec.mechanism == mech
    assert torch.allclose(rec.epsilon, torch.ones(3, dtype=torch.float64))
    total = rec.split["weights"] + rec.split["means"] + rec.split["covariances"]
    assert torch.allclose(total, torch.ones(3, dtype=torch.float64))
    dp = rec.split["delta_parts"]
    dsum = dp["weights"] + dp["means"] + dp["covariances"]
    assert bool((dsum <= 1e-5 * (1 + 1e-12)).all())
    if mech == "laplace":
        assert bool((dsum == 0).all())
    assert any("leaks" in n for n in rec.notes)  # R was read from the data
    rec.to_dict()  # serialisable


@pytest.mark.parametrize("mech", BASELINES)
def test_projection_invariants(data, mech):
    X, y = data
    r = release(X, y, 3, 0.3, 1e-5, mechanism=mech, mode="as-published", generator=_g(1), cov_floor=1e-4)
    w = r.model.weights
    assert torch.allclose(w.sum(-1), torch.ones(3, dtype=w.dtype))
    assert bool((w >= 1.0 / 150 - 1e-12).all())
    ev = torch.linalg.eigvalsh(r.model.covariances)
    assert bool((ev >= 1e-4 - 1e-12 * ev.abs().amax(-1, keepdim=True)).all())  # up to rounding
    assert torch.allclose(r.model.covariances, r.model.covariances.transpose(-1, -2))


def test_epsilon_grid_broadcasts_in_front(data):
    X, y = data
    eps = torch.tensor([[0.5], [2.0]], dtype=torch.float64)
    r = release(X, y, 3, eps, 1e-5, mechanism="gaussian", mode="as-published", generator=_g(2))
    assert r.kl.shape == (2, 3) and r.model.batch_shape == (2, 3)
    assert torch.equal(r.fitted.means[0], r.fitted.means[1])  # one fit per dataset
    # noise std scales as 1/eps: the realised means' deviation is larger at eps = 0.5 on average
    dev = (r.model.means - r.fitted.means).pow(2).mean((-1, -2, -3))
    assert float(dev[0]) > float(dev[1])


def _replicated(X, y, reps):
    return X[:1].expand(reps, *X.shape[1:]), y[:1].expand(reps, *y.shape[1:])


def test_laplace_noise_scale_matches_wu_sensitivities(data):
    X, y = data
    Xr, yr = _replicated(X, y, 4000)
    eps = 1.5
    r = release(Xr, yr, 3, eps, 1e-5, mechanism="laplace", mode="as-published", generator=_g(3))
    n, K = 150, 3
    R = float(np.abs(X[0].numpy()).sum(1).max())
    b_mean = 4 * K * R / n / (eps / 3)
    noise = (r.model.means - r.fitted.means).reshape(-1).numpy()
    # Laplace(b): mean absolute deviation b, variance 2 b^2
    assert np.mean(np.abs(noise)) == pytest.approx(b_mean, rel=0.03)
    assert np.var(noise) == pytest.approx(2 * b_mean**2, rel=0.08)
    assert float(r.extras["noise_scale"]["means"][0]) == pytest.approx(b_mean, rel=1e-12)
    sc = (12 * n * K * R**2 + 8 * K**2 * R**2) / n**2 / (eps / 3)
    assert float(r.extras["noise_scale"]["covariances"][0]) == pytest.approx(sc, rel=1e-12)


def test_gaussian_noise_std_matches_paper_rule(data):
    X, y = data
    Xr, yr = _replicated(X, y, 4000)
    eps, delta = 2.0, 1e-5
    r = release(Xr, yr, 3, eps, delta, mechanism="gaussian", mode="as-published", generator=_g(4))
    n, K = 150, 3
    R = float(np.abs(X[0].numpy()).sum(1).max())
    sigma = (4 * K * R / n) * math.sqrt(2 * math.log(2 / (delta / 3))) / (eps / 3)
    noise = (r.model.means - r.fitted.means).reshape(-1).numpy()
    assert np.std(noise) == pytest.approx(sigma, rel=0.03)
    assert abs(np.mean(noise)) < 4 * sigma / math.sqrt(noise.size)


def test_r1smg_noise_power(data):
    X, y = data
    Xr, yr = _replicated(X, y, 4000)
    eps, delta, d = 1.0, 1e-5, 3
    r = release(Xr, yr, 3, eps, delta, mechanism="r1smg", mode="as-published", generator=_g(7))
    R = float(np.abs(X[0].numpy()).sum(1).max())
    Delta = 4 * 3 * R / 150
    dl, M = delta / 3, d
    psi = (dl * math.gamma((M - 1) / 2) / (math.sqrt(math.pi) * math.gamma(M / 2))) ** (2 / (M - 2))
    sigma = 2 * Delta**2 / ((eps / 3) * psi)
    noise = (r.model.means - r.fitted.means).numpy()  # (T, K, d); E||noise||^2 = sigma (z^2 ||u||^2)
    assert np.mean((noise**2).sum(-1)) == pytest.approx(sigma, rel=0.06)


def test_colored_noise_meets_condition_10_brute_force():
    b = synthetic_data(1, 40, num_classes=2, dim=2, generator=_g(8))
    X, y = b.X, b.y
    eps, delta = 1.2, 1e-5
    r = release(X, y, 2, eps, delta, mechanism="colored", mode="as-published", generator=_g(9))
    ncov = r.extras["mean_noise_cov"][0].numpy()
    eps_m, dm = eps / 3, delta / 3
    bound = eps_m**2 / (2 * math.log(2 / dm))
    Xn, yn = X[0].numpy(), y[0].numpy()
    fit = _np_fit(Xn, yn, 2)
    worst = 0.0
    for i in range(len(yn)):
        y2 = yn.copy()
        y2[i] = 1 - yn[i]
        fit2 = _np_fit(Xn, y2, 2)
        for k in range(2):
            v = fit[k][1] - fit2[k][1]
            worst = max(worst, v @ np.linalg.solve(ncov[k], v) / bound)
    assert worst <= 1 + 1e-9
    assert worst > 0.99  # the min-MSE covariance touches the constraint


def test_colored_min_mse_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    b = synthetic_data(1, 30, num_classes=2, dim=2, generator=_g(10))
    X, y = b.X, b.y
    r = release(X, y, 2, 1.0, 1e-5, mechanism="colored", mode="as-published", generator=_g(1))
    Xn, yn = X[0].numpy(), y[0].numpy()
    fit = _np_fit(Xn, yn, 2)
    L = 2 * math.log(2 / (1e-5 / 3)) / (1 / 3) ** 2
    for k in range(2):
        vs = []
        for i in range(len(yn)):
            y2 = yn.copy()
            y2[i] = 1 - yn[i]
            vs.append(fit[k][1] - _np_fit(Xn, y2, 2)[k][1])
        Z = cp.Variable((2, 2), PSD=True)
        cons = [cp.bmat([[np.ones((1, 1)), v[None, :]], [v[:, None], Z]]) >> 0 for v in vs]
        cp.Problem(cp.Minimize(cp.trace(Z)), cons).solve(solver=cp.CLARABEL)
        tr = float(np.trace(r.extras["mean_noise_cov"][0, k].numpy())) / L
        assert tr == pytest.approx(float(np.trace(Z.value)), rel=1e-5)


def test_user_data_bound_clips_and_has_no_leak_note(data):
    X, y = data
    r = release(X, y, 3, 1.0, 1e-5, mechanism="laplace", mode="as-published", generator=_g(2), data_bound=5.0)
    assert torch.allclose(r.extras["data_bound"], torch.full((3,), 5.0, dtype=torch.float64))
    clipped = r.extras["fitted_clipped"]
    assert not torch.allclose(clipped.means, r.fitted.means)  # rows beyond R were clipped
    assert not any("leaks" in n for n in r.privacy.notes)
    assert r.extras["data_bound_source"].startswith("user")
    r2 = release(X, y, 3, 1.0, 1e-5, mechanism="laplace", mode="as-published", generator=_g(2), data_bound=500.0)
    assert torch.allclose(r2.extras["fitted_clipped"].means, r2.fitted.means)  # nothing to clip


def test_mask_padding_gives_the_same_release():
    b = synthetic_data(1, 60, num_classes=2, dim=3, generator=_g(11))
    X, y = b.X, b.y
    Xp = torch.cat([X, torch.full((1, 5, 3), float("nan"), dtype=X.dtype)], 1)
    yp = torch.cat([y, torch.full((1, 5), 7)], 1)
    mask = torch.cat([torch.ones(1, 60, dtype=torch.bool), torch.zeros(1, 5, dtype=torch.bool)], 1)
    for mech in BASELINES:
        a = release(X, y, 2, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(3))
        p = release(Xp, yp, 2, 1.0, 1e-5, mechanism=mech, mode="as-published", generator=_g(3), mask=mask)
        assert torch.allclose(a.model.means, p.model.means, rtol=1e-6, atol=1e-8), mech
        assert torch.allclose(a.kl, p.kl, rtol=1e-6), mech


def _bad_calls(X, y):
    return [
        (dict(mechanism="nope"), ValueError, "mechanism"),
        (dict(variant="x"), ValueError, "variant"),
        (dict(solver="x"), ValueError, "solver"),
        (dict(mode="x"), ValueError, "mode"),
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(epsilon=float("nan")), ValueError, "epsilon"),
        (dict(delta=1.0), ValueError, "delta"),
        (dict(X=X.clone().index_put_((torch.tensor(0), torch.tensor(3), torch.tensor(1)), torch.tensor(float("inf"), dtype=torch.float64))),
         ValueError, "X"),
        (dict(y=y.clone().index_put_((torch.tensor(0), torch.tensor(0)), torch.tensor(9))), ValueError, "labels"),
        (dict(y=torch.where(y == 2, torch.zeros_like(y), y)
              .index_put_((torch.tensor(0), torch.tensor(0)), torch.tensor(2))), ValueError, "at least"),
        (dict(y=y[..., :-1]), ValueError, "y must have shape"),
        (dict(X=X.to(torch.int64)), TypeError, "floating"),
        (dict(mechanism="laplace", data_bound=-1.0), ValueError, "data_bound"),
        (dict(mechanism="laplace", cov_floor=0.0), ValueError, "cov_floor"),
        (dict(mechanism="laplace", bogus=1), ValueError, "not supported"),
        (dict(lam=1.5), ValueError, "lam"),
        (dict(epsilon=torch.ones(4, dtype=torch.float64)), ValueError, "broadcast"),
        (dict(mechanism="r1smg", X=X[..., :2]), ValueError, "d > 2"),
        (dict(mechanism="colored", calibration="nope"), ValueError, "calibration"),
    ]


def test_validation_errors_before_any_noise(data):
    X, y = data
    for over, exc, msg in _bad_calls(X, y):
        args = dict(X=X, y=y, num_classes=3, epsilon=1.0, delta=1e-5, mechanism="gaussian")
        args.update(over)
        g = _g(0)
        state = g.get_state().clone()
        with pytest.raises(exc, match=msg):
            release(generator=g, **{"mode": "as-published", **args})
        assert torch.equal(g.get_state(), state), over  # no random draw happened


def test_sound_mode_dispatches_to_the_sound_module(data):
    from torchdpgmm.release.sound import release_sound

    X, y = data
    a = release(X, y, 3, 0.7, 1e-5, mode="sound", clip_bound=2.5, generator=_g(4))
    b = release_sound(X, y, 3, 0.7, 1e-5, clip_bound=2.5, mechanism="kl", generator=_g(4))
    assert torch.equal(a.model.means, b.model.means) and torch.equal(a.model.covariances, b.model.covariances)
    assert a.privacy.mode == "sound" and a.privacy.adjacency == "add-remove" and a.fitted is None and a.kl is None
    lap = release(X, y, 3, 0.7, None, mode="sound", mechanism="laplace", clip_bound=2.5, generator=_g(4))
    assert lap.privacy.mechanism == "laplace"
    with pytest.raises(ValueError, match="clip_bound is required"):
        release(X, y, 3, 0.7, 1e-5, mode="sound", generator=_g(0))


@pytest.mark.parametrize("mode,mechanism,option,match", [
    ("sound", "kl", {"variant": "global"}, "variant= is not supported by mode='sound'"),
    ("sound", "kl", {"solver": "dual"}, "solver= is not supported"),
    ("sound", "kl", {"design": object()}, "design= is not supported"),
    ("sound", "gaussian", {"data_bound": 3.0}, "sound mode uses clip_bound"),
    ("sound", "kl", {"lam": 1e-3}, "lam= is not supported"),
    ("as-published", "kl", {"clip_bound": 3.0}, "pass mode='sound'"),
    ("as-published", "gaussian", {"adjacency": "add-remove"}, "adjacency= is not supported"),
    ("as-published", "laplace", {"covariance_type": "diag"}, "covariance_type= is not supported"),
    ("as-published", "laplace", {"solver": "dual"}, "solver= is not supported"),
    ("as-published", "kl", {"cov_floor": 1e-3}, "cov_floor= is not supported"),
    ("sound", "r1smg", {"clip_bound": 3.0}, "no sound mode"),
])
def test_unsupported_parameters_are_refused(data, mode, mechanism, option, match):
    X, y = data
    g = _g(0)
    state = g.get_state().clone()
    with pytest.raises(ValueError, match=match) as info:
        release(X, y, 3, 1.0, 1e-5, mechanism=mechanism, mode=mode, generator=g, **option)
    assert "\n" not in str(info.value)  # one line
    assert torch.equal(g.get_state(), state)


def test_optional_arguments_are_keyword_only(data):
    X, y = data
    with pytest.raises(TypeError):
        release(X, y, 3, 1.0, 1e-5, "gaussian")  # noqa


def test_registry_declares_what_each_mechanism_needs():
    from torchdpgmm.release import REGISTRY

    assert {m for m, _ in REGISTRY} == {"as-published", "sound"}
    assert REGISTRY[("as-published", "kl")].needs_design
    assert not REGISTRY[("sound", "kl")].needs_design
    assert "clip_bound" in REGISTRY[("sound", "gaussian")].accepted()
    assert "solver" in REGISTRY[("as-published", "colored")].accepted()
    assert "solver" not in REGISTRY[("as-published", "gaussian")].accepted()
    assert REGISTRY[("sound", "laplace")].noised_blocks == ("counts", "sums", "second_moments")


def test_evaluate_is_the_explicit_non_private_fit_and_kl(data):
    """evaluate() gives the eq. (2) fit and KL(released || fitted) (independent numpy check)."""
    from torchdpgmm.release.evaluation import evaluate

    X, y = data
    r = release(X, y, 3, 1.0, 1e-5, mode="sound", clip_bound=30.0, generator=_g(0))
    ev = evaluate(r, X, y)
    fit = _np_fit(X[1].numpy(), y[1].numpy(), 3)
    np.testing.assert_allclose(ev.fitted.covariances[1].numpy(), np.stack([f[2] for f in fit]), rtol=1e-10)
    kl = 0.0
    for k in range(3):
        p, q = float(r.model.weights[1, k]), fit[k][0]
        Sp, Sq = r.model.covariances[1, k].numpy(), fit[k][2]
        dm = fit[k][1] - r.model.means[1, k].numpy()
        Sqi = np.linalg.inv(Sq)
        kl += p * (math.log(p / q) + 0.5 * (np.trace(Sqi @ Sp) + dm @ Sqi @ dm - 3 + np.linalg.slogdet(Sq)[1]
                                             - np.linalg.slogdet(Sp)[1]))
    assert float(ev.kl[1]) == pytest.approx(kl, rel=1e-8)
    # as-published: the Release's own fitted / kl agree with evaluate()
    ap = release(X, y, 3, 1.0, 1e-5, mechanism="gaussian", mode="as-published", generator=_g(0))
    torch.testing.assert_close(evaluate(ap, X, y).kl, ap.kl)


def test_check_settings_warns_the_data_owner():
    from torchdpgmm.release.evaluation import SettingsWarning, check_settings

    X = torch.randn(100, 2, generator=_g(1), dtype=torch.float64)
    with pytest.warns(SettingsWarning) as rec:
        msgs = check_settings(X, epsilon=20.0, delta=0.05, clip_bound=0.1)
    assert len(msgs) == 3 and len(rec) == 3
    assert any("1/N" in m for m in msgs) and any("> 10" in m for m in msgs) and any("> 50%" in m for m in msgs)
    with pytest.warns(SettingsWarning, match="< 1%"):
        check_settings(X, epsilon=1.0, delta=1e-6, clip_bound=100.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        norms = X.norm(dim=-1).sort().values
        assert check_settings(X, epsilon=1.0, delta=1e-6, clip_bound=float(norms[80])) == []
    y = torch.arange(100) % 3
    y[5] = 3
    Xb = X.clone()
    Xb[7, 0] = float("nan")
    with pytest.warns(SettingsWarning) as caught:
        check_settings(Xb, y, num_classes=3, epsilon=1.0, delta=1e-6)
    msgs = [str(w.message) for w in caught]
    assert any("1 row(s) have features that are not finite" in m for m in msgs), msgs
    assert any("1 row(s) have a label that is not one of the 3 classes" in m for m in msgs), msgs


@pytest.fixture(scope="module")
def kl_base():
    """One real design (SDP included) on a small batch; the other kl tests reuse it through ``design=``."""
    if not HAS_DESIGN:
        pytest.skip("design_mechanism not merged yet")
    b = synthetic_data(2, 60, num_classes=3, dim=3, generator=_g(21))
    r = release(b.X, b.y, 3, 1.0, 1e-5, mode="as-published", generator=_g(5))
    return b.X, b.y, r


def test_kl_release_runs_the_design(kl_base):
    X, y, r = kl_base
    assert r.kl.shape == (2,) and r.model.batch_shape == (2,)
    assert r.design is not None and r.design.variant == "as-published"
    assert bool(torch.isfinite(r.kl).all())
    again = release(X, y, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), design=r.design)
    assert torch.equal(again.model.means, r.model.means)  # design= is equivalent to recomputing it
    assert torch.equal(again.model.covariances, r.model.covariances)


@pytest.mark.parametrize("variant", ["as-published", "global", "exact-kl"])
def test_kl_release_batched_seeded_and_recorded(kl_base, variant):
    X, y, base = kl_base
    eps = torch.tensor([[1.0], [1.0]], dtype=torch.float64)  # the same datasets twice: (2, 2) batch
    des = base.design.at(eps, variant=variant)
    r1 = release(X, y, 3, eps, 1e-5, variant=variant, mode="as-published", generator=_g(5), design=des)
    r2 = release(X, y, 3, eps, 1e-5, variant=variant, mode="as-published", generator=_g(5), design=des)
    r3 = release(X, y, 3, eps, 1e-5, variant=variant, mode="as-published", generator=_g(6), design=des)
    assert r1.kl.shape == (2, 2) and r1.model.batch_shape == (2, 2)
    assert torch.equal(r1.model.means, r2.model.means) and torch.equal(r1.kl, r2.kl)
    assert not torch.equal(r1.model.covariances, r3.model.covariances)
    # same dataset, two trials of one batch: independent noise
    assert not torch.allclose(r1.model.means[0, 0], r1.model.means[1, 0])
    assert not torch.allclose(r1.model.covariances[0, 0], r1.model.covariances[1, 0])
    assert bool(torch.isfinite(r1.kl).all())
    # released weights are on the lattice S: counts >= 1 summing to N
    c = r1.extras["released_counts"]
    assert bool((c >= 1).all()) and bool((c.sum(-1) == 60).all())
    torch.testing.assert_close(r1.model.weights, c.to(torch.float64) / 60)
    rec = r1.privacy
    assert rec.adjacency == "label-flip" and rec.mode == "as-published" and variant in rec.mechanism
    total = rec.split["total = max_k(eps_k + 3 gamma_k/(2 N_k)) + eps0"]
    assert bool((total <= 1.0 + 1e-9).all())
    assert any("Wishart" in n for n in rec.notes)
    rec.to_dict()


def test_kl_design_mismatch_is_rejected(kl_base):
    X, y, base = kl_base
    with pytest.raises(ValueError, match="variant"):
        release(X, y, 3, 1.0, 1e-5, variant="global", design=base.design, mode="as-published", generator=_g(0))
    with pytest.raises(ValueError, match="epsilon"):
        release(X, y, 3, 2.0, 1e-5, design=base.design, mode="as-published", generator=_g(0))
    with pytest.raises(ValueError, match="other data"):
        release(X.flip(0), y.flip(0), 3, 1.0, 1e-5, design=base.design, mode="as-published", generator=_g(0))
    with pytest.raises(ValueError, match="only meaningful"):
        release(X, y, 3, 1.0, 1e-5, mechanism="laplace", design=base.design, mode="as-published", generator=_g(0))


def test_kl_release_noise_matches_design(kl_base):
    X, y, base = kl_base
    T = 5000
    eps = torch.ones(T, 1, dtype=torch.float64)  # T independent releases of the same 2 datasets
    des = base.design.at(eps)
    r = release(X, y, 3, eps, 1e-5, mode="as-published", generator=_g(8), design=des)
    noise = (r.model.means - r.fitted.means)[:, 0, 0].numpy()  # (T, d): dataset 0, class 0
    C = base.design.mean_noise_cov[0, 0].numpy()
    sd = np.sqrt(np.outer(np.diag(C), np.diag(C)) / T)
    assert np.all(np.abs(np.cov(noise.T) - C) < 6 * sd)
    assert np.all(np.abs(noise.mean(0)) < 6 * np.sqrt(np.diag(C) / T))
    # covariance noise: W_d(I/gamma, d+1) has mean (d+1)/gamma I and Var(W_11) = 2 (d+1)/gamma^2
    W = (r.model.covariances - r.fitted.covariances)[:, 0, 0].numpy()
    gamma = float(base.design.gamma[0, 0])
    np.testing.assert_allclose(W.mean(0), 4 / gamma * np.eye(3), atol=6 * np.sqrt(8 / T) / gamma)
    assert np.var(W[:, 0, 0]) == pytest.approx(8 / gamma**2, rel=0.1)
    # weights: the random mapping keeps pi(D) with probability (1-lam) e^eps0/(e^eps0 + K(K-1)) (+ lam/|S|)
    kept = (r.extras["released_counts"][:, 0] == base.fitted.counts[0]).all(-1).double().mean()
    e0 = float(base.design.eps0[0])
    p = (1 - 1e-3) * math.exp(e0) / (math.exp(e0) + 6)
    assert float(kept) == pytest.approx(p, abs=6 * math.sqrt(p * (1 - p) / T) + 1e-3)


@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
def test_baseline_covariance_noise_law(data, mech):
    """The covariance noise of the baselines (now drawn by the one noise layer) keeps its law: i.i.d. on the
    upper triangle, mirrored, with the recorded scale (Laplace: mean |noise| = b; Gaussian: std = sigma).
    A large epsilon keeps the PSD projection inactive."""
    X, y = data
    Xr, yr = _replicated(X, y, 3000)
    r = release(Xr, yr, 3, 1e5, 1e-5, mechanism=mech, mode="as-published", generator=_g(12),
                allow_weak_privacy=True)
    E = (r.model.covariances - r.fitted.covariances)[:, 0]  # (T, d, d), class 0
    assert torch.allclose(E, E.transpose(-1, -2))
    scale = float(r.extras["noise_scale"]["covariances"][0])
    iu = torch.triu_indices(3, 3)
    v = E[:, iu[0], iu[1]].numpy() / scale
    if mech == "laplace":
        np.testing.assert_allclose(np.abs(v).mean(0), 1.0, rtol=0.06)
    else:
        np.testing.assert_allclose(v.std(0), 1.0, rtol=0.06)
    assert np.abs(v.mean(0)).max() < 5 * math.sqrt(2.0 / v.shape[0])


def test_a_design_is_refused_for_other_records_with_the_same_counts_and_means(kl_base):
    """An audit (2026-12-01): design= was compared on class counts, means, epsilon and delta only, so a design
    solved on one dataset was accepted for another with each class spread twice as wide about the same means, and
    its noise then missed condition (10) on the new records' label-flip vectors. The records' digest decides."""
    X, y, r = kl_base
    means = torch.stack([torch.stack([X[b][y[b] == k].mean(0) for k in range(3)]) for b in range(X.shape[0])])
    centre = torch.gather(means, 1, y.unsqueeze(-1).expand(*y.shape, X.shape[-1]))
    wider = centre + 2 * (X - centre)  # same counts and class means, other records
    with pytest.raises(ValueError, match="design was computed on other data"):
        release(wider, y, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), design=r.design)


def test_as_published_records_name_the_calibration_they_used():
    """An audit (2026-12-01): the Gaussian baselines' accountant text always named the paper's rule, whatever
    calibration= chose, and colored's record said 'analytic' while its means' covariance meets the paper's
    condition (10) whatever the calibration (its weights and covariances do follow it). The text names both now."""
    b = synthetic_data(1, 60, num_classes=3, dim=3, generator=_g(3))
    for rule, words in (("paper", "paper's rule"), ("analytic", "analytic Gaussian calibration"),
                        ("classical", "classical rule")):
        r = release(b.X, b.y, 3, 1.0, 1e-5, mode="as-published", mechanism="gaussian", calibration=rule,
                    generator=_g(1))
        assert words in r.privacy.accountant
    r = release(b.X, b.y, 3, 1.0, 1e-5, mode="as-published", mechanism="colored", calibration="analytic",
                generator=_g(1))
    assert "analytic Gaussian calibration" in r.privacy.accountant
    assert "condition (10) whatever the calibration" in r.privacy.accountant


def test_a_design_is_accepted_for_its_own_records_however_they_are_masked(kl_base):
    """A review (2026-12-01): the records' check must not refuse the same records given with an all-true mask
    instead of none, or with other values in masked-out padding rows."""
    X, y, r = kl_base
    ones = torch.ones(y.shape, dtype=torch.bool)
    a = release(X, y, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), design=r.design)
    b = release(X, y, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), design=r.design, mask=ones)
    assert torch.equal(a.model.means, b.model.means)
    Xp = torch.cat([X, torch.full((X.shape[0], 2, X.shape[-1]), 7.0, dtype=X.dtype)], -2)  # two padding rows
    yp = torch.cat([y, torch.zeros(y.shape[0], 2, dtype=y.dtype)], -1)
    mp = torch.cat([ones, torch.zeros(y.shape[0], 2, dtype=torch.bool)], -1)
    d = release(Xp, yp, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), mask=mp).design
    Xq = Xp.clone()
    Xq[..., -2:, :] = -3.0  # other values in the padding only
    release(Xq, yp, 3, 1.0, 1e-5, mode="as-published", generator=_g(5), mask=mp, design=d)
