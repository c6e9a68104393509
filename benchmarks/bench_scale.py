"""Scale benchmark: the Fig-2 sweep through ``torchdpgmm.sweep`` at 10^3, 10^4 (and 10^5) trials.

For every trial count T the sweep (7 epsilons x the 5 mechanisms of Fig. 2 of Liu, Scaglione & Peisert
2025: kl, colored, gaussian, laplace, r1smg; N=1000, K=5, d=3) runs in a fresh subprocess under the
default memory budget, and the benchmark records its wall time and peak resident memory (``ru_maxrss``
of that process). A separate, in-process measurement on ``--cost-trials`` trials (in blocks of the
sweep's block size, as the sweep runs them) gives the per-trial cost of each mechanism over the whole
epsilon grid against the per-trial cost of generating and fitting the data (eq. 2), measured in the same
run; the ratios are the numbers to compare across machines. When a GPU is present the per-mechanism
measurement is repeated on it (the "gpu" section).

Writes JSON (default ``benchmarks/results/bench_scale.json``) and a plot of cost per trial vs trials
(``bench_scale.png`` next to it). The 1-minute load average is recorded at start and end: the machine is
shared and every absolute timing scales with the load.

``--cli-trials T`` (default 2000) also times the issue's command ``torchdpgmm sweep --mechanisms kl --epsilons
0.1,0.2,0.5,1,2,5,10 --trials T`` end to end in a fresh process, in the paper's (as-published) mode and in
sound mode (``--clip-bound 30``), the "cli_sweeps" section.

    python benchmarks/bench_scale.py [--trials 1000,10000] [--big] [--threads 2] [--out PATH] [--quick] [--jobs 1]

``--jobs J`` runs the fresh-process legs (the sweeps and the CLI commands) J at a time instead of one after the other
(the default, 1: each leg alone on the machine, as measured): for a smoke run (the test runs ``--quick --jobs 2``),
whose wall times then share the cores and mean nothing; each process's peak memory is still its own.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.experiments.synthetic import EPS_GRID  # noqa: E402

MECHS = ("kl", "colored", "gaussian", "laplace", "r1smg")

_CHILD = """
import json, resource, sys, tempfile, time, torch
torch.set_num_threads({threads})
from torchdpgmm.sweep import SweepSpec, run_sweep
spec = SweepSpec(**json.loads(sys.argv[1]))
with tempfile.TemporaryDirectory(prefix="bench_scale_") as out:
    t0 = time.perf_counter()
    res = run_sweep(spec, out, progress=False)
    wall = time.perf_counter() - t0
print(json.dumps({{"wall_s": wall, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "chunks": res["done"]}}))
"""


def _spec(trials: int, mechanisms, epsilons, block_size: int, memory_budget) -> dict:
    return {"mechanisms": list(mechanisms), "epsilons": list(epsilons), "Ns": [1000], "Ks": [5], "ds": [3],
            "trials": trials, "chunk_size": None, "block_size": block_size, "memory_budget": memory_budget}


def _child(code: str, args: list[str]) -> tuple[dict, str]:
    """Run ``python -c code *args`` in a fresh process (this checkout first on the path); its last stdout
    line is JSON. Returns ``(that JSON, stderr)``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def sweep_run(trials: int, mechanisms, epsilons, threads: int, block_size: int, memory_budget) -> dict:
    """One sweep in a fresh process: wall time and peak RSS of that process."""
    res, _ = _child(_CHILD.format(threads=threads), [json.dumps(_spec(trials, mechanisms, epsilons, block_size,
                                                                        memory_budget))])
    res.update(trials=trials, seconds_per_trial=res["wall_s"] / trials, peak_rss_gib=res["peak_rss_bytes"] / 2**30)
    return res


_CLI_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from torchdpgmm.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "wall_s": time.perf_counter() - t0,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def cli_sweep(trials: int, threads: int, extra: list[str]) -> dict:
    """``torchdpgmm sweep --mechanisms kl --epsilons 0.1,0.2,0.5,1,2,5,10 --trials T`` (issue #16's command) in
    a fresh process: wall time of the whole command (imports included) and that process's peak RSS."""
    import tempfile

    args = ["sweep", "--mechanisms", "kl", "--epsilons", "0.1,0.2,0.5,1,2,5,10", "--trials", str(trials),
            "--threads", str(threads), "--no-progress", *extra]
    with tempfile.TemporaryDirectory(prefix="bench_scale_cli_") as out:
        res, err = _child(_CLI_CHILD, [*args, "--out", str(Path(out) / "s")])
    if res["rc"] != 0:
        raise RuntimeError(f"torchdpgmm {' '.join(args)} exited {res['rc']}: {err[-500:]}")
    return {"command": "torchdpgmm " + " ".join(args), "trials": trials, "wall_s": res["wall_s"],
            "seconds_per_trial": res["wall_s"] / trials, "peak_rss_bytes": res["peak_rss_bytes"],
            "peak_rss_gib": res["peak_rss_bytes"] / 2**30}


def per_mechanism_cost(trials: int, mechanisms, epsilons, block_size: int, device: str = "cpu") -> dict:
    """Seconds per trial of data generation, fitting, and each mechanism over the whole epsilon grid (after one
    untimed warm-up block)."""
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t = {"generate": 0.0, "fit": 0.0, **{m: 0.0 for m in mechanisms}}
    n_blocks = max(1, trials // block_size)
    eps = torch.tensor(list(epsilons), dtype=torch.float64, device=dev)[:, None]
    # block -1 is an untimed warm-up (its times go to a discarded dict): CUDA context, solver handles and kernel
    # compilation would otherwise be charged to the first timed block (and dominate a short GPU measurement)
    for b in range(-1, n_blocks):
        g = torch.Generator(device=dev).manual_seed(b if b >= 0 else 10**6)
        tb = t if b >= 0 else dict.fromkeys(t, 0.0)
        sync()
        t0 = time.perf_counter()
        data = synthetic_data(block_size, 1000, 5, 3, generator=g, device=dev)
        sync()
        tb["generate"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        fit_labeled(data.X, data.y, 5)
        sync()
        tb["fit"] += time.perf_counter() - t0
        for m in mechanisms:
            t0 = time.perf_counter()
            release(data.X, data.y, 5, eps, 1e-5, mechanism=m, mode="as-published", generator=g)
            sync()
            tb[m] += time.perf_counter() - t0
    T = n_blocks * block_size
    per = {k: v / T for k, v in t.items()}
    base = per["generate"] + per["fit"]
    return {"trials": T, "device": device, "seconds_per_trial": per, "generate_and_fit_per_trial": base,
            "ratio_to_generate_and_fit": {m: per[m] / base for m in mechanisms}}


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    runs = res["sweeps"]
    ax.plot([r["trials"] for r in runs], [r["seconds_per_trial"] for r in runs], "o-", label="whole sweep")
    cost = res["per_mechanism"]["seconds_per_trial"]
    for m in res["config"]["mechanisms"] + ["generate", "fit"]:
        ax.axhline(cost[m], ls=":", lw=1, color="C1" if m in ("generate", "fit") else "0.5")
        ax.annotate(m, (runs[0]["trials"], cost[m]), fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("trials")
    ax.set_ylabel("seconds per trial (all 7 epsilons)")
    ax2 = ax.twinx()
    ax2.plot([r["trials"] for r in runs], [r["peak_rss_bytes"] / 2**30 for r in runs], "s--", color="C3")
    ax2.set_ylabel("peak RSS (GiB)", color="C3")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(f"Fig-2 sweep cost (load avg {res['environment']['load_average_start'][0]:.1f})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    count = _args.whole(1)
    p.add_argument("--trials", default="1000,10000", type=_args.csv_of(count, "whole numbers >= 1", allow_empty=True),
                   help="comma-separated trial counts of the sweep")
    p.add_argument("--big", action="store_true", help="also run 10^5 trials")
    p.add_argument("--cost-trials", type=count, default=200, help="trials of the per-mechanism measurement")
    p.add_argument("--block-size", type=count, default=40)
    p.add_argument("--memory-budget", type=_args.positive_float, default=None,
                   help="bytes per chunk (default: the sweep's)")
    p.add_argument("--threads", type=count, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_scale.json")
    p.add_argument("--quick", action="store_true", help="tiny smoke run (2 mechanisms, 2 epsilons)")
    p.add_argument("--cli-trials", type=_args.whole(0), default=2000,
                   help="trials of the timed `torchdpgmm sweep --mechanisms kl ...` command (0: skip)")
    p.add_argument("--jobs", type=count, default=1,
                   help="fresh-process legs run at a time (default 1; more only for a smoke run: the timings then "
                        "share the cores)")
    a = p.parse_args(argv)
    _args.check_out(p, a.out)
    torch.set_num_threads(a.threads)
    mechs, eps = (["gaussian", "laplace"], [0.5, 2.0]) if a.quick else (list(MECHS), list(EPS_GRID))
    trials = [int(x) for x in a.trials.split(",") if x.strip()] + ([100000] if a.big else [])
    if a.quick:
        trials, a.cost_trials, a.block_size = [4, 8], 4, 4
    load0 = os.getloadavg()
    t0 = time.time()
    cost = per_mechanism_cost(a.cost_trials, mechs, eps, a.block_size)
    sweep_legs = [functools.partial(sweep_run, T, mechs, eps, a.threads, a.block_size, a.memory_budget)
                  for T in trials]
    cli_legs = []
    if a.cli_trials > 0:
        n_cli = 8 if a.quick else a.cli_trials
        # the KL mechanism of the paper (as-published, label-level), and the sound release of the same name
        small = ["--N", "100", "--block-size", "4"] if a.quick else []
        cli_legs = [functools.partial(cli_sweep, n_cli, a.threads, ["--mode", "as-published"] + small),
                    functools.partial(cli_sweep, n_cli, a.threads, ["--clip-bound", "30"] + small)]

    def gpu_cost():
        return per_mechanism_cost(a.cost_trials, mechs, eps, a.block_size, "cuda") if torch.cuda.is_available() else None

    if a.jobs == 1:  # the measurement: each fresh process alone, the GPU cost between the sweeps and the commands
        sweeps = _args.run_legs(sweep_legs, 1)
        gpu = gpu_cost()
        cli = _args.run_legs(cli_legs, 1)
    else:  # a smoke run: the legs side by side, then the GPU cost
        legs = _args.run_legs(sweep_legs + cli_legs, a.jobs)
        sweeps, cli = legs[:len(sweep_legs)], legs[len(sweep_legs):]
        gpu = gpu_cost()
    res = {
        "config": {"trials": trials, "mechanisms": mechs, "epsilons": eps, "N": 1000, "K": 5, "d": 3,
                   "block_size": a.block_size, "memory_budget": a.memory_budget, "threads": a.threads,
                   "cost_trials": cost["trials"], "jobs": a.jobs},
        "sweeps": sweeps,
        "per_mechanism": cost,
        "gpu": gpu,
        "cli_sweeps": cli,
        "max_peak_rss_gib": max(r["peak_rss_bytes"] for r in sweeps) / 2**30,
        "environment": {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                        "gpu": torch.cuda.get_device_name(0) if gpu else None,
                        "load_average_start": list(load0), "load_average_end": list(os.getloadavg()),
                        "started_unix": t0, "elapsed_s": time.time() - t0},
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    res["provenance"] = _environment()  # commit (+dirty), versions, machine
    a.out.write_text(json.dumps(res, indent=2))
    plot(res, a.out.with_suffix(".png"))
    print(json.dumps({k: res[k] for k in ("sweeps", "max_peak_rss_gib")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
