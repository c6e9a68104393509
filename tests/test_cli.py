"""The command line's contract: every bad input gives one line on stderr, exit status 2 and nothing written;
Ctrl-C on a sweep exits 130 with a hint to --resume; files are written readable (0644)."""
import csv
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from torchdpgmm.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLASSES = "setosa,versicolor,virginica"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "torchdpgmm.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=240)


def _csv(path, header=("petal_length", "species", "petal_width"), n=90):
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, 2)) + np.array([[0, 0], [4, 0], [0, 4]])[y]
    names = np.array(CLASSES.split(","))
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for xi, yi in zip(X, y):
            w.writerow([xi[0], names[yi], xi[1]])
    return path


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))


RELEASE = ["release", "--data", "d.csv", "--label-column", "species", "--features", "petal_length,petal_width",
           "--epsilon", "1", "--delta", "1e-5"]
SOUND = ["--classes", CLASSES, "--clip-bound", "10"]

BAD = {
    "bare command": [],
    "bare experiment": ["experiment"],
    "unknown flag": [*RELEASE, *SOUND, "--bogus", "--out", "m.json"],
    "sound without classes": [*RELEASE, "--clip-bound", "10", "--out", "m.json"],
    "sound without clip bound": [*RELEASE, "--classes", CLASSES, "--out", "m.json"],
    "tiny clip bound": [*RELEASE, "--classes", CLASSES, "--clip-bound", "1e-300", "--out", "m.json"],
    "as-published with clip bound": [*RELEASE, "--mode", "as-published", "--clip-bound", "10", "--out", "m.json"],
    "as-published with adjacency": [*RELEASE, "--mode", "as-published", "--adjacency", "replace-one",
                                    "--out", "m.json"],
    "duplicated class": [*RELEASE, "--classes", "setosa,setosa,virginica", "--clip-bound", "10", "--out", "m.json"],
    "duplicated header": ["release", "--data", "dup.csv", "--label-column", "species", "--epsilon", "1",
                          "--delta", "1e-5", *SOUND, "--out", "m.json"],
    "epsilon zero": [*RELEASE[:-4], "--epsilon", "0", "--delta", "1e-5", *SOUND, "--out", "m.json"],
    "r1smg sound": [*RELEASE, *SOUND, "--mechanism", "r1smg", "--out", "m.json"],
    "out is a folder": [*RELEASE, *SOUND, "--out", "."],
    "missing model": ["sample", "nope.json", "-n", "3", "--out", "s.csv"],
    "sample n zero": ["sample", "nope.json", "-n", "0", "--out", "s.csv"],
    "sweep unknown mechanism": ["sweep", "--mechanisms", "kl,nope", "--mode", "as-published", "--out", "sw"],
    "sweep sound without clip bound": ["sweep", "--out", "sw"],
    "sweep no gpu": ["sweep", "--mode", "as-published", "--device", "cuda", "--out", "sw"],
    "experiment no gpu": ["experiment", "fig2", "--quick", "--device", "cuda", "--out", "ex"],
    "experiment bad trials": ["experiment", "fig2", "--quick", "--trials", "0", "--out", "ex/deep"],
    "bad device": ["experiment", "fig2", "--device", "tpu9", "--out", "ex"],
    "sweep failing in its first chunk": ["sweep", "--mode", "as-published", "--mechanisms", "r1smg", "--d", "2",
                                         "--N", "40", "--K", "2", "--trials", "2", "--no-progress", "--out", "sw/x"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, name):
    if name.endswith("no gpu") and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    _csv(tmp_path / "d.csv")
    _csv(tmp_path / "dup.csv", header=("a", "species", "a"))
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    assert main(BAD[name]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if not (ln.startswith("torchdpgmm") and ": warning: mode='as-published'" in ln)]  # the as-published caveat
    assert len(err) == 1 and "error" in err[0], err
    assert "Traceback" not in err[0]
    assert _tree(tmp_path) == before


def test_subprocess_front_door(tmp_path):
    """The real command (a fresh process): help, version, one-line errors. The four processes are independent
    (none writes): they run two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    _csv(tmp_path / "d.csv")
    calls = [("--version",), ("experiment", "--help"), ("experiment",),
             (*RELEASE, "--mode", "as-published", "--clip-bound", "10", "--out", "m.json")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        version, help_, bare, release = pool.map(lambda args: _run(*args, cwd=tmp_path), calls)
    assert version.returncode == 0 and version.stdout.startswith("torchdpgmm ")
    assert help_.returncode == 0 and "fig2" in help_.stdout, help_.stderr
    assert bare.returncode == 2 and len(bare.stderr.strip().splitlines()) == 1 and "fig2" in bare.stderr
    r = release
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--clip-bound" in r.stderr
    assert not (tmp_path / "m.json").exists()


def test_output_files_are_readable(tmp_path, monkeypatch):
    """Model and sample files go through the atomic writer with ordinary permissions (0644), not 0600."""
    _csv(tmp_path / "d.csv")
    monkeypatch.chdir(tmp_path)
    assert main([*RELEASE, *SOUND, "--seed", "0", "--out", "out/m.json"]) == 0
    assert main(["sample", "out/m.json", "-n", "20", "--seed", "1", "--out", "out/s.csv"]) == 0
    old = os.umask(0o022)
    os.umask(old)
    for f in ("out/m.json", "out/s.csv"):
        assert stat.S_IMODE((tmp_path / f).stat().st_mode) == 0o666 & ~old


def test_as_published_release_warns_it_is_not_dp(tmp_path, capsys, monkeypatch):
    _csv(tmp_path / "d.csv")
    monkeypatch.chdir(tmp_path)
    assert main([*RELEASE, "--mode", "as-published", "--seed", "0", "--out", "m.json"]) == 0
    err = capsys.readouterr().err
    assert "label-level" in err and "NOT a valid differential privacy guarantee" in err


def test_sound_release_takes_classes_from_the_flag(tmp_path, capsys, monkeypatch):
    from torchdpgmm.modelfile import load_model

    _csv(tmp_path / "d.csv")
    monkeypatch.chdir(tmp_path)
    # a class without rows is legal and keeps its place; the class order is the flag's
    assert main([*RELEASE, "--classes", "virginica,setosa,versicolor,unseen", "--clip-bound", "10",
                 "--adjacency", "replace-one", "--seed", "0", "--out", "m.json"]) == 0
    mf = load_model(tmp_path / "m.json")
    assert mf.class_names == ["virginica", "setosa", "versicolor", "unseen"]
    assert mf.privacy.mode == "sound" and mf.privacy.adjacency == "replace-one"
    assert isinstance(mf.privacy.epsilon, float)


def test_ctrl_c_on_a_sweep_prints_a_resume_hint_and_exits_130(tmp_path):
    out = tmp_path / "sw"
    args = ["sweep", "--mode", "as-published", "--mechanisms", "kl,gaussian", "--epsilons", "1,2,3,4",
            "--N", "60", "--K", "2", "--d", "2", "--trials", "400", "--block-size", "1", "--chunk-size", "1",
            "--no-progress", "--out", str(out)]  # 400 one-trial chunks: far from done when the first lands
    # a job started in the background inherits SIGINT as ignored (and Python then keeps it ignored): give the
    # child the default disposition, as an interactive shell would, so Ctrl-C reaches it
    proc = subprocess.Popen([sys.executable, "-m", "torchdpgmm.cli", *args], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and len(list((out / "chunks").glob("*.csv"))) < 1:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert "--resume" in last and "Traceback" not in err
    assert (out / "sweep.json").exists()  # what is finished stays, to be resumed


def test_every_study_help_renders():
    """Study help texts may hold '%' (e.g. '95% CI'): argparse must not %-format them."""
    import argparse

    from torchdpgmm.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    exp = sub.choices["experiment"]
    studies = next(a for a in exp._actions if isinstance(a, argparse._SubParsersAction))
    assert studies.choices, "no studies registered"
    exp.format_help()
    for name, sp in studies.choices.items():
        assert name in sp.format_help()
    assert "audit" in sub.choices and "--out" in sub.choices["audit"].format_help()


def test_audit_command_is_the_audit_study(tmp_path, monkeypatch):
    import torchdpgmm.experiments as ex

    seen = {}

    def fake_run_study(name, cfg):
        seen["name"], seen["out"] = name, cfg.out
        return {"rows": [], "runtime_seconds": 0.0}
    monkeypatch.setattr(ex, "run_study", fake_run_study)
    assert main(["audit", "--quick", "--out", str(tmp_path / "a")]) == 0
    assert seen == {"name": "audit", "out": tmp_path / "a"}


@pytest.mark.cuda
def test_estimator_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    y = np.repeat(np.array(["a", "b"]), 50)
    X = rng.normal(size=(100, 2)) + 4.0 * (y == "b")[:, None]
    est = DPGaussianMixture(classes=["a", "b"], clip_bound=10.0, random_state=0, device="cuda").fit(X, y)
    assert est.model_.device.type == "cuda" and est.predict(X).shape == (100,)


def test_sound_sweep_passes_the_public_settings(tmp_path):
    import json

    out = tmp_path / "sw"
    assert main(["sweep", "--mechanisms", "gaussian", "--epsilons", "1", "--N", "40", "--K", "2", "--d", "2",
                 "--trials", "2", "--clip-bound", "5", "--classes", "2", "--no-progress", "--out", str(out)]) == 0
    spec = json.loads((out / "sweep.json").read_text())
    assert spec["mode"] == "sound" and spec["clip_bound"] == 5.0
    assert spec["adjacency"] == "add-remove" and spec["classes"] == 2


def test_check_settings_is_a_dry_run(tmp_path, capsys, monkeypatch):
    _csv(tmp_path / "d.csv")
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    assert main([*RELEASE, "--classes", CLASSES, "--clip-bound", "1000", "--check-settings", "--out", "m.json"]) == 0
    err = capsys.readouterr().err
    assert "clips 0.0% of rows" in err and "do not publish" in err
    assert _tree(tmp_path) == before


def test_covariance_type_reaches_the_release(tmp_path, monkeypatch):
    from torchdpgmm.modelfile import load_model

    _csv(tmp_path / "d.csv")
    monkeypatch.chdir(tmp_path)
    assert main([*RELEASE, *SOUND, "--covariance-type", "diag", "--seed", "0", "--out", "m.json"]) == 0
    cov = load_model(tmp_path / "m.json").model.covariances
    assert torch.count_nonzero(cov - torch.diag_embed(torch.diagonal(cov, dim1=-2, dim2=-1))) == 0
    assert main([*RELEASE, "--mode", "as-published", "--covariance-type", "diag", "--out", "m2.json"]) == 2


def test_sound_release_prints_no_private_count(tmp_path, capsys, monkeypatch):
    # under add/remove the number of records is private: the summary line must not state it
    _csv(tmp_path / "d.csv", n=87)
    monkeypatch.chdir(tmp_path)
    assert main([*RELEASE, "--classes", CLASSES, "--clip-bound", "10", "--seed", "0", "--out", "m.json"]) == 0
    out = capsys.readouterr()
    assert "87" not in out.out + out.err
    assert "mode=sound" in out.out


def test_sweep_memory_budget_flag_sets_the_chunking_and_bad_values_are_refused(tmp_path):
    """``--memory-budget`` sizes the chunks (in whole trial blocks) when no ``--chunk-size`` is given; a
    budget that is not a positive byte count is one usage line, exit 2, nothing written."""
    from torchdpgmm.cli import _bytes, _sweep_spec, build_parser
    from torchdpgmm.sweep import chunk_size_for, resolve_block_sizes

    assert _bytes("512MiB") == 512 * 2 ** 20 and _bytes("4GB") == 4e9 and _bytes("2e9") == 2e9
    args = build_parser().parse_args(["sweep", "--mechanisms", "gaussian", "--epsilons", "1", "--trials", "400",
                                      "--memory-budget", "200MiB", "--mode", "as-published", "--out", str(tmp_path / "a")])
    spec = _sweep_spec(args)
    assert spec.chunk_size is None and spec.memory_budget == 200 * 2 ** 20
    small, small_block = chunk_size_for(spec, 1000, 5, 3), resolve_block_sizes(spec)[(1000, 5, 3)]
    args.memory_budget = 2 * 2 ** 30
    big_spec = _sweep_spec(args)
    big, big_block = chunk_size_for(big_spec, 1000, 5, 3), resolve_block_sizes(big_spec)[(1000, 5, 3)]
    assert small % small_block == 0 and big % big_block == 0 and big > small and big_block > small_block
    out = tmp_path / "bad"
    proc = subprocess.run([sys.executable, "-m", "torchdpgmm.cli", "sweep", "--memory-budget", "0", "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--memory-budget" in proc.stderr and not out.exists()


def test_sweep_without_a_bound_names_both_ways_out(tmp_path):
    """The default (sound) sweep without --clip-bound: one line naming --clip-bound and --mode as-published."""
    out = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-m", "torchdpgmm.cli", "sweep", "--mechanisms", "kl", "--trials", "2",
                           "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and not out.exists()
    line = [x for x in proc.stderr.splitlines() if "error" in x][-1]
    assert "--clip-bound" in line and "--mode as-published" in line


def _idx_training_folder(folder, n=600):
    """Tiny MNIST-layout IDX files: three classes of 28x28 uint8 images, one bright block each."""
    from torchdpgmm.data.idx import write_idx

    g = torch.Generator().manual_seed(0)
    y = (torch.arange(n) % 3).to(torch.uint8)
    imgs = (20 * torch.rand(n, 28, 28, generator=g)).to(torch.uint8)
    for k in range(3):
        imgs[y == k, 4 + 7 * k: 11 + 7 * k, 6:20] = 220
    folder.mkdir(parents=True, exist_ok=True)
    write_idx(folder / "train-images-idx3-ubyte.gz", imgs)
    write_idx(folder / "train-labels-idx1-ubyte.gz", y)
    return imgs, y


def test_synthesize_writes_the_release_and_synthetic_rows_from_an_idx_folder(tmp_path, capsys):
    import json

    imgs, y = _idx_training_folder(tmp_path / "idx")
    out = tmp_path / "rel"
    assert main(["synthesize", "--data", str(tmp_path / "idx"), "--classes", "0,1,2", "--epsilon", "4",
                 "--delta", "1e-5", "--n-components", "6", "--components-per-class", "2", "-n", "300",
                 "--seed", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "2 component(s) per class" in printed.out and "seed" in printed.err
    rel = json.loads((out / "release.json").read_text())
    assert rel["privacy"]["epsilon"] <= 4.0 * (1 + 1e-9) and rel["privacy"]["adjacency"] == "add-remove"
    assert {b["name"] for b in rel["privacy"]["blocks"]} >= {"pca-second_moment", "class-second-moments",
                                                             "cells-second-moments"}
    assert np.asarray(rel["mixture"]["means"]).shape == (3, 2, 6)
    assert np.asarray(rel["pca"]["components"]).shape == (6, 196)
    with open(out / "synthetic.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == [f"z{i}" for i in range(6)] + ["label"] and len(rows) == 301
    assert {r[-1] for r in rows[1:]} <= {"0", "1", "2"}
    # the released Bayes rule separates the three blocks: a check that the release learnt from the data
    from torchdpgmm.pipelines.class_mixture import ClassMixture
    from torchdpgmm.pipelines.dp_pca import lowfreq_dct

    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    mix = ClassMixture(*(t(rel["mixture"][k]) for k in ("weights", "comp_weights", "means", "covariances")))
    U = (lowfreq_dct(imgs.reshape(600, -1).double() / 255) - t(rel["pca"]["mean"])) @ t(rel["pca"]["components"]).T / 5.0
    U = U / U.norm(dim=1, keepdim=True).clamp_min(1.0)
    assert float((mix.predict(U) == y.long()).double().mean()) > 0.9


@pytest.mark.parametrize("args, match", [
    (["--classes", "0,1,2", "--epsilon", "-1"], "epsilon"),
    (["--classes", "0,0,2", "--epsilon", "1"], "twice"),
    (["--classes", "0,1,2", "--epsilon", "1", "-n", "0"], "-n"),
    (["--classes", "0,1,2", "--epsilon", "1", "--n-components", "500"], "--n-components"),
    (["--classes", "0,1,2", "--epsilon", "1", "--radius", "0"], "--radius"),
    (["--classes", "0,1,2", "--epsilon", "1", "-n", str(10 ** 8 + 1)], "-n must be <= 1e+08"),  # as `sample`
])
def test_synthesize_bad_input_one_line_and_nothing_written(tmp_path, capsys, args, match):
    _idx_training_folder(tmp_path / "idx", n=60)
    out = tmp_path / "rel"
    assert main(["synthesize", "--data", str(tmp_path / "idx"), "--delta", "1e-5", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0] and not out.exists()
    # public checks come before the data are read: the same error with a data path that does not exist
    assert main(["synthesize", "--data", str(tmp_path / "missing"), "--delta", "1e-5", *args, "--out", str(out)]) == 2
    assert match in capsys.readouterr().err


def test_synthesize_refuses_a_used_out_folder_and_a_wrong_width_without_printing_n(tmp_path, capsys):
    _idx_training_folder(tmp_path / "idx", n=60)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "old.csv").write_text("x\n")
    base = ["synthesize", "--classes", "0,1,2", "--epsilon", "1", "--delta", "1e-5"]
    assert main(base + ["--data", str(tmp_path / "idx"), "--out", str(tmp_path / "used")]) == 2
    assert "new or empty folder" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")  # refused before the data are read (a missing data path is not reached)
    assert main(base + ["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "afile" / "o")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(base + ["--data", str(tmp_path / "idx"), "-n", str(10 ** 13), "--out", str(tmp_path / "big")]) == 2
    assert "memory" in capsys.readouterr().err and not (tmp_path / "big").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left
    (tmp_path / "empty").mkdir()  # an empty folder is accepted and receives the release whole
    assert main(base + ["--data", str(tmp_path / "idx"), "--n-components", "4", "--out", str(tmp_path / "empty")]) == 0
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["release.json"]
    assert stat.S_IMODE((tmp_path / "empty").stat().st_mode) & 0o055 == 0o055
    capsys.readouterr()
    (tmp_path / "bad").mkdir()  # a truncated IDX file: one line that quotes no size (N * 784 bytes is private)
    header = bytes([0, 0, 8, 3, 0, 0, 0, 37, 0, 0, 0, 28, 0, 0, 0, 28])  # 37 images of 28x28 declared, 100 bytes given
    (tmp_path / "bad" / "train-images-idx3-ubyte").write_bytes(header + bytes(100))
    (tmp_path / "bad" / "train-labels-idx1-ubyte").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 37]) + bytes(37))
    assert main(base + ["--data", str(tmp_path / "bad"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.replace(str(tmp_path), "TMP")  # the temporary path may hold "37" (pytest-237)
    assert "not valid IDX" in err and "29008" not in err and "37" not in err
    np.savez(tmp_path / "t.npz", X=np.zeros((37, 10)), y=np.zeros(37, dtype=int))
    assert main(base + ["--data", str(tmp_path / "t.npz"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.replace(str(tmp_path), "TMP")
    assert "784" in err and "37" not in err and not (tmp_path / "o").exists()


def test_synthesize_interrupted_while_writing_leaves_nothing(tmp_path, monkeypatch, capsys):
    import torchdpgmm.datafile as datafile

    _idx_training_folder(tmp_path / "idx", n=60)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(datafile, "write_labeled_csv", interrupted)
    out = tmp_path / "o"
    assert main(["synthesize", "--data", str(tmp_path / "idx"), "--classes", "0,1,2", "--epsilon", "1",
                 "--delta", "1e-5", "--n-components", "4", "-n", "10", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # neither the output nor a temporary folder


def _release_json(path):
    import json

    return json.loads((path / "release.json").read_text())


def test_synthesize_reads_a_uint8_npz_as_the_idx_reader_does(tmp_path, capsys):
    """An NPZ of the same uint8 images as an IDX folder used to enter the pipeline as 0..255 against clips meant for
    [0, 1] (no warning). Now it is scaled as the IDX reader scales it: the same release, byte for byte, as the IDX
    folder and as a float NPZ divided by 255 by hand. With --bounds (the file's own units) nothing is rescaled."""
    imgs, y = _idx_training_folder(tmp_path / "idx", n=60)
    U = imgs.reshape(60, 784).numpy()
    np.savez(tmp_path / "u8.npz", X=U, y=y.numpy())
    np.savez(tmp_path / "f.npz", X=U.astype(np.float64) / 255.0, y=y.numpy())
    common = ["--classes", "0,1,2", "--epsilon", "2", "--delta", "1e-5", "--n-components", "4", "--seed", "3"]
    for name in ("idx", "u8.npz", "f.npz"):
        assert main(["synthesize", "--data", str(tmp_path / name), *common, "--out", str(tmp_path / f"o-{name}")]) == 0
    ref = (tmp_path / "o-f.npz" / "release.json").read_bytes()
    assert (tmp_path / "o-u8.npz" / "release.json").read_bytes() == ref
    assert (tmp_path / "o-idx" / "release.json").read_bytes() == ref
    np.savez(tmp_path / "u8t.npz", X=U[:, 300:305], y=y.numpy())
    np.savez(tmp_path / "ft.npz", X=U[:, 300:305].astype(np.float64), y=y.numpy())
    table = ["--classes", "0,1,2", "--epsilon", "2", "--delta", "1e-5", "--bounds", "0:255", "--seed", "3"]
    for name in ("u8t.npz", "ft.npz"):
        assert main(["synthesize", "--data", str(tmp_path / name), *table, "--out", str(tmp_path / f"b-{name}")]) == 0
    assert (tmp_path / "b-u8t.npz" / "release.json").read_bytes() == (tmp_path / "b-ft.npz" / "release.json").read_bytes()


def test_synthesize_image_transform_none_defaults_to_the_width_as_the_estimator_does(tmp_path, capsys):
    """--image-transform none without bounds used to default to n_components = 40 (refused after the data were read
    on a 5-column table, naming the Python parameter; on a wide table a different release than the API's). Now the
    estimator's rule: the table's width; the same release as DPSyntheticClassifier, bit for bit."""
    import warnings

    from torchdpgmm.estimator import DPSyntheticClassifier

    rng = np.random.default_rng(0)
    y = np.arange(90) % 3
    X = rng.random((90, 5)) * 0.3 + 0.2 * y[:, None]
    np.savez(tmp_path / "t.npz", X=X, y=y)
    assert main(["synthesize", "--data", str(tmp_path / "t.npz"), "--classes", "0,1,2", "--epsilon", "2", "--delta",
                 "1e-5", "--image-transform", "none", "--seed", "4", "--out", str(tmp_path / "o")]) == 0
    rel = _release_json(tmp_path / "o")
    assert rel["config"]["n_components"] == 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPSyntheticClassifier(2.0, 1e-5, classes=[0, 1, 2], image_transform="none", random_state=4).fit(X, y)
    assert est.release_.config.n_components == 5
    np.testing.assert_array_equal(np.asarray(rel["mixture"]["means"]), est.model_.means.numpy())
    np.testing.assert_array_equal(np.asarray(rel["pca"]["components"]), est.release_.pca.components.numpy())


def test_synthesize_refuses_what_the_width_forbids_before_reading_and_names_the_flag(tmp_path, capsys, monkeypatch):
    """The width is in the file's header (public schema): --n-components above it, --components-per-class above twice
    the dimension, dct14 on a table that is not 784 wide are refused before a record is read, naming the flag."""
    import torchdpgmm.datafile as datafile

    _idx_training_folder(tmp_path / "idx", n=30)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "t.npz", X=rng.random((30, 5)), y=np.arange(30) % 3)
    with open(tmp_path / "t.csv", "w") as fh:
        fh.write("a,b,c,label\n" + "".join(f"{i / 30},0.5,0.25,{i % 3}\n" for i in range(30)))

    def no_read(*args, **kwargs):
        raise AssertionError("the data were read")

    monkeypatch.setattr(datafile, "read_labeled_images", no_read)
    base = ["synthesize", "--classes", "0,1,2", "--epsilon", "1", "--delta", "1e-5"]
    for data, extra, match in (
            ("t.npz", ["--image-transform", "none", "--n-components", "6"], "--n-components must lie in [1, 5]"),
            ("t.npz", ["--image-transform", "none", "--components-per-class", "11"], "--components-per-class must be <= 2 x d = 10"),
            ("t.csv", ["--label-column", "label", "--image-transform", "none", "--components-per-class", "7"],
             "--components-per-class must be <= 2 x d = 6"),
            ("t.csv", ["--label-column", "label", "--bounds", "0:1", "--n-components", "4"], "--n-components must lie in [1, 3]"),
            ("idx", ["--image-transform", "none", "--n-components", "785"], "--n-components must lie in [1, 784]"),
            ("t.npz", [], "784 columns")):
        out = tmp_path / "o"
        assert main([*base, "--data", str(tmp_path / data), *extra, "--out", str(out)]) == 2, (data, extra)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0] and "n_components" not in err[0], err
        assert not out.exists()


def test_an_idx_folder_with_bounds_is_read_in_the_files_units(tmp_path):
    """With public --bounds the pixels are in the file's own units (0 to 255 for uint8), as an NPZ's are; the IDX
    reader divided by 255 regardless, so --bounds 0:255 squeezed the images into [0, 1/255] of the unit box."""
    from torchdpgmm.datafile import read_labeled_images

    _idx_training_folder(tmp_path / "idx", n=50)
    classes = [str(k) for k in range(10)]
    raw = read_labeled_images(tmp_path / "idx", classes, uint8_pixels=False).X
    scaled = read_labeled_images(tmp_path / "idx", classes).X
    assert float(raw.max()) > 1.0 and torch.equal(raw / 255.0, scaled)
