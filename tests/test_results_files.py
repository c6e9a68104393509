"""Result files of sweeps and studies: written through temporary files renamed into place (an interrupted run
leaves the previous files whole, and no file mixed from two runs), valid JSON (NaN is null), and a stale temporary
chunk file is neither read as results nor left behind (found by an independent review, 2026-11-27)."""
import json

import pytest

from torchdpgmm.sweep import SweepSpec, load_results, run_sweep
from test_sweep import fake_trials


def _spec(**kw):
    base = dict(mechanisms=["kl"], epsilons=[0.5, 1.0], Ns=[50], Ks=[2], ds=[2], trials=4, chunk_size=2, block_size=2)
    return SweepSpec(**(base | kw))


def test_sweep_summary_is_strict_json_and_names_its_versions(tmp_path):
    run_sweep(_spec(trials=1, chunk_size=1, block_size=1), tmp_path / "s", trial_fn=fake_trials, progress=False)
    text = (tmp_path / "s" / "summary.json").read_text()
    summary = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert all(p["ci_low"] is None for p in summary["points"])  # one trial: no interval, null not NaN
    assert {"torchdpgmm", "torch", "commit", "device"} <= set(summary["environment"])


def test_a_stale_temporary_chunk_is_not_results_and_resume_removes_it(tmp_path):
    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    rows = len(load_results(out))
    good = sorted((out / "chunks").glob("*.csv"))[0]
    stale = out / "chunks" / ".tmp-abcd.csv"
    stale.write_text(good.read_text()[:200])
    assert len(load_results(out)) == rows
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    assert not stale.exists()


def test_every_temporary_of_the_sweep_folder_has_one_prefix_and_resume_removes_each(tmp_path, monkeypatch):
    """Every file a writer of the folder creates before its rename (chunks, results, summary, figure, progress,
    manifest) starts with ``.tmp-``, so one pattern finds what a killed writer left; the names of older versions
    are removed as well."""
    import os

    made = []
    real_replace = os.replace

    def spy(src, dst):
        made.append((os.path.basename(src), os.path.basename(dst)))
        return real_replace(src, dst)
    monkeypatch.setattr(os, "replace", spy)
    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    monkeypatch.setattr(os, "replace", real_replace)
    targets = {dst for _, dst in made}
    assert {"sweep.json", "progress.json", "summary.json", "sweep.png"} <= targets, targets
    assert any(dst.startswith("results") for dst in targets) and any(dst.endswith(".csv") for dst in targets)
    assert all(src.startswith(".tmp-") for src, _ in made), made
    left = [out / ".tmp-sweep.json", out / ".tmp-progress.json", out / ".tmp-x.png", out / "chunks" / ".tmp-y.csv",
            *(out / n for n in (".summary.ab.json", ".sweep.cd.png", ".progress.json.tmp", ".sweep.json.tmp"))]
    for p in left:
        p.write_text("half")
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    assert [p.name for p in left if p.exists()] == []


def test_an_interrupted_sweep_plot_keeps_the_previous_files_whole(tmp_path, monkeypatch):
    import torchdpgmm.sweep as sweep

    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    before = {n: (out / n).read_bytes() for n in ("summary.json", "sweep.png")}

    def interrupted(summary, path, **kw):
        path.write_bytes(b"half a png")
        raise KeyboardInterrupt
    monkeypatch.setattr(sweep, "plot_results", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    assert {n: (out / n).read_bytes() for n in before} == before
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_an_interrupted_study_leaves_the_previous_run_whole_and_no_temporary_file(tmp_path, monkeypatch):
    from torchdpgmm.cli import main
    from torchdpgmm.experiments import plotting

    args = ["experiment", "fig2", "--quick", "--trials", "2", "--out", str(tmp_path)]
    assert main([*args, "--seed", "1"]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert {"fig2.json", "fig2.csv", "fig2.png"} <= set(before)

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(plotting, "plot_curves", interrupted)
    assert main([*args, "--seed", "5"]) == 130
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_an_interrupted_study_removes_the_empty_folders_it_made(tmp_path, monkeypatch):
    from torchdpgmm.cli import main
    from torchdpgmm.experiments import synthetic

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(synthetic, "kl_sweep", interrupted)
    out = tmp_path / "new" / "deeper"
    assert main(["experiment", "fig2", "--quick", "--trials", "2", "--out", str(out)]) == 130
    assert list(tmp_path.iterdir()) == []


def test_a_resume_under_another_torch_is_refused(tmp_path):
    import torch

    out = tmp_path / "s"
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False)
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["torch"] == torch.__version__
    manifest["torch"] = "0.0.1"
    (out / "sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="begun with torch 0.0.1"):
        run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
    del manifest["torch"]  # a manifest from before the field: resumed as before
    (out / "sweep.json").write_text(json.dumps(manifest))
    run_sweep(_spec(), out, trial_fn=fake_trials, progress=False, resume=True)
