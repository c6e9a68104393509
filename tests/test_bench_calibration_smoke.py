"""Smoke test of benchmarks/bench_calibration.py (two epsilons, one repeat; no timing assertions)."""
import json


def test_bench_calibration_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_calibration.py")
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["quick"] and data["epsilons"] == [0.37, 2.9]
    assert set(data["zcdp_rho_median_seconds"]) == {"tensor path", "float path"}
    assert data["largest_relative_difference"] < 1e-12
    assert set(data["fit_at_new_epsilon_median_seconds"]) == {"tensor path", "float path"}
