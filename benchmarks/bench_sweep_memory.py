"""Benchmark of issue 27 item 8: a sweep's memory does not depend on its number of trials.

Runs the same sweep -- the proposed KL mechanism of Liu, Scaglione & Peisert (2025) as published, the 7
epsilons of Fig. 2, N = 1000, K = 5, d = 3, chunks sized by the default 1 GiB memory budget -- with a small
and a large number of trials (default 10^3 and 10^5), each in a fresh subprocess, and records each run's
peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss`` read by the child at its end) and wall
time. Target: the large run's peak RSS within 10% of the small run's, and the large run in under 10
minutes on 2 cores.

Writes JSON (default ``benchmarks/results/bench_sweep_memory.json``); the machine load average is recorded
because other jobs on the two cores inflate the timings.

    python benchmarks/bench_sweep_memory.py [--small 1000] [--large 100000] [--threads 2] [--out PATH] [--quick]

``--quick`` (the smoke test) runs 4 and 40 trials of a small configuration (N = 40, K = 2, d = 2).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(trials: int, threads: int, n: int, k: int, d: int, out: str) -> dict:
    """One sweep in this process; returns its wall time, peak RSS and the number of result rows."""
    import resource

    import torch

    from torchdpgmm.experiments.synthetic import EPS_GRID
    from torchdpgmm.sweep import SweepSpec, num_chunks, run_sweep

    torch.set_num_threads(threads)
    spec = SweepSpec(mechanisms=["kl"], epsilons=list(EPS_GRID), Ns=[n], Ks=[k], ds=[d], trials=trials,
                     chunk_size=None, mode="as-published")
    t0 = time.perf_counter()
    run_sweep(spec, out, progress=False)
    wall = time.perf_counter() - t0
    with open(Path(out) / "results.csv") as fh:
        rows = sum(1 for _ in fh) - 1
    return {"trials": trials, "seconds": wall, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rows": rows, "chunks": num_chunks(spec), "epsilons": list(EPS_GRID)}


def _run_child(trials: int, threads: int, n: int, k: int, d: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", str(trials), "--threads", str(threads), "--n", str(n),
               "--k", str(k), "--d", str(d), "--out", str(Path(tmp) / "sweep")]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=1000)
    p.add_argument("--large", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--d", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_sweep_memory.json")
    p.add_argument("--quick", action="store_true", help="smoke run: 4 and 40 trials, N=40, K=2, d=2")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child is not None:
        print(json.dumps(child(a.child, a.threads, a.n, a.k, a.d, str(a.out))))
        return 0
    if a.quick:
        a.small, a.large, a.n, a.k, a.d = 4, 40, 40, 2, 2
    small = _run_child(a.small, a.threads, a.n, a.k, a.d)
    large = _run_child(a.large, a.threads, a.n, a.k, a.d)
    ratio = large["peak_rss_mib"] / small["peak_rss_mib"]
    res = {
        "config": {"mechanism": "kl", "mode": "as-published", "N": a.n, "K": a.k, "d": a.d,
                   "memory_budget": "default (1 GiB)", "threads": a.threads, "quick": a.quick},
        "small": small, "large": large,
        "peak_rss_ratio_large_over_small": ratio,
        "target_rss_within_10_percent": bool(ratio <= 1.10),
        "target_large_under_600_s": bool(large["seconds"] < 600),
        "machine": {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()), "python": platform.python_version()},
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("peak_rss_ratio_large_over_small", "target_rss_within_10_percent",
                                          "target_large_under_600_s")}))
    print(f"small: {small['trials']} trials {small['seconds']:.1f} s {small['peak_rss_mib']:.0f} MiB; "
          f"large: {large['trials']} trials {large['seconds']:.1f} s {large['peak_rss_mib']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
