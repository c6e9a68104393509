"""Smoke run of scripts/gpu_tabular.sh (the tabular study on a lent GPU, one process per table) on the CPU: one table,
one epsilon, one draw. Checks what a lease brings back: the table's JSON in the tarball and its line in timings.txt."""
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("flock") is None or shutil.which("bash") is None, reason="needs bash and flock")
def test_gpu_tabular_script_on_cpu(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "W": str(tmp_path / "work"), "TABLES": "wine",
           "DRAWS": "1", "EPSILONS": "1", "DEVICE": "cpu", "LANES": "1", "PYTHON": sys.executable,
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_tabular.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wine exit 0 after" in done.stdout
    with tarfile.open(tmp_path / "out" / "tabular-cuda.tar.gz") as tar:
        d = json.load(tar.extractfile("./wine/tabular.json"))
        timings = tar.extractfile("./timings.txt").read().decode()
    assert d["config"]["device"] == "cpu" and d["config"]["epsilons"] == [1.0] and d["config"]["draws"] == 1
    assert timings.startswith("wine exit 0 after")
    assert any(r["method"] == "DPGaussianMixture[default=auto]" and r["accuracy"] is not None for r in d["rows"])


@pytest.mark.skipif(shutil.which("flock") is None or shutil.which("bash") is None, reason="needs bash and flock")
def test_gpu_tabular_draws_in_parts_merge_into_the_study_rows(tmp_path):
    """``DRAW_PARTS=2``: wine's two draws at eps 1 run as two processes (``--first-draw`` 0 and 1). Merged by
    scripts/tabular_device_compare.py they are the study's own rows for those draws: on the CPU (the same noise
    stream) every accuracy equals the committed study JSON's, and the non-private rows come once."""
    import importlib.util

    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "W": str(tmp_path / "work"), "TABLES": "wine",
           "DRAWS": "2", "DRAW_PARTS": "2", "EPSILONS": "1", "DEVICE": "cpu", "LANES": "2",
           "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_tabular.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wine.d0 exit 0 after" in done.stdout and "wine.d1 exit 0 after" in done.stdout
    run = tmp_path / "run"
    run.mkdir()
    with tarfile.open(tmp_path / "out" / "tabular-cuda.tar.gz") as tar:
        tar.extractall(run, filter="data")
    spec = importlib.util.spec_from_file_location("tdc", ROOT / "scripts" / "tabular_device_compare.py")
    tdc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tdc)
    merged = tdc.merge_runs([run], ["HEAD"])
    assert sorted(merged["tables"]) == ["wine.d0", "wine.d1"]
    rows = merged["rows"]
    assert {r["draw"] for r in rows if r["method"].startswith("DP")} == {0, 1}
    assert sorted(r["method"] for r in rows if r["privacy"] == "none") == ["non-private HGB", "non-private QDA"]
    committed = {tdc._row_key(r): r["accuracy"] for r in
                 json.loads((ROOT / "docs" / "results" / "tabular" / "tabular.json").read_text())["rows"]}
    assert all(committed[tdc._row_key(r)] == r["accuracy"] for r in rows)


def test_the_shell_scripts_answer_help_without_running(tmp_path):
    """--help prints the header and runs nothing (it had launched the study, run the checks, or been taken as the
    output folder)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for script in ("gpu_tabular.sh", "gpu_checks.sh", "figures_synthetic.sh"):
        r = subprocess.run(["bash", str(root / "scripts" / script), "--help"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and len(r.stdout.splitlines()) >= 2, (script, r.stderr)
        assert not list(tmp_path.iterdir()), script  # nothing written (no gpu-out/, no results/)
