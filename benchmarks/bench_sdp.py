"""Benchmarks (b) and (c) of issue 3: the covering SDP (23) and the per-trial cost of Algorithm 1.

(c) per-problem SDP time and optimum agreement: literal LMI in plain cvxpy + Clarabel (the baseline),
    the cvxpylayers Gamma form, and the batched dual solver (single problem, and amortised over a batch),
    at d in {3, 5, 10} and N in {1000, 5000}. The LMI is skipped above ``--lmi-cap`` seconds (estimated
    from the smallest size) and the skip is recorded.
(b) the literal per-trial method — Algorithm 1 with the LMI (23) solved in plain cvxpy + Clarabel inside
    the alternating loop, one trial at a time — against ``design_mechanism`` on a batch of trials.

Baseline and ours are measured interleaved in the same run (the machine is shared); the thread count and
the load average are recorded. Usage::

    python benchmarks/bench_sdp.py [--quick] [--out benchmarks/results/bench_sdp.json] [--threads 1]
    python benchmarks/bench_sdp.py --kl-speed [--kl-trials 200] [--repeats 3] [--threads 1]

``--kl-speed`` (issue 16 item 3) times the current solver and design code against those of a git ref
(``--baseline-ref``, default ``main``, loaded beside them) on the KL mechanism's class problems and
``release(..., mechanism="kl")`` over the 7 epsilons (one call, and blocks of 40 trials as the sweep makes),
and merges the result into the JSON under ``kl_speed`` (with its own meta and load averages).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.design import (covering_violation, design_mechanism, label_flip_differences,  # noqa: E402
                               solve_covering_sdp, solve_lmi_cvxpy)
from torchdpgmm.design.algorithm import _mvdigamma  # noqa: E402


def synthetic(seed, T, N, K, d):
    """Sec. V-A generator: Dirichlet(1) weights, means U[-10,10]^d, Wishart(d+1, I) covariances."""
    g = torch.Generator().manual_seed(seed)
    w = -torch.log(torch.rand(T, K, generator=g, dtype=torch.float64))
    w = w / w.sum(-1, keepdim=True)
    w = 0.5 * w + 0.5 / K  # keep every class populated enough for a covariance (d + 1 points)
    mu = 20 * torch.rand(T, K, d, generator=g, dtype=torch.float64) - 10
    G = torch.randn(T, K, d, d + 1, generator=g, dtype=torch.float64)
    cov = G @ G.transpose(-1, -2)
    y = torch.multinomial(w, N, replacement=True, generator=g)
    z = torch.randn(T, N, d, generator=g, dtype=torch.float64)
    Lc = torch.linalg.cholesky(cov)
    X = torch.gather(mu, 1, y.unsqueeze(-1).expand(T, N, d)) + \
        (torch.gather(Lc, 1, y.view(T, N, 1, 1).expand(T, N, d, d)) @ z.unsqueeze(-1)).squeeze(-1)
    return X, y


def _class_problem(X, y, K, k=0):
    V, vm, counts, means = label_flip_differences(X, y, K)
    S = torch.cov(X[y == k].T)
    return V[k], vm[k], torch.linalg.inv(S)


def _timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


def bench_c(sizes, repeats, lmi_cap, batch):
    rows = []
    t_lmi_ref = None  # seconds at the first size, to estimate the cost of the next ones
    n_ref = None
    for d, N in sizes:
        X, y = synthetic(100 * d + N, 1, N, 5, d)
        V, vm, A = _class_problem(X[0], y[0], 5)
        # batch of `batch` problems (different classes / datasets) for the amortised dual time
        Xb, yb = synthetic(7 + d + N, max(1, batch // 5), N, 5, d)
        Vb, vmb, _, _ = label_flip_differences(Xb, yb, 5)
        covb = torch.stack([torch.stack([torch.cov(Xb[t][yb[t] == k].T) for k in range(5)]) for t in range(Xb.shape[0])])
        Ab = torch.linalg.inv(covb)
        solve_covering_sdp(V, A, vm)  # warm-up (first call of eigh etc.)
        est = None if t_lmi_ref is None else t_lmi_ref * (N / n_ref[1]) ** 1.5 * (d / n_ref[0]) ** 3
        run_lmi = est is None or est <= lmi_cap
        rec = {"d": d, "N": N, "lmi": [], "cvxpylayers": [], "dual": [], "dual_batched_per_problem": []}
        for r in range(repeats):
            if run_lmi and (r == 0 or est is None or est * repeats <= lmi_cap):
                (o_lmi, _, _), t = _timed(solve_lmi_cvxpy, A.numpy(), V.numpy())
                rec["lmi"].append(t)
                rec["lmi_opt"] = o_lmi
                if t_lmi_ref is None:
                    t_lmi_ref, n_ref = t, (d, N)
            res_l, t = _timed(solve_covering_sdp, V, A, vm, solver="cvxpylayers")
            rec["cvxpylayers"].append(t)
            rec["cvxpylayers_opt"] = res_l.opt.item()
            res_d, t = _timed(solve_covering_sdp, V, A, vm, solver="dual")
            rec["dual"].append(t)
            rec["dual_opt"] = res_d.opt.item()
            rec["dual_gap"] = res_d.gap.item()
            rec["dual_iterations"] = res_d.iterations
            res_b, t = _timed(solve_covering_sdp, Vb, Ab, vmb, solver="dual")
            rec["dual_batched_per_problem"].append(t / res_b.opt.numel())
            rec["dual_batched_max_gap"] = res_b.gap.max().item()
            rec["batch_problems"] = res_b.opt.numel()
        if not rec["lmi"]:
            rec["lmi_note"] = f"skipped: estimated {est:.0f} s > cap {lmi_cap:.0f} s"
        for key in ("lmi", "cvxpylayers", "dual", "dual_batched_per_problem"):
            if rec[key]:
                rec[key + "_median_s"] = float(np.median(rec[key]))
        if rec["lmi"]:
            o = rec["lmi_opt"]
            rec["rel_diff_dual_vs_lmi"] = abs(rec["dual_opt"] / o - 1)
            rec["rel_diff_cvxpylayers_vs_lmi"] = abs(rec["cvxpylayers_opt"] / o - 1)
            rec["speedup_dual_vs_lmi"] = rec["lmi_median_s"] / rec["dual_median_s"]
            rec["speedup_dual_batched_vs_lmi"] = rec["lmi_median_s"] / rec["dual_batched_per_problem_median_s"]
            rec["speedup_cvxpylayers_vs_lmi"] = rec["lmi_median_s"] / rec["cvxpylayers_median_s"]
        rec["rel_diff_dual_vs_cvxpylayers"] = abs(rec["dual_opt"] / rec["cvxpylayers_opt"] - 1)
        rows.append(rec)
        print(json.dumps({k: v for k, v in rec.items() if not isinstance(v, list)}), flush=True)
    return rows


def literal_algorithm1_trial(X, y, K, eps, delta, lam=1e-3, tol=1e-3, max_iter=50):
    """One trial of Algorithm 1 as printed, with (23) as the literal LMI in plain cvxpy + Clarabel (one SDP per
    class per iteration, eps_k^2 a variable), numpy everywhere else. The objective (12) uses the same closed
    forms for the mapping as the library (the SDPs dominate the cost)."""
    import cvxpy as cp
    N, d = X.shape
    Nk = np.array([(y == k).sum() for k in range(K)], dtype=float)
    pi = Nk / N
    mu = np.stack([X[y == k].mean(0) for k in range(K)])
    Sinv = np.stack([np.linalg.inv(np.cov(X[y == k].T, ddof=1)) for k in range(K)])
    V = []
    for k in range(K):
        inc = (y == k)[:, None]
        V.append(np.where(inc, (X - mu[k]) / (Nk[k] - 1), (mu[k] - X) / (Nk[k] + 1)))
    L = 2 * math.log(2 / delta)
    nbkl = 0.0
    for i in range(K):
        for j in range(K):
            if i != j:
                c = Nk.copy(); c[i] -= 1; c[j] += 1
                nbkl += ((c / N) * np.log(c / Nk)).sum()
    const = (d * math.log(2) + _mvdigamma((d + 1) / 2, d)) / 2
    w = (1 - lam) * pi + lam / K
    eps0, epsk = eps / 3, np.full(K, eps / 3)
    prev, it = None, 0
    for it in range(1, max_iter + 1):
        gam = np.minimum((d + 1) / d * np.trace(Sinv, axis1=1, axis2=2), 2 * Nk * (eps - eps0 - epsk) / 3)
        Ginv = np.zeros((K, d, d))
        for k in range(K):
            sc = float(np.sqrt((V[k] ** 2).sum(1).max()))
            Xv = cp.Variable((d, d), symmetric=True)
            e2 = cp.Variable()
            cons = [Xv >> 0, e2 >= 0, e2 <= (eps - eps0 - 3 * gam[k] / (2 * Nk[k])) ** 2]
            for v in V[k] / sc:
                v = v.reshape(d, 1)
                cons.append(cp.bmat([[cp.reshape(e2 / L, (1, 1), order="C"), v.T], [v, Xv]]) >> 0)
            cp.Problem(cp.Minimize(cp.trace(Sinv[k] @ Xv)), cons).solve(solver=cp.CLARABEL)
            Ginv[k] = Xv.value * sc ** 2
            epsk[k] = math.sqrt(max(e2.value, 1e-300))
        eps0 = eps - np.max(epsk + 3 * gam / (2 * Nk))
        ck = 0.5 * (d * np.log(gam) + (d + 1) / gam * np.trace(Sinv, axis1=1, axis2=2)
                    + np.einsum("kij,kji->k", Sinv, Ginv))
        obj = (1 - lam) * nbkl / (math.exp(eps0) + K * (K - 1)) + (w * ck).sum() - const  # + lam * U (constant)
        if prev is not None and abs(obj - prev) <= tol:
            break
        prev = obj
    return {"eps0": eps0, "eps_k": epsk, "gamma": gam, "mean_noise_cov": Ginv, "iterations": it}


def bench_b(T_literal, T_ours, N, K, d, eps, delta):
    X, y = synthetic(11, max(T_literal, T_ours), N, K, d)
    rows = {"N": N, "K": K, "d": d, "epsilon": eps, "delta": delta, "literal_s": [], "ours_batch_s": [],
            "ours_trials": T_ours, "max_rel_diff_mean_noise_cov": 0.0}
    design_mechanism(X[:2], y[:2], K, eps, delta)  # warm-up
    for t in range(T_literal):
        lit, tl = _timed(literal_algorithm1_trial, X[t].numpy(), y[t].numpy(), K, eps, delta)
        rows["literal_s"].append(tl)
        D, to = _timed(design_mechanism, X[:T_ours], y[:T_ours], K, eps, delta, variant="as-published")
        rows["ours_batch_s"].append(to)
        rel = np.abs(D.mean_noise_cov[t].numpy() / lit["mean_noise_cov"] - 1).max()
        rows["max_rel_diff_mean_noise_cov"] = max(rows["max_rel_diff_mean_noise_cov"], float(rel))
        rows["literal_iterations"] = lit["iterations"]
    rows["literal_per_trial_s"] = float(np.median(rows["literal_s"]))
    rows["ours_per_trial_s"] = float(np.median(rows["ours_batch_s"])) / T_ours
    rows["speedup_per_trial"] = rows["literal_per_trial_s"] / rows["ours_per_trial_s"]
    print(json.dumps({k: v for k, v in rows.items() if not isinstance(v, list)}), flush=True)
    return rows


def _baseline_modules(ref):
    """``torchdpgmm/design/sdp.py`` and ``algorithm.py`` as of git ``ref``, loaded beside the current ones
    (the baseline of the same run); None when git or the ref is unavailable."""
    import subprocess
    import types

    root = Path(__file__).resolve().parents[1]
    mods = {}
    try:
        commit = subprocess.run(["git", "rev-parse", ref], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        for name in ("sdp", "algorithm"):
            src = subprocess.run(["git", "show", f"{commit}:torchdpgmm/design/{name}.py"], cwd=root,
                                 capture_output=True, text=True, check=True).stdout
            mod = types.ModuleType(f"torchdpgmm.design._baseline_{name}")
            mod.__package__ = "torchdpgmm.design"
            sys.modules[mod.__name__] = mod
            exec(compile(src, f"{ref}:{name}.py", "exec"), mod.__dict__)
            mods[name] = mod
    except (OSError, subprocess.CalledProcessError):
        return None
    # the baseline algorithm imported the current sdp by its relative import: point it at the baseline's
    mods["algorithm"].solve_covering_sdp = mods["sdp"].solve_covering_sdp
    mods["algorithm"].label_flip_differences = mods["sdp"].label_flip_differences
    return {"ref": ref, "commit": commit, **mods}


def bench_kl_speed(T, repeats, N=1000, K=5, d=3, epsilons=(0.1, 0.2, 0.5, 1, 2, 5, 10), ref="main", block=40):
    """Issue 16 item 3: the covering SDP of the KL mechanism (T trials = T K class problems) and
    ``release(..., mechanism="kl")`` over the 7 epsilons (one call on T trials, and T trials in blocks of
    ``block`` as the sweep calls it), current code ("barrier") vs the solver and design glue of git ``ref``
    ("baseline"), interleaved in the same run on the same data, against generating + fitting the data."""
    import torchdpgmm.design as design_pkg
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    base = _baseline_modules(ref)
    meths = ("baseline", "barrier") if base is not None else ("barrier",)
    solvers = {"barrier": solve_covering_sdp}
    designs = {"barrier": design_pkg.design_mechanism}
    if base is not None:
        solvers["baseline"] = base["sdp"].solve_covering_sdp
        designs["baseline"] = base["algorithm"].design_mechanism
    eps = torch.tensor(list(epsilons), dtype=torch.float64)[:, None]
    rec = {"N": N, "K": K, "d": d, "trials": T, "block": block, "epsilons": list(epsilons), "repeats": repeats,
           "baseline_ref": None if base is None else {"ref": ref, "commit": base["commit"]},
           "generate_s": [], "fit_s": [], "solve_s": {m: [] for m in meths},
           "release_kl_s": {m: [] for m in meths}, "release_kl_blocks_s": {m: [] for m in meths},
           "max_gap": {}, "max_rel_diff_opt": 0.0, "max_violation": 0.0}

    def rel(meth, X, y, g):
        design_pkg.design_mechanism = designs[meth]    # release() imports it from the package at call time
        try:
            return release(X, y, K, eps, 1e-5, mechanism="kl", mode="as-published", generator=g)
        finally:
            design_pkg.design_mechanism = designs["barrier"]

    for rep in range(repeats + 1):           # repeat 0 is a warm-up, not recorded
        g = torch.Generator().manual_seed(rep)
        (data, tg) = _timed(synthetic_data, T, N, K, d, generator=g)
        fit, tf = _timed(fit_labeled, data.X, data.y, K)
        V, vm, _, _ = label_flip_differences(data.X.double(), data.y, K)
        A = torch.cholesky_inverse(torch.linalg.cholesky(fit.covariances.double()))
        opts = {}
        for meth in (meths if rep % 2 == 0 else meths[::-1]):   # alternate the order
            opts[meth], ts = _timed(solvers[meth], V, A, vm)
            _, tr = _timed(rel, meth, data.X, data.y, torch.Generator().manual_seed(rep))
            t0 = time.perf_counter()
            for b in range(0, T, block):
                rel(meth, data.X[b:b + block], data.y[b:b + block], torch.Generator().manual_seed(b))
            tb = time.perf_counter() - t0
            if rep > 0:
                rec["solve_s"][meth].append(ts)
                rec["release_kl_s"][meth].append(tr)
                rec["release_kl_blocks_s"][meth].append(tb)
                rec["max_gap"][meth] = max(rec["max_gap"].get(meth, 0.0), opts[meth].gap.max().item())
        if rep > 0:
            rec["generate_s"].append(tg)
            rec["fit_s"].append(tf)
            if base is not None:
                dv = (opts["barrier"].opt / opts["baseline"].opt - 1).abs().max().item()
                rec["max_rel_diff_opt"] = max(rec["max_rel_diff_opt"], dv)
            rec["max_violation"] = max(rec["max_violation"], covering_violation(V, opts["barrier"].X, vm).max().item())
    med = lambda xs: float(np.median(xs))  # noqa: E731
    basefit = (med(rec["generate_s"]) + med(rec["fit_s"])) / T
    rec["generate_and_fit_per_trial_s"] = basefit
    for meth in meths:
        rec[f"{meth}_per_problem_s"] = med(rec["solve_s"][meth]) / (T * K)
        rec[f"{meth}_per_trial_s"] = med(rec["solve_s"][meth]) / T
        rec[f"release_kl_{meth}_per_trial_s"] = med(rec["release_kl_s"][meth]) / T
        rec[f"release_kl_blocks_{meth}_per_trial_s"] = med(rec["release_kl_blocks_s"][meth]) / T
        rec[f"release_kl_{meth}_vs_generate_and_fit"] = rec[f"release_kl_{meth}_per_trial_s"] / basefit
    if base is not None:
        rec["speedup_solve"] = rec["baseline_per_trial_s"] / rec["barrier_per_trial_s"]
        rec["speedup_release_kl"] = rec["release_kl_baseline_per_trial_s"] / rec["release_kl_barrier_per_trial_s"]
        rec["speedup_release_kl_blocks"] = (rec["release_kl_blocks_baseline_per_trial_s"]
                                            / rec["release_kl_blocks_barrier_per_trial_s"])
    print(json.dumps({k: v for k, v in rec.items() if not isinstance(v, (list, dict))}), flush=True)
    return rec


def bench_kl_sizes(sizes, T, repeats, K=5, ref="main"):
    """Solver only, current vs git ``ref``, interleaved, on T trials' K class problems at other (d, N)
    (the barrier settings were tuned at d = 3, N = 1000)."""
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.montecarlo import synthetic_data

    base = _baseline_modules(ref)
    if base is None:
        return []
    rows = []
    for d, N in sizes:
        ts = {"baseline": [], "barrier": []}
        gap = {"baseline": 0.0, "barrier": 0.0}
        for rep in range(repeats + 1):
            data = synthetic_data(T, N, K, d, generator=torch.Generator().manual_seed(100 + rep))
            fit = fit_labeled(data.X, data.y, K)
            V, vm, _, _ = label_flip_differences(data.X.double(), data.y, K)
            A = torch.cholesky_inverse(torch.linalg.cholesky(fit.covariances.double()))
            order = (("baseline", base["sdp"].solve_covering_sdp), ("barrier", solve_covering_sdp))
            for meth, fn in (order if rep % 2 == 0 else order[::-1]):
                res, t = _timed(fn, V, A, vm)
                if rep > 0:
                    ts[meth].append(t / T)
                    gap[meth] = max(gap[meth], res.gap.max().item())
        row = {"d": d, "N": N, "trials": T, "baseline_per_trial_s": float(np.median(ts["baseline"])),
               "barrier_per_trial_s": float(np.median(ts["barrier"])), "max_gap": gap}
        row["speedup"] = row["baseline_per_trial_s"] / row["barrier_per_trial_s"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def _size(text: str) -> tuple[int, int]:
    """``dxN`` (``3x5000``): d and N, both whole numbers >= 1."""
    d, n = (int(v) for v in text.split("x"))
    if d < 1 or n < 1:
        raise ValueError(text)
    return d, n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "bench_sdp.json"))
    count = _args.whole(1)
    ap.add_argument("--threads", type=count, default=1)
    ap.add_argument("--repeats", type=count, default=3)
    ap.add_argument("--lmi-cap", type=_args.positive_float, default=150.0,
                    help="skip an LMI solve estimated above this (s)")
    ap.add_argument("--literal-trials", type=count, default=2)
    ap.add_argument("--batch", type=count, default=100, help="problems in the amortised dual measurement")
    ap.add_argument("--sizes", default=None, type=_args.csv_of(_size, "dxN sizes (e.g. 3x5000)"),
                    help="comma list of dxN, e.g. 3x5000,5x1000 (default: the grid)")
    ap.add_argument("--skip-b", action="store_true")
    ap.add_argument("--skip-c", action="store_true")
    ap.add_argument("--kl-speed", action="store_true",
                    help="only the barrier-vs-multiplicative comparison (issue 16 item 3); merged into --out")
    ap.add_argument("--kl-trials", type=count, default=200)
    ap.add_argument("--baseline-ref", default="main",
                    help="git ref whose design/sdp.py + algorithm.py are the --kl-speed baseline (default main)")
    a = ap.parse_args(argv)
    _args.check_quick_out(ap, a.quick, a.out)
    _args.check_out(ap, a.out)
    torch.set_num_threads(a.threads)
    if a.quick:
        sizes, repeats, lit_T, ours_T, Nb, Kb, db, batch = [(2, 60), (3, 80)], 1, 1, 4, 60, 3, 2, 10
    else:
        sizes = [(3, 1000), (5, 1000), (10, 1000), (3, 5000), (5, 5000), (10, 5000)]
        repeats, lit_T, ours_T, Nb, Kb, db, batch = a.repeats, a.literal_trials, 100, 1000, 5, 3, a.batch
    if a.sizes:
        sizes = [tuple(int(v) for v in z.split("x")) for z in a.sizes.split(",")]
    meta = {"threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "loadavg_start": os.getloadavg(),
            "quick": a.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if a.kl_speed:   # merged into the existing JSON (the other sections and their meta are kept)
        path = Path(a.out)
        out = json.loads(path.read_text()) if path.exists() else {"benchmark": "bench_sdp", "meta": meta}
        T = 4 if a.quick else a.kl_trials
        from torchdpgmm._provenance import environment as _environment

        out["kl_speed"] = {"meta": meta | {"provenance": _environment()}, **bench_kl_speed(T, 1 if a.quick else a.repeats, ref=a.baseline_ref,
                                                          block=2 if a.quick else 40)}
        sizes = [(2, 60)] if a.quick else [(2, 1000), (4, 1000), (5, 1000), (10, 1000), (3, 5000)]
        out["kl_speed"]["other_sizes"] = bench_kl_sizes(sizes, 2 if a.quick else 20, 1 if a.quick else a.repeats,
                                                        ref=a.baseline_ref)
        meta["loadavg_end"] = os.getloadavg()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1))
        print("wrote", a.out)
        return out
    from torchdpgmm._provenance import environment as _environment

    out = {"benchmark": "bench_sdp", "meta": meta, "provenance": _environment()}
    if not a.skip_c:
        out["c_per_problem"] = bench_c(sizes, repeats, a.lmi_cap, batch)
    if not a.skip_b:
        out["b_literal_per_trial"] = bench_b(lit_T, ours_T, Nb, Kb, db, 1.0, 1e-5)
    meta["loadavg_end"] = os.getloadavg()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)
    return out


if __name__ == "__main__":
    main()
