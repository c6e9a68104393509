"""The sweep's defects found by the probe of /tmp/probe_sweep (F2, F3, F6-F12 of its report): stale chunks,
repeated grid values, late failures that left a manifest behind, seeds past 2^63, temporary files a kill left,
the automatic block at few trials, the lazy numpy.random import, the default adjacency and the messages.

References are independent of the code under test: hand-written expectations, rows of explicit settings, the
stand-in release of test_sweep.py."""
import json
import subprocess
import sys

import pytest

from torchdpgmm import sweep as S
from torchdpgmm.sweep import SweepSpec, auto_block_size, run_sweep

from test_sweep import fake_trials


def _spec(**kw):
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 1.0], Ns=[50], Ks=[2], ds=[2], trials=7,
                chunk_size=2, block_size=2)
    base.update(kw)
    return SweepSpec(**base)


def test_chunks_without_a_manifest_are_refused_not_reused(tmp_path):
    """F2: chunk files left without sweep.json were reused by a sweep of another seed (its rows said seed 0)."""
    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    for name in ("sweep.json", "results.csv", "summary.json"):
        (out / name).unlink()
    before = sorted(p.name for p in (out / "chunks").iterdir())
    for resume in (False, True):
        with pytest.raises(ValueError, match="no sweep.json") as e:
            run_sweep(_spec(seed=7), out, trial_fn=fake_trials, progress=False, resume=resume)
        assert "\n" not in str(e.value)
        assert not (out / "sweep.json").exists() and sorted(p.name for p in (out / "chunks").iterdir()) == before
    # an empty chunks/ (or only a killed writer's temporary) is no sweep's rows: accepted
    for p in (out / "chunks").iterdir():
        p.unlink()
    (out / "chunks" / ".tmp-x.csv").write_text("mechanism\n")
    res = run_sweep(_spec(seed=7), out, trial_fn=fake_trials, progress=False)
    assert res["skipped"] == 0
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 * 2 * 7 and {r.split(",")[5] for r in rows} == {"7"}


@pytest.mark.parametrize("bad,match", [
    (dict(Ns=[50, 50]), "Ns must not repeat"),
    (dict(mechanisms=["kl", "kl"]), "mechanisms must not repeat"),
    (dict(epsilons=[1.0, 1.0]), "epsilons must not repeat"),
    (dict(Ks=[2, 2]), "Ks must not repeat"),
    (dict(ds=[2, 3, 2]), "ds must not repeat"),
    (dict(mechanisms=["kl", "foo"]), "unknown mechanism 'foo'"),
    (dict(mode="sound", clip_bound=10.0, adjacency="both"), "adjacency must be one of"),
    (dict(variant="exact"), "variant must be one of"),
    (dict(device="tpu"), "device must be cpu or cuda"),
    (dict(device="xyz"), "device must be cpu or cuda"),
    (dict(seed=-1), "seed must be an integer >= 0 and < 2\\^63"),
    (dict(seed=2 ** 63), "seed must be an integer >= 0 and < 2\\^63"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(mechanisms=["kl", "r1smg"], ds=[3, 2], Ns=[60]), "r1smg' needs d > 2"),
    (dict(mechanisms=["r1smg"], ds=[3], Ns=[60], mode="sound", clip_bound=10.0), "r1smg' has no sound mode"),
])
def test_spec_refuses_in_one_line_before_the_manifest(bad, match, tmp_path):
    """F3, F6, F7: each of these ran (repeats doubled the trial count and narrowed the interval) or failed only
    once sweep.json was written, after the first block's work (seed >= 2^63, r1smg at d = 2, names)."""
    calls = []

    def counting(spec, chunk):
        calls.append(chunk.id)
        return fake_trials(spec, chunk)

    with pytest.raises(ValueError, match=match) as e:
        run_sweep(_spec(**bad), tmp_path / "s", trial_fn=counting, progress=False)
    assert "\n" not in str(e.value) and not calls
    assert not (tmp_path / "s" / "sweep.json").exists()


def test_the_largest_seed_runs():
    """F7: 2^63 - 1 is the largest seed a row's int64 column holds; it runs."""
    spec = _spec(seed=2 ** 63 - 1, trials=2)
    spec.validate()
    from torchdpgmm.sweep import Chunk, _columns

    cols = _columns(fake_trials(spec, Chunk(50, 2, 2, 0, 0, 2, 2)))
    assert int(cols["seed"][0]) == 2 ** 63 - 1


def test_a_new_sweep_that_fails_before_any_chunk_leaves_no_manifest(tmp_path):
    """F6: a late failure in an existing folder left sweep.json behind, and the corrected call was then refused
    as 'a different sweep'. A failure after a chunk is on disk keeps it and the manifest (for resume)."""
    out = tmp_path / "given"
    out.mkdir()

    def failing(spec, chunk):
        raise ValueError("a mechanism failed")

    with pytest.raises(ValueError, match="a mechanism failed"):
        run_sweep(_spec(), out, trial_fn=failing, progress=False)
    assert sorted(out.iterdir()) == []
    run_sweep(_spec(trials=8), out, trial_fn=fake_trials, progress=False)   # the corrected sweep runs
    assert len((out / "results.csv").read_text().splitlines()) == 1 + 2 * 2 * 8

    out2 = tmp_path / "late"
    calls = []

    def late(spec, chunk):
        calls.append(chunk.id)
        if len(calls) == 2:
            raise ValueError("the second chunk failed")
        return fake_trials(spec, chunk)

    with pytest.raises(ValueError, match="second chunk"):
        run_sweep(_spec(), out2, trial_fn=late, progress=False)
    assert (out2 / "sweep.json").exists() and len(list((out2 / "chunks").glob("*.csv"))) == 1
    res = run_sweep(_spec(), out2, trial_fn=fake_trials, progress=False, resume=True)
    assert res["skipped"] == 1


def test_resume_removes_the_temporaries_a_kill_left_in_the_output_folder(tmp_path):
    """F8: a kill while results.csv was assembled left OUT/.tmp-XXXX.csv (a results-sized file) for good."""
    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    stale = [out / ".tmp-abcd1234.csv", out / ".summary.x1y2.json", out / ".sweep.z9.png"]
    for p in stale:
        p.write_text("half")
    keep = out / "notes.txt"
    keep.write_text("mine")
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    assert not any(p.exists() for p in stale) and keep.read_text() == "mine"


def test_the_automatic_block_accepts_trials_that_fit_below_the_bottom_rung():
    """F9: one trial needing 849 MiB within a 1 GiB budget was refused because 8 trials would not fit."""
    mib = 2 ** 20
    spec = _spec(Ns=[50], block_size=None, chunk_size=None, trials=1, memory_budget=1024 * mib)
    assert auto_block_size(spec, 50, 2, 2, free=None, per_trial=849 * mib) == 1
    spec3 = _spec(Ns=[50], block_size=None, chunk_size=None, trials=3, memory_budget=1024 * mib)
    assert auto_block_size(spec3, 50, 2, 2, free=None, per_trial=300 * mib) == 3
    with pytest.raises(ValueError, match="a block of 3 trials"):
        auto_block_size(spec3, 50, 2, 2, free=None, per_trial=400 * mib)
    # at 8 trials and more nothing changes: the bottom rung is 8
    spec8 = _spec(Ns=[50], block_size=None, chunk_size=None, trials=100, memory_budget=1024 * mib)
    with pytest.raises(ValueError, match="a block of 8 trials"):
        auto_block_size(spec8, 50, 2, 2, free=None, per_trial=200 * mib)


def test_numpy_random_is_imported_with_the_sweep():
    """F10: numpy.random was imported lazily inside the first block_seed call, where a Ctrl-C was lost."""
    code = "import sys, torchdpgmm.sweep, torchdpgmm.montecarlo; print('numpy.random' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"


def test_the_sound_default_adjacency_is_add_remove_as_release_and_the_command_line(tmp_path):
    """F11: SweepSpec's sound mode defaulted to replace-one, release() and the command line to add-remove, so the
    same settings gave other rows from Python. A manifest with a null adjacency (written before) ran replace-one
    and resumes under an explicit replace-one."""
    base = dict(mechanisms=["gaussian"], epsilons=[1.0], Ns=[40], Ks=[2], ds=[2], trials=2, block_size=2,
                chunk_size=2, mode="sound", clip_bound=30.0)
    spec = SweepSpec(**base)
    spec.validate()
    assert spec.adjacency == "add-remove"
    run_sweep(SweepSpec(**base), tmp_path / "default", progress=False)
    run_sweep(SweepSpec(**base, adjacency="add-remove"), tmp_path / "explicit", progress=False)
    assert json.loads((tmp_path / "default" / "sweep.json").read_text())["adjacency"] == "add-remove"
    assert (tmp_path / "default" / "results.csv").read_bytes() == (tmp_path / "explicit" / "results.csv").read_bytes()

    old = tmp_path / "old"
    run_sweep(SweepSpec(**base, adjacency="replace-one"), old, progress=False)
    manifest = json.loads((old / "sweep.json").read_text())
    manifest["adjacency"] = None
    (old / "sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="different sweep"):
        run_sweep(SweepSpec(**base), old, progress=False, resume=True)
    assert run_sweep(SweepSpec(**base, adjacency="replace-one"), old, progress=False, resume=True)["done"] == 0


@pytest.mark.parametrize("text", ["[1, 2]", "{bad", '{"block_sizes": 3}', "\udcff"])
def test_a_corrupt_manifest_is_one_line(tmp_path, text):
    """F12: a corrupt sweep.json gave Python's raw texts ('pop expected at most 1 argument, got 2')."""
    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match="is not a sweep manifest written by torchdpgmm sweep") as e:
        run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    assert "\n" not in str(e.value)


def test_an_output_where_nothing_can_be_written_says_so(tmp_path):
    """F12: --out /proc/x was refused as '/proc has 0 GB free; use fewer trials'."""
    with pytest.raises(ValueError, match="is not a writable folder"):
        S.check_disk(_spec(), "/proc/torchdpgmm-sweep-probe")
    with pytest.raises(ValueError, match="empty path"):
        run_sweep(_spec(), "", trial_fn=fake_trials, progress=False)


def test_the_progress_bar_counts_whole_trials(tmp_path, capsys):
    """F12: the bar read '40.0/40.0 trial' (unit_scale)."""
    run_sweep(_spec(), tmp_path / "s", trial_fn=fake_trials, progress=True)
    err = capsys.readouterr().err
    assert "7/7" in err and "7.0/7.0" not in err


def test_r1smg_at_d2_is_refused_for_a_numpy_d_and_a_cuda_sweep_plans_without_the_gpu():
    """SweepSpec.validate checked r1smg's d > 2 only for Python ints and floats (a numpy d = 2 passed), and it asked
    for the CUDA device itself, so a CUDA sweep with its block size given could not be planned on a machine without
    the GPU; running it still needs the device."""
    import numpy as np

    bad = SweepSpec(mechanisms=["r1smg"], epsilons=[1.0], Ns=[100], Ks=[2], ds=[np.int64(2)], trials=4)
    with pytest.raises(ValueError, match="r1smg' needs d > 2"):
        bad.validate()
    cuda = SweepSpec(mechanisms=["kl"], epsilons=[1.0], Ns=[100], Ks=[2], ds=[2], trials=20, device="cuda:0",
                     block_size=8, mode="sound", clip_bound=5.0)
    assert S.num_chunks(cuda) == len(S.plan_chunks(cuda)) >= 1
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            cuda.validate()
