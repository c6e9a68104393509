"""Smoke test of benchmarks/bench_fig2.py (no timing assertions)."""
import json

def test_bench_fig2_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_fig2.py")
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["mechanisms"] == ["kl", "colored", "gaussian", "laplace", "r1smg"]
    assert len(res["mean_kl"]["kl"]) == 2 and res["a_sweep_seconds"] > 0
    assert len(res["target_exact_below_as_published"]["ratio_exact_over_as_published"]) == 2
    assert set(res["target_order_at_eps1"]["mean_kl"]) == {"kl", "colored", "gaussian", "laplace"}
