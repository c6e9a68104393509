"""Benchmark: batched EM (torchdpgmm.em.fit_gmm) vs a loop of scikit-learn GaussianMixture fits, and the
skew-normal EM (torchdpgmm.em.fit_skew_normal_mixture) vs a direct implementation of the same EM
(per-component triangular solves and explicit differences x - xi_k, the package's code before it was
rewritten as batched products), both from the same start, same iterations, interleaved in one run.

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
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)


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


def direct_skew_normal_em(X, weights, xi, Lam, eta, iters):
    """The EM of the DP-MSNM paper (2021) written directly, batched over datasets: the baseline."""
    import math

    d = X.shape[-1]
    for _ in range(iters):
        L = torch.linalg.cholesky(Lam)
        diff = X.unsqueeze(-3) - xi.unsqueeze(-2)  # (..., K, N, d)
        u = torch.linalg.solve_triangular(L, diff.transpose(-1, -2), upper=False)
        v = torch.linalg.solve_triangular(L, eta.unsqueeze(-1), upper=False)
        c = (v * v).sum((-2, -1))
        vu = (v * u).sum(-2)
        maha = (u * u).sum(-2) - vu * vu / (1 + c).unsqueeze(-1)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1) + torch.log(1 + c)
        m = vu / torch.sqrt(1 + c).unsqueeze(-1)
        log_Phi = torch.special.log_ndtr(m)
        logf = math.log(2) - 0.5 * (d * math.log(2 * math.pi) + logdet.unsqueeze(-1) + maha) + log_Phi
        r0 = torch.softmax((logf + torch.log(weights).unsqueeze(-1)).transpose(-1, -2), -1)  # (..., N, K)
        st = torch.rsqrt(1 + c).unsqueeze(-1)
        Delta = torch.exp(-0.5 * m * m - 0.5 * math.log(2 * math.pi) - log_Phi)
        r1 = (st * (m + Delta)).transpose(-1, -2)
        r2 = (st ** 2 * (1 + m * (m + Delta))).transpose(-1, -2)
        Nk = r0.sum(-2)
        weights = Nk / Nk.sum(-1, keepdim=True)
        xi = (r0.transpose(-1, -2) @ X - eta * (r0 * r1).sum(-2).unsqueeze(-1)) / Nk.unsqueeze(-1)
        D = X.unsqueeze(-3) - xi.unsqueeze(-2)
        s = torch.einsum("...nk,...knd->...kd", r0 * r1, D)
        w2 = (r0 * r2).sum(-2)
        eta = s / w2.unsqueeze(-1)
        Sxx = torch.einsum("...nk,...kni,...knj->...kij", r0, D, D)
        es = eta.unsqueeze(-1) * s.unsqueeze(-2)
        Lam = (Sxx - es - es.transpose(-1, -2) + w2[..., None, None] * eta.unsqueeze(-1) * eta.unsqueeze(-2)) \
            / Nk[..., None, None]
        Lam = 0.5 * (Lam + Lam.transpose(-1, -2))
    return weights, xi, Lam, eta


def bench_skew_normal(datasets: int, N: int, K: int, iters: int, repeats: int, seed: int) -> dict:
    """Ours vs :func:`direct_skew_normal_em` on the em-synthetic mixture (scaled to [0,1]^3)."""
    from torchdpgmm.em import fit_skew_normal_mixture, skew_normal_mixture_log_prob
    from torchdpgmm.experiments.em import _minmax, synthetic_skew_mixture

    X = _minmax(synthetic_skew_mixture(datasets, N, torch.Generator().manual_seed(seed))[0])
    start = fit_skew_normal_mixture(X, K, max_iter=0, generator=torch.Generator().manual_seed(seed + 1))
    init = (start.weights, start.xi, start.Lambda, start.eta)
    t_ours, t_base = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ref = direct_skew_normal_em(X, *init, iters)
        t_base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fit = fit_skew_normal_mixture(X, K, max_iter=iters, reg=0.0, init_params=init)
        t_ours.append(time.perf_counter() - t0)
    ref_ll = skew_normal_mixture_log_prob(X, *ref).sum(-1)
    return {"config": {"datasets": datasets, "N": N, "K": K, "d": 3, "iters": iters, "repeats": repeats},
            "seconds_ours": t_ours, "seconds_direct": t_base, "median_ours": statistics.median(t_ours),
            "median_direct": statistics.median(t_base),
            "speedup": statistics.median(t_base) / statistics.median(t_ours),
            "max_rel_loglik_diff": float(((fit.loglik - ref_ll).abs() / ref_ll.abs()).max())}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    count = _args.whole(1)
    p.add_argument("--datasets", type=count, default=100)
    p.add_argument("--N", type=count, default=1000)
    p.add_argument("--K", type=count, default=5)
    p.add_argument("--d", type=count, default=3)
    p.add_argument("--iters", type=count, default=100)
    p.add_argument("--repeats", type=count, default=3)
    p.add_argument("--threads", type=count, default=1, help="torch threads (default 1: the machine is shared)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes for a test")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_em.json"))
    p.add_argument("--sn-datasets", type=count, default=20, help="skew-normal section: datasets (20, as em-synthetic)")
    p.add_argument("--sn-N", type=count, default=3500, help="skew-normal section: rows per dataset (3500)")
    p.add_argument("--sn-iters", type=count, default=50, help="skew-normal section: EM iterations (50)")
    a = p.parse_args(argv)
    _args.check_out(p, a.out)
    if a.smoke:
        a.datasets, a.N, a.iters, a.repeats = 3, 100, 5, 1
        a.sn_datasets, a.sn_N, a.sn_iters = 2, 200, 5
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
    res["skew_normal"] = bench_skew_normal(a.sn_datasets, a.sn_N, 3, a.sn_iters, a.repeats, a.seed)
    limiter.unregister() if hasattr(limiter, "unregister") else None
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from torchdpgmm._provenance import environment as _environment
    res["provenance"] = _environment()  # commit (+dirty), versions, machine
    a.out.write_text(json.dumps(res, indent=2))
    print(json.dumps({k: res[k] for k in ("median_ours", "median_sklearn_loop", "speedup", "max_rel_loglik_diff",
                                          "torch_threads")}))
    print(json.dumps({k: res["skew_normal"][k] for k in ("median_ours", "median_direct", "speedup",
                                                         "max_rel_loglik_diff")}))
    return res


if __name__ == "__main__":
    main()
