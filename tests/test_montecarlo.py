"""Monte Carlo engine: Sec. V-A generator and chunked runner (Liu, Scaglione & Peisert 2025, Sec. V-A)."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm.montecarlo import (
    chunk_seeds,
    chunk_size_for_budget,
    run_chunked,
    synthetic_data,
    synthetic_gmm_params,
)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def test_shapes_and_dtypes():
    b = synthetic_data(7, 120, num_classes=4, dim=2, generator=_g(0))
    assert b.X.shape == (7, 120, 2) and b.X.dtype == torch.float64
    assert b.y.shape == (7, 120) and b.y.dtype == torch.int64
    assert b.weights.shape == (7, 4) and b.means.shape == (7, 4, 2) and b.covariances.shape == (7, 4, 2, 2)
    assert int(b.y.min()) >= 0 and int(b.y.max()) < 4


def test_same_seed_same_batch_different_trials_differ():
    a = synthetic_data(5, 50, 3, 2, generator=_g(11))
    b = synthetic_data(5, 50, 3, 2, generator=_g(11))
    c = synthetic_data(5, 50, 3, 2, generator=_g(12))
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y)
    assert not torch.equal(a.X, c.X)
    # trials within one batch are different datasets
    assert not torch.allclose(a.X[0], a.X[1])


def test_every_class_has_min_points():
    # N=100, K=5: small classes are frequent, so redraws must happen
    b = synthetic_data(200, 100, num_classes=5, dim=2, generator=_g(3))
    counts = torch.stack([(b.y == k).sum(-1) for k in range(5)], -1)
    assert int(counts.min()) >= 3  # default min_class_size = d + 1
    assert b.redrawn > 0
    b2 = synthetic_data(50, 30, num_classes=5, dim=2, generator=_g(3), min_class_size=2)
    counts2 = torch.stack([(b2.y == k).sum(-1) for k in range(5)], -1)
    assert int(counts2.min()) >= 2


def test_impossible_class_size_rejected():
    with pytest.raises(ValueError, match="min_class_size"):
        synthetic_data(2, 10, num_classes=5, dim=3, generator=_g(0))
    with pytest.raises(ValueError, match="trials"):
        synthetic_data(0, 10, generator=_g(0))


def test_ground_truth_distribution_moments():
    # Dirichlet(1): E pi_k = 1/K, Var = (K-1)/(K^2 (K+1)); U[-10,10]: mean 0, var 100/3;
    # Wishart_d(d+1, I): E = (d+1) I, Var(S_11) = 2 (d+1).
    T, K, d = 20000, 5, 3
    w, mu, cov = synthetic_gmm_params(T, K, d, generator=_g(5))
    assert torch.allclose(w.sum(-1), torch.ones(T, dtype=w.dtype))
    assert abs(float(w.mean()) - 1 / K) < 1e-3
    assert abs(float(w[:, 0].var()) - (K - 1) / (K**2 * (K + 1))) < 2e-3
    assert float(mu.abs().max()) <= 10.0
    assert abs(float(mu.var()) - 100 / 3) < 0.5
    m = cov.mean(0).mean(0)
    assert torch.allclose(m, (d + 1) * torch.eye(d, dtype=m.dtype), atol=0.05)
    assert abs(float(cov[..., 0, 0].var()) - 2 * (d + 1)) < 0.3


def test_points_follow_their_class_model():
    # one trial, many points: class sample means / covariances match the ground truth (CLT scale)
    b = synthetic_data(1, 60000, num_classes=3, dim=2, generator=_g(9))
    X, y = b.X[0].numpy(), b.y[0].numpy()
    for k in range(3):
        xk = X[y == k]
        frac = len(xk) / len(X)
        assert abs(frac - float(b.weights[0, k])) < 5 * math.sqrt(0.25 / len(X))
        if len(xk) < 500:
            continue
        np.testing.assert_allclose(xk.mean(0), b.means[0, k].numpy(), atol=6 * math.sqrt(float(b.covariances[0, k].diagonal().max()) / len(xk)))
        np.testing.assert_allclose(np.cov(xk.T), b.covariances[0, k].numpy(), rtol=0.1, atol=0.1)


def test_draw_on_cpu_moves_to_device():
    b = synthetic_data(2, 30, 2, 2, generator=_g(1), device="cpu", draw_device="cpu")
    assert b.X.device.type == "cpu"


def test_chunking_budget_and_seeds():
    assert chunk_size_for_budget(100, 10.0, 250.0) == 25
    assert chunk_size_for_budget(100, 1e12, 1.0) == 1
    assert chunk_size_for_budget(100, 0.0) == 100
    s = chunk_seeds(4, 3)
    assert s == chunk_seeds(4, 3) and len(set(s)) == 3 and s != chunk_seeds(5, 3)


def test_run_chunked_concatenates_and_reproduces():
    calls = []

    def fn(T, g):
        calls.append(T)
        return {"x": torch.rand(T, 2, generator=g), "n": torch.full((T,), T)}

    out = run_chunked(fn, 10, seed=1, bytes_per_trial=1.0, memory_budget=4.0, progress=False)
    assert calls == [4, 4, 2]
    assert out["x"].shape == (10, 2)
    again = run_chunked(fn, 10, seed=1, bytes_per_trial=1.0, memory_budget=4.0, progress=False)
    assert torch.equal(out["x"], again["x"])
    other = run_chunked(fn, 10, seed=2, bytes_per_trial=1.0, memory_budget=4.0, progress=False)
    assert not torch.equal(out["x"], other["x"])
    with pytest.raises(ValueError, match="trials"):
        run_chunked(fn, 0)


def test_running_stats_merge_is_exact_and_quantiles_close():
    import numpy as np

    from torchdpgmm.montecarlo import RunningStats

    rng = np.random.default_rng(1)
    v = np.concatenate([rng.lognormal(0, 2, 3000), [0.0, -1.5, np.nan, np.inf]])
    st = RunningStats()
    for part in np.array_split(v, 7):      # uneven chunks, one of them a torch tensor
        st.update(torch.as_tensor(part) if len(part) % 2 else part)
    fin = v[np.isfinite(v)]
    s = st.summary()
    assert s["n"] == fin.size and s["nonfinite"] == 2
    assert s["mean"] == pytest.approx(fin.mean(), rel=1e-12)
    assert s["std"] == pytest.approx(fin.std(ddof=1), rel=1e-10)
    for q in (0.05, 0.5, 0.95):
        assert st.quantile(q) == pytest.approx(np.quantile(fin, q), rel=0.03)
    assert st.quantile(0.0) < 0          # the negative value keeps its sign


def test_fixed_blocks_make_draws_independent_of_the_memory_budget():
    """With ``block_size`` every trial's draws depend on (seed, trials, index) only, never on the budget."""
    from torchdpgmm.montecarlo import run_chunked

    def fn(T, g):
        return torch.rand(T, generator=g, dtype=torch.float64)

    a = run_chunked(fn, 23, seed=5, bytes_per_trial=1.0, memory_budget=4.0, progress=False, block_size=5)
    b = run_chunked(fn, 23, seed=5, bytes_per_trial=1.0, memory_budget=1e9, progress=False, block_size=5)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    c = run_chunked(fn, 23, seed=5, bytes_per_trial=1.0, memory_budget=4.0, progress=False)  # budget chunks
    assert not torch.equal(a, c)
    with pytest.raises(ValueError, match="block_size"):
        run_chunked(fn, 3, block_size=0, progress=False)


def test_study_kl_sweep_rows_do_not_depend_on_the_memory_budget():
    from torchdpgmm.experiments.synthetic import MECHANISM_VARIANTS, kl_sweep

    mechs = [m for m in MECHANISM_VARIANTS if m[0] in ("kl/as-published", "gaussian")]
    args = (50, 40, 2, 2, [0.5, 2.0], 1e-5, 1e-3, mechs, 3)
    small = kl_sweep(*args, memory_budget=1.6e6, progress=False)  # chunks of 43 trials by budget alone
    big = kl_sweep(*args, memory_budget=1e9, progress=False)
    for label in small:
        for s, b in zip(small[label], big[label]):
            assert s.n == b.n == 50 and s.mean == b.mean


def test_chunk_seeds_are_the_spawned_children_and_run_chunked_streams():
    """Chunk c's seed is child c of SeedSequence(seed).spawn (numpy, independently), built without the list of
    all children; a streaming fn (returning None) runs 2e5 chunks in memory independent of their number."""
    import tracemalloc

    from torchdpgmm.montecarlo import chunk_seed, chunk_seeds, run_chunked

    ref = [int(s.generate_state(1, dtype=np.uint64)[0]) & ((1 << 63) - 1)
           for s in np.random.SeedSequence(7).spawn(5)]
    assert chunk_seeds(7, 5) == ref and chunk_seed(7, 3) == ref[3]

    class Stop(Exception):
        pass

    def stop(n, g):
        raise Stop

    def peak(trials):
        tracemalloc.start()
        try:
            with pytest.raises(Stop):
                run_chunked(stop, trials, block_size=1, progress=False)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(200_000) < peak(20) + 100_000
    seen = []
    assert run_chunked(lambda n, g: seen.append(n), 10, block_size=4, progress=False, combine=len) == 0
    assert seen == [4, 4, 2]


def _slope(load_script, fn):
    """Live tensor bytes per trial: the slope of the peak between blocks of 8 and 40 trials, counted by
    benchmarks/bench_syncs.py's dispatch mode."""
    count = load_script("benchmarks/bench_syncs.py").count
    a, b = (count(lambda: fn(T), warm=False)["peak_bytes_above_inputs"] for T in (8, 40))
    return (b - a) / 32


def _sound_block():
    from torchdpgmm.sweep import Chunk, SweepSpec, default_trial_fn

    spec = SweepSpec(mechanisms=["kl"], epsilons=[0.1, 0.2, 0.5, 1, 2, 5, 10], mode="sound", clip_bound=30.0)
    run = lambda T: default_trial_fn(spec, Chunk(1000, 5, 3, 0, 0, T, T))  # noqa: E731
    run(2)   # the calibration's one-time host work (memoised per setting), outside the slow dispatch mode
    return spec, run


def test_synthetic_data_and_sweep_block_memory_per_trial(load_script):
    """Issue 36 item 3: the live bytes per trial of generating a block's data and of a whole sound sweep block
    (data, the 7-epsilon release with the default discrete noise, its KL) at N = 1000, K = 5, d = 3 are at most
    100 KB and at most the analytic estimates the block sizing uses."""
    from torchdpgmm.montecarlo import synthetic_data_bytes_per_trial
    from torchdpgmm.sweep import bytes_per_trial

    data = _slope(load_script, lambda T: synthetic_data(T, 1000, 5, 3, generator=torch.Generator().manual_seed(0)))
    assert 0.9 * synthetic_data_bytes_per_trial(1000, 5, 3) <= data <= synthetic_data_bytes_per_trial(1000, 5, 3)
    spec, run = _sound_block()
    block = _slope(load_script, run)
    assert data <= block <= bytes_per_trial(spec, 1000, 5, 3) <= 100_000, block


def test_running_stats_quantiles_over_the_whole_float_range_follow_numpy():
    """No clamping (values beyond 1e12, the old grid's edge, were all reported as 1e12: r1smg's medians), numpy's
    linear rule between order statistics (the median of an even count is the midpoint), exact extremes."""
    import numpy as np

    from torchdpgmm.montecarlo import RunningStats

    rng = np.random.default_rng(3)
    for v in (rng.lognormal(np.log(5e12), 1.0, 3000), rng.lognormal(np.log(1e-14), 1.0, 3000),
              np.concatenate([-rng.lognormal(0, 1, 20), [0.0] * 3, rng.lognormal(40, 3, 25)]),
              np.array([1.0, 2.0, 100.0, 400.0])):
        st = RunningStats()
        for part in np.array_split(v, 3):
            st.update(part)
        assert st.quantile(0.0) == v.min() and st.quantile(1.0) == v.max()
        for q in (0.05, 0.25, 0.5, 0.75, 0.95):
            assert st.quantile(q) == pytest.approx(np.quantile(v, q), rel=0.013), q
    with pytest.raises(ValueError, match="q must lie"):
        RunningStats().update([1.0]).quantile(1.5)
