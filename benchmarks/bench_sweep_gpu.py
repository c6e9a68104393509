"""Benchmark of issue 36: the KL sweep end to end on a GPU, and on the same machine's CPU cores for the ratio.

The issue's sweep: ``torchdpgmm sweep --mechanisms kl --epsilons 0.1,0.2,0.5,1,2,5,10 --clip-bound 30`` (sound
mode, N = 1000, K = 5, d = 3, everything else at its default: the automatic block size, the default memory
budget), 10^5 trials, run as the command line in a fresh process and timed from start to exit (imports,
data, releases, KL, files, summary and figure included). Legs, one after the other in one run:

* ``--device`` (default cuda) with ``--trials`` (default 100000);
* the same device with ``--large-trials`` (default 1000000; 0 skips it), with ``--format parquet`` (a CSV of
  7 x 10^6 rows is the 300-MB file item 4 of the issue replaces);
* the machine's CPUs with ``--cpu-trials`` (default: ``--trials``; 0 skips it): ``--device cpu --workers C``,
  one worker process per core (``--cpu-workers``, default ``os.cpu_count()``), as the issue's "16 CPU
  workers" row.

With ``--device cpu`` only the first leg runs, on the CPUs (``--workers`` = ``--cpu-workers``): the 2-core
figure of the issue. Writes JSON (default ``benchmarks/results/bench_sweep_gpu.json``, or
``bench_sweep_cpu.json`` for ``--device cpu``) naming the device (``torch.cuda.get_device_name``), torch's
version, the CPU count, the load average, each leg's wall time, block sizes (from its ``sweep.json``) and
rows, the GPU/CPU ratio and the issue's targets (<= 5 s at 10^5 trials and <= 40 s at 10^6 on one H100,
>= 10x the same machine's CPU cores; <= 175 s on 2 CPU cores). Timings are not asserted anywhere.

    python benchmarks/bench_sweep_gpu.py [--device cuda] [--trials 100000] [--large-trials 1000000]
        [--cpu-trials N] [--cpu-workers C] [--out PATH] [--quick]

``--quick`` (the smoke test, on CPU): N = 40, K = 2, d = 2, 20 trials on ``--device`` (cpu unless given),
8 on the CPUs with 1 worker, no large leg. ``--jobs J`` runs the legs J at a time instead of one after the other (the
default, 1, is the measurement): for a smoke run only (the test runs ``--quick --jobs 2``), whose wall times then
share the machine.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)

EPSILONS = "0.1,0.2,0.5,1,2,5,10"
TARGETS = {"gpu_1e5_seconds": 5.0, "gpu_1e6_seconds": 40.0, "gpu_over_cpu": 10.0, "cpu2_1e5_seconds": 175.0}


def _command(device: str, trials: int, out: Path, *, workers: int = 1, fmt: str = "csv", small: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "torchdpgmm.cli", "sweep", "--mechanisms", "kl", "--epsilons", EPSILONS,
           "--clip-bound", "30", "--trials", str(trials), "--device", device, "--no-progress", "--out", str(out)]
    if small:
        cmd += ["--N", "40", "--K", "2", "--d", "2"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    if fmt != "csv":
        cmd += ["--format", fmt]
    return cmd


def leg(name: str, device: str, trials: int, *, workers: int = 1, fmt: str = "csv", small: bool = False,
        timeout: float | None = None) -> dict:
    """One end-to-end CLI sweep in a fresh process; its wall time, exit status, block sizes and rows."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        cmd = _command(device, trials, out, workers=workers, fmt=fmt, small=small)
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        load = list(os.getloadavg())
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
            rc, err = r.returncode, r.stderr.strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            rc, err = None, [f"timed out after {timeout} s"]
        wall = time.perf_counter() - t0
        res = {"name": name, "device": device, "trials": trials, "workers": workers, "format": fmt,
               "command": "torchdpgmm " + " ".join(a for i, a in enumerate(cmd[3:], 3)
                                                   if "--out" not in (a, cmd[i - 1])),
               "returncode": rc, "wall_s": wall,
               "loadavg_before": load, "loadavg_after": list(os.getloadavg())}
        if rc == 0:
            manifest = json.loads((out / "sweep.json").read_text())
            summary = json.loads((out / "summary.json").read_text())
            res.update(block_sizes=manifest.get("block_sizes"), chunks=len(list((out / "chunks").iterdir())),
                       rows=sum(p["trials"] for p in summary["points"]),
                       results_bytes=(out / f"results.{fmt}").stat().st_size,
                       mean_kl={str(p["epsilon"]): p["mean"] for p in summary["points"]})
        else:
            res["stderr_tail"] = err
    return res


def device_info(device: str) -> dict:
    import torch

    info = {"torch": torch.__version__, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}
    if device.startswith("cuda") and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        info.update(device_name=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                    device_memory_gib=total / 2 ** 30, device_free_gib_at_start=free / 2 ** 30)
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cuda (default) or cpu")
    p.add_argument("--trials", type=_args.whole(1), default=100_000)
    p.add_argument("--large-trials", type=_args.whole(0), default=1_000_000, help="0 skips the large leg")
    p.add_argument("--cpu-trials", type=_args.whole(0), default=None,
                   help="trials of the CPU leg (default --trials; 0 skips)")
    p.add_argument("--cpu-workers", type=_args.whole(1), default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=_args.positive_float, default=None,
                   help="seconds per leg before it is recorded as timed out")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--quick", action="store_true", help="smoke run on CPU: tiny sizes, no large leg")
    p.add_argument("--jobs", type=_args.whole(1), default=1,
                   help="legs run at a time (default 1, the measurement; more only for a smoke run)")
    p.add_argument("--derive", type=Path, default=None, metavar="JSON",
                   help="only add this version's derived fields to a JSON written earlier, then exit")
    a = p.parse_args(argv)
    if a.derive is not None:
        _args.check_in(p, a.derive, "--derive")
        _args.check_out(p, a.derive, "--derive")
        derive(a.derive)
        return 0
    _args.check_quick_out(p, a.quick, a.out)
    device = a.device or ("cpu" if a.quick else "cuda")
    _args.check_device(p, device)
    on_gpu = device.startswith("cuda")
    out = a.out or ROOT / "benchmarks" / "results" / ("bench_sweep_gpu.json" if on_gpu else "bench_sweep_cpu.json")
    _args.check_out(p, out)
    if a.quick:
        a.trials, a.large_trials, a.cpu_trials, a.cpu_workers = 20, 0, 8, 1
    cpu_trials = a.trials if a.cpu_trials is None else a.cpu_trials
    planned = []  # the legs, each a call of leg(...) made by _args.run_legs
    if on_gpu:
        planned.append(functools.partial(leg, "gpu", device, a.trials, small=a.quick, timeout=a.timeout))
        if a.large_trials > 0:
            planned.append(functools.partial(leg, "gpu_large", device, a.large_trials, fmt="parquet", small=a.quick,
                                             timeout=a.timeout))
        if cpu_trials > 0:
            planned.append(functools.partial(leg, "cpu", "cpu", cpu_trials, workers=a.cpu_workers, small=a.quick,
                                             timeout=a.timeout))
    else:
        planned.append(functools.partial(leg, "cpu", "cpu", a.trials, workers=a.cpu_workers, small=a.quick,
                                         timeout=a.timeout))
        if cpu_trials > 0 and a.quick:   # the smoke run exercises the comparison leg too
            planned.append(functools.partial(leg, "cpu_compare", "cpu", cpu_trials, workers=1, small=True,
                                             timeout=a.timeout))
    legs = _args.run_legs(planned, a.jobs)
    by = {lg["name"]: lg for lg in legs}
    ok = lambda name: name in by and by[name]["returncode"] == 0   # noqa: E731
    ratio, large_ratio = per_trial_ratio(legs, "gpu"), per_trial_ratio(legs, "gpu_large")
    res = {
        "config": {"mechanism": "kl", "mode": "sound", "clip_bound": 30.0, "epsilons": EPSILONS, "N": 40 if a.quick else 1000,
                   "K": 2 if a.quick else 5, "d": 2 if a.quick else 3, "defaults": "block size, memory budget, chunking",
                   "quick": a.quick, "jobs": a.jobs},
        "machine": device_info(device),
        "legs": legs,
        "gpu_over_cpu_per_trial": ratio,
        "gpu_large_over_cpu_per_trial": large_ratio,
        "targets": TARGETS,
        "met": {"gpu_1e5": ok("gpu") and by["gpu"]["trials"] >= 100_000 and by["gpu"]["wall_s"] <= TARGETS["gpu_1e5_seconds"],
                "gpu_1e6": ok("gpu_large") and by["gpu_large"]["trials"] >= 1_000_000
                and by["gpu_large"]["wall_s"] <= TARGETS["gpu_1e6_seconds"],
                "gpu_over_cpu": ratio is not None and ratio >= TARGETS["gpu_over_cpu"],
                "cpu2_1e5": (not on_gpu and ok("cpu") and by["cpu"]["trials"] >= 100_000 and os.cpu_count() == 2
                             and by["cpu"]["wall_s"] <= TARGETS["cpu2_1e5_seconds"])},
    }
    from torchdpgmm._provenance import environment as _environment

    res["provenance"] = _environment(device)  # commit (+dirty), versions, the card
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    for lg in legs:
        print(f"{lg['name']}: {lg['trials']} trials on {lg['device']} x{lg['workers']}: {lg['wall_s']:.1f} s "
              f"(rc {lg['returncode']}, blocks {lg.get('block_sizes')})")
    if ratio is not None:
        print(f"GPU over CPU per trial: {ratio:.1f}x")
    return 0 if all(lg["returncode"] == 0 for lg in legs) else 1


def render(res: dict) -> str:
    """The docs/gpu.md block of measured numbers (scripts/task_pages.py writes it)."""
    m = res["machine"]
    c = res["config"]
    gpu = any(lg["device"].startswith("cuda") for lg in res["legs"])
    head = (f"_From benchmarks/results/{'bench_sweep_gpu.json' if gpu else 'bench_sweep_cpu.json'} "
            f"(`python benchmarks/bench_sweep_gpu.py{'' if gpu else ' --device cpu'}`): `torchdpgmm sweep --mechanisms kl --epsilons {c['epsilons']} "
            f"--clip-bound 30` (sound mode, N = {c['N']}, K = {c['K']}, d = {c['d']}, block size and memory budget at "
            f"their defaults), end to end; {m['device_name']}, torch {m['torch']}, {m['cpu_count']} CPU cores._")
    lines = [head, "", "| where | trials | workers | results | blocks (trials) | wall time (s) | load avg before / after |",
             "|---|---|---|---|---|---|---|"]
    for lg in res["legs"]:
        where = m["device_name"] if lg["device"].startswith("cuda") else f"{m['cpu_count']} CPU cores"
        blocks = ", ".join(str(b) for b in sorted(set((lg.get("block_sizes") or {}).values()))) or "n/a"
        wall = f"{lg['wall_s']:.1f}" if lg["returncode"] == 0 else f"failed (exit {lg['returncode']})"
        lines.append(f"| {where} | {lg['trials']:,} | {lg['workers']} | {lg['format']} | {blocks} | {wall} | "
                     f"{lg['loadavg_before'][0]:.1f} / {lg['loadavg_after'][0]:.1f} |")
    if res.get("gpu_over_cpu_per_trial") is not None:
        lines.append(f"\nGPU over the same machine's CPU cores, per trial: {res['gpu_over_cpu_per_trial']:.1f}x "
                     f"(the GPU's {gpu_trials(res, 'gpu'):,}-trial leg)")
        large = res.get("gpu_large_over_cpu_per_trial")
        if large is not None:
            lines[-1] += f"; {large:.1f}x with its {gpu_trials(res, 'gpu_large'):,}-trial leg, where start-up weighs less."
        else:
            lines[-1] += "."
    return "\n".join(lines)


def per_trial_ratio(legs: list[dict], gpu_leg: str) -> float | None:
    """The CPU leg's seconds per trial over the GPU leg ``gpu_leg``'s (per trial, so that legs of different sizes
    compare; in the 10^6-trial leg the fixed start-up, imports, CUDA context, probe block and figure, weighs less
    than in the 10^5 leg); None unless both legs finished."""
    by = {lg["name"]: lg for lg in legs if lg["returncode"] == 0}
    if gpu_leg not in by or "cpu" not in by:
        return None
    return (by["cpu"]["wall_s"] / by["cpu"]["trials"]) / (by[gpu_leg]["wall_s"] / by[gpu_leg]["trials"])


def derive(path: Path) -> None:
    """Add the derived fields of this version to a JSON an older version wrote (the measured legs unchanged)."""
    res = json.loads(path.read_text())
    res["gpu_large_over_cpu_per_trial"] = per_trial_ratio(res["legs"], "gpu_large")
    path.write_text(json.dumps(res, indent=2) + "\n")


def gpu_trials(res: dict, name: str) -> int | None:
    """Trials of the leg ``name`` when it finished, else None."""
    for lg in res["legs"]:
        if lg["name"] == name and lg["returncode"] == 0:
            return lg["trials"]
    return None


if __name__ == "__main__":
    sys.exit(main())
