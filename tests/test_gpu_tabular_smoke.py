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
