"""Render the validation tables of docs/tables-validation.md (the reference page behind docs/tables.md's defaults).

The covariance rule's table comes from docs/results/covariance-rule.json.

The block between ``<!-- generated: covariance-rule -->`` and ``<!-- /generated -->`` is rewritten
(:func:`benchmarks.docs_tables.rewrite`); ``--check`` exits 1 when it is out of date. The JSON is written by
``scripts/covariance_rule_validation.py`` (validation splits only). The block ``covariance-rule-gaussiannb`` is
rendered the same way from docs/results/covariance-rule-gaussiannb.json (``scripts/gaussiannb_validation.py``), and
``clip-rule`` from docs/results/clip-rule.json (``scripts/clip_rule_validation.py``), ``clip-rule-pipeline`` from
docs/results/clip-rule-pipeline.json (its ``--pipeline``), ``centre-rule`` from docs/results/centre-rule.json (its
``--centre``), ``split-stability`` from docs/results/split-stability.json (``scripts/split_stability.py``) and
``split-stability-large-epsilon`` from it and docs/results/split-stability-large-epsilon.json (its ``--epsilons``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "docs" / "results" / "covariance-rule.json"
PAGE = ROOT / "docs" / "tables-validation.md"
NAME = "covariance-rule"
GNB = ROOT / "docs" / "results" / "covariance-rule-gaussiannb.json"
GNB_NAME = "covariance-rule-gaussiannb"
CLIP = ROOT / "docs" / "results" / "clip-rule.json"
CLIP_NAME = "clip-rule"
PIPE = ROOT / "docs" / "results" / "clip-rule-pipeline.json"
PIPE_NAME = "clip-rule-pipeline"
CENTRE = ROOT / "docs" / "results" / "centre-rule.json"
CENTRE_NAME = "centre-rule"
SPLITS = ROOT / "docs" / "results" / "split-stability.json"
SPLITS_NAME = "split-stability"
LARGE = ROOT / "docs" / "results" / "split-stability-large-epsilon.json"
LARGE_NAME = "split-stability-large-epsilon"


def table(data: dict) -> str:
    flip = "auto_mean_shrinkage_flipped"
    flip_label = "auto without James-Stein means" if data["mean_shrinkage"] else "auto with James-Stein means"
    floor = "auto_count_floor_off" in next(iter(data["summary"].values()))["eps=1"]
    lines = [f"| table (N train, d, K) | epsilon | majority class | full | tied | diag | auto | {flip_label} | "
             + ("auto without its count floor | " if floor else "") + "auto - best fixed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | " + ("--- | " if floor else "") + "--- |"]
    for name, s in data["summary"].items():
        label = f"{name} ({s['n_train']}, {s['d']}, {s['K']})"
        for key, v in s.items():
            if not key.startswith("eps="):
                continue
            best = v["best_fixed"]
            cells = [f"**{v[c]:.3f}**" if c == best else f"{v[c]:.3f}" for c in ("full", "tied", "diag")]
            lines.append(f"| {label} | {key[4:]} | {s['majority_class_accuracy']:.3f} | " + " | ".join(cells)
                         + f" | {v['auto']:.3f} | {v[flip]:.3f} | "
                         + (f"{v['auto_count_floor_off']:.3f} | " if floor else "")
                         + f"{v['auto_minus_best_fixed']:+.3f} |")
    w, wt, wm = data["worst_auto_minus_best_fixed"], data["worst_auto_minus_tied"], data["worst_mean_shrinkage_gain"]
    lines += ["", f"Worst row against the best fixed type: {w['table']} at {w['cell'].replace('=', ' ')} "
                  f"({w['value']:+.3f}); against tied: {wt['table']} at {wt['cell'].replace('=', ' ')} "
                  f"({wt['value']:+.3f}); of the James-Stein means against none: {wm['table']} at "
                  f"{wm['cell'].replace('=', ' ')} ({wm['value']:+.3f}). {len(data['seeds'])} noise seeds, "
                  f"counts floor {data['counts_floor']:g}."]
    if floor:
        wf = data["worst_count_floor_gain"]
        lines[-1] += (f" The count floor (step 0) gains {data['mean_count_floor_gain']:+.3f} on average over the rows; "
                      f"its worst row: {wf['table']} at {wf['cell'].replace('=', ' ')} ({wf['value']:+.3f}).")
    return "\n".join(lines)


def gaussiannb_table(data: dict) -> str:
    """docs/results/covariance-rule-gaussiannb.json: the rule against diffprivlib's GaussianNB, validation splits."""
    lines = ["| table (N train, d) | epsilon | draws | majority class | auto (se) | GaussianNB (se) | auto - GaussianNB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in data["rows"]:
        lines.append(f"| {r['table']} ({r['n_train']}, {r['d']}) | {r['epsilon']:g} | {r['draws']} | "
                     f"{r['majority_class_accuracy']:.3f} | {r['auto']:.3f} ({r['auto_se']:.3f}) | "
                     f"{r['gaussiannb']:.3f} ({r['gaussiannb_se']:.3f}) | {r['auto_minus_gaussiannb']:+.3f} |")
    w = data["worst_auto_minus_gaussiannb"]
    below = ", ".join(data["cells_below_gaussiannb"]) or "none"
    lines += ["", f"Rows where the released model is below GaussianNB: {below}. Closest row: {w['table']} at epsilon "
                  f"{w['epsilon']:g} ({w['auto_minus_gaussiannb']:+.3f}); mean difference over the rows "
                  f"{data['mean_auto_minus_gaussiannb']:+.3f}. diffprivlib {data['diffprivlib']}."]
    return "\n".join(lines)


def clip_table(data: dict) -> str:
    """docs/results/clip-rule.json (``scripts/clip_rule_validation.py``): the default release's Bayes accuracy on
    validation splits at each clip-bound fraction of the half-diagonal, per table and epsilon, and the summary."""
    fr = [str(f) for f in data["fractions"]]
    lines = ["| table (N train, d, K) | epsilon | " + " | ".join(f"f = {f}" for f in fr) + " |",
             "| --- | --- | " + " | ".join("---" for _ in fr) + " |"]
    rule = str(data["summary"]["rule_fraction"])
    for c in data["cells"]:
        t = data["tables"][c["table"]]
        cells = [f"**{c['bayes'][f]:.3f}**" if f == rule else f"{c['bayes'][f]:.3f}" for f in fr]
        lines.append(f"| {c['table']} ({t['n_train']}, {t['d']}, {t['K']}) | {c['epsilon']:g} | " + " | ".join(cells) + " |")
    per = data["summary"]["per_fraction"]
    lines += ["", "| over the cells | " + " | ".join(f"f = {f}" for f in fr) + " |", "| --- | " + " | ".join("---" for _ in fr) + " |",
              "| mean Bayes accuracy | " + " | ".join(f"{per[f]['mean_bayes']:.3f}" for f in fr) + " |",
              "| mean gain over f = 1 | " + " | ".join(f"{per[f]['mean_gain_vs_1']:+.3f}" for f in fr) + " |",
              "| worst cell against f = 1 | " + " | ".join(f"{per[f]['worst_gain_vs_1']:+.3f} ({per[f]['worst_cell']})" for f in fr) + " |",
              "| cells below f = 1 | " + " | ".join(str(per[f]["cells_below_1"]) for f in fr) + " |",
              "| synthetic rows -> logistic regression, eps = 1, mean | "
              + " | ".join(f"{data['synthetic_summary'][f]:.3f}" for f in fr) + " |",
              "", _clip_rule_sentence(data)]
    return "\n".join(lines)


def _clip_rule_sentence(data: dict) -> str:
    """The line under the clip-rule table: which fraction is the rule and why (the JSON's summary)."""
    s, n = data["summary"], len(data["cells"])
    rule, top = s["rule_fraction"], s["highest_mean_fraction"]
    tail = (f"{data['seeds']} noise seeds per cell ({data['synthetic_seeds']} for the synthetic rows, "
            f"{data['n_synthetic']} rows each).")
    if top == rule:
        return f"The rule (bold): f = {rule:g}, the highest mean Bayes accuracy over the {n} cells; " + tail
    return (f"The rule (bold): f = {rule:g}, the code's default, kept because f = {top:g}, the highest mean over the "
            f"{n} cells, leads it by {s['highest_mean_minus_default']:+.4f} with a standard error of "
            f"{s['highest_mean_minus_default_se']:.4f} for the paired difference over the cells, within the "
            f"{s['margin_se']:g} standard errors a change needs; " + tail)


def pipeline_clip_table(data: dict) -> str:
    """docs/results/clip-rule-pipeline.json (``scripts/clip_rule_validation.py --pipeline``): the pipeline on tables,
    its Bayes accuracy on validation splits with the PCA clip and radius at f = 1 and f = 0.5 of sqrt(d)/2."""
    eps = data["epsilons"]
    a, b = (str(f) for f in data["fractions"])
    lines = ["| table (N train, d, K) | " + " | ".join(f"eps {e:g}: f = {a} -> {b}" for e in eps) + " |",
             "| --- | " + " | ".join("---" for _ in eps) + " |"]
    for name, t in data["tables"].items():
        cells = {c["epsilon"]: c["bayes"] for c in data["cells"] if c["table"] == name}
        lines.append(f"| {name} ({t['n_train']}, {t['d']}, {t['K']}) | "
                     + " | ".join(f"{cells[e][a]:.3f} -> {cells[e][b]:.3f}" for e in eps) + " |")
    per = data["summary"]["per_fraction"][b]
    lines += ["", f"Mean over the {len(data['cells'])} cells: {data['summary']['per_fraction'][a]['mean_bayes']:.3f} "
                  f"-> {per['mean_bayes']:.3f} ({per['mean_gain_vs_1']:+.3f}); below f = {a} on {per['cells_below_1']} "
                  f"cells, the worst {per['worst_cell']} ({per['worst_gain_vs_1']:+.3f}); {data['seeds']} noise seeds per cell."]
    return "\n".join(lines)


def _radius_label(spec) -> str:
    kind, v = spec
    return f"{v:g} sqrt(d)/2" if kind == "f" else f"{v:g}"


def centre_table(data: dict) -> str:
    """docs/results/centre-rule.json (``scripts/clip_rule_validation.py --centre``): the one-stage release about the
    box's middle (the previous default) against the two-stage release about a private centre, per table and
    epsilon at the rule's budget share and every radius, then the mean over the cells for every (share, radius)."""
    s = data["summary"]
    box = "box 0.5"
    share = s["rule_share"]
    radii = [tuple(r) for r in data["radii"]]
    key = lambda c, r: f"centre {c:g} / {r[0]} {r[1]:g}"  # noqa: E731  (the script's labels)
    cols = [key(share, r) for r in radii]
    lines = ["| table (N train, d, K) | epsilon | box's middle, 0.5 sqrt(d)/2 | "
             + " | ".join(f"centre, r = {_radius_label(r)}" for r in radii) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in radii) + " |"]
    for c in data["cells"]:
        t = data["tables"][c["table"]]
        cells = [f"**{c['bayes'][k]:.3f}**" if k == s["rule"] else f"{c['bayes'][k]:.3f}" for k in cols]
        lines.append(f"| {c['table']} ({t['n_train']}, {t['d']}, {t['K']}) | {c['epsilon']:g} | {c['bayes'][box]:.3f} | "
                     + " | ".join(cells) + " |")
    mean = data["mean_bayes"]
    lines += ["", "| mean Bayes accuracy over the cells, centre's share | "
              + " | ".join(f"r = {_radius_label(r)}" for r in radii) + " |",
              "| --- | " + " | ".join("---" for _ in radii) + " |"]
    for c in data["shares"]:
        lines.append(f"| {c:g} | " + " | ".join(
            f"**{mean[key(c, r)]:.3f}**" if key(c, r) == s["rule"] else f"{mean[key(c, r)]:.3f}" for r in radii) + " |")
    syn = data["synthetic_summary"]
    if "highest_mean" not in s or s["highest_mean"] == s["rule"]:
        why = f"the highest mean over the {s['cells']} cells"
    else:
        why = (f"the default, kept: the highest mean, {s['highest_mean']}, is {s['highest_mean_minus_default']:+.4f} "
               f"above it (standard error of the paired difference over the cells {s['highest_mean_minus_default_se']:.4f}), "
               f"not more than {s['margin_se']:g} standard errors; over the {s['cells']} cells")
    lines += ["", f"About the box's middle (the previous default): {mean[box]:.3f}. The rule (bold): a share of "
                  f"{share:g} for the centre and r = {_radius_label((s['rule_radius_kind'], s['rule_radius']))}, "
                  f"{why}: {s['mean_gain_vs_box']:+.3f} against the box's middle, below "
                  f"it on {s['cells_below_box']} cells, the worst {s['worst_cell']} ({s['worst_gain_vs_box']:+.3f}). "
                  f"Logistic regression on synthetic rows at eps = 1 (mean over the tables): {syn[box]:.3f} -> "
                  f"{syn[s['rule']]:.3f}. {data['seeds']} noise seeds per cell ({data['synthetic_seeds']} for the "
                  f"synthetic rows, {data['n_synthetic']} rows each). "
                  + ("Scored as `predict` scores: each release's validation rows pulled onto the ball it clipped its "
                     "records to." if str(data.get("scoring", "raw")).startswith("pulled") else
                     "Scored on the validation rows as given (not pulled as `predict` pulls them).")]
    return "\n".join(lines)


def split_table(data: dict) -> str:
    """``auto`` minus the best fixed type per (table, eps), mean over the 80/20 splits, and the default's mean."""
    eps = data["epsilons"]
    head = "| table (test rows, d, K) | " + " | ".join(f"epsilon {e:g}" for e in eps) + " | `auto` by epsilon |"
    lines = [head, "| --- | " + " | ".join("---" for _ in eps) + " | --- |"]
    for name, t in data["tables"].items():
        cells = {c["epsilon"]: c for c in t["cells"]}
        row = [f"{name} ({t['n_test']}, {t['d']}, {t['classes']})"]
        for e in eps:
            c = cells[e]
            mark = "**" if c["mean_auto_minus_best_fixed"] < -data["margin"] else ""
            row.append(f"{mark}{c['mean_auto_minus_best_fixed']:+.3f}{mark} \u00b1 {c['se_over_splits']:.3f} "
                       f"({c['splits_within_margin']}/{c['splits']})")
        row.append(" / ".join(f"{cells[e]['auto_mean']:.3f}" for e in eps))
        lines.append("| " + " | ".join(row) + " |")
    s = data["summary"]
    lines += ["", f"{data['splits']} stratified 80/20 splits (split 0 is the study's), {data['draws']} noise draws "
              f"each; a cell: `auto` minus the best fixed type's mean accuracy, mean \u00b1 standard error over "
              f"splits, and in brackets the splits where `auto` is within {100 * data['margin']:g} point (bold: "
              f"more than {100 * data['margin']:g} point below on average). Within the point: "
              f"{s['cells_within_margin_on_split_0']} of {s['cells']} cells on split 0 with these draws (the study's "
              f"own count is over its own draws), "
              f"{s['cells_within_margin_on_mean_over_splits']} on the mean over splits, "
              f"{s['cells_within_margin_on_every_split']} on every split; the best fixed type changes between "
              f"splits in {s['cells_whose_best_fixed_type_changes_between_splits']} cells."]
    if "cells_auto_more_than_margin_below_chosen_on_mean" in s:
        m = f"{100 * data['margin']:g} point"
        lines += ["", f"The yardstick: on each split, the fixed type with the highest mean over the other "
                  f"{data['splits'] - 1} splits (chosen with held-out rows, as a non-private tuner would). By the "
                  f"target's own test it is within {m} of that split's best fixed type on "
                  f"{s['pairs_chosen_fixed_within_margin']} of {s['cell_split_pairs']} (cell, split) pairs, and on "
                  f"every split in {s['cells_chosen_fixed_within_margin_on_every_split']} of {s['cells']} cells; "
                  f"`auto` is within {m} on {s['pairs_auto_within_margin']} pairs (misses per split, on average: "
                  f"{s['mean_cells_missed_per_split_chosen_fixed']:.1f} of {s['cells']} cells for the chosen type, "
                  f"{s['mean_cells_missed_per_split_auto']:.1f} for `auto`). "
                  f"Against the chosen type itself, "
                  f"`auto` is more than {m} below it on {s['pairs_auto_more_than_margin_below_chosen']} pairs and "
                  f"more than {m} above it on {s['pairs_auto_more_than_margin_above_chosen']}; on the mean over the "
                  f"splits it is more than {m} below the chosen type in "
                  f"{s['cells_auto_more_than_margin_below_chosen_on_mean']} of {s['cells']} cells."]
    return "\n".join(lines)


def large_epsilon_table(data: dict, large: dict) -> str:
    """Mean accuracy over the splits per type and epsilon, the study's epsilons (``data``) beside larger ones
    (``large``: little noise), for the tables where ``auto`` is more than the margin below the best fixed type on
    average at some epsilon; the best of the four in bold."""
    eps = data["epsilons"] + large["epsilons"]
    cells = {name: {c["epsilon"]: c for c in data["tables"][name]["cells"] + large["tables"][name]["cells"]}
             for name in data["tables"] if name in large["tables"]}
    shown = [n for n, cs in cells.items() if any(c["mean_auto_minus_best_fixed"] < -data["margin"]
                                                for c in cs.values())]
    lines = ["| table | type | " + " | ".join(f"epsilon {e:g}" for e in eps) + " |",
             "| --- | --- | " + " | ".join("---" for _ in eps) + " |"]
    for name in shown:
        means = {e: {"auto": c["auto_mean"], **c["fixed_means_over_splits"]} for e, c in cells[name].items()}
        for t in ("auto", "full", "tied", "diag"):
            row = []
            for e in eps:
                v, best = means[e][t], max(means[e].values())
                row.append(f"**{v:.3f}**" if v == best else f"{v:.3f}")
            lines.append(f"| {name} | {t} | " + " | ".join(row) + " |")
    lines += ["", f"Mean Bayes accuracy over the {large['splits']} splits ({large['draws']} draws each) per type, the "
              f"study's epsilons and larger ones, where little noise is left (`split-stability-large-epsilon.json`); "
              f"the tables where `auto` is more than {100 * data['margin']:g} point below the best fixed type on "
              f"average at some epsilon; the best of the four in bold. `auto` on rows pulled onto the release's "
              f"ball, the fixed types on rows as given, as `predict` gives them."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the docs block is out of date")
    a = p.parse_args(argv)
    spec = importlib.util.spec_from_file_location("_docs_tables", ROOT / "benchmarks" / "docs_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rewrite = mod.rewrite

    old = PAGE.read_text()
    new = rewrite(old, NAME, table(json.loads(JSON.read_text())))
    if GNB.exists():
        new = rewrite(new, GNB_NAME, gaussiannb_table(json.loads(GNB.read_text())))
    if CLIP.exists():
        new = rewrite(new, CLIP_NAME, clip_table(json.loads(CLIP.read_text())))
    if PIPE.exists():
        new = rewrite(new, PIPE_NAME, pipeline_clip_table(json.loads(PIPE.read_text())))
    if CENTRE.exists():
        new = rewrite(new, CENTRE_NAME, centre_table(json.loads(CENTRE.read_text())))
    if SPLITS.exists():
        new = rewrite(new, SPLITS_NAME, split_table(json.loads(SPLITS.read_text())))
    if SPLITS.exists() and LARGE.exists():
        new = rewrite(new, LARGE_NAME, large_epsilon_table(json.loads(SPLITS.read_text()),
                                                           json.loads(LARGE.read_text())))
    if new == old:
        return 0
    if a.check:
        print(f"out of date: {PAGE.name}:{NAME}")
        return 1
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
