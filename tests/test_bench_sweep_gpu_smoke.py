"""Smoke test of benchmarks/bench_sweep_gpu.py --quick on CPU (two tiny CLI sweeps in subprocesses, side by side with
``--jobs 2``); no timing assertions, only that the legs ran, the JSON names the machine and the rendered block shows
every leg."""
import json


def test_bench_sweep_gpu_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_sweep_gpu.py")
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--jobs", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["quick"] is True and res["config"]["jobs"] == 2 and res["config"]["epsilons"] == "0.1,0.2,0.5,1,2,5,10"
    assert res["machine"]["cpu_count"] >= 1 and res["machine"]["torch"]
    legs = {lg["name"]: lg for lg in res["legs"]}
    assert set(legs) == {"cpu", "cpu_compare"}
    for lg, trials in ((legs["cpu"], 20), (legs["cpu_compare"], 8)):
        assert lg["returncode"] == 0 and lg["trials"] == trials and lg["wall_s"] > 0
        assert lg["rows"] == 7 * trials and lg["block_sizes"] == {"N40_K2_d2": trials}
        assert lg["command"].startswith("torchdpgmm sweep --mechanisms kl") and "--out" not in lg["command"]
    assert res["met"]["gpu_1e5"] is False and res["gpu_over_cpu_per_trial"] is None
    table = mod.render(res)
    assert table.count("\n| ") == 1 + 2 + 0 and "| 20 | 1 | csv | 20 |" in table
