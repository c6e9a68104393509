"""Benchmark: the issue-36 sweep end to end, this tree against a baseline tree, on one machine in one run.

Issue 36's 10^5-trial GPU leg is bound by one command's fixed start-up (docs/gpu.md), and two GPU machines of the
same kind differed by seconds on it (benchmarks/results/bench_sweep_gpu.json against its previous version), so a
start-up change is only measured like for like: each round runs the same ``torchdpgmm sweep`` command in a fresh
process with this tree and with the baseline tree (``git archive REV torchdpgmm`` unpacked into a temporary folder,
or ``--baseline-tree`` for a folder holding a ``torchdpgmm`` package, imported through ``PYTHONPATH``), alternating
which goes first; the 1-minute load average is recorded before and after.

    PYTHONPATH=. python benchmarks/bench_sweep_startup.py --baseline 40db43c --device cuda \\
        --out benchmarks/results/bench_sweep_startup_h100.json
    # on a machine without git: git archive REV torchdpgmm | tar -x -C .ab/base here, carry .ab, then
    python benchmarks/bench_sweep_startup.py --baseline-tree .ab/base --baseline-label REV --device cuda
    python benchmarks/bench_sweep_startup.py --quick --baseline-tree .      # smoke run on CPU (tests)

``--jobs 2`` runs the two trees' runs of a warm-up or a round side by side instead of one after the other (the
default, 1, is the measurement): for a smoke run only (the test's), whose seconds then share the cores.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts; run_legs)

EPSILONS = "0.1,0.2,0.5,1,2,5,10"


def command(trials: int, device: str, out: Path) -> list[str]:
    """The issue-36 sweep (docs/gpu.md) at ``trials``, progress bar off."""
    return ["-m", "torchdpgmm.cli", "sweep", "--mechanisms", "kl", "--epsilons", EPSILONS, "--clip-bound", "30",
            "--trials", str(trials), "--device", device, "--no-progress", "--out", str(out)]


def run_once(tree: Path, trials: int, device: str, scratch: Path) -> float:
    """Wall seconds of one sweep in a fresh process importing ``torchdpgmm`` from ``tree``."""
    out = Path(tempfile.mkdtemp(dir=scratch))
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *command(trials, device, out / "sw")], env=env, cwd=tree,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def baseline_tree(rev: str, into: Path) -> Path:
    """``git archive REV torchdpgmm`` unpacked under ``into``: benchmarks/bench_startup.py's, loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_startup", ROOT / "benchmarks" / "bench_startup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._baseline_tree(rev, into)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=None, help="git revision to compare with")
    ap.add_argument("--baseline-tree", type=Path, default=None, help="a folder holding the baseline torchdpgmm")
    ap.add_argument("--baseline-label", default=None, help="what the baseline tree is (a revision), for the JSON")
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed runs of each tree first (bytecode written, caches filled: an installed package's "
                         "state; where site-packages is read-only, set PYTHONPYCACHEPREFIX)")
    ap.add_argument("--quick", action="store_true", help="smoke run on CPU: 64 trials, 1 round")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at a time (default 1, the measurement; 2 only for a smoke run: the seconds then share "
                         "the cores)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if (a.baseline is None) == (a.baseline_tree is None):
        ap.error("give one of --baseline REV and --baseline-tree PATH")
    if a.rounds < 1 or a.warmup < 0 or a.jobs < 1:
        ap.error("--rounds and --jobs must be >= 1 and --warmup >= 0")
    if a.quick:
        a.trials, a.device, a.rounds = 64, "cpu", 1
    import torch

    device_name = torch.cuda.get_device_name() if a.device == "cuda" else f"{platform.machine()}, {os.cpu_count()} CPUs"
    times: dict[str, list[float]] = {"this tree": [], "baseline": []}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        base = a.baseline_tree.resolve() if a.baseline_tree else baseline_tree(a.baseline, Path(tmp))
        trees = {"this tree": ROOT, "baseline": base}

        def run(name: str, rnd: int | None = None):
            def timed() -> float:
                secs = run_once(trees[name], a.trials, a.device, Path(tmp))
                if rnd is not None:
                    print(f"round {rnd + 1}: {name} {secs:.2f} s", flush=True)
                return secs
            return timed

        for _ in range(a.warmup):
            _args.run_legs([run(name) for name in trees], a.jobs)
        for r in range(a.rounds):
            order = ("this tree", "baseline") if r % 2 == 0 else ("baseline", "this tree")
            for name, secs in zip(order, _args.run_legs([run(name, r) for name in order], a.jobs)):
                times[name].append(secs)
    payload = {
        "benchmark": "bench_sweep_startup", "script": "benchmarks/bench_sweep_startup.py",
        "command": "torchdpgmm " + " ".join(command(a.trials, a.device, Path("OUT"))[2:]),
        "baseline": a.baseline or str(a.baseline_tree), "baseline_label": a.baseline_label or a.baseline, "device": device_name, "torch": torch.__version__,
        "python": platform.python_version(), "trials": a.trials, "rounds": a.rounds, "warmup_runs_per_tree": a.warmup,
        "jobs": a.jobs,
        "bytecode": {k: os.environ.get(k) for k in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}, "quick": a.quick,
        "date": time.strftime("%Y-%m-%d"), "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
        "seconds": times, "median_seconds": {k: statistics.median(v) for k, v in times.items()},
        "min_seconds": {k: min(v) for k, v in times.items()},
    }
    payload["median_saved_seconds"] = payload["median_seconds"]["baseline"] - payload["median_seconds"]["this tree"]
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        from torchdpgmm._provenance import environment as _environment
        payload["provenance"] = _environment()  # commit (+dirty), versions, machine
        a.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(json.dumps(payload["median_seconds"]))
    return payload


if __name__ == "__main__":
    main()
