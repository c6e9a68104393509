"""Trace what the printed updates of Algorithm 1 (Liu, Scaglione & Peisert 2025) do; compare the three design variants.

For synthetic data as in Sec. V-A (default N=1000, K=5, d=3, delta=1e-5, lambda=1e-3) and several epsilons,
records per iteration of the as-published loop: eps0, eps_k, gamma_k, the objective (12), the column
F'_{., j*} of the printed (26) (its sum, which a PMF would need to be 1) and sum_i g_i F'_{i,j*}; then the
designs of the "global" and "exact-kl" variants and the exact expected KL of all three.
Writes JSON to the file named by ``--out`` (required: the script never writes into the repository by
itself; the JSON holds no absolute path) and prints a summary. Numbers in docs/design.md come from::

    python scripts/trace_algorithm1.py --trials 20 --out scripts/results/trace_algorithm1.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.design import design_mechanism  # noqa: E402


def synthetic(seed, T, N, K, d):
    """Sec. V-A: Dirichlet(1) weights, means U[-10,10]^d, Wishart(d+1, I) covariances, N i.i.d. points.
    Datasets with a class of fewer than d + 1 points are redrawn (needed for eq. 2c)."""
    g = torch.Generator().manual_seed(seed)
    Xs, ys = [], []
    while len(Xs) < T:
        w = -torch.log(torch.rand(K, generator=g, dtype=torch.float64))
        w = w / w.sum()
        mu = 20 * torch.rand(K, d, generator=g, dtype=torch.float64) - 10
        G = torch.randn(K, d, d + 1, generator=g, dtype=torch.float64)
        Lc = torch.linalg.cholesky(G @ G.transpose(-1, -2))
        y = torch.multinomial(w, N, replacement=True, generator=g)
        if int(torch.bincount(y, minlength=K).min()) < d + 1:
            continue
        z = torch.randn(N, d, 1, generator=g, dtype=torch.float64)
        Xs.append(mu[y] + (Lc[y] @ z).squeeze(-1))
        ys.append(y)
    return torch.stack(Xs), torch.stack(ys)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    count = _args.whole(1)
    ap.add_argument("--trials", type=count, default=20)
    ap.add_argument("--N", type=count, default=1000)
    ap.add_argument("--K", type=count, default=5)
    ap.add_argument("--d", type=count, default=3)
    ap.add_argument("--delta", type=_args.positive_float, default=1e-5)
    ap.add_argument("--eps", type=_args.positive_float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=count, default=1)
    ap.add_argument("--out", required=True, help="JSON file to write (e.g. scripts/results/trace_algorithm1.json)")
    a = ap.parse_args(argv)
    if a.delta >= 1:
        ap.error(f"--delta must lie in (0, 1), got {a.delta}")
    if a.N < a.K * (a.d + 1):  # every class needs d + 1 points (datasets are redrawn until they have them)
        ap.error(f"--N must be at least K (d + 1) = {a.K * (a.d + 1)} for K={a.K}, d={a.d}, got {a.N}")
    _args.check_out(ap, a.out)
    torch.set_num_threads(a.threads)
    X, y = synthetic(a.seed, a.trials, a.N, a.K, a.d)
    t0 = time.perf_counter()
    base = design_mechanism(X, y, a.K, a.eps[0], a.delta, variant="as-published")
    t_design = time.perf_counter() - t0
    eps = torch.tensor(a.eps, dtype=torch.float64).unsqueeze(-1)            # (E, 1) x (T,) -> (E, T)
    t0 = time.perf_counter()
    designs = {v: base.at(eps, variant=v) for v in ("as-published", "global", "exact-kl")}
    t_sweep = time.perf_counter() - t0
    pub = designs["as-published"]
    rows = []
    for i, e in enumerate(a.eps):
        trace = [{"iteration": s["iteration"],
                  "eps0_mean": s["eps0"][i].mean().item(),
                  "eps0_over_eps_min": (s["eps0"][i] / e).min().item(),
                  "eps0_over_eps_max": (s["eps0"][i] / e).max().item(),
                  "eps_k_over_eps_mean": (s["eps_k"][i] / e).mean().item(),
                  "wishart_share_mean": (3 * s["gamma"][i] / (2 * pub.counts) / e).mean().item(),
                  "gamma_at_bound_fraction": (s["gamma"][i] < (a.d + 1) / a.d * pub._ctx["tr_inv"] * (1 - 1e-12)).double().mean().item(),
                  "objective_mean": s["objective"][i].mean().item(),
                  "printed_F_col_sum_mean": s["printed_F_col_sum"][i].mean().item(),
                  "printed_objective_mean": s["printed_objective"][i].mean().item()}
                 for s in pub.trace]
        row = {"epsilon": e, "as_published_iterations": sorted(set(pub.iterations[i].tolist())), "trace": trace}
        for v, D in designs.items():
            row[v] = {"eps0_mean": D.eps0[i].mean().item(),
                      "eps_k_over_eps_mean": (D.eps_k[i] / e).mean().item(),
                      "wishart_share_mean": (3 * D.gamma[i] / (2 * D.counts) / e).mean().item(),
                      "gamma_mean": D.gamma[i].mean().item(),
                      "objective_eq12_mean": D.objective_eq12[i].mean().item(),
                      "expected_kl_mean": D.expected_kl[i].mean().item()}
        row["expected_kl_ratio_exact_over_published"] = (designs["exact-kl"].expected_kl[i]
                                                         / pub.expected_kl[i]).mean().item()
        row["eq12_gain_global_over_published"] = (pub.objective_eq12[i] - designs["global"].objective_eq12[i]).mean().item()
        rows.append(row)
        print(f"eps={e:5.2f}  as-published: iters {row['as_published_iterations']}, eps0/eps "
              f"{trace[-1]['eps0_over_eps_min']:.6f}..{trace[-1]['eps0_over_eps_max']:.6f}, "
              f"F' col sum {trace[-1]['printed_F_col_sum_mean']:.4f}, obj(12) {trace[-1]['objective_mean']:.4f}, "
              f"E[KL] {row['as-published']['expected_kl_mean']:.4f} | global eps0 {row['global']['eps0_mean']:.2e} "
              f"obj(12) {row['global']['objective_eq12_mean']:.4f} E[KL] {row['global']['expected_kl_mean']:.4f} | "
              f"exact-kl eps0 {row['exact-kl']['eps0_mean']:.2e} E[KL] {row['exact-kl']['expected_kl_mean']:.4f} "
              f"(ratio {row['expected_kl_ratio_exact_over_published']:.3f})")
    config = {k: v for k, v in vars(a).items() if k != "out"}  # no paths of this machine in the output
    out = {"script": "trace_algorithm1", "config": config, "design_seconds": t_design,
           "sweep_seconds_3_variants": t_sweep, "rows": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)
    return out


if __name__ == "__main__":
    main()
