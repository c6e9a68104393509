"""The tabular study (issue 37) run on a GPU, compared in distribution with the committed CPU run.

    bash scripts/gpu_tabular.sh                     # on a lent GPU machine: $OUT/tabular-cuda.tar.gz
    mkdir RUN && tar xzf tabular-cuda.tar.gz -C RUN
    python scripts/tabular_device_compare.py RUN --tree REV --out docs/results/tabular/cuda-h100
    python scripts/tabular_device_compare.py RUN1 RUN2 --tree REV1 --tree REV2 --out ...   # a table per lease
    python scripts/tabular_device_compare.py NEW --tree REV --out docs/results/tabular/cuda-h100 \
        --previous docs/results/tabular/cuda-h100/tabular-cuda.json      # add to the committed runs
    python scripts/tabular_device_compare.py --out docs/results/tabular/cuda-h100 \
        --previous docs/results/tabular/cuda-h100/tabular-cuda.json      # the committed runs against a re-run CPU study

Reads every ``RUN/<table>/tabular.json`` (one process per table, as ``gpu_tabular.sh`` writes them), its
``timings.txt`` and ``machine.txt``, and the CPU study ``docs/results/tabular/tabular.json``. Several runs merge
(:func:`merge_runs`: a table left unfinished by one lease and run on the next). Writes to ``--out``:

* ``tabular-cuda.json``: the GPU runs' rows that carry an accuracy (ours and the non-private references; the peers
  are CPU programs and were not run there), each marked with its run's tree, each folder's config (a table, or a
  part of its draws), and per run its tree, machine and each folder's wall time and exit;
* ``comparison.json``:

  - per (table, epsilon, method, downstream) cell present in both runs, the CPU and GPU means and standard
    deviations over noise draws and Welch's t-test of their difference (scipy);
  - how many cells fall below p = 0.01 against how many a run with equal distributions would give (cells x 0.01;
    the cells are not independent: one release feeds its Bayes and its synthetic-data rows), and the cells
    significant after Bonferroni's correction;
  - the mean difference per method, and per (method, downstream) the cells' signed z-scores averaged per table and
    combined over tables (Stouffer, :func:`combined_by_group`), with the correlation that makes the averaging
    necessary (:func:`draw_correlation_across_epsilons`);
  - issue 37's targets (``torchdpgmm.experiments.tabular.issue37_targets``, and the eps-1 peer margin with the CPU
    run's peer rows) from the GPU rows, from the CPU rows of the same tables, and from both runs' draws pooled
    (``targets_pooled``: twice the draws per cell, valid where the per-cell tests find the runs equal in
    distribution);
  - the default release's mean fit time per table in each run (not like for like: other machines and loads).

CPU and CUDA generators draw different noise from the same seed, so the two runs agree in distribution, not digit
for digit; the data splits, bounds and non-private references are the same.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from torchdpgmm.experiments import tabular as study  # noqa: E402

CPU = ROOT / "docs" / "results" / "tabular" / "tabular.json"
ALPHA = 0.01


def read_run(run: Path) -> dict:
    """The per-table JSONs of one ``gpu_tabular.sh`` run merged: rows with an accuracy, configs, timings."""
    rows, configs, envs = [], {}, set()
    for f in sorted(run.glob("*/tabular.json")):
        d = json.loads(f.read_text())
        configs[f.parent.name] = {k: d["config"][k] for k in ("device", "seed", "draws", "epsilons", "tables")}
        envs.add(json.dumps(d["environment"], sort_keys=True))
        rows += [r for r in d["rows"] if r.get("accuracy") is not None]
    timings = {}
    for line in (run / "timings.txt").read_text().splitlines():  # "<table> exit <rc> after <s> s"
        t, _, rc, _, s, _ = line.split()
        timings[t] = {"exit": int(rc), "wall_seconds": int(s)}
    return {"machine": (run / "machine.txt").read_text().splitlines(), "environment": [json.loads(e) for e in envs],
            "timings": timings, "tables": configs, "rows": rows}


def _groups(rows) -> dict[tuple, list[float]]:
    g: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get("accuracy") is not None:
            g.setdefault((r["table"], r.get("epsilon"), r["method"], r["downstream"]), []).append(r["accuracy"])
    return g


def compare_cells(cpu_rows, gpu_rows) -> list[dict]:
    """Welch's t-test per cell present in both runs with at least two draws each (a cell that is the same constant
    on both, such as a non-private reference, has p = 1; a constant that differs, p = 0)."""
    a, b = _groups(cpu_rows), _groups(gpu_rows)
    out = []
    for key in (k for k in b if k in a):
        x, y = np.asarray(a[key]), np.asarray(b[key])
        if min(len(x), len(y)) < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
            p = 1.0 if np.array_equal(np.unique(x), np.unique(y)) else 0.0
        else:
            with warnings.catch_warnings():  # one side constant: scipy warns of its moments, the test stands
                warnings.simplefilter("ignore", RuntimeWarning)
                p = float(stats.ttest_ind(y, x, equal_var=False).pvalue)
        t, eps, m, d = key
        out.append({"table": t, "epsilon": eps, "method": m, "downstream": d, "draws_cpu": len(x), "draws_gpu": len(y),
                    "mean_cpu": float(x.mean()), "mean_gpu": float(y.mean()),
                    "sd_cpu": float(x.std(ddof=1)) if len(x) > 1 else None,
                    "sd_gpu": float(y.std(ddof=1)) if len(y) > 1 else None,
                    "difference": float(y.mean() - x.mean()), "p_value": p})
    return out


def combined_by_group(cells) -> list[dict]:
    """Per (method, downstream): the cells' two-sided p-values turned into z-scores with the sign of their difference
    (GPU minus CPU), averaged per table over its epsilons, then combined over tables (Stouffer:
    ``Z = sum_t z_t / sqrt(T)``), with its two-sided p-value. A method shifted a little on every table shows here
    though no single cell does. The average per table first: one draw's releases at every epsilon share one seed
    (the study's ``random_state``), so a table's cells are correlated and a plain Stouffer sum over all cells
    overstates its evidence; the mean of correlated standard normals has variance at most 1, so ``Z`` is
    conservative where the tables are independent (other data, other dimensions). The sum over every cell as if
    independent is kept beside it (``stouffer_z_cells_as_if_independent``), for the reader: it overstates."""
    g: dict[tuple, dict[str, list[float]]] = {}
    for c in cells:
        if c["epsilon"] is not None:
            z = float(stats.norm.isf(max(c["p_value"], 1e-300) / 2)) * float(np.sign(c["difference"]))
            g.setdefault((c["method"], c["downstream"]), {}).setdefault(c["table"], []).append(z)
    out = []
    for (m, d), per_table in sorted(g.items()):
        zt = [float(np.mean(v)) for v in per_table.values()]
        big_z = float(np.sum(zt) / np.sqrt(len(zt)))
        cells_z = [z for v in per_table.values() for z in v]
        out.append({"method": m, "downstream": d, "tables": len(zt), "stouffer_z": big_z,
                    "p_value": float(2 * stats.norm.sf(abs(big_z))), "cells": len(cells_z),
                    "stouffer_z_cells_as_if_independent": float(np.sum(cells_z) / np.sqrt(len(cells_z)))})
    return out


def draw_correlation_across_epsilons(rows) -> dict[str, float]:
    """Per (method, downstream), in one run: the Pearson correlation of the per-draw accuracies at consecutive
    epsilons of a table (draw i at both, the same seed), averaged over tables and pairs (pairs where one side is
    constant are left out). The measured reason :func:`combined_by_group` averages a table's cells first."""
    acc: dict[tuple, dict[int, float]] = {}
    for r in rows:
        if r.get("accuracy") is not None and r.get("epsilon") is not None:
            acc.setdefault((r["method"], r["downstream"], r["table"], r["epsilon"]), {})[r["draw"]] = r["accuracy"]
    out: dict[str, list[float]] = {}
    for (m, d, t, e), a in acc.items():
        nxt = min((k[3] for k in acc if k[:3] == (m, d, t) and k[3] > e), default=None)
        if nxt is None:
            continue
        b = acc[(m, d, t, nxt)]
        x, y = (np.asarray([v[i] for i in sorted(set(a) & set(b))]) for v in (a, b))
        if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
            out.setdefault(f"{m} {d}", []).append(float(np.corrcoef(x, y)[0, 1]))
    return {k: float(np.mean(v)) for k, v in sorted(out.items())}


def mean_fit_seconds(rows, method: str = "DPGaussianMixture[default=auto]") -> dict[str, float]:
    """Per table, the mean ``fit_seconds`` of ``method``'s releases (its Bayes rows: one per release)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["method"] == method and r["downstream"] == "bayes" and r.get("fit_seconds") is not None:
            out.setdefault(r["table"], []).append(r["fit_seconds"])
    return {t: float(np.mean(v)) for t, v in sorted(out.items())}


def _targets(rows, peer_rows) -> dict:
    t = study.issue37_targets(rows)
    peers = study.compute_targets(rows, peer_rows)["eps1_synthetic_vs_best_peer"]
    auto = t["auto_within_1_point_of_best_fixed"]["per_table_eps"]
    return {"eps1_1_point_above_best_peer": {
                "met_on": sum(p["at_least_1_point_above"] is True for p in peers["per_table"].values()),
                "tables": len(peers["per_table"]),
                "not_met": sorted(k for k, p in peers["per_table"].items() if p["at_least_1_point_above"] is False)},
            "default_bayes_non_decreasing": {"met": t["default_bayes_non_decreasing"]["met"],
                                             "steps": len(t["default_bayes_non_decreasing"]["steps"])},
            "auto_within_1_point_of_best_fixed": {
                "met_on": sum(c["met"] for c in auto), "cells": len(auto),
                "not_met": [f"{c['table']} eps={c['epsilon']:g}" for c in auto if not c["met"]]},
            "no_synthetic_cells_on_bounds": {"met": t["no_synthetic_cells_on_bounds"]["met"]}}


def compare(cpu: dict, gpu: dict) -> dict:
    tables = {r["table"] for r in gpu["rows"]}  # a table's folder may be one of its parts (DRAW_PARTS)
    cpu_rows = [r for r in cpu["rows"] if r["table"] in tables]
    ours_cpu = [r for r in cpu_rows if study._is_ours(r) or r.get("privacy") == "none"]
    peer_rows = [r for r in cpu_rows if study._is_peer(r)]
    cells = compare_cells(ours_cpu, gpu["rows"])
    n = len(cells)
    by_method: dict[str, list[float]] = {}
    for c in cells:
        by_method.setdefault(c["method"], []).append(c["difference"])
    groups = combined_by_group(cells)
    return {"tables": sorted(tables), "tables_in_cpu_run_only": sorted({r["table"] for r in cpu["rows"]} - tables),
            "cells": n, "alpha": ALPHA, "cells_below_alpha": sum(c["p_value"] < ALPHA for c in cells),
            "expected_below_alpha_if_equal": n * ALPHA,
            "cells_significant_bonferroni": [c for c in cells if c["p_value"] < 0.05 / max(n, 1)],
            "mean_difference_gpu_minus_cpu_by_method": {m: float(np.mean(v)) for m, v in sorted(by_method.items())},
            "by_method_and_downstream": groups,
            "cpu_draw_correlation_across_epsilons": draw_correlation_across_epsilons(ours_cpu),
            "default_release_mean_fit_seconds": {"cpu": mean_fit_seconds(ours_cpu),
                                                 "gpu": mean_fit_seconds(gpu["rows"]),
                                                 "note": "not like for like: the CPU run on 2 cores (1 thread), the "
                                                         "GPU runs several processes at a time on one card "
                                                         "(gpu_runs: lanes and threads per run)"},
            "groups_significant_bonferroni": [g for g in groups if g["p_value"] < 0.05 / max(len(groups), 1)],
            "largest_abs_difference": max((abs(c["difference"]) for c in cells), default=None),
            "targets_gpu": _targets(gpu["rows"], peer_rows), "targets_cpu_same_tables": _targets(ours_cpu, peer_rows),
            "targets_pooled": _targets([*ours_cpu, *gpu["rows"]], peer_rows),
            "per_cell": cells}


def _row_key(r) -> tuple:
    return r["table"], r.get("epsilon"), r.get("draw"), r["method"], r["downstream"]


def merge_runs(runs: list[Path], trees: list[str], previous: dict | None = None) -> dict:
    """Several ``gpu_tabular.sh`` runs as one (a table left unfinished by one lease and run on the next, or a table's
    draws run in parts, ``DRAW_PARTS``): each run's tree, machine and timings kept apart, the rows merged, each
    marked with its run's tree. A row drawn twice (the same table, epsilon, draw, method and downstream model) is
    refused: its draw would count twice. ``previous``: a ``tabular-cuda.json`` this script wrote (the committed runs,
    whose folders a later session does not have), merged first."""
    out: dict = {"runs": [], "tables": {}, "rows": []}
    if previous is not None:
        out = {"runs": list(previous["runs"]), "tables": dict(previous["tables"]), "rows": list(previous["rows"])}
    seen = {_row_key(r) for r in out["rows"]}
    for run, tree in zip(runs, trees):
        r = read_run(run)
        keys = [_row_key(row) for row in r["rows"]]
        twice = sorted({k[0] for k in keys if k in seen} | {k[0] for k, c in Counter(keys).items() if c > 1})
        if twice:
            raise ValueError(f"rows of {', '.join(twice)} drawn twice (same epsilon, draw and method): give each "
                             "draw once")
        seen |= set(keys)
        out["runs"].append({"tree": tree, "path_name": run.name, "machine": r["machine"],
                            "environment": r["environment"], "timings": r["timings"]})
        out["tables"] |= r["tables"]
        out["rows"] += [{**row, "tree": tree} for row in r["rows"]]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="*", help="extracted gpu_tabular.sh runs (one folder per table in each); "
                   "none with --previous: its runs compared again, e.g. against a re-run CPU study")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tree", action="append", default=[],
                   help="the commit each run used: once per run, in the same order (once for all of them)")
    p.add_argument("--cpu", type=Path, default=CPU)
    p.add_argument("--previous", type=Path, default=None,
                   help="a tabular-cuda.json written before (e.g. the committed one) whose runs are kept")
    a = p.parse_args(argv)
    if a.previous is not None and not a.previous.is_file():
        p.error(f"--previous {a.previous}: no such file")
    if not a.run and a.previous is None:
        p.error("give a gpu_tabular.sh run, or --previous alone to compare its runs again")
    for run in a.run:
        if not (run / "timings.txt").is_file():
            p.error(f"{run} has no timings.txt: not a gpu_tabular.sh run")
    if not a.run and a.tree:
        p.error("--tree names a run's commit: give it with a run")
    if a.run and len(a.tree) not in (1, len(a.run)):
        p.error(f"--tree given {len(a.tree)} times for {len(a.run)} runs: once per run, or once for all")
    try:
        previous = None if a.previous is None else json.loads(a.previous.read_text())
        gpu = merge_runs(a.run, a.tree * len(a.run) if len(a.tree) == 1 else a.tree, previous)
    except ValueError as e:
        p.error(str(e))
    cpu = json.loads(a.cpu.read_text())
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "tabular-cuda.json").write_text(json.dumps(gpu, indent=1) + "\n")
    res = {"gpu_runs": [{k: r[k] for k in ("tree", "machine")} for r in gpu["runs"]],
           "cpu_run": str(a.cpu.relative_to(ROOT)) if a.cpu.is_relative_to(ROOT) else str(a.cpu),
           "cpu_environment": cpu.get("environment"), **compare(cpu, gpu)}
    (a.out / "comparison.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"{res['cells']} cells; {res['cells_below_alpha']} below p = {ALPHA} "
          f"(about {res['expected_below_alpha_if_equal']:.1f} if equal in distribution); "
          f"{len(res['cells_significant_bonferroni'])} after Bonferroni")
    for g in res["by_method_and_downstream"]:
        print(f"  {g['method']} {g['downstream']}: {g['tables']} tables, Stouffer z {g['stouffer_z']:+.2f}, "
              f"p {g['p_value']:.3g}")
    for k in ("targets_gpu", "targets_cpu_same_tables", "targets_pooled"):
        print(k, json.dumps({t: {x: y for x, y in v.items() if x != "not_met"} for t, v in res[k].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
