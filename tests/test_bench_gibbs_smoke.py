"""Smoke run of benchmarks/bench_gibbs.py (the Gibbs fallback's ops and seconds): this tree only, one repeat."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_gibbs_smoke(tmp_path):
    out = tmp_path / "g.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gibbs.py"), "--repeats", "1", "--out",
                           str(out)], cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    (leg,) = json.loads(out.read_text())["legs"].values()
    assert leg["ops_2_sweeps"] > 0 and leg["strictly_inside"] and leg["median_seconds"] > 0
