"""Smoke run of benchmarks/bench_jacobi.py (the PSD repair's Jacobi orders): one dimension, one repeat."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_jacobi_smoke(tmp_path):
    out = tmp_path / "j.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_jacobi.py"), "--dims", "5", "--repeats",
                           "1", "--out", str(out)], cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["d"] == 5 and row["default_order"] == "parallel" and row["parallel_ops"] < row["cyclic_ops"]
    assert max(row["cyclic_max_eigenvalue_error"], row["parallel_max_eigenvalue_error"]) < 1e-12
    assert row["eigh_seconds_one"] > 0 and row["eigh_seconds_10000"] > 0  # the baseline the release calls on a CPU
