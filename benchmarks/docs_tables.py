"""Regenerate the measured-numbers tables of README.md, ``docs/release.md`` and ``docs/design.md`` from the JSON.

    python benchmarks/docs_tables.py [--results benchmarks/results] [--check]

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->`` in the docs; this script
rewrites those blocks (``--check``: exit 1 if a block differs instead of writing). Every number in them
comes from a benchmark JSON, with the load average of the run it comes from.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"fig2": ROOT / "docs" / "release.md", "scale": ROOT / "docs" / "release.md",
        "scale-gpu": ROOT / "docs" / "release.md", "sdp": ROOT / "docs" / "design.md",
        "benchmarks": ROOT / "README.md", "trace": ROOT / "docs" / "design.md"}


def trace_table(res: dict) -> str:
    """Algorithm 1 traced by ``scripts/trace_algorithm1.py`` (means over datasets)."""
    lines = ["| eps | as-published: iters / eps0/eps / sum of printed F' column / (12) / E[KL] "
             "| global: eps0 / (12) / E[KL] | exact-kl: E[KL] |", "| --- | --- | --- | --- |"]
    for r in res["rows"]:
        it = max(r["as_published_iterations"])
        last = r["trace"][-1]
        a, g, x = r["as-published"], r["global"], r["exact-kl"]
        lines.append(f"| {r['epsilon']:g} | {it} / {_f(last['eps0_over_eps_min'], 4)} / {_f(last['printed_F_col_sum_mean'])} / "
                     f"{_f(a['objective_eq12_mean'], 4)} / {_f(a['expected_kl_mean'], 4)} | {_f(g['eps0_mean'], 2)} / "
                     f"{_f(g['objective_eq12_mean'], 4)} / {_f(g['expected_kl_mean'], 4)} | {_f(x['expected_kl_mean'], 4)} |")
    return "\n".join(lines)


def readme_table(results: Path) -> str:
    """The README's benchmark table: the rows of ``benchmarks/report.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_report", Path(__file__).with_name("report.py"))
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    lines = ["| benchmark | result | check | load avg |", "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in report.rows(results)]
    return "\n".join(lines)


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 1e5 or (x != 0 and abs(x) < 1e-3):
        return f"{x:.{max(digits - 1, 1)}e}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def _la(v) -> str:
    return "n/a" if not v else f"{v[0]:.1f}"


def fig2_table(res: dict) -> str:
    c, parts = res["config"], res["a_seconds_by_part"]
    eps = c["epsilons"]
    lines = [f"`bench_fig2.json`: {c['trials']} trials, load average {_la(res['environment'].get('load_average_1_5_15'))}.",
             "", "| quantity | value |", "| --- | --- |",
             f"| (a) Fig-2 sweep end to end, {len(eps)} eps x {c['trials']} trials x {len(c['mechanisms'])} mechanisms | "
             f"{_f(res['a_sweep_seconds'])} s (target < {res['a_target_seconds']:g} s: "
             f"{'met' if res['a_target_met'] else '**not met**'}) |",
             "| of which, per part (s) | " + ", ".join(f"{k} {_f(v)}" for k, v in parts.items()) + " |",
             f"| (d) sweep cost per trial / generate + fit per trial | {_f(res['d_sweep_seconds_per_trial'])} s / "
             f"{_f(res['d_generate_and_fit_seconds_per_trial'])} s, ratio {_f(res['d_ratio_sweep_to_generate_and_fit'])} |",
             "| variants from the same SDP (`design.at`), s | " + ", ".join(
                 f"{k} {_f(v)}" for k, v in res["variants_from_same_sdp_seconds"].items()) + " |",
             "", "Mean realised KL per epsilon:", "",
             "| mechanism | " + " | ".join(f"{e:g}" for e in eps) + " |", "| --- |" + " --- |" * len(eps)]
    for m, v in res["mean_kl"].items():
        lines.append(f"| {m} | " + " | ".join(_f(x) for x in v) + " |")
    o = res["target_order_at_eps1"]
    lines += ["", f"Order at eps = 1: observed {' < '.join(o['observed_order'])}; the paper's "
              f"{' < '.join(o['paper_order'])}: {'met' if o['met'] else 'not met'}."]
    return "\n".join(lines)


def scale_table(res: dict) -> str:
    c, pm = res["config"], res["per_mechanism"]
    lines = [f"`bench_scale.json`: {len(c['epsilons'])} eps x {len(c['mechanisms'])} mechanisms, N={c['N']}, K={c['K']}, "
             f"d={c['d']}, {c['threads']} threads, load average {_la(res['environment']['load_average_start'])} at start, "
             f"{_la(res['environment']['load_average_end'])} at end.", "",
             "| trials | wall (s) | s per trial | peak RSS (GiB) |", "| --- | --- | --- | --- |"]
    for r in res["sweeps"]:
        lines.append(f"| {r['trials']:,} | {_f(r['wall_s'])} | {_f(r['seconds_per_trial'])} | "
                     f"{_f(r['peak_rss_gib'])} |")
    lines += ["", f"Per trial over all epsilons ({pm['trials']} trials, {pm['device']}): generate "
              f"{_f(pm['seconds_per_trial']['generate'])} s + fit {_f(pm['seconds_per_trial']['fit'])} s;",
              "", "| mechanism | s per trial | x (generate + fit) |", "| --- | --- | --- |"]
    for m in c["mechanisms"]:
        lines.append(f"| {m} | {_f(pm['seconds_per_trial'][m])} | {_f(pm['ratio_to_generate_and_fit'][m])} |")
    if res.get("cli_sweeps"):
        lines += ["", "The issue's command end to end (a fresh process, imports, summary and plot included):", "",
                  "| command | wall (s) | s per trial | peak RSS (GiB) |", "| --- | --- | --- | --- |"]
        for r in res["cli_sweeps"]:
            lines.append(f"| `{r['command']}` | {_f(r['wall_s'])} | {_f(r['seconds_per_trial'])} | "
                         f"{_f(r['peak_rss_gib'])} |")
    return "\n".join(lines)


def gpu_table(runs: dict[str, dict]) -> str:
    """CPU vs GPU seconds per trial of ``bench_scale.py`` runs made on a machine with a GPU (their "gpu" section
    beside the "per_mechanism" one, measured in the same run)."""
    lines = ["| file | block (trials) | timed trials | step | CPU s per trial | GPU s per trial |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, res in runs.items():
        cpu, gpu = res["per_mechanism"], res["gpu"]
        for step in ["generate", "fit"] + list(res["config"]["mechanisms"]):
            lines.append(f"| `{name}` | {res['config']['block_size']} | {gpu['trials']} | {step} | "
                         f"{_f(cpu['seconds_per_trial'][step])} | {_f(gpu['seconds_per_trial'][step])} |")
    first = next(iter(runs.values()))
    env = first["environment"]
    lines += ["", f"Machine: {env['cpus']} CPU cores ({first['config']['threads']} torch threads) "
              f"and one GPU (torch {env['torch']}; the `_h100` files: one NVIDIA H100 80GB)."]
    return "\n".join(lines)


def sdp_table(res: dict, extra: dict | None) -> str:
    lines = [f"`bench_sdp.json`: {res['meta']['threads']} thread(s), load average {_la(res['meta'].get('loadavg_start'))}"
             f" at start. Seconds per problem, median of the repeats:", "",
             "| d | N | LMI (s) | cvxpylayers (s) | dual (s) | dual, batched (s/problem) | dual vs LMI | batched vs LMI "
             "| rel. diff dual/LMI | certified gap |", "| --- |" + " --- |" * 9]
    rows = list(res["c_per_problem"]) + (list(extra["c_per_problem"]) if extra else [])
    for r in rows:
        lines.append(f"| {r['d']} | {r['N']} | {_f(r.get('lmi_median_s'))} | {_f(r['cvxpylayers_median_s'])} | "
                     f"{_f(r['dual_median_s'])} | {_f(r['dual_batched_per_problem_median_s'])} | "
                     f"{_f(r.get('speedup_dual_vs_lmi'))} | {_f(r.get('speedup_dual_batched_vs_lmi'))} | "
                     f"{_f(r.get('rel_diff_dual_vs_lmi'))} | {_f(r['dual_gap'] if not isinstance(r['dual_gap'], list) else max(r['dual_gap']))} |")
    b = res.get("b_literal_per_trial")
    if b:
        lines += ["", f"Literal Algorithm 1 (LMI in the loop, one trial at a time) vs `design_mechanism` batched "
                  f"(N={b['N']}, K={b['K']}, d={b['d']}): {_f(b['literal_per_trial_s'])} s vs {_f(b['ours_per_trial_s'])} s "
                  f"per trial, {_f(b['speedup_per_trial'])}x; largest relative difference of Gamma_k^-1 "
                  f"{_f(b['max_rel_diff_mean_noise_cov'])}."]
    return "\n".join(lines)


def tables(results: Path) -> dict[str, str]:
    load = lambda n: json.loads((results / n).read_text()) if (results / n).exists() else None  # noqa: E731
    out = {}
    if load("bench_fig2.json"):
        out["fig2"] = fig2_table(load("bench_fig2.json"))
    if load("bench_scale.json"):
        out["scale"] = scale_table(load("bench_scale.json"))
    gpu_runs = {p.name: json.loads(p.read_text()) for p in sorted(results.glob("bench_scale*.json"))}
    gpu_runs = {k: v for k, v in gpu_runs.items() if v.get("gpu")}
    if gpu_runs:
        out["scale-gpu"] = gpu_table(gpu_runs)
    if load("bench_sdp.json"):
        out["sdp"] = sdp_table(load("bench_sdp.json"), load("bench_sdp_lmi_3x5000.json"))
    out["benchmarks"] = readme_table(results)
    trace = ROOT / "scripts" / "results" / "trace_algorithm1.json"
    if trace.exists():
        out["trace"] = trace_table(json.loads(trace.read_text()))
    return out


def rewrite(text: str, name: str, table: str) -> str:
    pat = re.compile(rf"(<!-- generated: {name} -->\n)(?:(?!<!-- generated:).)*?(<!-- /generated -->)", re.S)
    return pat.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--check", action="store_true", help="exit 1 if a docs block is out of date")
    a = p.parse_args(argv)
    stale = []
    for name, table in tables(a.results).items():
        path = DOCS[name]
        old = path.read_text()
        new = rewrite(old, name, table)
        if new != old:
            stale.append(f"{path.name}:{name}")
            if not a.check:
                path.write_text(new)
    if a.check and stale:
        print("out of date: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
