"""The results blocks of docs/tables.md, rendered from the tabular study's JSON (and the release benchmark's).

    python -m torchdpgmm.cli experiment tabular --out docs/results/tabular   # the study (peers.json merged if there)
    python scripts/tabular_tables.py --write     # tabular-summary.json + the docs blocks from tabular.json
    python scripts/tabular_tables.py --check     # exit 1 if the summary or a block is out of date

Reads docs/results/tabular/tabular.json and benchmarks/results/bench_tabular_release.json. Writes
docs/results/tabular/tabular-summary.json: the mean accuracy over noise draws of every (table, epsilon,
method, downstream) and the study's targets, so that every number the page quotes is in a committed JSON.
Blocks sit between ``<!-- generated: NAME -->`` and ``<!-- /generated -->`` (benchmarks/docs_tables.py's
``rewrite``, the one home of that format).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)

RESULTS = ROOT / "docs" / "results" / "tabular"
DOC = ROOT / "docs" / "tables.md"
BENCH = ROOT / "benchmarks" / "results" / "bench_tabular_release.json"
OURS = ("DPGaussianMixture", "DPSyntheticClassifier")


def summarize(study: dict) -> dict:
    """Mean accuracy (and fit time) over noise draws per (table, epsilon, method, downstream), in row order."""
    groups: dict[tuple, list[dict]] = {}
    for r in study["rows"]:
        groups.setdefault((r["table"], r.get("epsilon"), r["method"], r["downstream"]), []).append(r)
    out = []
    for (t, eps, m, d), rs in groups.items():
        acc = [r["accuracy"] for r in rs if r.get("accuracy") is not None]
        fit = [r["fit_seconds"] for r in rs if r.get("fit_seconds") is not None]
        out.append({"table": t, "epsilon": eps, "method": m, "downstream": d, "draws": len(acc),
                    "mean_accuracy": sum(acc) / len(acc) if acc else None,
                    "mean_fit_seconds": sum(fit) / len(fit) if fit else None,
                    "status": None if acc else sorted({str(r.get("status")) for r in rs})[0]})
    cfg = study["config"]
    return {"source": "docs/results/tabular/tabular.json (scripts/tabular_tables.py)", "rows": out,
            "tables": cfg["tables"], "epsilons": cfg["epsilons"], "draws": cfg["draws"],
            "default_covariance_type": cfg.get("default_covariance_type"), "peers": cfg.get("peers"),
            "targets": cfg["targets"]}


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _get(summary, table, eps, method=None, downstream=None, keep=None):
    return [r for r in summary["rows"] if r["table"] == table and r["epsilon"] == eps
            and (method is None or r["method"] == method) and (downstream is None or r["downstream"] == downstream)
            and (keep is None or keep(r)) and r["mean_accuracy"] is not None]


def _best(rows):
    return max(rows, key=lambda r: r["mean_accuracy"], default=None)


def _short(r) -> str:
    m = r["method"].replace("DPGaussianMixture", "GMM").replace("DPSyntheticClassifier[pipeline]", "pipeline")
    return f"{m} {r['downstream'].replace('synthetic->', '→ ')}"


def overview_block(s: dict) -> str:
    """At eps = 1: every table's non-private references, the default release, our best, the DP peers."""
    default = next((r["method"] for r in s["rows"] if r["method"].startswith("DPGaussianMixture[default=")), None)
    head = ["table", "N train", "d", "K", "bounds", "non-private QDA / HGB", f"default release ({default}) Bayes",
            "best of ours, synthetic rows → classifier", "diffprivlib GaussianNB", "best peer (peers.json)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t, info in s["tables"].items():
        qda = _get(s, t, None, "non-private QDA")
        hgb = _get(s, t, None, "non-private HGB")
        dflt = _get(s, t, 1.0, default, "bayes")
        ours = _best(_get(s, t, 1.0, keep=lambda r: r["method"].startswith(OURS)
                          and r["downstream"].startswith("synthetic")))
        nb = _get(s, t, 1.0, "diffprivlib GaussianNB")
        peer = _best(_get(s, t, 1.0, keep=lambda r: not r["method"].startswith(OURS)
                          and not r["method"].startswith("diffprivlib")))
        src = "public" if info["bounds_source"].startswith("public") else "train min-max"
        cells = [t, str(info["n_train"]), str(info["d"]), str(info["classes"]), src,
                 f"{_pct(qda[0]['mean_accuracy'] if qda else None)} / {_pct(hgb[0]['mean_accuracy'] if hgb else None)}",
                 _pct(dflt[0]["mean_accuracy"] if dflt else None),
                 "-" if ours is None else f"{_pct(ours['mean_accuracy'])} ({_short(ours)})",
                 _pct(nb[0]["mean_accuracy"]) if nb else "not run",
                 "not run" if peer is None else f"{_pct(peer['mean_accuracy'])} ({peer['method']} {peer['downstream']})"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + (f"\n\nMean test accuracy at epsilon = 1, delta = 1e-5, add/remove, over {s['draws']} "
                             f"noise draws for ours, {_draw_range(s, 'diffprivlib')} for diffprivlib and "
                             f"{_draw_range(s, 'synthesizers')} for the synthesizers of peers.json (their fits take "
                             "minutes); \"train min-max\" bounds are a stand-in read off the training split "
                             "(not a private choice: a real release needs bounds known in advance).")


def _draw_range(s: dict, who: str) -> str:
    """'N' or 'N to M': the numbers of noise draws at epsilon = 1 of diffprivlib's models or of the synthesizers."""
    n = sorted({r["draws"] for r in s["rows"] if r["epsilon"] == 1.0 and r["mean_accuracy"] is not None
                and not r["method"].startswith(OURS) and r["method"].startswith("diffprivlib") == (who == "diffprivlib")
                and r["method"] not in ("non-private QDA", "non-private HGB")})
    return "-" if not n else str(n[0]) if n[0] == n[-1] else f"{n[0]} to {n[-1]}"


def epsilon_block(s: dict) -> str:
    """The default release's Bayes accuracy and our best synthetic-data classifier at every epsilon."""
    default = next((r["method"] for r in s["rows"] if r["method"].startswith("DPGaussianMixture[default=")), None)
    eps = s["epsilons"]
    head = ["table"] + [f"eps={e:g}" for e in eps]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in s["tables"]:
        cells = [t]
        for e in eps:
            d = _get(s, t, e, default, "bayes")
            b = _best(_get(s, t, e, keep=lambda r: r["method"].startswith(OURS) and r["downstream"] != "bayes"))
            cells.append(f"{_pct(d[0]['mean_accuracy'] if d else None)} / {_pct(b['mean_accuracy'] if b else None)}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + (f"\n\nEach cell: the default release ({default}) as a Bayes classifier / the best of "
                             "our synthetic-data classifiers (any covariance structure or the pipeline, logistic "
                             "regression or gradient boosting).")


def _word(met) -> str:
    return {True: "**met**", False: "**not met**", None: "**not decided**"}[met]


def _missing_peers(s: dict, diffprivlib: bool = True) -> str:
    """Why peer rows are missing, from structured fields: peers.json's presence and diffprivlib's row status."""
    why = ["peers.json absent beside tabular.json" if s.get("peers") in (None, "absent") else "peers.json has no row"]
    st = {r["status"] for r in s["rows"] if r["method"].startswith("diffprivlib") and r["status"]}
    if diffprivlib and any(x.startswith("not installed") for x in st):
        why.append("diffprivlib not importable in the study's environment")
    return "; ".join(why)


def _nb_detail(nb: dict) -> str:
    """The pairs below GaussianNB (both means with their standard errors over draws) and the verdict on the first
    3 draws alone (the count the issue names)."""
    def se(v):
        return "" if v is None else f" ± {100 * v:.1f}"

    below = [f"{x['table']} at {x['epsilon']:g}: {_pct(x['default_bayes'])}{se(x.get('default_bayes_se'))} vs "
             f"{_pct(x['diffprivlib_gaussiannb'])}{se(x.get('diffprivlib_gaussiannb_se'))}"
             for x in nb["per_table_eps"] if x["met"] is False]
    out = f" ({'; '.join(below)}; mean ± standard error over draws)" if below else ""
    if "not_met_on_first_3_draws" in nb and any(x["met"] is not None for x in nb["per_table_eps"]):
        f3 = nb["not_met_on_first_3_draws"]
        out += (f". On the first 3 draws alone it is below on {len(f3)}" + (f" ({', '.join(f3)})" if f3 else ""))
    return out


def targets_block(s: dict, bench: dict | None) -> str:
    tg = s["targets"]
    one, most, nb = (tg["eps1_synthetic_vs_best_peer"], tg["eps1_above_mst_on_most"],
                     tg["default_release_vs_diffprivlib_gaussiannb"])
    per = one["per_table"]
    n_none = sum(p["within_1_point_or_above"] is None for p in per.values())
    n_nb = sum(x["met"] is None for x in nb["per_table_eps"])
    missing = _missing_peers(s)
    lines = [f"- At epsilon = 1 our best synthetic-data classifier is within 1 point of, or above, the best DP peer "
             f"on every table: {_word(one['met'])}; below it by more than 1 point on "
             f"{sum(p['within_1_point_or_above'] is False for p in per.values())} of {len(per)} tables"
             + (f", no peer row on {n_none} ({missing})" if n_none else "") + ".",
             f"- ... and above smartnoise-synth's MST on most tables: {_word(most['met'])}; above on "
             f"{most['above_on']} of {most['tables']} tables"
             + (f", no MST accuracy on {len(most['tables_without_mst'])} ("
                + "; ".join(f"{t}: {per[t].get('mst_reason') or _missing_peers(s, False)}"
                            for t in most["tables_without_mst"]) + ")"
                if most["tables_without_mst"] else "")
             + ".",
             f"- No table gives a default release ({nb['default_method']}) below diffprivlib's GaussianNB at the "
             f"same epsilon: {_word(nb['met'])}; below on {sum(x['met'] is False for x in nb['per_table_eps'])} of "
             f"{len(nb['per_table_eps'])} (table, epsilon) pairs"
             + (f", no GaussianNB row on {n_nb} ({missing})" if n_nb else "") + _nb_detail(nb) + "."]
    lines += issue37_lines(tg)
    if bench is None:
        lines.append("- One release under 2 s on 2 cores at N = 20,000, d = 16: not measured yet "
                     "(benchmarks/bench_tabular_release.py).")
    else:
        env = bench["environment"]
        met = {True: "**met**", False: "**not met**", None: "**not decided** (a --quick run)"}[bench["target"]["met"]]
        lines.append(f"- One release under 2 s on 2 cores at N = 20,000, d = 16: {met}. "
                     f"`benchmarks/bench_tabular_release.py` ({env['measured_at_utc'][:10]}): one "
                     f"`DPGaussianMixture(bounds=(0, 15))` release ({bench['covariance_type']}) of LetterRecognition "
                     f"({bench['n_rows']:,} x {bench['n_features']}, 26 classes) on {bench['threads']} threads took "
                     f"{bench['release_seconds_median']:.3f} s (median of {bench['repeats']}); non-private QDA on the "
                     f"same rows {bench['baseline_seconds_median']:.3f} s, ratio {bench['ratio_to_baseline']:.2f}x; "
                     f"1-minute load average {env['load_average_start'][0]:.2f} at the start "
                     f"(benchmarks/results/bench_tabular_release.json).")
    return "\n".join(lines) + ("\n\nThe reasons in full, per table: `config.targets` of "
                               "docs/results/tabular/tabular.json.")


def issue37_lines(tg: dict) -> list[str]:
    """Issue 37's targets (a JSON written before they existed has none: no line)."""
    if "auto_within_1_point_of_best_fixed" not in tg:
        return []
    up, mono, auto, bnd = (tg.get("eps1_1_point_above_best_peer"), tg["default_bayes_non_decreasing"],
                           tg["auto_within_1_point_of_best_fixed"], tg["no_synthetic_cells_on_bounds"])
    lines = []
    if up is not None:
        lines.append(f"- At epsilon = 1 our best synthetic-data classifier at least 1 point above the best DP peer on "
                     f"at least {up['needed']} of {up['tables']} tables: {_word(up['met'])}; on "
                     f"{up['above_by_1_point_on']}"
                     + (f", no peer row on {up['tables_without_peer']}" if up["tables_without_peer"] else "") + ".")
    down = [s for s in mono["steps"] if not s["met"]]
    lines.append(f"- The default release's Bayes accuracy non-decreasing in epsilon on every table (mean over draws, "
                 f"within one standard error of the difference): {_word(mono['met'])}; "
                 + (f"down on {len(down)} of {len(mono['steps'])} steps ("
                    + "; ".join(f"{s['table']} eps {s['from_epsilon']:g} -> {s['to_epsilon']:g}: "
                                f"{_pct(s['from'])} -> {_pct(s['to'])}, tolerance {100 * s['tolerance']:.1f} points"
                                for s in down) + ")" if down else f"every one of {len(mono['steps'])} steps") + ".")
    below = [c for c in auto["per_table_eps"] if not c["met"]]
    lines.append(f"- `auto` within 1 point of the best fixed covariance type on every table at every epsilon: "
                 f"{_word(auto['met'])}; more than 1 point below on {len(below)} of {len(auto['per_table_eps'])} "
                 f"(table, epsilon) cells"
                 + (" (" + "; ".join(f"{c['table']} eps {c['epsilon']:g}: {_pct(c['default'])} vs "
                                     f"{c['best_fixed_type']} {_pct(c['best_fixed'])}" + _se_points(c)
                                     for c in below) + ")"
                    if below else "")
                 + (", each with the standard error of the difference over draws in points"
                    if any(c.get("difference_se") is not None for c in below) else "") + ".")
    over = [c for c in bnd["per_table_method"] if not c["met"]]
    worst = max(bnd["per_table_method"], key=lambda c: c["synthetic_on_bound"] - c["real_on_bound"], default=None)
    lines.append(f"- No synthetic column with more than {100 * bnd['limit']:g}% of its cells on a bound unless the real "
                 f"column has them: {_word(bnd['met'])}; "
                 + (f"over on {len(over)} of {len(bnd['per_table_method'])} (table, method) pairs"
                    if over else f"none of {len(bnd['per_table_method'])} (table, method) pairs")
                 + (f"; the largest synthetic share is {100 * worst['synthetic_on_bound']:.2g}% ({worst['table']}, "
                    f"{worst['method']}; real {100 * worst['real_on_bound']:.2g}%)" if worst else "") + ".")
    return lines


def _se_points(cell: dict) -> str:
    """`` (± x.x)``: a cell's standard error of the difference in points (nothing for a JSON written without it)."""
    se = cell.get("difference_se")
    return "" if se is None else f" (± {100 * se:.1f})"


def _rewrite():
    spec = importlib.util.spec_from_file_location("_docs_tables", ROOT / "benchmarks" / "docs_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.rewrite


def peer_wins_block(s: dict) -> str:
    """The tables where the best DP peer is more than 1 point above our best synthetic-data classifier at eps 1:
    both sides' mean accuracy over their noise draws, the number of draws and the mean fit time."""
    per = s["targets"]["eps1_synthetic_vs_best_peer"]["per_table"]
    lines = ["| table | ours: best synthetic-data classifier | draws | fit (s) | best peer | draws | fit (s) |",
             "|---|---|---|---|---|---|---|"]
    for t, p in per.items():
        if p["within_1_point_or_above"] is not False:
            continue
        cells = [t]
        for method in (p["best_dp_synthetic_method"], p["best_peer_method"]):
            m, _, down = method.rpartition(" ")
            r = _get(s, t, 1.0, m, down)[0]
            cells += [f"{_pct(r['mean_accuracy'])} ({_short(r)})", str(r["draws"]),
                      "-" if r["mean_fit_seconds"] is None else f"{r['mean_fit_seconds']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return "No table: at epsilon = 1 our best synthetic-data classifier is within 1 point of, or above, every peer."
    return "\n".join(lines) + ("\n\nAt epsilon = 1; a row's accuracy is the mean over its noise draws (fit time: the "
                              "synthesizer's fit alone, on the machine its run records).")


def render(doc: str, summary: dict, bench: dict | None) -> str:
    rewrite = _rewrite()
    for name, body in (("tabular-overview", overview_block(summary)), ("tabular-epsilon", epsilon_block(summary)),
                       ("tabular-targets", targets_block(summary, bench)),
                       ("tabular-peer-wins", peer_wins_block(summary))):
        if f"<!-- generated: {name} -->\n" not in doc:
            raise ValueError(f"docs/tables.md has no '<!-- generated: {name} -->' block")
        doc = rewrite(doc, name, body)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--bench", type=Path, default=BENCH)
    a = p.parse_args(argv)
    _args.check_in(p, a.results, "--results", folder=True)
    _args.check_in(p, a.results / "tabular.json", "--results")
    _args.check_in(p, a.doc, "--doc")
    if a.write:
        _args.check_out(p, a.results / "tabular-summary.json", "--results")
        _args.check_out(p, a.doc, "--doc")
    summary = summarize(json.loads((a.results / "tabular.json").read_text()))
    bench = json.loads(a.bench.read_text()) if a.bench.is_file() else None
    text = json.dumps(summary, indent=1) + "\n"
    spath = a.results / "tabular-summary.json"
    old_doc = a.doc.read_text()
    new_doc = render(old_doc, summary, bench)
    if a.check:
        stale = [str(x) for x, new in ((spath, text), (a.doc, new_doc))
                 if not x.is_file() or x.read_text() != new]
        if stale:
            print("out of date: " + ", ".join(stale) + "; run: python scripts/tabular_tables.py --write", file=sys.stderr)
            return 1
        return 0
    spath.write_text(text)
    a.doc.write_text(new_doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
