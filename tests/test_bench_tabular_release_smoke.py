"""Smoke test of benchmarks/bench_tabular_release.py (no timing assertions)."""
import json


def test_bench_tabular_release_quick(tmp_path, load_script):
    from torchdpgmm.estimator import DPGaussianMixture

    mod = load_script("benchmarks/bench_tabular_release.py")
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["n_rows"] == 2000 and res["n_features"] == 16 and res["repeats"] == 1
    assert res["covariance_type"] == DPGaussianMixture().covariance_type
    assert len(res["release_seconds"]) == len(res["baseline_seconds"]) == 1
    assert res["ratio_to_baseline"] > 0 and res["target"]["met"] is None
    assert res["privacy_epsilon"] == 1.0 and len(res["environment"]["load_average_start"]) == 3
