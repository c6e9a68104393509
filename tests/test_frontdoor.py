"""The README's user journey, end to end: release from a CSV, sample, sweep, kill + resume, Ray."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from torchdpgmm.cli import main
from torchdpgmm.datafile import read_labeled_table
from torchdpgmm.modelfile import load_model

ROOT = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _csv(path, n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    y[:6] = [0, 0, 1, 1, 2, 2]
    X = rng.normal(size=(n, 2)) + np.array([[0, 0], [4, 0], [0, 4]])[y]
    names = np.array(["setosa", "versicolor", "virginica"])
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["petal_length", "species", "petal_width"])
        for xi, yi in zip(X, y):
            w.writerow([xi[0], names[yi], xi[1]])
    return path


SOUND_FLAGS = ["--classes", "setosa,versicolor,virginica", "--clip-bound", "10"]


def test_release_then_sample_from_csv(tmp_path, capsys):
    data = _csv(tmp_path / "flowers.csv")
    out = tmp_path / "model.json"
    rc = main(["release", "--data", str(data), "--label-column", "species", "--features", "petal_length,petal_width",
               "--epsilon", "1", "--delta", "1e-5",
               "--mechanism", "kl", *SOUND_FLAGS, "--seed", "3", "--out", str(out)])
    assert rc == 0
    mf = load_model(out)
    assert mf.class_names == ["setosa", "versicolor", "virginica"]
    assert mf.feature_names == ["petal_length", "petal_width"]
    assert mf.privacy.epsilon == 1.0 and mf.privacy.delta == 1e-5 and mf.privacy.mode == "sound"
    assert mf.privacy.adjacency and mf.privacy.accountant and mf.privacy.notes
    assert main(["sample", str(out), "-n", "50", "--seed", "1", "--out", str(tmp_path / "syn.csv")]) == 0
    syn = read_labeled_table(tmp_path / "syn.csv", "label")
    assert syn.X.shape == (50, 2)
    expected = mf.model.counts.double() / mf.model.counts.sum() * 50
    assert np.all(np.abs(np.bincount(syn.y.numpy(), minlength=3) - expected.numpy()) < 1)
    # the same seed gives the same release
    main(["release", "--data", str(data), "--label-column", "species", "--features", "petal_length,petal_width",
          "--epsilon", "1", "--delta", "1e-5", *SOUND_FLAGS, "--seed", "3", "--out", str(tmp_path / "again.json")])
    torch.testing.assert_close(load_model(tmp_path / "again.json").model.means, mf.model.means)


@pytest.mark.parametrize("args, msg", [
    (["--label-column", "nope"], "no column named"),
    (["--label-column", "species", "--epsilon", "0"], "epsilon"),
    (["--label-column", "species", "--delta", "2"], "delta"),
])
def test_release_errors_write_nothing(tmp_path, capsys, args, msg):
    data = _csv(tmp_path / "d.csv")
    base = {"--epsilon": "1", "--delta": "1e-5", "--classes": "setosa,versicolor,virginica", "--clip-bound": "10",
            "--features": "petal_length,petal_width"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    argv = ["release", "--data", str(data), "--out", str(tmp_path / "m.json")]
    for k, v in base.items():
        argv += [k, v]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


def test_single_class_depends_on_mode_and_bad_rows_are_dropped_in_sound_mode(tmp_path, capsys):
    p = tmp_path / "one.csv"
    p.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,x\n")
    base = ["release", "--data", str(p), "--label-column", "label", "--features", "a,b", "--epsilon", "1",
            "--delta", "1e-5"]
    # as-published reads the classes from the data, so a single class is refused ...
    assert main([*base, "--mode", "as-published", "--out", str(tmp_path / "m.json")]) == 2
    assert "single class" in capsys.readouterr().err
    # ... the sound mode takes them from --classes: a class without rows is legal, never a data-dependent error
    assert main([*base, "--classes", "x,y", "--clip-bound", "10", "--seed", "0", "--out", str(tmp_path / "s.json")]) == 0
    assert load_model(tmp_path / "s.json").class_names == ["x", "y"]
    capsys.readouterr()
    # sound mode: a row with a missing feature or a label outside --classes is dropped by the release, never
    # an error (which would reveal that the row exists): the release equals that of the file without it
    rows = "3,4,y\n5,6,x\n7,8,y\n"
    q = tmp_path / "clean.csv"
    q.write_text("a,b,label\n" + rows)
    for bad in ("1,nan,x\n", "1,2,z\n"):
        p.write_text("a,b,label\n" + bad + rows)
        args = ["--classes", "x,y", "--clip-bound", "10", "--seed", "0", "--force"]  # --out is reused
        assert main([*base, *args, "--out", str(tmp_path / "m.json")]) == 0
        qbase = [*base[:2], str(q), *base[3:]]
        assert main([*qbase, *args, "--out", str(tmp_path / "c.json")]) == 0
        got, ref = load_model(tmp_path / "m.json"), load_model(tmp_path / "c.json")
        assert torch.equal(got.model.means, ref.model.means)
    capsys.readouterr()


SWEEP_TRIALS = 30  # one-trial chunks of ~25 ms each: the kill below lands long before the last one


def _sweep_args():
    import dataclasses

    from torchdpgmm.sweep import SweepSpec

    args = ["--mode", "as-published", "--mechanisms", "kl,gaussian", "--epsilons", "1,4", "--N", "40", "--K", "2",
            "--d", "2", "--trials", str(SWEEP_TRIALS), "--chunk-size", "1", "--no-progress"]
    if "block_size" in {f.name for f in dataclasses.fields(SweepSpec)}:
        args += ["--block-size", "1"]  # chunks are rounded up to whole blocks: one trial per chunk
    return args


SWEEP = _sweep_args()


def _finished_chunks(out):
    """The sweep's finished chunk files: pathlib's glob matches dotfiles too, and a kill during a chunk's write leaves
    its ``.tmp-*.csv`` (removed by the resume, so the test read a file that had gone)."""
    return [p for p in (out / "chunks").glob("*.csv") if not p.name.startswith(".")]


def test_sweep_killed_and_resumed_gives_the_same_rows(tmp_path):
    """The sweep's journey: a run, a killed run resumed to the same rows; the Ray step (the same command with
    ``--backend ray``, the same rows) is test_sweep.py's test_ray_backend_matches_local."""
    # 1. an uninterrupted reference run, in-process
    assert main(["sweep", *SWEEP, "--out", str(tmp_path / "ref")]) == 0
    ref = (tmp_path / "ref" / "results.csv").read_text()
    assert len(ref.strip().splitlines()) == 1 + 2 * 2 * SWEEP_TRIALS
    total = len(list((tmp_path / "ref" / "chunks").glob("*.csv")))
    # 2. the same sweep as a separate process, killed (SIGKILL) once some chunks are on disk
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "torchdpgmm.cli", "sweep", *SWEEP, "--out", str(out)],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if len(_finished_chunks(out)) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in _finished_chunks(out)}
    assert 2 <= len(done) < total, f"kill came too late or too early: {len(done)} of {total} chunks done"
    assert not (out / "results.csv").exists()
    # 3. resume: finished chunks are kept untouched, the rest is computed, the result equals the reference
    assert main(["sweep", *SWEEP, "--out", str(out), "--resume"]) == 0
    assert all((out / "chunks" / n).stat().st_mtime_ns == t for n, t in done.items())
    assert (out / "results.csv").read_text() == ref
    # 4. the same sweep on a local Ray instance gives identical numbers: tests/test_sweep.py's
    # test_ray_backend_matches_local makes that check (a sweep command with --backend ray gives the local rows)


def test_estimator_fit_sample_predict_score():
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    y = np.repeat(np.array(["a", "b"]), 100)
    X = rng.normal(size=(200, 2)) + np.where(y[:, None] == "a", 0.0, 6.0)
    est = DPGaussianMixture(epsilon=2.0, delta=1e-5, classes=["a", "b"], clip_bound=10.0, random_state=0).fit(X, y)
    assert est.privacy_.epsilon == 2.0 and list(est.classes_) == ["a", "b"] and est.privacy_.mode == "sound"
    Xs, ys = est.sample(40)
    assert Xs.shape == (40, 2) and set(ys) <= {"a", "b"}
    assert est.predict(X).shape == (200,) and np.isfinite(est.score(X))
    assert 0.0 <= est.accuracy(X, y) <= 1.0
    assert not hasattr(est, "fitted_")  # the non-private fit is not kept
    with pytest.raises(ValueError, match="clip_bound"):
        DPGaussianMixture(classes=["a", "b"]).fit(X, y)
    with pytest.raises(ValueError, match="mechanism"):
        DPGaussianMixture(mechanism="nope").fit(X, y)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        DPGaussianMixture().predict(X)


def test_python_dash_m_torchdpgmm_is_the_command(tmp_path):
    """``python -m torchdpgmm`` runs the ``torchdpgmm`` command (there was no ``__main__.py``: 'No module named
    torchdpgmm.__main__'), with its exit codes: 0 for --version, 2 for a usage error, one line."""
    import torchdpgmm

    ok = subprocess.run([sys.executable, "-m", "torchdpgmm", "--version"], env=_env(), cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and torchdpgmm.__version__ in ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, "-m", "torchdpgmm", "release", "--epsilon", "1"], env=_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "required" in bad.stderr and list(tmp_path.iterdir()) == []
