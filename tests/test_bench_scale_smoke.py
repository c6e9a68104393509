"""Smoke test of benchmarks/bench_scale.py (no timing assertions). ``--jobs 2``: its four fresh-process legs (two
sweeps, two CLI commands) run two at a time."""
import json

def test_bench_scale_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_scale.py")
    out = tmp_path / "s.json"
    assert mod.main(["--quick", "--threads", "1", "--jobs", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["jobs"] == 2
    assert [r["trials"] for r in res["sweeps"]] == [4, 8]
    assert all(r["peak_rss_bytes"] > 0 and r["wall_s"] > 0 for r in res["sweeps"])
    assert set(res["per_mechanism"]["ratio_to_generate_and_fit"]) == {"gaussian", "laplace"}
    assert out.with_suffix(".png").stat().st_size > 0
    cli = res["cli_sweeps"]
    assert [c["trials"] for c in cli] == [8, 8] and all(c["wall_s"] > 0 and c["peak_rss_bytes"] > 0 for c in cli)
    assert "--mode as-published" in cli[0]["command"] and "--clip-bound" in cli[1]["command"]
