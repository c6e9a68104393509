"""Print the benchmark table (markdown) from the JSON files in ``benchmarks/results/``.

    python benchmarks/report.py [--results benchmarks/results]

Every number comes from a benchmark's JSON; every ratio was measured against its baseline in the
same run (see each benchmark's docstring). The machine load at measurement time is shown because this
project's machines are small (2 cores) and often shared.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _fmt(x: float, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _load_avg(v) -> str:
    return "n/a" if not v else f"{v[0]:.1f}"


def rows(results: Path) -> list[tuple[str, str, str, str]]:
    out: list[tuple[str, str, str, str]] = []
    sdp = _load(results / "bench_sdp.json")
    if sdp:
        la = _load_avg(sdp["meta"].get("loadavg_start"))
        for r in sdp.get("c_per_problem", []):
            if r.get("speedup_dual_vs_lmi") is None:
                out.append((f"SDP (23) d={r['d']}, N={r['N']}: dual vs cvxpylayers",
                            f"dual {_fmt(r['dual_median_s'])} s/problem, {_fmt(r['dual_batched_per_problem_median_s'])} s batched",
                            f"optimum rel. diff {_fmt(r.get('rel_diff_dual_vs_cvxpylayers'))} (LMI skipped: too slow)", la))
                continue
            out.append((f"SDP (23) d={r['d']}, N={r['N']}: dual vs literal LMI (cvxpy+Clarabel)",
                        f"{_fmt(r['speedup_dual_vs_lmi'])}x single, {_fmt(r['speedup_dual_batched_vs_lmi'])}x batched "
                        f"(cvxpylayers {_fmt(r['speedup_cvxpylayers_vs_lmi'])}x)",
                        f"optimum rel. diff {_fmt(r['rel_diff_dual_vs_lmi'])}; target >= 100x at d=3, 1e-6", la))
        b = sdp.get("b_literal_per_trial")
        if b:
            out.append((f"Algorithm 1 per trial, literal (LMI in the loop) vs batched (N={b['N']}, K={b['K']}, d={b['d']})",
                        f"{_fmt(b['speedup_per_trial'])}x ({_fmt(b['literal_per_trial_s'])} s vs {_fmt(b['ours_per_trial_s'])} s)",
                        f"mean-noise cov rel. diff {_fmt(b['max_rel_diff_mean_noise_cov'])}; target >= 1000x", la))
    fig2 = _load(results / "bench_fig2.json")
    if fig2:
        la = _load_avg(fig2["environment"].get("load_average_1_5_15"))
        c = fig2["config"]
        out.append((f"Fig-2 sweep ({len(c['epsilons'])} eps x {c['trials']} trials x {len(c['mechanisms'])} mechanisms)",
                     f"{_fmt(fig2['a_sweep_seconds'])} s", f"target < {fig2['a_target_seconds']:g} s: "
                     f"{'met' if fig2['a_target_met'] else 'NOT met'}", la))
        out.append(("Fig-2 cost per trial vs generating + fitting its data",
                    f"{_fmt(fig2['d_ratio_sweep_to_generate_and_fit'])}x",
                    f"{_fmt(fig2['d_sweep_seconds_per_trial'])} s vs {_fmt(fig2['d_generate_and_fit_seconds_per_trial'])} s", la))
        o = fig2["target_order_at_eps1"]
        out.append(("Mean KL at eps=1 (100 trials)", " < ".join(f"{m} {_fmt(o['mean_kl'][m])}" for m in o["observed_order"]),
                    f"paper's order {' < '.join(o['paper_order'])}: {'met' if o['met'] else 'NOT met'}", la))
        e = fig2["target_exact_below_as_published"]
        out.append(("exact-kl / as-published realised KL, every eps of Fig 2",
                    ", ".join(_fmt(x, 2) for x in e["ratio_exact_over_as_published"]),
                    "below 1 at every eps: " + ("met" if e["met_at_every_eps"] else "NOT met"), la))
    sc = _load(results / "bench_scale.json")
    if sc:
        la = _load_avg(sc["environment"].get("load_average_start"))
        c = sc["config"]
        for r in sc["sweeps"]:
            out.append((f"Fig-2 sweep via `torchdpgmm.sweep`, {r['trials']:,} trials x {len(c['epsilons'])} eps x "
                        f"{len(c['mechanisms'])} mechanisms",
                        f"{_fmt(r['wall_s'])} s ({_fmt(r['seconds_per_trial'])} s/trial)",
                        f"peak RSS {_fmt(r['peak_rss_gib'])} GiB; target < 3 GB at 10^4", la))
        pm = sc["per_mechanism"]
        out.append((f"Per-trial cost over all {len(c['epsilons'])} eps vs generating + fitting the data "
                    f"({_fmt(pm['generate_and_fit_per_trial'])} s)",
                    ", ".join(f"{m} {_fmt(pm['seconds_per_trial'][m])} s ({_fmt(pm['ratio_to_generate_and_fit'][m], 2)}x)"
                              for m in c["mechanisms"]),
                    "target: kl <= 0.004 s and <= 3x", la))
        for r in sc.get("cli_sweeps") or []:
            out.append((f"`{r['command']}` (end to end)", f"{_fmt(r['wall_s'])} s ({_fmt(r['seconds_per_trial'])} s/trial)",
                        f"peak RSS {_fmt(r['peak_rss_gib'])} GiB; target well under 15 s for 2,000 trials", la))
    em = _load(results / "bench_em.json")
    if em:
        c = em["config"]
        out.append((f"Batched EM, {c['datasets']} datasets (N={c['N']}, K={c['K']}, d={c['d']}, {c['iters']} iterations) vs sklearn loop",
                    f"{_fmt(em['speedup'])}x ({_fmt(em['median_ours'])} s vs {_fmt(em['median_sklearn_loop'])} s)",
                    f"loglik rel. diff {_fmt(em['max_rel_loglik_diff'])}; target >= 10x, 1e-6", _load_avg(em.get("load_average"))))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results")
    a = p.parse_args(argv)
    print("| benchmark | result | check | load avg |")
    print("| --- | --- | --- | --- |")
    for r in rows(a.results):
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
