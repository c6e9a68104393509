"""Benchmark: batched EM (torchdpgmm.em.fit_gmm) vs a loop of scikit-learn GaussianMixture fits.

100 datasets (N=1000, K=5, d=3), the same k-means++ start for both (sklearn gets it through weights_init /
means_init / precisions_init), the same number of EM iterations (tol=0 in sklearn). Baseline and ours are
interleaved in one run (the machine is shared), each repeated; medians are reported with their ratio, the
largest relative log-likelihood difference, and the thread settings.

    PYTHONPATH=. python benchmarks/bench_em.py --out benchmarks/results/bench_em.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch


def make_data(B: int, N: int, K: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(B, K, d, generator=g, dtype=torch.float64) * 20 - 10)
    A = torch.randn(B, K, d, d + 1, generator=g, dtype=torch.float64)
    covs = A @ A.transpose(-1, -2) / (d + 1)
    e = -torch.log(torch.rand(B, K, generator=g, dtype=torch.float64))
    w = e / e.sum(-1, keepdim=True)
    lab = torch.multinomial(w, N, replacement=True, generator=g)
    L = torch.linalg.cholesky(covs)
    z = torch.randn(B, N, d, 1, generator=g, dtype=torch.float64)
    idx = lab[..., None].expand(B, N, d)
    x = torch.gather(means, 1, idx) + (torch.gather(L, 1, lab[..., None, None].expand(B, N, d, d)) @ z).squeeze(-1)
    return x


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--datasets", type=int, default=100)
    p.add_argument("--N", type=int, default=1000)
    p.add_argument("--K", type=int, default=5)
    p.add_argument("--d", type=int, default=3)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes for a test")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_em.json"))
    a = p.parse_args(argv)
    if a.smoke:
        a.datasets, a.N, a.iters, a.repeats = 3, 100, 5, 1
    torch.set_num_threads(a.threads)
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    from torchdpgmm.em import fit_gmm

    X = make_data(a.datasets, a.N, a.K, a.d, a.seed)
    start = fit_gmm(X, a.K, max_iter=0, generator=torch.Generator().manual_seed(a.seed + 1))
    init = (start.weights, start.means, start.covariances)
    prec = np.linalg.inv(start.covariances.numpy())
    Xn = X.numpy()

    def ours():
        return fit_gmm(X, a.K, max_iter=a.iters, init_params=init)

    def baseline():
        out = np.empty(a.datasets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for b in range(a.datasets):
                gm = GaussianMixture(a.K, covariance_type="full", max_iter=a.iters, tol=0.0, reg_covar=1e-6,
                                     weights_init=start.weights[b].numpy(), means_init=start.means[b].numpy(),
                                     precisions_init=prec[b])
                gm.fit(Xn[b])
                out[b] = gm.score(Xn[b]) * a.N
        return out

    from threadpoolctl import threadpool_info, threadpool_limits

    # the baseline's BLAS gets the same number of threads as torch (fair, and the machine is shared)
    limiter = threadpool_limits(a.threads)
    ours()  # warm-up (allocations, lazy init)
    baseline_warm = a.repeats > 1
    if baseline_warm:
        baseline()
    t_ours, t_base = [], []
    fit = ref = None
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        ref = baseline()
        t_base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fit = ours()
        t_ours.append(time.perf_counter() - t0)
    rel = np.abs(fit.loglik.numpy() - ref) / np.abs(ref)
    res = {
        "benchmark": "bench_em",
        "config": {"datasets": a.datasets, "N": a.N, "K": a.K, "d": a.d, "iters": a.iters, "repeats": a.repeats,
                   "dtype": "float64"},
        "torch_threads": torch.get_num_threads(),
        "blas_threads_baseline": [{"api": i.get("internal_api"), "threads": i.get("num_threads")} for i in threadpool_info()],
        "env_threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        "seconds_ours": t_ours,
        "seconds_sklearn_loop": t_base,
        "median_ours": statistics.median(t_ours),
        "median_sklearn_loop": statistics.median(t_base),
        "speedup": statistics.median(t_base) / statistics.median(t_ours),
        "max_rel_loglik_diff": float(rel.max()),
        "load_average": os.getloadavg(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    limiter.unregister() if hasattr(limiter, "unregister") else None
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2))
    print(json.dumps({k: res[k] for k in ("median_ours", "median_sklearn_loop", "speedup", "max_rel_loglik_diff",
                                          "torch_threads")}))
    return res


if __name__ == "__main__":
    main()
