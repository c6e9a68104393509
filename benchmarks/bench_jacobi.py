"""Benchmark: the PSD repair's fixed-sweep Jacobi eigen-decomposition in its two orders, per dimension.

On an accelerator the sound release repairs each noisy covariance of dimension d <= JACOBI_MAX_DIM by
``torchdpgmm.mechanisms.psd.jacobi_eigh`` (a fixed number of sweeps: no host synchronisation, no solver workspace).
A single release (one table, ``DPGaussianMixture(device="cuda")``) is then bound by kernel launches, not arithmetic:
the cyclic order rotates one pair per step (``d (d - 1) / 2`` steps a sweep), Brent & Luk's round-robin order
``d / 2`` disjoint pairs per step (``d - 1`` steps a sweep; the default from d = 4). This counts the ops each order
dispatches for one matrix (the launches a GPU pays; counted on the CPU with a ``TorchDispatchMode``, the same on
every device), its largest eigenvalue error against numpy on 1,000 random symmetric matrices, and the wall time of
one matrix and of 10,000 on ``--device`` (the orders interleaved, medians of the repeats; on CUDA each timing ends
with a synchronisation), beside ``torch.linalg.eigh`` on the same matrices (``eigh_seconds_*``, or ``eigh_error``
where the batch fails: cuSOLVER's workspace). ``--dims`` above ``JACOBI_MAX_DIM`` (8) time what Jacobi would cost
there against the eigh the accelerator release calls now (gpu_checks.sh passes 12 and 16). The CPU release never calls it (it uses ``torch.linalg.eigh`` there), so the CPU times only
show the arithmetic of each order: the matrix products of the round-robin order cost more there at large batches.

    PYTHONPATH=. python benchmarks/bench_jacobi.py --out benchmarks/results/bench_jacobi.json
    PYTHONPATH=. python benchmarks/bench_jacobi.py --device cuda --out benchmarks/results/bench_jacobi_cuda.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.mechanisms import psd  # noqa: E402


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _with_order(order: str, fn):
    saved = psd.JACOBI_PARALLEL_MIN_DIM
    psd.JACOBI_PARALLEL_MIN_DIM = 99 if order == "cyclic" else 2
    try:
        return fn()
    finally:
        psd.JACOBI_PARALLEL_MIN_DIM = saved


def _seconds(fn, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def _eigh_baseline(S: torch.Tensor, device: str) -> dict:
    """What the release calls where it does not take Jacobi sweeps (``torch.linalg.eigh``: the CPU, and an
    accelerator above ``JACOBI_MAX_DIM``): a first call on one matrix and on the whole batch (on CUDA cuSOLVER sizes
    a workspace per matrix, and a batch can ask for more memory than the card has: the error is recorded, not
    raised, so the Jacobi rows still come back). Empty timing lists to fill, or ``eigh_error``."""
    try:
        torch.linalg.eigh(S[:1])
        torch.linalg.eigh(S)
    except RuntimeError as e:  # torch.OutOfMemoryError (cuSOLVER's workspace) is a RuntimeError
        if device == "cuda":
            torch.cuda.empty_cache()
        return {"eigh_error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    return {"eigh_seconds_one": [], "eigh_seconds_10000": []}


def release_ops(d: int = 8) -> dict:
    """Ops dispatched by one ``DPGaussianMixture(eps=1, bounds=...).fit`` (the default ``"auto"``: two eigen-
    decompositions per release) of a 600-row, two-class table of ``d`` columns (simulated, bounds [-4, 4] public by
    construction), with the PSD repair's eigen-decomposition done by LAPACK (the CPU release), by the cyclic order and
    by the round-robin order (the accelerator release, forced here on the CPU)."""
    import torchdpgmm.release.sound as sound
    from torchdpgmm.estimator import DPGaussianMixture

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 600)
    X = np.clip(rng.normal(size=(600, d)) + y[:, None], -4, 4)
    saved = sound._eigh
    out = {"d": d, "rows": 600, "classes": 2}
    try:
        for name in ("lapack", "cyclic", "parallel"):
            sound._eigh = (lambda cov, jacobi=None: saved(cov, jacobi=False)) if name == "lapack" else \
                (lambda cov, jacobi=None: saved(cov, jacobi=True))
            est = DPGaussianMixture(1.0, 1e-5, classes=[0, 1], bounds=(-4.0, 4.0), random_state=0)
            with _Count() as c:
                _with_order(name, lambda: est.fit(X, y)) if name != "lapack" else est.fit(X, y)
            out[f"fit_ops_{name}"] = c.n
    finally:
        sound._eigh = saved
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=_args.whole(1), default=5)
    p.add_argument("--dims", default="3,4,5,6,7,8", type=_args.csv_of(_args.whole(1), "whole numbers >= 1"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_jacobi.json"))
    a = p.parse_args(argv)
    _args.check_device(p, a.device)
    _args.check_out(p, a.out)
    rng = np.random.default_rng(0)
    rows = []
    for d in (int(x) for x in a.dims.split(",")):
        M = rng.normal(size=(10_000, d, d))
        S = torch.as_tensor(M + np.swapaxes(M, -1, -2))
        ref = np.linalg.eigvalsh(S[:1000].numpy())
        S = S.to(a.device)
        row = {"d": d, "default_order": "parallel" if d >= psd.JACOBI_PARALLEL_MIN_DIM else "cyclic"}
        for order in ("cyclic", "parallel"):
            def count():
                with _Count() as c:
                    psd.jacobi_eigh(S[:1])
                return c.n
            lam = _with_order(order, lambda: psd.jacobi_eigh(S[:1000])[0]).cpu().numpy()
            _with_order(order, lambda: psd.jacobi_eigh(S[:1]))  # a first call (CUDA kernels load) is not timed
            row[f"{order}_ops"] = _with_order(order, count)
            row[f"{order}_max_eigenvalue_error"] = float(np.abs(np.sort(lam, -1) - ref).max())
            row[f"{order}_seconds_one"], row[f"{order}_seconds_10000"] = [], []
        row.update(_eigh_baseline(S, a.device))
        for _ in range(a.repeats):
            for order in ("cyclic", "parallel"):
                for k, X in (("one", S[:1]), ("10000", S)):
                    row[f"{order}_seconds_{k}"].append(
                        _with_order(order, lambda: _seconds(lambda: psd.jacobi_eigh(X), a.device)))
            for k, X in (("one", S[:1]), ("10000", S)):
                if "eigh_error" not in row:
                    row[f"eigh_seconds_{k}"].append(_seconds(lambda: torch.linalg.eigh(X), a.device))
        for order in ("cyclic", "parallel") + (() if "eigh_error" in row else ("eigh",)):
            for k in ("one", "10000"):
                row[f"{order}_seconds_{k}"] = statistics.median(row[f"{order}_seconds_{k}"])
        row["ops_ratio_cyclic_over_parallel"] = row["cyclic_ops"] / row["parallel_ops"]
        rows.append(row)
        print(f"d={d}: ops cyclic {row['cyclic_ops']}, parallel {row['parallel_ops']} "
              f"({row['ops_ratio_cyclic_over_parallel']:.1f}x); error {row['cyclic_max_eigenvalue_error']:.1e} / "
              f"{row['parallel_max_eigenvalue_error']:.1e}")
    out = {"benchmark": "bench_jacobi", "repeats": a.repeats, "sweeps": "max(6, d) + 4 (the default)",
           "device": a.device if a.device == "cpu" else torch.cuda.get_device_name(),
           "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
           "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "rows": rows, "release": release_ops()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    out["provenance"] = _environment()  # commit (+dirty), versions, machine
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"release fit ops: {out['release']}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
