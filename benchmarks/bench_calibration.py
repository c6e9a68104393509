"""Benchmark: the zCDP calibration of a sound release at a new epsilon, in Python floats against the tensor path.

A sound release with discrete Gaussian noise (the default) calibrates ``rho = zcdp_rho(epsilon, delta)`` by
bisection; the two-stage release about a private centre (the default with bounds) also inverts it
(``zcdp_epsilon``) for each stage. Each step evaluates a golden-section minimum, a few thousand scalar evaluations in
all. On Python numbers they now run in Python floats (``calibration._zcdp_rho_scalar``); the tensor path
(``calibration._zcdp_rho`` on 0-d tensors, which Python numbers took before) stays for tensor inputs. Both run here,
interleaved on the same epsilons, repeated; the JSON gives the medians, their ratio, the largest relative difference
of the values (the two libraries' exp/log round a few arguments differently), and the whole
``DPGaussianMixture(bounds=...).fit`` of a 178-row, 13-column table at a new epsilon (memo cleared), once with the
float path and once with each of its evaluations done by the tensor steps (as before), interleaved.

    PYTHONPATH=. python benchmarks/bench_calibration.py --out benchmarks/results/bench_calibration.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=_args.whole(1), default=5)
    p.add_argument("--quick", action="store_true", help="two epsilons, one repeat: a smoke run")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_calibration.json"))
    args = p.parse_args(argv)
    _args.check_quick_out(p, args.quick, args.out)
    _args.check_out(p, args.out)
    torch.set_num_threads(1)
    from torchdpgmm.estimator import DPGaussianMixture
    from torchdpgmm.privacy import calibration as C

    delta = 1e-5
    epsilons = [0.37, 2.9] if args.quick else [0.11, 0.37, 0.93, 1.7, 2.9, 6.1]
    repeats = 1 if args.quick else args.repeats
    tensor_s, float_s, worst = [], [], 0.0
    for _ in range(repeats):  # interleaved: the machine is shared
        for e in epsilons:
            out = {}
            tensor_s.append(_time(lambda: out.__setitem__("t", float(C._zcdp_rho(e, delta)))))
            float_s.append(_time(lambda: out.__setitem__("f", C._zcdp_rho_scalar(e, delta))))
            worst = max(worst, abs(out["t"] - out["f"]) / out["t"])
    rng = np.random.default_rng(0)
    y = np.arange(178) % 3
    X = rng.normal(size=(178, 13)) + y[:, None]
    bounds = (X.min(0).tolist(), X.max(0).tolist())
    fast = C._zcdp_log_delta_float
    f64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    slow = lambda e, r, steps=80: float(C._zcdp_log_delta(f64(e), f64(r), steps))  # noqa: E731  (the tensor steps)
    fit_s: dict[str, list[float]] = {"tensor path": [], "float path": []}
    try:
        for i in range(repeats):
            for e in epsilons:
                for j, (name, fn) in enumerate((("tensor path", slow), ("float path", fast))):
                    C._zcdp_log_delta_float = fn
                    C._ZCDP_RHO_MEMO.clear()
                    eps = e * (1 + 1e-3 * i + 1e-6 * j)  # a new epsilon each fit (the release's own caches miss)
                    est = DPGaussianMixture(eps, delta, classes=[0, 1, 2], bounds=bounds)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        fit_s[name].append(_time(lambda: est.fit(X, y)))
    finally:
        C._zcdp_log_delta_float = fast
    med_t, med_f = statistics.median(tensor_s), statistics.median(float_s)
    fit_med = {k: statistics.median(v) for k, v in fit_s.items()}
    data = {
        "benchmark": "bench_calibration", "script": "benchmarks/bench_calibration.py", "quick": args.quick,
        "epsilons": epsilons, "delta": delta, "repeats": repeats,
        "zcdp_rho_median_seconds": {"tensor path": med_t, "float path": med_f},
        "tensor_over_float": med_t / med_f, "largest_relative_difference": worst,
        "fit_at_new_epsilon_median_seconds": fit_med,
        "fit_tensor_over_float": fit_med["tensor path"] / fit_med["float path"],
        "fit_table": {"rows": 178, "columns": 13, "classes": 3, "estimator": "DPGaussianMixture(bounds=...)"},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform(), "threads": 1,
                    "load_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    data["provenance"] = _environment()  # commit (+dirty), versions, machine
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"zcdp_rho: tensor path {med_t * 1e3:.1f} ms, float path {med_f * 1e3:.2f} ms ({med_t / med_f:.0f}x); "
          f"fit at a new epsilon {fit_med['tensor path'] * 1e3:.0f} ms -> {fit_med['float path'] * 1e3:.0f} ms; "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
