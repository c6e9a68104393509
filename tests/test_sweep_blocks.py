"""The sweep's automatic block size (issue 36 item 3), its out-of-memory fallback and the Parquet results
file (item 4), on CPU with a simulated device: the free-memory query and the release are monkeypatched.

References are independent: the ladder is recomputed here from its definition; rows are compared with runs
at an explicit block size (the literal per-block computation) and with pandas' reading of the files."""
import csv
import json
import math
import sys

import numpy as np
import pytest
import torch

from torchdpgmm import sweep as S
from torchdpgmm.sweep import SweepSpec, auto_block_size, resolve_block_sizes, run_sweep

# per-trial values drawn block by block from the block seeds (the default trial function's seeding discipline):
# the stand-in release of test_sweep.py (tests/ is on sys.path: pytest's rootdir import mode, no package)
from test_sweep import fake_trials

GB = 1e9


def ladder(cap, per_trial, memory, trials):
    """The rule, written out: halve the cap until it fits (bottom 8), then even it out over the trials."""
    rung = cap
    while rung > 8 and rung * per_trial > memory:
        rung //= 2
    blocks = math.ceil(trials / rung)
    return math.ceil(trials / blocks)


def _spec(**kw):
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 1.0], Ns=[1000], Ks=[5], ds=[3], trials=1000)
    base.update(kw)
    return SweepSpec(**base)


@pytest.mark.parametrize("free,budget,per_trial,trials", [
    (80 * GB, None, 100e3, 100_000),     # an H100 at the 100 KB per trial: the top rung (32768)
    (80 * GB, None, 2.6e6, 100_000),     # today's 2.6 MB per trial: 32768 x 2.6 MB > 64 GB, one rung down
    (80 * GB, 60 * GB, 2.6e6, 100_000),  # --memory-budget 60GB bounds device memory
    (24 * GB, None, 100e3, 1_000_000),   # a smaller card still fits the top rung
    (1 * GB, None, 100e3, 100_000),      # a small card: a lower rung
    (80 * GB, None, 100e3, 100),         # few trials: one block of exactly the trials
])
def test_cuda_block_rule_with_a_simulated_device(free, budget, per_trial, trials):
    spec = _spec(device="cuda", memory_budget=budget, trials=trials)
    memory = min(budget or math.inf, 0.8 * free)
    got = auto_block_size(spec, 1000, 5, 3, free=free, per_trial=per_trial)
    assert got == ladder(32768, per_trial, memory, trials)
    assert got * per_trial <= memory
    assert math.ceil(trials / got) * got - trials < math.ceil(trials / got)   # evened out: < 1 surplus per block


def test_cpu_block_rule_reads_the_free_memory_query(monkeypatch):
    spec = _spec(trials=10_000)
    per_trial = S.bytes_per_trial(spec, 1000, 5, 3)
    monkeypatch.setattr(S, "device_free_bytes", lambda device: 64 * GB)
    big = resolve_block_sizes(spec)[(1000, 5, 3)]
    assert big == ladder(256, per_trial, 2 ** 30, 10_000)          # the 1 GiB default budget binds
    monkeypatch.setattr(S, "device_free_bytes", lambda device: 300e6)  # a small machine: half of it per block
    small = resolve_block_sizes(spec)[(1000, 5, 3)]
    assert small == ladder(256, per_trial, 150e6, 10_000) and small < big
    assert resolve_block_sizes(_spec(trials=10_000, block_size=7))[(1000, 5, 3)] == 7   # the override
    monkeypatch.setattr(S, "device_free_bytes", lambda device: 1e6)
    with pytest.raises(ValueError, match="raise --memory-budget or free memory"):
        resolve_block_sizes(spec)


def test_explicit_block_beyond_the_budget_is_refused_in_one_line(tmp_path, capsys):
    from torchdpgmm.cli import main

    with pytest.raises(ValueError, match="more than --memory-budget"):
        resolve_block_sizes(_spec(block_size=100_000, memory_budget=2 ** 30))
    out = tmp_path / "sw"
    code = main(["sweep", "--mode", "as-published", "--block-size", "100000", "--memory-budget", "1GiB",
                 "--trials", "2", "--no-progress", "--out", str(out)])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln.lower()]
    assert code == 2 and len(err) == 1 and "--block-size 100000" in err[0], err
    assert not out.exists()


def test_rows_do_not_depend_on_the_machine_that_fits_the_top_rung(tmp_path, monkeypatch):
    """Two machines whose free memory both hold the top rung pick the same block and write the same rows; a
    small machine picks a lower rung (recorded in sweep.json), and a resume elsewhere reuses the record."""
    spec = _spec(Ns=[40], Ks=[2], ds=[2], trials=600, chunk_size=64)
    runs = {}
    for name, free in (("big", 512 * GB), ("medium", 8 * GB), ("small", 2e6)):
        monkeypatch.setattr(S, "device_free_bytes", lambda device, free=free: free)
        runs[name] = run_sweep(spec, tmp_path / name, trial_fn=fake_trials, progress=False)
    text = {k: (tmp_path / k / "results.csv").read_text() for k in runs}
    assert runs["big"]["block_sizes"] == runs["medium"]["block_sizes"] == {"N40_K2_d2": ladder(256, 0, 1, 600)}
    assert text["big"] == text["medium"]
    small_block = runs["small"]["block_sizes"]["N40_K2_d2"]
    assert small_block < 300 and text["small"] != text["big"]
    assert json.loads((tmp_path / "small" / "sweep.json").read_text())["block_sizes"] == {"N40_K2_d2": small_block}

    # the small machine's sweep, interrupted after its first chunk, resumed on the big machine
    calls = []

    def dies_after_one(spec, chunk):
        calls.append(chunk.id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return fake_trials(spec, chunk)

    monkeypatch.setattr(S, "device_free_bytes", lambda device: 2e6)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "moved", trial_fn=dies_after_one, progress=False)
    monkeypatch.setattr(S, "device_free_bytes", lambda device: 512 * GB)
    res = run_sweep(spec, tmp_path / "moved", trial_fn=fake_trials, resume=True, progress=False)
    assert res["block_sizes"] == runs["small"]["block_sizes"] and res["skipped"] == 1
    assert (tmp_path / "moved" / "results.csv").read_text() == text["small"]


def _oom_above(limit, monkeypatch):
    """The release raises CUDA's out-of-memory error for blocks of more than ``limit`` trials."""
    real = S._release_kl
    seen = []

    def release(spec, mech, X, *a, **kw):
        seen.append(X.shape[0])
        if X.shape[0] > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {X.shape[0]} GiB (simulated)")
        return real(spec, mech, X, *a, **kw)

    monkeypatch.setattr(S, "_release_kl", release)
    return seen


def test_out_of_memory_halves_the_automatic_block_and_gives_the_rows_of_that_block(tmp_path, monkeypatch):
    spec = _spec(mechanisms=["gaussian"], Ns=[40], Ks=[2], ds=[2], trials=100, mode="as-published")
    seen = _oom_above(20, monkeypatch)
    res = run_sweep(spec, tmp_path / "auto", progress=False)
    block = res["block_sizes"]["N40_K2_d2"]
    assert block <= 20 and max(seen) > 20            # it did run out first, then halved
    assert json.loads((tmp_path / "auto" / "sweep.json").read_text())["block_sizes"] == {"N40_K2_d2": block}
    expect = 100                                      # the top rung evened over 100 trials: one block of 100
    while expect > 20:                                # halved (bottom 8) and evened out again: 50, 25, 13
        expect = ladder(max(8, math.ceil(expect / 2)), 0, 1, 100)
    assert block == expect == 13
    # the same rows as a sweep asked for at that block size outright
    monkeypatch.undo()
    run_sweep(SweepSpec(**{**spec.to_dict(), "block_size": block}), tmp_path / "fixed", progress=False)
    assert (tmp_path / "auto" / "results.csv").read_text() == (tmp_path / "fixed" / "results.csv").read_text()


def test_out_of_memory_at_an_explicit_block_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from torchdpgmm.cli import main

    _oom_above(4, monkeypatch)
    out = tmp_path / "sw"
    args = ["sweep", "--mode", "as-published", "--mechanisms", "gaussian", "--N", "40", "--K", "2", "--d", "2",
            "--trials", "8", "--no-progress", "--out", str(out)]
    code = main(args + ["--block-size", "8"])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln.lower()]
    assert code == 2 and len(err) == 1 and "out of memory" in err[0] and "smaller --block-size" in err[0], err
    assert not out.exists()


def test_out_of_memory_after_a_chunk_is_on_disk_keeps_it_for_resume(tmp_path, monkeypatch):
    """Memory taken by someone else mid-sweep: one line, the finished chunk stays, --resume finishes the
    sweep with the same rows as an uninterrupted run."""
    spec = _spec(mechanisms=["gaussian"], Ns=[40], Ks=[2], ds=[2], trials=8, mode="as-published", block_size=2,
                 chunk_size=2)
    run_sweep(spec, tmp_path / "ref", progress=False)
    real = S._release_kl
    calls = []

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(*a, **kw)

    monkeypatch.setattr(S, "_release_kl", flaky)
    with pytest.raises(ValueError, match="finished chunks are kept") as e:
        run_sweep(spec, tmp_path / "part", progress=False)
    assert "\n" not in str(e.value)
    assert len(list((tmp_path / "part" / "chunks").glob("*.csv"))) == 1
    run_sweep(spec, tmp_path / "part", resume=True, progress=False)
    assert (tmp_path / "part" / "results.csv").read_text() == (tmp_path / "ref" / "results.csv").read_text()


def test_parquet_results_equal_the_csv_rows_and_resume(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 2.0], Ns=[40], Ks=[2], ds=[2], trials=9,
                block_size=2, chunk_size=4)
    a = run_sweep(SweepSpec(**base), tmp_path / "csv", trial_fn=fake_trials, progress=False)
    calls = []

    def dies(spec, chunk):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return fake_trials(spec, chunk)

    spec = SweepSpec(**base, results_format="parquet")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "pq", trial_fn=dies, progress=False)
    assert [p.suffix for p in (tmp_path / "pq" / "chunks").iterdir()] == [".parquet"]
    b = run_sweep(spec, tmp_path / "pq", trial_fn=fake_trials, resume=True, progress=False)
    assert b["skipped"] == 1 and b["results"].endswith("results.parquet")
    assert not (tmp_path / "pq" / "results.csv").exists()
    ref = pd.read_csv(tmp_path / "csv" / "results.csv")
    got = pd.read_parquet(tmp_path / "pq" / "results.parquet")
    assert list(got.columns) == list(ref.columns) and len(got) == 2 * 2 * 9
    got["mechanism"] = got["mechanism"].astype(str)
    pd.testing.assert_frame_equal(got, ref)               # exact: doubles are stored, not printed
    assert a["summary"] == b["summary"]
    assert S.load_results(tmp_path / "pq") == S.load_results(tmp_path / "csv")


def test_parquet_without_pyarrow_is_one_line(tmp_path, monkeypatch, capsys):
    from torchdpgmm.cli import main

    monkeypatch.setitem(sys.modules, "pyarrow", None)     # import pyarrow -> ImportError
    with pytest.raises(ValueError, match="needs pyarrow"):
        run_sweep(_spec(results_format="parquet", trials=2), tmp_path / "a", trial_fn=fake_trials, progress=False)
    assert not (tmp_path / "a").exists()
    out = tmp_path / "b"
    code = main(["sweep", "--mode", "as-published", "--format", "parquet", "--trials", "2", "--no-progress",
                 "--out", str(out)])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln.lower()]
    assert code == 2 and len(err) == 1 and "pip install pyarrow" in err[0], err
    assert not out.exists()


def test_streamed_summary_does_not_depend_on_the_chunking(tmp_path, monkeypatch):
    """Values enter each grid point's running summary in fixed slices (SUMMARY_FLUSH, made small here), so
    the summaries of two chunkings are equal exactly, and match numpy."""
    monkeypatch.setattr(S, "SUMMARY_FLUSH", 5)
    base = dict(mechanisms=["kl"], epsilons=[1.0, 2.0], Ns=[40], Ks=[2], ds=[2], trials=23, block_size=3)
    a = run_sweep(SweepSpec(**base, chunk_size=3), tmp_path / "a", trial_fn=fake_trials, progress=False)
    b = run_sweep(SweepSpec(**base, chunk_size=12), tmp_path / "b", trial_fn=fake_trials, progress=False)
    assert a["summary"] == b["summary"]
    rows = list(csv.DictReader(open(tmp_path / "a" / "results.csv")))
    for p in a["summary"]:
        v = np.array([float(r["kl"]) for r in rows if float(r["epsilon"]) == p["epsilon"]])
        assert p["trials"] == 23 and p["mean"] == pytest.approx(v.mean(), rel=1e-13)


def test_cli_sweep_at_defaults_records_its_block(tmp_path, capsys):
    from torchdpgmm.cli import main

    out = tmp_path / "sw"
    assert main(["sweep", "--mode", "as-published", "--mechanisms", "gaussian", "--epsilons", "1", "--N", "40",
                 "--K", "2", "--d", "2", "--trials", "30", "--no-progress", "--out", str(out)]) == 0
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["block_size"] is None and manifest["block_sizes"] == {"N40_K2_d2": 30}
    assert "blocks of 30 trials" in capsys.readouterr().out
    progress = json.loads((out / "progress.json").read_text())
    assert progress["trials_done"] == progress["trials_total"] == 30 and progress["chunks_done"] == 1
    assert progress["eta_s"] == 0 and progress["elapsed_s"] > 0


@pytest.mark.cuda
def test_cuda_probe_measures_the_footprint_and_the_sweep_fits(tmp_path):
    spec = _spec(mechanisms=["kl"], epsilons=[0.5, 2.0], mode="sound", clip_bound=30.0, device="cuda", trials=300)
    per_trial = S.measure_bytes_per_trial(spec, 1000, 5, 3, trials=64)
    assert 24_000 < per_trial < 50e6                 # at least the data (N d 8 bytes), far below a GPU
    res = run_sweep(spec, tmp_path, progress=False)
    assert res["block_sizes"] == {"N1000_K5_d3": 300}


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["sound", "as-published"])
def test_cuda_sweep_rows_are_the_same_run_to_run(tmp_path, mode):
    """A seeded sweep on one GPU writes the same rows twice (no nondeterministic kernel on the path: atomics in
    a reduction or a sampler would show here), with the block size fixed as a resumed sweep fixes it."""
    import pandas as pd

    spec = _spec(mechanisms=["kl"], epsilons=[0.1, 1.0], mode=mode, clip_bound=30.0 if mode == "sound" else None,
                 device="cuda", trials=2000, block_size=1000)
    for name in ("a", "b"):
        run_sweep(spec, tmp_path / name, progress=False)
    a, b = (pd.read_csv(tmp_path / name / "results.csv") for name in ("a", "b"))
    assert len(a) == 4000 and a.equals(b)


def test_out_of_memory_in_the_cuda_probe_is_one_line(tmp_path, monkeypatch):
    """The probe block that measures the footprint on CUDA runs before any chunk: its out-of-memory is one line
    too, and the half-made sweep folder holds no chunk (a simulated CUDA device: the probe is patched)."""
    def probe(*a, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(S, "measure_bytes_per_trial", probe)
    with pytest.raises(ValueError, match="probe block of 256 trials") as e:
        run_sweep(_spec(trials=4), tmp_path / "sw", trial_fn=fake_trials, progress=False)
    assert "\n" not in str(e.value) and not list((tmp_path / "sw" / "chunks").iterdir())


def test_automatic_chunks_leave_work_for_every_worker(monkeypatch):
    """A chunk is one automatic block (blocks below CHUNK_TRIALS = 256 trials are grouped up to it), so the
    default sweep of 1000 trials is 4 chunks that workers can share, not one."""
    monkeypatch.setattr(S, "device_free_bytes", lambda device: 64 * GB)
    assert [c.num_trials for c in S.plan_chunks(_spec(trials=1000))] == [250] * 4
    assert [c.num_trials for c in S.plan_chunks(_spec(trials=1000, block_size=40))] == [240] * 4 + [40]
