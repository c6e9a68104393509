"""Render the "Which covariance structure" table of docs/tables.md from docs/results/covariance-rule.json.

The block between ``<!-- generated: covariance-rule -->`` and ``<!-- /generated -->`` is rewritten
(:func:`benchmarks.docs_tables.rewrite`); ``--check`` exits 1 when it is out of date. The JSON is written by
``scripts/covariance_rule_validation.py`` (validation splits only).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "docs" / "results" / "covariance-rule.json"
PAGE = ROOT / "docs" / "tables.md"
NAME = "covariance-rule"


def table(data: dict) -> str:
    flip = "auto_mean_shrinkage_flipped"
    flip_label = "auto without James-Stein means" if data["mean_shrinkage"] else "auto with James-Stein means"
    lines = [f"| table (N train, d, K) | epsilon | majority class | full | tied | diag | auto | {flip_label} | "
             "auto - best fixed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in data["summary"].items():
        label = f"{name} ({s['n_train']}, {s['d']}, {s['K']})"
        for key, v in s.items():
            if not key.startswith("eps="):
                continue
            best = v["best_fixed"]
            cells = [f"**{v[c]:.3f}**" if c == best else f"{v[c]:.3f}" for c in ("full", "tied", "diag")]
            lines.append(f"| {label} | {key[4:]} | {s['majority_class_accuracy']:.3f} | " + " | ".join(cells)
                         + f" | {v['auto']:.3f} | {v[flip]:.3f} | {v['auto_minus_best_fixed']:+.3f} |")
    w, wt, wm = data["worst_auto_minus_best_fixed"], data["worst_auto_minus_tied"], data["worst_mean_shrinkage_gain"]
    lines += ["", f"Worst row against the best fixed type: {w['table']} at {w['cell'].replace('=', ' ')} "
                  f"({w['value']:+.3f}); against tied: {wt['table']} at {wt['cell'].replace('=', ' ')} "
                  f"({wt['value']:+.3f}); of the James-Stein means against none: {wm['table']} at "
                  f"{wm['cell'].replace('=', ' ')} ({wm['value']:+.3f}). {len(data['seeds'])} noise seeds, "
                  f"counts floor {data['counts_floor']:g}."]
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
    if new == old:
        return 0
    if a.check:
        print(f"out of date: {PAGE.name}:{NAME}")
        return 1
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
