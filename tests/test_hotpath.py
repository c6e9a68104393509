"""The sound release's hot path (issue 36): host reads and dispatched ops per call, batched epsilons, memory per
trial. Counted on CPU with the dispatch mode of benchmarks/bench_syncs.py (every host read is an ATen op)."""
import json

import numpy as np
import pytest
import torch

from torchdpgmm.release import release
from torchdpgmm.release.sound import _calibrate, _perturb_epsilons, bytes_per_trial, sound_settings


@pytest.fixture(scope="module")
def bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_syncs.py"
    spec = importlib.util.spec_from_file_location("bench_syncs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _data_path_reads(c):
    """Host reads made anywhere but the shared check of the public epsilon and delta (torchdpgmm/_validation.py)."""
    return {k: v for k, v in c["sync_callers"].items() if not k.split(" @ ")[1].startswith("_validation.py")}


@pytest.mark.parametrize("epsilon", [1.0, [0.5, 1.0, 4.0]])
def test_sound_release_reads_nothing_back_and_ops_do_not_grow_with_trials(bench, epsilon):
    """At most 5 host reads per call (discrete noise, the default, and continuous), none of them on the data path
    (only the shared budget check of the public epsilon and delta reads numbers), and with continuous noise the same
    dispatched ops at 16 and 4,096 trials, with either noise (the exact samplers, mechanisms/discrete.py, take one
    layout per device and work in chunks of 2^17 draws: one per block up to 4,369 trials at K = 5, d = 3).
    The 16-trial counts are taken on a second call (the first fills the public calibration's memo, per setting); the
    4,096-trial ones on the first call at that size, the same settings already warmed by the 16-trial calls (a first
    call does at least what a second does: nothing is left out by not repeating the large release)."""
    rows = {}
    for T in (16, 4096):
        X, y = bench.data(T, n=200)
        warm = T == 16
        rows[T] = (bench.count(bench.sound_release(X, y, noise="continuous", epsilon=epsilon), stacks=True, warm=warm),
                   bench.count(bench.sound_release(X, y, epsilon=epsilon), stacks=True, warm=warm))
    for pair in rows.values():
        for c in pair:
            assert c["syncs"] <= bench.MAX_SYNCS and _data_path_reads(c) == {}, c["sync_callers"]
    assert rows[16][0]["ops"] == rows[4096][0]["ops"]
    assert rows[16][1]["ops"] == rows[4096][1]["ops"]
    # the continuous path's peak working memory per trial: the clipped rows and one class's rows (+ masks)
    assert rows[4096][0]["peak_bytes_above_inputs"] <= 4096 * 200 * (2 * 3 * 8 + 8)


def test_counter_sees_host_reads(bench):
    """The counter is not blind: a bool(), a nonzero and a boolean-mask index are each counted."""
    x = torch.arange(5.0)
    with bench.OpCounter() as c:
        bool((x > 2).any())
        torch.nonzero(x)
        x[x > 1]
    assert c.total_syncs >= 3 and {"nonzero", "index[bool]"} <= set(c.syncs)


def test_batched_epsilons_equal_scalar_releases_discrete(bench):
    """Discrete noise: the batched release draws in the order of E scalar releases, so each slice equals the
    scalar release bit for bit, and each record equals the scalar record."""
    X, y = bench.data(6, n=200)
    eps = [0.3, 1.0, 3.0]
    kw = dict(mode="sound", clip_bound=30.0, adjacency="replace-one")
    rel = release(X, y, 5, eps, 1e-5, generator=torch.Generator().manual_seed(4), **kw)
    assert tuple(rel.model.batch_shape) == (3, 6)
    g = torch.Generator().manual_seed(4)
    for i, e in enumerate(eps):
        one = release(X, y, 5, e, 1e-5, generator=g, **kw)
        sub = rel.at_epsilon(i)
        for a in ("weights", "means", "covariances", "counts"):
            assert torch.equal(getattr(sub.model, a), getattr(one.model, a))
        assert sub.privacy.to_dict() == one.privacy.to_dict() and sub.privacy.covered
        sig, sig1 = sub.extras.pop("signal"), one.extras.pop("signal")  # tensors: (6,) z-scores per block
        assert sig.keys() == sig1.keys() and all(torch.equal(sig[k], sig1[k]) for k in sig)
        assert sub.extras == one.extras | {}  # same public diagnostics
    p = rel.privacy
    assert not p.covered and p.blocks == () and torch.equal(p.epsilon, torch.tensor(eps, dtype=torch.float64))
    assert "not for the batch together" in p.notes[0]
    with pytest.raises(ValueError, match="at_epsilon applies"):
        release(X, y, 5, 1.0, 1e-5, **kw).at_epsilon(0)
    with pytest.raises(ValueError, match="index"):
        rel.at_epsilon(3)
    with pytest.raises(ValueError, match="epsilon must be finite"):
        release(X, y, 5, [1.0, -1.0], 1e-5, **kw)
    # a 1-D tensor is a batch like a list, one epsilon included; a 0-d tensor is one epsilon like a number
    one_list = release(X, y, 5, [1.0], 1e-5, generator=torch.Generator().manual_seed(4), **kw)
    one_vec = release(X, y, 5, torch.tensor([1.0]), 1e-5, generator=torch.Generator().manual_seed(4), **kw)
    assert tuple(one_vec.model.batch_shape) == tuple(one_list.model.batch_shape) == (1, 6)
    assert torch.equal(one_vec.model.means, one_list.model.means) and not one_vec.privacy.covered
    assert release(X, y, 5, torch.tensor(1.0), 1e-5, **kw).privacy.covered
    with pytest.raises(ValueError, match="epsilon is empty"):
        release(X, y, 5, torch.tensor([]), 1e-5, **kw)


def test_batched_epsilons_continuous_noise_has_each_epsilons_scale():
    """Continuous noise: one draw per block for all epsilons; the noise of slice e has the std that the scalar
    calibration at epsilon e states (chi-square interval on 20,000 draws per block and epsilon)."""
    eps = [0.2, 1.0, 5.0]
    sts = [sound_settings(3, 5, e, 1e-5, clip_bound=2.0, noise="continuous") for e in eps]
    cals = [_calibrate(st, 3) for st in sts]
    T = 4000
    stats = (torch.zeros(T, 5), torch.zeros(T, 5, 3), torch.zeros(T, 5, 3, 3))
    noisy = _perturb_epsilons(stats, cals, sts, torch.Generator().manual_seed(0))
    from scipy import stats as ss

    for i, (scales, _) in enumerate(cals):
        for name, z in zip(("counts", "sums", "second_moments"), noisy):
            v = z[i]
            if name == "second_moments":  # diagonal entries carry the full std (off-diagonal / sqrt 2)
                v = torch.diagonal(v, dim1=-2, dim2=-1)
                assert torch.equal(z[i], z[i].transpose(-1, -2))
            v = v.reshape(-1).numpy()
            n = v.size
            lo, hi = ss.chi2.ppf([1e-4, 1 - 1e-4], n)
            assert lo <= (v ** 2).sum() / scales[name] ** 2 <= hi, (eps[i], name)


def test_sweep_releases_all_epsilons_in_one_call(monkeypatch):
    """sweep._release_kl calls release once with the whole epsilon grid and returns (E, T)."""
    from torchdpgmm import sweep
    from torchdpgmm.montecarlo import synthetic_data

    calls = []
    real = release

    def spy(*a, **k):
        calls.append(a[3])
        return real(*a, **k)

    monkeypatch.setattr("torchdpgmm.release.release", spy)
    spec = sweep.SweepSpec(mechanisms=["kl"], epsilons=[0.1, 1.0, 10.0], Ns=[200], Ks=[3], ds=[2], trials=4,
                           mode="sound", clip_bound=30.0, adjacency="replace-one")
    d = synthetic_data(4, 200, 3, 2, generator=torch.Generator().manual_seed(0))
    kl = sweep._release_kl(spec, "kl", d.X, d.y, 3, None, torch.Generator().manual_seed(5), data_classes=3)
    assert calls == [[0.1, 1.0, 10.0]] and kl.shape == (3, 4) and torch.isfinite(kl).all()
    assert (kl[0] > kl[2]).all()  # far more noise at epsilon 0.1 than at 10


def test_bytes_per_trial_matches_measured_sweep_block(bench):
    """The analytic per-trial bytes bound the measured peak live bytes of a sweep block (release of 7 epsilons +
    KL evaluation, continuous noise; slope between two block sizes) within 25%, and both are <= 100 KB."""
    pts = []
    for T in (8, 24):
        X, y = bench.data(T)
        pts.append(bench.count(bench.sweep_block(X, y, noise="continuous"), track=(X, y))["peak_bytes"])
    measured = (pts[1] - pts[0]) / 16
    est = bytes_per_trial(1000, 5, 3, epsilons=7)
    assert measured <= est <= 1.25 * measured and est <= bench.MAX_BYTES_PER_TRIAL, (measured, est)
    with pytest.raises(ValueError, match="n must be a positive int"):
        bytes_per_trial(0, 5, 3)


def test_bench_syncs_quick(tmp_path, bench):
    out = tmp_path / "b.json"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["quick"] is True and res["max_syncs"] == 5
    assert res["releases"]["sound_kl_discrete"]["max_syncs_warm"] <= 5
    assert res["releases"]["sound_kl_continuous_7eps"]["ops_ratio"] == 1.0
    assert res["releases"]["sound_kl_discrete"]["ops_ratio"] <= 2
    acc = res["accelerator_layout"]["sound_kl_discrete"]
    assert acc["ops_ratio"] <= 2 and all(r["device_reads"] == 0 for r in acc["rows"])
    mem = res["sweep_block_memory"]
    assert mem["estimate_bytes_per_trial"] == 88840 and mem["continuous"]["bytes_per_trial"] > 0


def _fake_cuda():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "test_device_contract.py"
    spec = importlib.util.spec_from_file_location("_device_contract", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fake_cuda


@pytest.mark.parametrize("case", ["discrete", "continuous", "discrete-7eps", "continuous-7eps", "centred", "d6"])
def test_no_device_reads_under_fake_cuda(bench, case):
    """With the data "on the GPU" (tests/test_device_contract.py's FakeCuda: which storages would live there), a sound
    release reads no device value back (item / bool / int / float / tolist of a GPU tensor), makes no nonzero,
    boolean-mask index or masked_select, and mixes no devices (FakeCuda raises CUDA's errors)."""
    from torchdpgmm.release.centring import release_centred

    Xc, yc = bench.data(4, n=200, d=6 if case == "d6" else 3)  # d = 6: the PSD repair's round-robin Jacobi order
    with _fake_cuda()() as mode:
        X, y = Xc.to("cuda"), yc.to("cuda")
        g = torch.Generator("cuda").manual_seed(1)
        kw = dict(mode="sound", clip_bound=30.0, adjacency="replace-one", generator=g)
        noise = case.split("-")[0] if case not in ("centred", "d6") else "discrete"
        eps = list(bench.EPSILONS) if case.endswith("7eps") else 1.0
        if case == "centred":
            fn = lambda: release_centred(X, y, 5, 1.0, 1e-5, clip_bound=15.0, ball_center=torch.zeros(3),  # noqa: E731
                                         ball_radius=30.0, generator=g)
        else:
            fn = lambda: release(X, y, 5, eps, 1e-5, noise=noise, **kw)  # noqa: E731
        fn()
        before = mode.syncs
        with bench.OpCounter(stacks=True) as c:
            rel = fn()
        assert mode.syncs == before, mode.syncs - before
        assert rel.model.means.device.type == "cuda"
    # (the budget check of the public Python epsilon and delta, _validation.py, indexes CPU tensors of numbers)
    assert _data_path_reads(c.summary()) == {}


@pytest.mark.parametrize("mech,ct", [("laplace", "auto"), ("gaussian", "diag"), ("kl", "tied"), ("kl", "spherical")])
@pytest.mark.parametrize("noise", ["discrete", "continuous"])
def test_batched_epsilons_every_mechanism_and_type(bench, mech, ct, noise):
    """Shapes (E, *batch), finite repaired covariances, and records equal to the scalar releases' for every
    mechanism, covariance type and noise; a 1-D tensor of epsilons with num_draws gives (E, draws, *batch)."""
    X, y = bench.data(3, n=200)
    dl = None if mech == "laplace" else 1e-5
    kw = dict(mechanism=mech, mode="sound", clip_bound=30.0, covariance_type=ct, noise=noise)
    rel = release(X, y, 5, [0.5, 2.0], dl, generator=torch.Generator().manual_seed(0), **kw)
    assert tuple(rel.model.batch_shape) == (2, 3) and torch.isfinite(rel.model.covariances).all()
    assert (torch.linalg.eigvalsh(rel.model.covariances) > 0).all()
    for i, e in enumerate((0.5, 2.0)):
        one = release(X, y, 5, e, dl, generator=torch.Generator().manual_seed(0), **kw)
        assert rel.records[i].to_dict() == one.privacy.to_dict() == rel.at_epsilon(i).privacy.to_dict()
    more = release(X, y, 5, torch.tensor([0.5, 2.0]), dl, num_draws=2, generator=torch.Generator().manual_seed(0), **kw)
    assert tuple(more.model.batch_shape) == (2, 2, 3)


def test_one_epsilon_apis_refuse_several_in_one_line(bench):
    from torchdpgmm.release.sound import sound_statistics

    X, y = bench.data(2, n=200)
    with pytest.raises(ValueError, match=r"epsilon must be a single number here, got \[1.0, 2.0\]"):
        sound_statistics(X, y, 5, [1.0, 2.0], 1e-5, clip_bound=3.0)
    with pytest.raises(ValueError, match="epsilon is empty"):
        release(X, y, 5, [], 1e-5, mode="sound", clip_bound=3.0)


@pytest.mark.cuda
@pytest.mark.parametrize("noise", ["discrete", "continuous"])
def test_cuda_release_synchronises_at_most_five_times(bench, noise):
    """On a GPU: the synchronisations torch itself reports (set_sync_debug_mode) for a sound release of 7 epsilons
    over 1,000 trials are at most 5 (torch.linalg.eigh's convergence check is one), and the statistics and the
    row maxima match the CPU's."""
    import warnings

    from torchdpgmm.mechanisms.clip import row_abs_max
    from torchdpgmm.mixture import class_moments

    X, y = (t.cuda() for t in bench.data(1000))
    fn = bench.sound_release(X, y, noise=noise, epsilon=list(bench.EPSILONS))
    fn()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rel = fn()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert len(w) <= bench.MAX_SYNCS, [f"{q.filename}:{q.lineno}" for q in w]
    assert rel.model.means.is_cuda and torch.isfinite(rel.model.covariances).all()
    for a, b in zip(class_moments(X[:8], y[:8], 5), class_moments(X[:8].cpu(), y[:8].cpu(), 5)):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-12, atol=1e-9)
    Z = torch.tensor([[1.0, float("nan")], [float("inf"), 1.0], [-3.0, 2.0]], dtype=torch.float64, device="cuda")
    m = row_abs_max(Z).squeeze(-1).cpu()
    assert torch.isnan(m[0]) and m[1] == float("inf") and m[2] == 3.0


@pytest.mark.parametrize("ct,d", [("full", 3), ("tied", 3), ("full", 6), ("auto", 7)])
def test_accelerator_psd_repair_equals_the_cpu_one(bench, monkeypatch, ct, d):
    """The PSD repair by Jacobi sweeps (the path an accelerator takes for d <= 8; the round-robin order from d = 4)
    gives the release that torch.linalg.eigh gives, to rounding (a batched release of 3 epsilons over 64 trials)."""
    from torchdpgmm.release import sound

    X, y = bench.data(64, n=200, d=d)
    orig = sound._eigh
    models = []
    for jacobi in (False, True):
        monkeypatch.setattr(sound, "_eigh", lambda cov, jacobi=None, j=jacobi: orig(cov, j))
        models.append(sound.release_sound(X, y, 5, [0.1, 1.0, 10.0], 1e-5, clip_bound=30.0, covariance_type=ct,
                                          generator=torch.Generator().manual_seed(2)).model)
    a, b = models
    assert torch.equal(a.means, b.means) and torch.equal(a.weights, b.weights)
    scale = a.covariances.abs().amax((-1, -2), keepdim=True)
    assert ((a.covariances - b.covariances).abs() / scale).max() < 1e-13


def test_sagmm_reads_no_count_or_value_of_the_data(bench):
    """SAGMM's block fits ran fit_gmm's checks of non-private data: a host read of every block's count (whether one
    had fewer than K unmasked rows) and of its values (any NaN), both private under SAGMM's add/remove adjacency,
    and its k-means start read the labels' range (torch's one_hot on a CPU) (2026-12-02). None is left in the block
    fits (em/gmm.py); the public checks (bounds, budget, the record's blocks) still read public values."""
    from torchdpgmm.em import fit_sagmm

    X = torch.randn(4, 60, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    run = lambda: fit_sagmm(X, 2, 2.0, 1e-5, num_blocks=3, mean_bounds=(-4.0, 4.0),  # noqa: E731
                            var_bounds=(0.01, 4.0), max_iter=3, generator=torch.Generator().manual_seed(1))
    c = bench.count(run, stacks=True)
    data_reads = {k: v for k, v in c["sync_callers"].items() if "em/gmm.py" in k}  # the block fits' data path
    assert data_reads == {}, c["sync_callers"]
    assert c["sync_callers"], "the counter saw no read at all (the public checks read the bounds)"
