"""Smoke run of benchmarks/bench_jacobi.py (the PSD repair's Jacobi orders): one dimension, one repeat, the script's
``main`` in this process."""
import json

import pytest


# its release count fits DPGaussianMixture(random_state=0), which warns that the noise is seeded (as in a fresh process)
@pytest.mark.filterwarnings("ignore::torchdpgmm.privacy.record.SeededNoiseWarning")
def test_bench_jacobi_smoke(tmp_path, load_script):
    mod = load_script("benchmarks/bench_jacobi.py")
    out = tmp_path / "j.json"
    assert mod.main(["--dims", "5", "--repeats", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (row,) = res["rows"]
    assert row["d"] == 5 and row["default_order"] == "parallel" and row["parallel_ops"] < row["cyclic_ops"]
    assert max(row["cyclic_max_eigenvalue_error"], row["parallel_max_eigenvalue_error"]) < 1e-12
    assert row["eigh_seconds_one"] > 0 and row["eigh_seconds_10000"] > 0  # the baseline the release calls on a CPU
