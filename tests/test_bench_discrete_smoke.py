"""Smoke test of benchmarks/bench_discrete.py (tiny sizes; no timing assertions)."""
import json


def test_bench_discrete_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_discrete.py")
    out = tmp_path / "b.json"
    mod.main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["meta"]["threads"] == 1 and data["meta"]["device"] == "cpu"
    assert {(r["sampler"], r["draws"]) for r in data["timings"]} == {
        ("gaussian", 200), ("gaussian", 2000), ("laplace", 200), ("laplace", 2000)}
    for r in data["timings"]:
        assert r["fixed_work_s"] > 0
    for r in data["dispatch_counts"]:
        assert r["fixed_work"]["syncs"] == 0 and r["fixed_work"]["ops"] > 0
        if data["meta"]["baseline"] is not None:  # git available: the rejection loops synchronise
            assert r["rejection_loops"]["syncs"] > 0
