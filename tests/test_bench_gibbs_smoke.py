"""Smoke run of benchmarks/bench_gibbs.py (the Gibbs fallback's ops and seconds): this tree only, one repeat, a small
model (``--model``; the leg still runs in its own fresh process, as the benchmark runs it), the script's ``main`` in
this process."""
import json


def test_bench_gibbs_smoke(tmp_path, load_script):
    mod = load_script("benchmarks/bench_gibbs.py")
    out = tmp_path / "g.json"
    assert mod.main(["--repeats", "1", "--model", "400,16,4", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == "400 rows x 16 columns, 4 classes" and res["repeats"] == 1
    (leg,) = res["legs"].values()
    assert leg["ops_2_sweeps"] > 0 and leg["strictly_inside"] and leg["median_seconds"] > 0
