"""Smoke test of benchmarks/bench_sweep_memory.py --quick (two small sweeps in subprocesses, side by side with
``--jobs 2``; no timing or memory assertions beyond the fields being there)."""
import json


def test_bench_sweep_memory_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_sweep_memory.py")
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--jobs", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["mechanism"] == "kl" and res["config"]["quick"] is True and res["config"]["jobs"] == 2
    assert (res["small"]["trials"], res["large"]["trials"]) == (4, 40)
    assert res["large"]["rows"] == 7 * 40 and res["small"]["rows"] == 7 * 4   # 7 epsilons x trials
    assert res["small"]["peak_rss_mib"] > 0 and res["peak_rss_ratio_large_over_small"] > 0
    # the compared figure counts the worker processes (driver + workers x largest worker)
    assert res["config"]["workers"] == res["large"]["workers"] == 2
    assert res["large"]["peak_rss_mib"] >= res["large"]["peak_rss_mib_driver"] + 2 * res["large"]["peak_rss_mib_largest_worker"] - 1e-9
    assert res["speed_before_after"] is None   # --quick skips the baseline comparison
