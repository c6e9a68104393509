"""Smoke test of benchmarks/bench_fig2.py (no timing assertions)."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_fig2_quick(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_fig2", ROOT / "benchmarks" / "bench_fig2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["mechanisms"] == ["kl", "colored", "gaussian", "laplace", "r1smg"]
    assert len(res["mean_kl"]["kl"]) == 2 and res["a_sweep_seconds"] > 0
    assert len(res["target_exact_below_as_published"]["ratio_exact_over_as_published"]) == 2
    assert set(res["target_order_at_eps1"]["mean_kl"]) == {"kl", "colored", "gaussian", "laplace"}
