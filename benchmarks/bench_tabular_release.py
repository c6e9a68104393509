"""Benchmark: one DP release of a table at N = 20,000, d = 16 (issue 26's timing target: under 2 s on 2 cores).

LetterRecognition (Frey & Slate 1991; 20,000 rows, 16 integer features with the documented range 0..15,
26 classes; ``torchdpgmm/data``'s mlbench export) released by ``DPGaussianMixture(bounds=(0, 15))`` with the
estimator's DEFAULT ``covariance_type`` (named in the JSON), eps = 1, delta = 1e-5, add/remove, fresh noise.
The baseline, measured in the same run and interleaved with ours (the machine is shared), is scikit-learn's
non-private ``QuadraticDiscriminantAnalysis().fit`` on the same rows: the ratio ours / QDA is what carries over
between machines; the absolute time depends on the load, recorded before and after. One untimed warm-up call
of each first (imports, allocator). Threads: ``--threads`` for torch and BLAS/OpenMP (default 2, the target's
2 cores).

    PYTHONPATH=. python benchmarks/bench_tabular_release.py --out benchmarks/results/bench_tabular_release.json
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)

TARGET_SECONDS = 2.0


def _load(rows: int | None):
    from torchdpgmm.data.tables import load_table

    t = load_table("LetterRecognition")
    X, y = t.X, t.y
    if rows is not None:  # --quick: the first rows only (a smoke run)
        X, y = X[:rows], y[:rows]
    return X, y, t.public_bounds


def _ours(X, y, bounds):
    from torchdpgmm.estimator import DPGaussianMixture

    est = DPGaussianMixture(1.0, 1e-5, classes=list(range(26)), bounds=bounds)
    t0 = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t0, est


def _qda(X, y):
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        QuadraticDiscriminantAnalysis().fit(X, y)
    return time.perf_counter() - t0


def _default_center() -> str:
    from torchdpgmm.bounds import DEFAULT_CENTER

    return DEFAULT_CENTER


def run(repeats: int, threads: int, rows: int | None) -> dict:
    import torch
    from threadpoolctl import threadpool_limits

    from torchdpgmm.estimator import DPGaussianMixture

    torch.set_num_threads(threads)
    X, y, bounds = _load(rows)
    load0 = os.getloadavg()
    ours, base = [], []
    with threadpool_limits(threads):
        _ours(X, y, bounds), _qda(X, y)  # warm-up, untimed
        for _ in range(repeats):
            t, est = _ours(X, y, bounds)
            ours.append(t)
            base.append(_qda(X, y))
    med, bmed = statistics.median(ours), statistics.median(base)
    return {
        "benchmark": "one DPGaussianMixture release of LetterRecognition (bounds 0..15), eps=1, delta=1e-5, add/remove",
        "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]), "classes": 26,
        "covariance_type": DPGaussianMixture().covariance_type, "center": _default_center(),
        "privacy_blocks": [b.name for b in est.privacy_.blocks], "repeats": repeats, "threads": threads,
        "release_seconds": ours, "release_seconds_median": med,
        "baseline": "sklearn QuadraticDiscriminantAnalysis().fit, non-private, same rows, interleaved",
        "baseline_seconds": base, "baseline_seconds_median": bmed, "ratio_to_baseline": med / bmed,
        "target": {"seconds": TARGET_SECONDS, "cores": 2, "met": med < TARGET_SECONDS if rows is None else None,
                   "note": "met is null for a --quick run (fewer rows than the target's N)"},
        "privacy_epsilon": float(est.privacy_.epsilon), "privacy_delta": float(est.privacy_.delta),
        "environment": {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                        "load_average_start": list(load0), "load_average_end": list(os.getloadavg()),
                        "measured_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=_args.whole(1), default=7)
    p.add_argument("--threads", type=_args.whole(1), default=2)
    p.add_argument("--quick", action="store_true", help="2,000 rows, 1 repeat: a smoke run, not the target")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_tabular_release.json"))
    a = p.parse_args(argv)
    _args.check_quick_out(p, a.quick, a.out)
    _args.check_out(p, a.out)
    res = run(1 if a.quick else a.repeats, a.threads, 2000 if a.quick else None)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    res["provenance"] = _environment()  # commit (+dirty), versions, machine
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"release median {res['release_seconds_median']:.3f} s, QDA {res['baseline_seconds_median']:.3f} s, "
          f"ratio {res['ratio_to_baseline']:.2f} (load {res['environment']['load_average_start'][0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
