"""Benchmark of the exact discrete samplers (issue 36): fixed-work pools against the rejection loops they
replaced, timed interleaved in the same run, plus a dispatch-mode count of ops and host syncs per call.

The baseline is ``torchdpgmm/mechanisms/discrete.py`` as of git ``--baseline-ref`` (default ``a2505e8``, the
last commit with the rejection loops), loaded beside the current module; without git it is skipped and
recorded as null. Times are medians of ``--repeats`` calls after one warm-up; the machine and its load
average are recorded (a shared machine: compare ratios from one run, not across runs). Usage::

    python benchmarks/bench_discrete.py [--quick] [--device cpu|cuda] [--threads 1] \
        [--out benchmarks/results/bench_discrete.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import types
import weakref
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.mechanisms import discrete as current  # noqa: E402

SYNC_OPS = ("nonzero", "_local_scalar_dense", "item", "is_nonzero", "masked_select")


def _baseline(ref: str):
    """The discrete module as of git ``ref`` (None when git or the ref is unavailable)."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", ref], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        src = subprocess.run(["git", "show", f"{commit}:torchdpgmm/mechanisms/discrete.py"], cwd=root,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    mod = types.ModuleType("torchdpgmm.mechanisms._baseline_discrete")
    mod.__package__ = "torchdpgmm.mechanisms"
    exec(compile(src, f"{ref}:discrete.py", "exec"), mod.__dict__)
    mod.commit = commit
    return mod


class _Count(TorchDispatchMode):
    """Dispatched ops by name, and the peak of the live bytes of the tensors the ops return."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()
        self.live = self.peak = 0
        self.seen = set()

    def _free(self, key, nbytes):
        self.seen.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if torch.is_tensor(t):
                st = t.untyped_storage()
                key = st.data_ptr()
                if key and key not in self.seen:
                    self.seen.add(key)
                    self.live += st.nbytes()
                    weakref.finalize(st, self._free, key, st.nbytes())
        self.peak = max(self.peak, self.live)
        return out


def _draw(mod, kind, n, param, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    f = mod.discrete_gaussian_noise if kind == "gaussian" else mod.discrete_laplace_noise
    return f((n,), param, g, device=device)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _time(mod, kind, n, param, device, repeats):
    _draw(mod, kind, n, param, 0, device)
    _sync(device)
    times = []
    for r in range(repeats):
        t = time.perf_counter()
        _draw(mod, kind, n, param, r + 1, device)
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _counts(mod, kind, n, param, device):
    with _Count() as c:
        _draw(mod, kind, n, param, 0, device)
    return {"ops": sum(c.ops.values()), "syncs": sum(c.ops[k] for k in SYNC_OPS),
            "peak_live_bytes": c.peak, "peak_live_bytes_per_draw": c.peak / n}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=_args.whole(1), default=1)
    ap.add_argument("--repeats", type=_args.whole(1), default=3)
    ap.add_argument("--baseline-ref", default="a2505e8")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "bench_discrete.json"))
    a = ap.parse_args(argv)
    _args.check_quick_out(ap, a.quick, a.out)
    _args.check_device(ap, a.device)
    _args.check_out(ap, a.out)
    torch.set_num_threads(a.threads)
    base = _baseline(a.baseline_ref)
    sizes = [200, 2000] if a.quick else [1000, 10_000, 100_000, 1_000_000]
    cases = [("gaussian", 2.0), ("gaussian", 300.0), ("laplace", 2.0), ("laplace", 300.0)]
    if a.quick:
        cases = cases[:1] + cases[2:3]
    repeats = 1 if a.quick else a.repeats
    meta = {"threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "loadavg_start": os.getloadavg(),
            "device": str(a.device), "device_name": (torch.cuda.get_device_name() if torch.device(a.device).type
                                                      == "cuda" else platform.processor() or platform.machine()),
            "quick": a.quick, "repeats": repeats, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "baseline": None if base is None else {"ref": a.baseline_ref, "commit": base.commit}}
    rows = []
    for kind, param in cases:
        for n in sizes:
            row = {"sampler": kind, "scale": param, "draws": n,
                   "fixed_work_s": _time(current, kind, n, param, a.device, repeats)}
            if base is not None:
                row["rejection_loops_s"] = _time(base, kind, n, param, a.device, repeats)
                row["ratio_fixed_over_loops"] = row["fixed_work_s"] / row["rejection_loops_s"]
            row["fixed_work_ns_per_draw"] = 1e9 * row["fixed_work_s"] / n
            rows.append(row)
            print(json.dumps(row), flush=True)
    counts = []
    for kind, param in cases:
        for n in ([16, 2000] if a.quick else [16, 1000, 100_000, 1_000_000]):
            row = {"sampler": kind, "scale": param, "draws": n,
                   "fixed_work": _counts(current, kind, n, param, a.device)}
            if base is not None:
                row["rejection_loops"] = _counts(base, kind, n, param, a.device)
            counts.append(row)
    meta["loadavg_end"] = os.getloadavg()
    from torchdpgmm._provenance import environment as _environment

    out = {"benchmark": "bench_discrete", "meta": meta, "timings": rows, "dispatch_counts": counts,
           "provenance": _environment()}
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print("wrote", path)
    return out


if __name__ == "__main__":
    main()
