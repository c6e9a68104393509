"""Benchmark: the truncated sampler's Gibbs fallback (``torchdpgmm.bounds._gibbs_inside``), ops and seconds.

The fallback draws one coordinate at a time, ``d x sweeps`` steps per call; on a GPU each step's ops are kernel
launches, so their count is its time there (counted on the CPU with a ``TorchDispatchMode``: the same on every
device). Model: 4,000 rows, 64 columns, 10 classes (random covariances, means far outside the box [0, 1]^64, as a
64-column table's class Gaussian with almost no mass inside). Measured for this tree and, with ``--baseline REV``, for
that commit's ``torchdpgmm`` (a ``git worktree``, each in a fresh process, the two alternating): dispatched ops of 2
sweeps, seconds of the default sweeps (median of ``--repeats``), and a checksum of the draws (the same chain gives
the same sum up to rounding).

    PYTHONPATH=. python benchmarks/bench_gibbs.py --baseline 383e962 --out benchmarks/results/bench_gibbs.json

``--model ROWS,COLUMNS,CLASSES`` (default 4000,64,10, the model above) sizes the model: a smaller one for the smoke
test (tests/test_bench_gibbs_smoke.py), whose numbers are not the benchmark's.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)

MODEL = "4000,64,10"  # rows, columns, classes

_CHILD = r"""
import json, sys, time
src = sys.argv[1]
n, d, K = (int(v) for v in sys.argv[2].split(","))
sys.path.insert(0, src)  # that tree's package, not an editable install's finder
sys.meta_path = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torchdpgmm import bounds as B

class Count(TorchDispatchMode):
    n = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))

torch.manual_seed(0)
A = torch.randn(K, d, d, dtype=torch.float64) / d ** 0.5
cov = A @ A.mT + 0.5 * torch.eye(d, dtype=torch.float64)
labels = torch.randint(0, K, (n,))
means = (torch.randn(K, d, dtype=torch.float64) * 3)[labels]
lo, hi = torch.zeros(d, dtype=torch.float64), torch.ones(d, dtype=torch.float64)
x0 = torch.randn(n, d, dtype=torch.float64)
with Count() as c:
    B._gibbs_inside(x0, means, cov, lo, hi, torch.Generator().manual_seed(1), sweeps=2, labels=labels)
t = time.perf_counter()
x = B._gibbs_inside(x0, means, cov, lo, hi, torch.Generator().manual_seed(1), labels=labels)
t = time.perf_counter() - t
print(json.dumps({"module": B.__file__, "ops_2_sweeps": c.n, "seconds": t, "sweeps": B.GIBBS_SWEEPS, "checksum": float(x.sum()),
                  "strictly_inside": bool(((x > lo) & (x < hi)).all())}))
"""


def _leg(src: Path, model: str = MODEL) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(src), model], env=env, capture_output=True, text=True,
                          check=True)
    leg = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(leg.pop("module")).resolve().is_relative_to(Path(src).resolve()):
        raise RuntimeError(f"the leg of {src} imported torchdpgmm from elsewhere")
    return leg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default=None, help="a commit whose torchdpgmm is measured beside this tree's")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_gibbs.json"))
    p.add_argument("--model", default=MODEL, metavar="ROWS,COLUMNS,CLASSES",
                   type=_args.csv_of(_args.whole(1), "whole numbers >= 1"),
                   help=f"the model's size (default {MODEL}; smaller for a smoke run)")
    a = p.parse_args(argv)
    if a.repeats < 1:
        p.error(f"--repeats must be >= 1, got {a.repeats}")
    if len(a.model.split(",")) != 3:
        p.error(f"--model takes ROWS,COLUMNS,CLASSES, got {a.model!r}")
    if a.baseline:
        _args.check_git_ref(p, "--baseline", a.baseline)
    _args.check_out(p, a.out)
    with tempfile.TemporaryDirectory() as tmp:
        legs = {"this tree": ROOT}
        if a.baseline:
            wt = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(wt), a.baseline],
                           check=True, capture_output=True)
            legs[a.baseline] = wt
        try:
            runs: dict[str, list[dict]] = {k: [] for k in legs}
            for _ in range(a.repeats):
                for k, src in legs.items():  # alternating
                    runs[k].append(_leg(src, a.model))
        finally:
            if a.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(legs[a.baseline])],
                               check=False, capture_output=True)
    n, d, K = (int(v) for v in a.model.split(","))
    out = {"benchmark": "bench_gibbs", "model": f"{n:,} rows x {d} columns, {K} classes", "repeats": a.repeats,
           "threads": int(os.environ.get("OMP_NUM_THREADS", "1")), "cpu_count": os.cpu_count(),
           "python": platform.python_version(), "machine": platform.machine(), "legs": {}}
    for k, rs in runs.items():
        out["legs"][k] = {"ops_2_sweeps": rs[0]["ops_2_sweeps"], "sweeps": rs[0]["sweeps"],
                          "median_seconds": statistics.median(r["seconds"] for r in rs),
                          "checksum": rs[0]["checksum"], "strictly_inside": rs[0]["strictly_inside"]}
        print(f"{k}: {out['legs'][k]}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    out["provenance"] = _environment()  # commit (+dirty), versions, machine
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
