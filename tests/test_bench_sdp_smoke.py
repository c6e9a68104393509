"""Smoke test of benchmarks/bench_sdp.py (tiny sizes; no timing assertions)."""
import json


def test_bench_sdp_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_sdp.py")
    out = tmp_path / "b.json"
    mod.main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["meta"]["threads"] == 1
    c = data["c_per_problem"]
    assert [(r["d"], r["N"]) for r in c] == [(2, 60), (3, 80)]
    for r in c:
        assert r["rel_diff_dual_vs_lmi"] < 1e-5 and r["rel_diff_cvxpylayers_vs_lmi"] < 1e-5
    b = data["b_literal_per_trial"]
    assert b["max_rel_diff_mean_noise_cov"] < 1e-3
    assert b["literal_per_trial_s"] > 0 and b["ours_per_trial_s"] > 0


def test_bench_sdp_kl_speed_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_sdp.py")
    out = tmp_path / "b.json"
    mod.main(["--quick", "--kl-speed", "--out", str(out)])
    r = json.loads(out.read_text())["kl_speed"]
    assert r["max_gap"]["barrier"] <= 1e-6
    if r["baseline_ref"] is not None:   # git available: the baseline (main) solves the same problems
        assert r["max_gap"]["baseline"] <= 1e-6 and r["max_rel_diff_opt"] < 2e-6
    assert r["max_violation"] <= 1 + 1e-9
    assert r["barrier_per_trial_s"] > 0 and r["release_kl_barrier_per_trial_s"] > 0
    assert r["release_kl_blocks_barrier_per_trial_s"] > 0
    for row in r["other_sizes"]:
        assert row["max_gap"]["barrier"] <= 1e-6 and row["barrier_per_trial_s"] > 0
    assert "loadavg_start" in r["meta"]
