"""Generate the Xi, Kantarcioglu & Inan (2011) result tables of docs/bayes.md from the committed study JSON
files under docs/results/xi/ (studies ``xi-table1``, ``xi-fig1`` ... ``xi-fig5``, ``xi-theorem41``,
``xi-compare``; Table 1 also at the other prior reading, docs/results/xi/prior07/) and the paper's printed
values transcribed in docs/results/xi/paper_values.json.

Each table sits between ``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED: NAME -->`` markers.
Summary numbers derived from the study JSON (differences from the paper, ranges) are written to
docs/results/xi/bayes_tables.json, so that every number the page quotes is in a committed JSON.

    python scripts/bayes_tables.py --write      # rewrite the blocks and bayes_tables.json
    python scripts/bayes_tables.py --check      # exit 1 if a block or bayes_tables.json is out of date
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
XI = ROOT / "docs" / "results" / "xi"
DOC = ROOT / "docs" / "bayes.md"
DERIVED = XI / "bayes_tables.json"
COMPARE_ORDER = ["xi-upper", "xi-exact", "nonprivate", "kl", "laplace", "gaussian", "colored", "r1smg"]


def _load(name: str) -> dict:
    return json.loads((XI / f"{name}.json").read_text())


def _r3(x: float) -> float:
    return round(float(x), 3)


def table1_block(main: dict, other: dict | None, paper: dict) -> tuple[str, dict]:
    rows, cfg = main["rows"], main["config"]
    dims = sorted({r["d"] for r in rows})
    sigmas = sorted({r["sigma"] for r in rows})
    cell = {(r["d"], r["sigma"]): r for r in rows}
    printed = {int(d): v for d, v in paper["table1"]["rows"].items()}
    diffs = [abs(cell[d, s]["bayes_error"] - printed[d][sigmas.index(s)]) for d in dims for s in sigmas]
    same = [f"{cell[d, s]['bayes_error']:.2f}" == f"{printed[d][sigmas.index(s)]:.2f}" for d in dims for s in sigmas]
    facts = {"prior": cfg["prior"], "max_abs_diff_vs_paper": _r3(max(diffs)), "cells_equal_at_two_decimals": sum(same),
             "cells": len(diffs)}
    lines = [f"Seed {cfg['seed']}, {cfg['trials']} trials per cell, {cfg['num_test']:,} test points per trial, "
             f"class prior {cfg['prior']:g}, n = {cfg['n_train']}, no noise. Cell: ours, mean of all trials / mean "
             "of the first five trials (paper's printed value).", "",
             "| d \\ sigma | " + " | ".join(f"{s:g}" for s in sigmas) + " |",
             "| --- " * (len(sigmas) + 1) + "|"]
    for d in dims:
        lines.append(f"| {d} | " + " | ".join(
            f"{cell[d, s]['bayes_error']:.3f} / {cell[d, s]['bayes_error_5reps']:.3f} ({printed[d][i]:.2f})"
            for i, s in enumerate(sigmas)) + " |")
    lines += ["", f"- Largest difference from the paper's printed cell: {facts['max_abs_diff_vs_paper']:.3f}; "
              f"{facts['cells_equal_at_two_decimals']} of {facts['cells']} cells, rounded to two decimals, equal the "
              "paper's."]
    if other is not None:
        o = {(r["d"], r["sigma"]): r["bayes_error"] for r in other["rows"]}
        below = [printed[d][sigmas.index(s)] - o[d, s] for d in dims for s in sigmas if (d, s) in o]
        facts.update({"other_prior": other["config"]["prior"], "other_prior_trials": other["config"]["trials"],
                      "other_prior_below_paper_min": _r3(min(below)), "other_prior_below_paper_max": _r3(max(below))})
        lines.append(f"- With class prior {facts['other_prior']:g} (`--prior {facts['other_prior']:g}`, "
                     f"{facts['other_prior_trials']} trials, docs/results/xi/prior07/xi-table1.json) the errors are "
                     f"{facts['other_prior_below_paper_min']:.3f} to {facts['other_prior_below_paper_max']:.3f} "
                     "below the paper's cells.")
    return "\n".join(lines), facts


def fig1_block(res: dict) -> tuple[str, dict]:
    rows, cfg = sorted(res["rows"], key=lambda r: r["n"]), res["config"]
    facts = {"trials": cfg["trials"], "majority_error": _r3(rows[0]["majority_error"]),
             "nonprivate_max": _r3(max(r["nonprivate_error_mean"] for r in rows)),
             "dp_min": _r3(min(r["dp_error_mean"] for r in rows)),
             "dp_at_largest_n": _r3(rows[-1]["dp_error_mean"]),
             "repaired_fraction_min": round(min(r["repaired_fraction"] for r in rows), 2),
             "max_abs_5reps_minus_all": _r3(max(abs(r["dp_error_mean_5reps"] - r["dp_error_mean"]) for r in rows))}
    lines = [f"Seed {cfg['seed']}, {cfg['trials']} trials per size, {cfg['num_test']:,} test points per trial, "
             f"prior {rows[0]['prior']:g}, epsilon {cfg['epsilon'][0]:g}, Theorem 3.7 {cfg['cov_bound']} bound, "
             f"means' share of epsilon {cfg['mean_fraction']:g}.", "",
             f"| n | DP error, {cfg['trials']} trials [95% CI] | DP error, first 5 trials | no noise | optimal | "
             "repaired fraction |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['dp_error_mean']:.3f} [{r['dp_error_ci_low']:.3f}, {r['dp_error_ci_high']:.3f}]"
                     f" | {r['dp_error_mean_5reps']:.3f} | {r['nonprivate_error_mean']:.3f} | "
                     f"{r['optimal_error']:.3f} | {r['repaired_fraction']:.2f} |")
    lines += ["", f"- No noise: largest mean error {facts['nonprivate_max']:.3f}; majority-class error "
              f"{facts['majority_error']:.3f}.",
              f"- DP error: smallest mean {facts['dp_min']:.3f} (at the largest n: {facts['dp_at_largest_n']:.3f}); "
              f"smallest repaired fraction {facts['repaired_fraction_min']:.2f}; largest gap between the first-5 "
              f"mean and the all-trials mean {facts['max_abs_5reps_minus_all']:.3f}."]
    return "\n".join(lines), facts


def corr_block(res: dict) -> tuple[str, dict]:
    rows, cfg = res["rows"], res["config"]
    sigmas = sorted({r["sigma"] for r in rows})
    sizes = sorted({r["n"] for r in rows})
    cell = {(r["n"], r["sigma"]): r for r in rows}
    big = sizes[-1]
    small = [n for n in sizes if n <= 8000]
    dp_small = [cell[n, s]["dp_error_mean"] for n in small for s in sigmas]
    dp_big = [cell[big, s]["dp_error_mean"] for s in sigmas]
    np_big = [cell[big, s]["nonprivate_error_mean"] for s in sigmas]
    facts = {"d": rows[0]["d"], "trials": cfg["trials"], "largest_n": big,
             "dp_n_le_8000_min": _r3(min(dp_small)), "dp_n_le_8000_max": _r3(max(dp_small)),
             "dp_largest_n_min": _r3(min(dp_big)), "dp_largest_n_max": _r3(max(dp_big)),
             "nonprivate_largest_n_min": _r3(min(np_big)), "nonprivate_largest_n_max": _r3(max(np_big))}
    lines = [f"Seed {cfg['seed']}, {cfg['trials']} trials per point, {cfg['num_test']:,} test points per trial, "
             f"d = {facts['d']}, prior {rows[0]['prior']:g}, epsilon {cfg['epsilon'][0]:g}. DP error, mean of all "
             "trials (mean of the first five trials).", "",
             "| n \\ sigma | " + " | ".join(f"{s:g}" for s in sigmas) + " |", "| --- " * (len(sigmas) + 1) + "|"]
    for n in sizes:
        lines.append(f"| {n} | " + " | ".join(
            f"{cell[n, s]['dp_error_mean']:.3f} ({cell[n, s]['dp_error_mean_5reps']:.3f})" for s in sigmas) + " |")
    lines.append(f"| no noise, n={big} | " + " | ".join(f"{v:.3f}" for v in np_big) + " |")
    lines += ["", f"- DP error for n <= 8000: {facts['dp_n_le_8000_min']:.3f} to {facts['dp_n_le_8000_max']:.3f}; "
              f"at n = {big}: {facts['dp_largest_n_min']:.3f} to {facts['dp_largest_n_max']:.3f}; no noise at "
              f"n = {big}: {facts['nonprivate_largest_n_min']:.3f} to {facts['nonprivate_largest_n_max']:.3f}."]
    return "\n".join(lines), facts


def theorem_block(res: dict) -> tuple[str, dict]:
    rows, cfg = res["rows"], res["config"]
    cols = [("corrected", "interval"), ("corrected", "paper"), ("paper", "interval"), ("paper", "paper")]
    ps = sorted({r["p"] for r in rows})
    cell = {(r["p"], r["quantiles"], r["form"]): r for r in rows}
    failing = sorted({r["p"] for r in rows if r["quantiles"] == "paper" and not r["holds"]})
    kl08 = cell.get((0.8, "corrected", "interval"))
    facts = {"trials": cfg["trials"], "nonpositive_variance_fraction": rows[0].get("nonpositive_variance_fraction"),
             "printed_quantiles_fail_at_p": failing,
             "corrected_always_holds": all(r["holds"] for r in rows if r["quantiles"] == "corrected"),
             "corrected_interval_K_L_at_p_0.8": None if kl08 is None else _r3(kl08["K_L"])}
    lines = [f"Seed {cfg['seed']}, {cfg['trials']:,} trials; mu = {tuple(cfg['mu'])}, var = {tuple(cfg['var'])}, "
             f"n = {tuple(cfg['n'])}, lambda = {tuple(cfg['lam'])}. Coverage of `K^L(p) < K < K^U(p)`; bold: below "
             "the claimed `p^8`.", "",
             "| p | p^8 | corrected, interval | corrected, paper form | printed quantiles, interval | "
             "printed quantiles, paper form |", "| --- | --- | --- | --- | --- | --- |"]
    for p in ps:
        cells = []
        for q, f in cols:
            r = cell[p, q, f]
            cells.append(f"{r['coverage']:.4f}" if r["holds"] else f"**{r['coverage']:.4f}**")
        lines.append(f"| {p:g} | {cell[p, 'paper', 'paper']['claimed_p8']:.3f} | " + " | ".join(cells) + " |")
    lines.append("")
    if facts["nonpositive_variance_fraction"] is not None:
        lines.append(f"- Trials with a released variance <= 0 (counted as not covered): "
                     f"{100 * facts['nonpositive_variance_fraction']:.3f}%.")
    lines.append("- The printed quantiles miss `p^8` at p in {" + ", ".join(f"{p:g}" for p in failing) + "}; "
                 "the corrected quantiles hold at every p: " + ("yes" if facts["corrected_always_holds"] else "no")
                 + ".")
    if kl08 is not None:
        lines.append(f"- Corrected interval form, p = 0.8: `K^L` = {facts['corrected_interval_K_L_at_p_0.8']:.3f}.")
    return "\n".join(lines), facts


def compare_block(res: dict) -> tuple[str, dict]:
    rows, cfg = res["rows"], res["config"]
    sizes = sorted({r["n"] for r in rows})
    mechs = [m for m in COMPARE_ORDER if any(r["mechanism"] == m for r in rows)]
    cell = {(r["mechanism"], r["n"]): r["bayes_error_mean"] for r in rows}
    private = [m for m in mechs if m != "nonprivate"]
    best = {n: min(private, key=lambda m: cell[m, n]) for n in sizes}
    big = sizes[-1]
    facts = {"trials": cfg["trials"], "largest_n": big, "best_private_per_n": {str(n): best[n] for n in sizes},
             "at_largest_n": {m: _r3(cell[m, big]) for m in mechs}}
    lines = [f"Seed {cfg['seed']}, {cfg['trials']} trials per size, {cfg['num_test']:,} test points per trial, "
             f"Fig. 1 mixture, epsilon {cfg['epsilon']:g}, delta {cfg['delta']:g} for the (epsilon, delta) "
             "mechanisms. Mean Bayes error; bold: the smallest private error at that n.", "",
             "| mechanism | " + " | ".join(str(n) for n in sizes) + " |", "| --- " * (len(sizes) + 1) + "|"]
    for m in mechs:
        cells = [f"**{cell[m, n]:.3f}**" if best[n] == m else f"{cell[m, n]:.3f}" for n in sizes]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines), facts


def _replace(text: str, name: str, block: str) -> str:
    """Rewrite one ``<!-- BEGIN/END GENERATED: name -->`` block: the rule of ``scripts/stats_docs.py``,
    which fills the other generated blocks of the same page."""
    spec = importlib.util.spec_from_file_location("_stats_docs", Path(__file__).with_name("stats_docs.py"))
    stats_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stats_docs)
    return stats_docs._replace(text, name, block)


def build() -> tuple[list[tuple[str, str]], dict]:
    paper = _load("paper_values")
    other = XI / "prior07" / "xi-table1.json"
    jobs = [("xi-table1", table1_block(_load("xi-table1"), json.loads(other.read_text()) if other.exists() else None,
                                       paper)),
            ("xi-fig1", fig1_block(_load("xi-fig1")))]
    jobs += [(f"xi-fig{k}", corr_block(_load(f"xi-fig{k}"))) for k in (2, 3, 4, 5)]
    jobs += [("xi-theorem41", theorem_block(_load("xi-theorem41"))), ("xi-compare", compare_block(_load("xi-compare")))]
    derived = {"script": "scripts/bayes_tables.py", "derived_from": "docs/results/xi/*.json",
               **{name: facts for name, (_, facts) in jobs}}
    return [(name, block) for name, (block, _) in jobs], derived


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    blocks, derived = build()
    old = DOC.read_text()
    new = old
    for name, block in blocks:
        new = _replace(new, name, block)
    derived_text = json.dumps(derived, indent=1) + "\n"
    stale = [str(DOC.relative_to(ROOT))] if new != old else []
    if not DERIVED.exists() or DERIVED.read_text() != derived_text:
        stale.append(str(DERIVED.relative_to(ROOT)))
    if a.write:
        DOC.write_text(new)
        DERIVED.write_text(derived_text)
    if a.check and stale:
        print("out of date: " + ", ".join(stale) + " (run: python scripts/bayes_tables.py --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
