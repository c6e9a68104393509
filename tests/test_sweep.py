"""The sweep engine: per-trial seeds, resumable storage, identical rows for any chunking and backend."""
import csv
import json

import numpy as np
import pytest
import torch

from torchdpgmm.sweep import SweepSpec, block_seed, load_results, plan_chunks, run_sweep, summarize


def fake_trials(spec, chunk):
    """A stand-in for the releases: per-trial values drawn block by block from the block seeds, exactly the
    seeding discipline of the default trial function (module level so Ray can ship it)."""
    rows = []
    for b in chunk.blocks:
        first = b * chunk.block_size
        n = min(chunk.block_size, spec.trials - first)
        gd = torch.Generator().manual_seed(block_seed(spec.seed, "data", chunk.N, chunk.K, chunk.d, b))
        data = torch.rand(chunk.block_size, generator=gd, dtype=torch.float64)
        for mech in spec.mechanisms:
            g = torch.Generator().manual_seed(block_seed(spec.seed, "noise", mech, chunk.N, chunk.K, chunk.d, b))
            noise = torch.rand(len(spec.epsilons), chunk.block_size, generator=g, dtype=torch.float64)
            for j, e in enumerate(spec.epsilons):
                rows += [{"mechanism": mech, "epsilon": e, "N": chunk.N, "K": chunk.K, "d": chunk.d,
                          "seed": spec.seed, "trial": first + i, "kl": float(data[i] + noise[j, i]) / e}
                         for i in range(n)]
    return rows


class Killed(Exception):
    pass


def _spec(**kw):
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 1.0], Ns=[50], Ks=[2], ds=[2], trials=7,
                chunk_size=2, block_size=2)
    base.update(kw)
    return SweepSpec(**base)


def test_plan_covers_every_trial_once():
    chunks = plan_chunks(_spec())
    assert len(chunks) == 4                      # ceil(7 / 2) chunks, each for every mechanism and epsilon
    assert sum(c.num_trials for c in chunks) == 7
    assert [b for c in chunks for b in c.blocks] == [0, 1, 2, 3]
    # chunk sizes are rounded up to whole blocks
    assert [c.num_trials for c in plan_chunks(_spec(chunk_size=3))] == [4, 3]


def test_resume_skips_finished_chunks(tmp_path):
    spec = _spec()
    run_sweep(spec, tmp_path / "full", trial_fn=fake_trials, progress=False)
    calls = []
    kill = [True]

    def counting(spec, chunk):
        calls.append(chunk.id)
        if kill[0] and len(calls) == 3:
            raise Killed("simulated kill after 2 finished chunks")
        return fake_trials(spec, chunk)

    with pytest.raises(Killed):
        run_sweep(spec, tmp_path / "part", trial_fn=counting, progress=False)
    assert len(list((tmp_path / "part" / "chunks").glob("*.csv"))) == 2
    with pytest.raises(ValueError, match="--resume"):
        run_sweep(spec, tmp_path / "part", trial_fn=fake_trials, progress=False)
    calls.clear()
    kill[0] = False
    res = run_sweep(spec, tmp_path / "part", trial_fn=counting, resume=True, progress=False)
    assert res["skipped"] == 2 and len(calls) == 2
    assert (tmp_path / "part" / "results.csv").read_text() == (tmp_path / "full" / "results.csv").read_text()
    assert len(load_results(tmp_path / "part")) == 28
    summary = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert len(summary["points"]) == 4 and all(p["trials"] == 7 for p in summary["points"])
    assert (tmp_path / "part" / "sweep.png").stat().st_size > 0


def test_rows_do_not_depend_on_chunk_size(tmp_path):
    a = run_sweep(_spec(chunk_size=2), tmp_path / "a", trial_fn=fake_trials, progress=False)
    b = run_sweep(_spec(chunk_size=6), tmp_path / "b", trial_fn=fake_trials, progress=False)
    c = run_sweep(_spec(chunk_size=None, memory_budget=1e9), tmp_path / "c", trial_fn=fake_trials, progress=False)
    text = (tmp_path / "a" / "results.csv").read_text()
    assert text == (tmp_path / "b" / "results.csv").read_text() == (tmp_path / "c" / "results.csv").read_text()
    assert a["summary"] == b["summary"] == c["summary"]


def test_summary_matches_numpy_and_scipy(tmp_path):
    from scipy import stats

    rng = np.random.default_rng(0)
    vals = rng.lognormal(size=5000)
    rows = [{"mechanism": "m", "epsilon": 1.0, "N": 1, "K": 2, "d": 1, "kl": float(v)} for v in vals]
    (s,) = summarize(iter(rows))
    assert s["trials"] == 5000
    assert s["mean"] == pytest.approx(vals.mean(), rel=1e-12)
    half = stats.t.ppf(0.975, 4999) * vals.std(ddof=1) / np.sqrt(5000)
    assert s["ci_high"] - s["mean"] == pytest.approx(half, rel=1e-9)
    for q, key in ((0.5, "median"), (0.05, "q05"), (0.95, "q95")):
        assert s[key] == pytest.approx(np.quantile(vals, q), rel=0.02)   # log-grid histogram: 1.2% bins


def test_refuses_a_different_sweep_in_the_same_folder(tmp_path):
    run_sweep(_spec(), tmp_path, trial_fn=fake_trials, progress=False)
    with pytest.raises(ValueError, match="different sweep"):
        run_sweep(_spec(trials=8), tmp_path, trial_fn=fake_trials, resume=True, progress=False)


@pytest.mark.parametrize("bad", [dict(epsilons=[0.0]), dict(Ks=[1]), dict(trials=0), dict(delta=1.0), dict(mechanisms=[]),
                                 dict(mode="sound"), dict(clip_bound=1.0), dict(classes=1), dict(mode="other"),
                                 dict(memory_budget=0.0)])
def test_spec_validation(bad, tmp_path):
    with pytest.raises(ValueError):
        run_sweep(_spec(**bad), tmp_path, trial_fn=fake_trials, progress=False)


def _real_spec(**kw):
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 2.0], Ns=[40], Ks=[2], ds=[2], trials=5,
                block_size=2, chunk_size=2)
    base.update(kw)
    return SweepSpec(**base)


def test_real_releases_identical_for_any_chunking(tmp_path):
    run_sweep(_real_spec(chunk_size=2), tmp_path / "a", progress=False)
    run_sweep(_real_spec(chunk_size=6), tmp_path / "b", progress=False)
    ta = (tmp_path / "a" / "results.csv").read_text()
    assert ta == (tmp_path / "b" / "results.csv").read_text()
    rows = list(csv.DictReader(open(tmp_path / "a" / "results.csv")))
    assert len(rows) == 2 * 2 * 5 and all(float(r["kl"]) > 0 for r in rows)


def test_real_release_matches_direct_call(tmp_path):
    """Row = release() on the block's data with the block's noise generator (an independent recomputation)."""
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    spec = _real_spec(mechanisms=["gaussian"], trials=2)
    run_sweep(spec, tmp_path, progress=False)
    rows = load_results(tmp_path)
    gd = torch.Generator().manual_seed(block_seed(0, "data", 40, 2, 2, 0))
    data = synthetic_data(2, 40, 2, 2, generator=gd)
    g = torch.Generator().manual_seed(block_seed(0, "noise", "gaussian", 40, 2, 2, 0))
    eps = torch.tensor([0.5, 2.0], dtype=torch.float64)[:, None]
    kl = release(data.X, data.y, 2, eps, 1e-5, mechanism="gaussian", mode="as-published", generator=g).kl
    got = {(r["epsilon"], r["trial"]): r["kl"] for r in rows}
    for j, e in enumerate([0.5, 2.0]):
        for t in range(2):
            assert got[(e, t)] == float(kl[j, t])


def test_sound_sweep_runs(tmp_path):
    spec = _real_spec(mechanisms=["gaussian"], mode="sound", clip_bound=30.0, adjacency="add-remove", trials=2,
                      epsilons=[1.0, 4.0], classes=2)
    res = run_sweep(spec, tmp_path, progress=False)
    assert len(res["summary"]) == 2 and all(p["trials"] == 2 for p in res["summary"])


def test_ray_backend_matches_local(tmp_path, ray_sandbox):
    """A sweep on a local Ray instance gives the local rows, byte for byte: the README's command (``torchdpgmm sweep
    ... --backend ray``, which is ``run_sweep(backend="ray")``), both mechanisms, two-trial blocks, and more chunks
    than the tasks Ray keeps in flight (two per CPU), so that window is refilled. One Ray start for the check that
    test_frontdoor's kill-and-resume journey also made with a second one."""
    pytest.importorskip("ray")
    import os

    from torchdpgmm.cli import main

    trials = 2 * (2 * (os.cpu_count() or 1) + 1)  # two-trial chunks: 2 * CPUs + 1 of them
    args = ["sweep", "--mode", "as-published", "--mechanisms", "kl,gaussian", "--epsilons", "1,4", "--N", "40",
            "--K", "2", "--d", "2", "--trials", str(trials), "--chunk-size", "2", "--block-size", "2", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--out", str(tmp_path / "ray"), "--backend", "ray"]) == 0
    local = (tmp_path / "local" / "results.csv").read_text()
    assert len(local.strip().splitlines()) == 1 + 2 * 2 * trials
    assert (tmp_path / "ray" / "results.csv").read_text() == local


def test_block_size_40_rows_identical_for_chunk_sizes_40_and_240(tmp_path):
    """The issue's check at block size 40 (the default before the automatic block size): chunk sizes 40 and
    240 (and the memory-budget chunking) give byte-identical per-trial rows of real releases."""
    spec = dict(mechanisms=["gaussian", "laplace"], epsilons=[0.5, 2.0], Ns=[20], Ks=[2], ds=[2], trials=250,
                block_size=40)
    run_sweep(SweepSpec(chunk_size=40, **spec), tmp_path / "a", progress=False)
    run_sweep(SweepSpec(chunk_size=240, **spec), tmp_path / "b", progress=False)
    run_sweep(SweepSpec(chunk_size=None, memory_budget=2 ** 26, **spec), tmp_path / "c", progress=False)
    ta = (tmp_path / "a" / "results.csv").read_text()
    assert ta == (tmp_path / "b" / "results.csv").read_text() == (tmp_path / "c" / "results.csv").read_text()
    assert len(ta.splitlines()) == 1 + 2 * 2 * 250


def _closed_loopback_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed again when the socket is: nothing listens there


def test_wrong_ray_address_fails_fast_in_one_line(tmp_path, capsys):
    """A closed port on loopback: one line, exit status 2, well within the stated timeout, nothing written
    (before the fix ``ray.init`` retried for minutes)."""
    import time

    from torchdpgmm.cli import main
    from torchdpgmm.sweep import RAY_CONNECT_TIMEOUT

    addr = f"127.0.0.1:{_closed_loopback_port()}"
    with pytest.raises(ValueError, match="cannot reach the Ray cluster"):
        run_sweep(_spec(), tmp_path / "a", backend="ray", ray_address=addr, trial_fn=fake_trials, progress=False)
    assert not (tmp_path / "a").exists()
    t0 = time.monotonic()
    code = main(["sweep", "--mode", "as-published", "--mechanisms", "kl", "--trials", "2", "--no-progress",
                 "--backend", "ray", "--ray-address", addr, "--out", str(tmp_path / "b")])
    assert code == 2 and time.monotonic() - t0 < RAY_CONNECT_TIMEOUT <= 30
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln]
    assert len(err) == 1 and addr in err[0], err
    assert not (tmp_path / "b").exists()
    with pytest.raises(ValueError, match="host:port"):
        run_sweep(_spec(), tmp_path / "c", backend="ray", ray_address="nonsense", trial_fn=fake_trials,
                  progress=False)


def test_plan_is_streamed_memory_does_not_grow_with_trials(tmp_path):
    """Up to the first chunk, a sweep of 2e5 one-trial chunks allocates what one of 20 does (before the fix
    the whole plan -- one Chunk object per chunk -- was built first)."""
    import tracemalloc

    from torchdpgmm.sweep import iter_chunks, num_chunks

    def first_chunk_peak(trials):
        def stop(spec, chunk):
            raise Killed
        tracemalloc.start()
        try:
            with pytest.raises(Killed):
                run_sweep(_spec(trials=trials, chunk_size=1, block_size=1), tmp_path / str(trials),
                          trial_fn=stop, progress=False)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, big = first_chunk_peak(20), first_chunk_peak(200_000)
    assert big < small + 200_000, (small, big)
    spec = _spec(trials=10**12, chunk_size=40, block_size=40)
    assert num_chunks(spec) == 10**12 // 40                       # arithmetic, no plan in memory
    first = next(iter_chunks(spec))
    assert (first.first_trial, first.num_trials) == (0, 40)


def test_sweep_whose_rows_cannot_fit_on_disk_is_refused(tmp_path, capsys):
    import shutil

    from torchdpgmm.cli import main

    free = shutil.disk_usage(tmp_path).free
    trials = free // 10 + 1            # 4 rows per trial (2 mechanisms x 2 epsilons), >= 20 bytes each, twice
    with pytest.raises(ValueError, match="GB free"):
        run_sweep(_spec(trials=trials), tmp_path / "a", trial_fn=fake_trials, progress=False)
    assert not (tmp_path / "a").exists()
    code = main(["sweep", "--mode", "as-published", "--mechanisms", "kl", "--trials", str(10**15),
                 "--no-progress", "--out", str(tmp_path / "b")])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln]
    assert code == 2 and len(err) == 1 and "GB free" in err[0], err
    assert not (tmp_path / "b").exists()
