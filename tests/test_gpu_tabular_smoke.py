"""Smoke run of scripts/gpu_tabular.sh (the tabular study on a lent GPU, one process per table) on the CPU: one table,
one epsilon, one draw. Checks what a lease brings back: the table's JSON in the tarball and its line in timings.txt.

The two runs of the script (one process for the table; its draws in two parts) are independent: a module fixture
runs them side by side (two at a time, as tests/test_script_args.py does), each test checks its own."""
import json
import shutil
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS = pytest.mark.skipif(shutil.which("flock") is None or shutil.which("bash") is None, reason="needs bash and flock")

#: the environment of each run of the script (OUT and W: folders of the run)
RUNS = {
    "one": {"TABLES": "wine", "DRAWS": "1", "EPSILONS": "1", "DEVICE": "cpu", "LANES": "1"},
    "parts": {"TABLES": "wine", "DRAWS": "2", "DRAW_PARTS": "2", "EPSILONS": "1", "DEVICE": "cpu", "LANES": "2"},
}


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory):
    """``{name: (its folder, the finished process)}`` for each of RUNS, run side by side."""
    def run(name):
        tmp = tmp_path_factory.mktemp(f"gpu_tabular_{name}")
        env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp / "out"), "W": str(tmp / "work"), "PYTHON": sys.executable,
               "OMP_NUM_THREADS": "1", **RUNS[name]}
        return tmp, subprocess.run(["bash", str(ROOT / "scripts" / "gpu_tabular.sh")], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(zip(RUNS, ex.map(run, RUNS)))


@NEEDS
def test_gpu_tabular_script_on_cpu(script_runs):
    tmp_path, done = script_runs["one"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wine exit 0 after" in done.stdout
    with tarfile.open(tmp_path / "out" / "tabular-cuda.tar.gz") as tar:
        d = json.load(tar.extractfile("./wine/tabular.json"))
        timings = tar.extractfile("./timings.txt").read().decode()
    assert d["config"]["device"] == "cpu" and d["config"]["epsilons"] == [1.0] and d["config"]["draws"] == 1
    assert timings.startswith("wine exit 0 after")
    assert any(r["method"] == "DPGaussianMixture[default=auto]" and r["accuracy"] is not None for r in d["rows"])


@NEEDS
def test_gpu_tabular_draws_in_parts_merge_into_the_study_rows(script_runs):
    """``DRAW_PARTS=2``: wine's two draws at eps 1 run as two processes (``--first-draw`` 0 and 1). Merged by
    scripts/tabular_device_compare.py they are the study's own rows for those draws: on the CPU (the same noise
    stream) every accuracy equals the committed study JSON's, and the non-private rows come once."""
    import importlib.util

    tmp_path, done = script_runs["parts"]
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
