"""Smoke test of benchmarks/bench_sweep_startup.py --quick on CPU (64-trial sweeps in subprocesses, this tree as its
own baseline: a warm-up run and a timed run of each tree, the two trees' runs side by side with ``--jobs 2``); no
timing is asserted."""
from __future__ import annotations

import json


def test_bench_sweep_startup_quick(tmp_path, load_script):
    mod = load_script("benchmarks/bench_sweep_startup.py")
    out = tmp_path / "b.json"
    res = mod.main(["--quick", "--warmup", "1", "--jobs", "2", "--baseline-tree", str(mod.ROOT), "--out", str(out)])
    d = json.loads(out.read_text())
    assert d == json.loads(json.dumps(res)) and d["trials"] == 64 and d["rounds"] == 1 and d["jobs"] == 2
    assert d["warmup_runs_per_tree"] == 1 and set(d["bytecode"]) == {"PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"}
    assert [len(v) for v in d["seconds"].values()] == [1, 1] and all(v > 0 for v in d["min_seconds"].values())
