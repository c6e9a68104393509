"""Render the measured tables of the task pages and of docs/realdata.md from committed JSON.

    python scripts/task_pages.py            # rewrite every block below from its JSON
    python scripts/task_pages.py --check    # exit 1 if a block differs from its JSON (tests/test_task_pages.py)

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->`` in its page (the marker format
of ``benchmarks/docs_tables.py``, whose ``rewrite`` this script uses); nothing inside a block is typed by hand.
The JSON files are written by committed scripts and studies (named in each block's first line):

* docs/budget.md: ``scripts/budget_composition.py`` (epsilon after k releases by each accountant);
* docs/synthetic-data.md: ``torchdpgmm experiment synthetic-classifier`` and ``scripts/synth_release_timing.py``,
  tables by ``scripts/realdata_tables.py``;
* docs/montecarlo.md: ``torchdpgmm experiment fig2`` (``scripts/figures_synthetic.sh``) and
  ``benchmarks/bench_sweep_memory.py``;
* docs/gpu.md: ``benchmarks/bench_sweep_gpu.py`` (the KL sweep on a GPU and on the same machine's CPUs),
  ``benchmarks/bench_syncs.py --device cuda`` (host synchronisations and device bytes per trial) and
  ``benchmarks/bench_sweep_startup.py`` (the sweep's start-up, this tree against a baseline);
* docs/realdata.md: the iris, mnist, mnist-mlp and record-level studies, tables by ``scripts/realdata_tables.py``;
* docs/decisions.md: ``scripts/synth_validation.py`` (the validation table behind the cells' defaults).

The audit tables of docs/audit.md and docs/privacy.md are rendered by ``scripts/privacy_doc.py``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REAL = DOCS / "realdata_results"
SYNTH = REAL / "synthetic-classifier"


def _script(rel: str):
    spec = importlib.util.spec_from_file_location("_" + Path(rel).stem, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def budget_table() -> str:
    d = _json(DOCS / "results" / "budget" / "composition.json")
    c = d["config"]
    out = [f"_From docs/results/budget/composition.json (`python scripts/budget_composition.py`): k releases, each "
           f"one Gaussian mechanism of sensitivity 1 calibrated to epsilon {c['epsilon_per_release']:g}, delta "
           f"{c['delta_per_release']:g} (sigma {c['sigma']:.3f}); epsilon spent at delta {c['delta']:g}._", "",
           "| releases k | GDP (exact) | PLD | RDP | zCDP | basic composition k x epsilon (its delta) |",
           "|---|---|---|---|---|---|"]
    for r in d["rows"]:
        out.append(f"| {r['releases']} | {r['gdp_epsilon']:.3f} | {r['pld_epsilon']:.3f} | {r['rdp_epsilon']:.3f} | "
                   f"{r['zcdp_epsilon']:.3f} | {r['basic_epsilon']:g} ({r['basic_delta']:.0e}) |")
    return "\n".join(out)


def synthetic_table() -> str:
    tables = _script("scripts/realdata_tables.py")
    merged = tables._merge_synthetic([SYNTH / "run_0.5_1_2_5"])
    (d,) = merged.values()
    t = _json(SYNTH / "synth-release-timing.json")
    head = (f"_From docs/realdata_results/synthetic-classifier/run_0.5_1_2_5/synthetic-classifier.json "
            f"(`torchdpgmm experiment synthetic-classifier --dataset fashion-mnist --epsilons 0.5,1,2,5 --threads 2`) "
            f"and docs/realdata_results/synthetic-classifier/synth-release-timing.json "
            f"(`python scripts/synth_release_timing.py`); rendered by "
            f"scripts/realdata_tables.py. Fashion-MNIST, full training set (N = {t['n']}), d = {t['d']}, "
            f"delta 1e-5, add/remove adjacency._")
    timing = (f"One release at N = {t['n']}, d = {t['d']}, epsilon 1, {t['threads']} threads: median "
              f"{t['release_seconds_median']:.2f} s; one DP-SGD training (batch 1024, 5 epochs) "
              f"{t['dpsgd_one_training_seconds (batch 1024, 5 epochs)']:.1f} s, "
              f"{t['ratio_dpsgd_over_release']:.1f}x the release (load average "
              f"{t['load_average_start'][0]:.1f} on {t['cpu_count']} cores).")
    table = tables.synthetic_classifier_table(d)
    table = table.split("\nTargets of issue #20")[0].rstrip()   # the targets: history, not for this page
    return "\n\n".join([head, table, timing])


def fig2_table() -> str:
    d = _json(ROOT / "scripts" / "results" / "synthetic" / "fig2.json")
    c = d["config"]
    rows = d["rows"]
    eps = sorted({r["epsilon"] for r in rows})
    out = [f"_From scripts/results/synthetic/fig2.json (`torchdpgmm experiment fig2 --trials {c['trials']} --seed "
           f"{c['seed']}`, via scripts/figures_synthetic.sh): N = {c['n']}, K = {c['k']}, d = {c['d']}, delta "
           f"{c['delta']:g}, as-published mode (label-flip adjacency), {c['trials']} trials per cell, study run time "
           f"{d['runtime_seconds']:.0f} s. Mean KL(released || fitted) in nats [95% Student-t interval]._", "",
           "| mechanism | " + " | ".join(f"eps={e:g}" for e in eps) + " |", "|---|" + "---|" * len(eps)]
    for lab in dict.fromkeys(r["label"] for r in rows):
        by = {r["epsilon"]: r for r in rows if r["label"] == lab}
        out.append(f"| {lab} | " + " | ".join(
            f"{by[e]['mean']:.3g} [{by[e]['ci_low']:.3g}, {by[e]['ci_high']:.3g}]" if e in by else "-" for e in eps)
            + " |")
    return "\n".join(out)


def sweep_scale_table() -> str:
    d = _json(ROOT / "benchmarks" / "results" / "bench_sweep_memory.json")
    c = d["config"]
    out = [f"_From benchmarks/results/bench_sweep_memory.json (`python benchmarks/bench_sweep_memory.py`): "
           f"`torchdpgmm sweep`, mechanism {c['mechanism']} ({c['mode']}), N = {c['N']}, K = {c['K']}, d = {c['d']}, "
           f"7 epsilons, {c['workers']} worker processes of {c['threads_per_worker']} torch thread each, memory "
           f"budget {c['memory_budget']}, on {d['machine']['cpus']} cores at load average "
           f"{d['machine']['loadavg_before'][0]:.1f} before the run._", "",
           "| trials | chunks | rows written | wall time (s) | CPU time (s) | peak memory, driver + workers (MiB) |",
           "|---|---|---|---|---|---|"]
    for key in ("small", "large"):
        r = d[key]
        out.append(f"| {r['trials']} | {r['chunks']} | {r['rows']} | {r['seconds']:.0f} | {r['cpu_seconds']:.0f} | "
                   f"{r['peak_rss_mib']:.0f} |")
    out.append(f"\nPeak memory of the large sweep over the small one: {d['peak_rss_ratio_large_over_small']:.3f}x "
               f"(the chunks bound it, whatever the number of trials).")
    return "\n".join(out)


def gpu_sweep_table() -> str:
    """docs/gpu.md: benchmarks/bench_sweep_gpu.py's JSON (a GPU run, and the 2-core CPU run when there is one)."""
    bench = _script("benchmarks/bench_sweep_gpu.py")
    parts = []
    for name in ("bench_sweep_gpu.json", "bench_sweep_cpu.json"):
        path = ROOT / "benchmarks" / "results" / name
        if path.exists():
            parts.append(bench.render(_json(path)))
    if not (ROOT / "benchmarks" / "results" / "bench_sweep_gpu.json").exists():
        parts.insert(0, "_No GPU measurement is committed yet: benchmarks/results/bench_sweep_gpu.json is written by "
                        "`python benchmarks/bench_sweep_gpu.py` on a GPU machine._")
    return "\n\n".join(parts)


def gpu_syncs_table() -> str:
    """docs/gpu.md: benchmarks/bench_syncs.py --device cuda's JSON (synchronisations torch reports, peak device
    bytes per trial, wall time per call, of each release, the sweep block and its stages)."""
    path = ROOT / "benchmarks" / "results" / "bench_syncs_cuda.json"
    if not path.exists():
        return ("_No GPU measurement is committed yet: benchmarks/results/bench_syncs_cuda.json is written by "
                "`python benchmarks/bench_syncs.py --device cuda` on a GPU machine._")
    d = _json(path)
    c = d["config"]
    out = [f"_From {path.relative_to(ROOT)} (`python benchmarks/bench_syncs.py --device cuda`): N = 1000, K = 5, "
           f"d = 3 per trial; synchronisations as torch reports them (`torch.cuda.set_sync_debug_mode`), peak device "
           f"bytes above what was allocated before, plus the data, per trial; {c['device']}, torch {c['torch']}._", "",
           "| call | trials | host synchronisations | peak device bytes per trial | wall time per call (s) |",
           "|---|---|---|---|---|"]
    for name, runs in d["releases"].items():
        for r in runs:
            if "syncs" not in r:
                out.append(f"| {name} | {r['trials']:,} | out of memory | | |")
                continue
            out.append(f"| {name} | {r['trials']:,} | {r['syncs']} | {r['peak_bytes_per_trial']:,.0f} | "
                       f"{r['wall_s']:.4f} |")
    return "\n".join(out)


def gpu_startup_table() -> str:
    """docs/gpu.md: benchmarks/bench_sweep_startup.py's JSON (the sweep, this tree against a baseline, one machine)."""
    path = ROOT / "benchmarks" / "results" / "bench_sweep_startup_h100.json"
    if not path.exists():
        return "_No like-for-like start-up measurement is committed yet (benchmarks/bench_sweep_startup.py)._"
    d = _json(path)
    out = [f"_From {path.relative_to(ROOT)} (`python benchmarks/bench_sweep_startup.py`): `{d['command']}`, "
           f"{d['rounds']} rounds in fresh processes, the two trees alternating; {d['device']}, torch {d['torch']}._",
           "", "| tree | seconds per round | median (s) |", "|---|---|---|"]
    for key, label in (("baseline", f"baseline ({d.get('baseline_label') or d['baseline']})"),
                       ("this tree", "this tree")):
        out.append(f"| {label} | {', '.join(f'{v:.2f}' for v in d['seconds'][key])} | "
                   f"{d['median_seconds'][key]:.2f} |")
    out.append(f"\nMedian saved: {d['median_saved_seconds']:.2f} s per command.")
    return "\n".join(out)


def _real(fn: str, name: str, path: Path, command: str) -> str:
    tables = _script("scripts/realdata_tables.py")
    d = _json(path)
    return (f"_From {path.relative_to(ROOT)} (`{command}`), rendered by scripts/realdata_tables.py._\n\n"
            + getattr(tables, fn)(d))


def validation_cellclip_table() -> str:
    tables = _script("scripts/realdata_tables.py")
    path = SYNTH / "synth-validation-cellclip.json"
    return (f"_From {path.relative_to(ROOT)} (`python scripts/synth_validation.py`), rendered by "
            f"scripts/realdata_tables.py._\n\n" + tables.validation_table(_json(path)))


def blocks() -> dict[str, tuple[Path, callable]]:
    """block name -> (page, renderer)."""
    rd = DOCS / "realdata.md"
    return {
        "budget-composition": (DOCS / "budget.md", budget_table),
        "synthetic-classifier-results": (DOCS / "synthetic-data.md", synthetic_table),
        "fig2-kl": (DOCS / "montecarlo.md", fig2_table),
        "sweep-scale": (DOCS / "montecarlo.md", sweep_scale_table),
        "gpu-sweep": (DOCS / "gpu.md", gpu_sweep_table),
        "gpu-syncs": (DOCS / "gpu.md", gpu_syncs_table),
        "gpu-startup": (DOCS / "gpu.md", gpu_startup_table),
        "realdata-iris": (rd, lambda: _real("iris_table", "iris", REAL / "iris.json",
                                            "torchdpgmm experiment iris --threads 1")),
        "realdata-mnist": (rd, lambda: _real("mnist_table", "mnist", REAL / "mnist.json",
                                             "torchdpgmm experiment mnist --dataset fashion-mnist --threads 1")),
        "realdata-mnist-public": (rd, lambda: _real(
            "mnist_table", "mnist", REAL / "mnist-public-pca.json",
            "torchdpgmm experiment mnist --dataset fashion-mnist --pca-fit public --mechanisms kl,kl-exact,kl-sound")),
        "realdata-mnist-mlp": (rd, lambda: _real("mlp_table", "mnist-mlp", REAL / "mnist-mlp.json",
                                                 "torchdpgmm experiment mnist-mlp --dataset fashion-mnist --threads 1")),
        "realdata-record-level": (rd, lambda: _real("record_table", "record-level", REAL / "record-level.json",
                                                    "torchdpgmm experiment record-level --threads 1")),
        "synthetic-validation-cellclip": (DOCS / "decisions.md", validation_cellclip_table),
    }


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a block differs from its JSON")
    a = p.parse_args(argv)
    rewrite = _script("benchmarks/docs_tables.py").rewrite
    stale, pages = [], {}
    for name, (page, render) in blocks().items():
        old = pages.get(page, page.read_text())
        if f"<!-- generated: {name} -->\n" not in old:
            raise SystemExit(f"{_rel(page)}: no '<!-- generated: {name} -->' block")
        new = rewrite(old, name, render())
        if new != old:
            stale.append(f"{_rel(page)}:{name}")
        pages[page] = new
    if a.check:
        if stale:
            print("stale generated blocks (run python scripts/task_pages.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for page, text in pages.items():
        if text != page.read_text():
            page.write_text(text)
            print(f"updated {_rel(page)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
