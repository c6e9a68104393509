"""Re-draw the committed figures of the real-data studies from their committed JSON, without re-running.

    python scripts/replot_docs_figures.py [--out DIR]   # default: next to each JSON (overwrites the PNG)

Each PNG is drawn by its study's own plot function from the rows and config of its JSON, so a figure follows
the current plotting code while every plotted number stays the one the study wrote:
docs/realdata_results/{mnist,mnist-mlp}.json, the synthetic-classifier run (its PNG and
accuracy-vs-epsilon.png) and docs/results/xi/{xi-fig1..5,xi-compare,xi-parkinson}.json. Nothing is recomputed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "docs" / "realdata_results"
SYNTH = REAL / "synthetic-classifier"
XI = ROOT / "docs" / "results" / "xi"


def jobs():
    from torchdpgmm.experiments.realdata import _plot_mlp, _plot_mnist
    from torchdpgmm.experiments.synthetic_classifier import _plot

    from torchdpgmm.experiments.xi import _plot_compare, _plot_figure
    from torchdpgmm.experiments.xi_parkinson import _plot as _plot_parkinson

    def xi_fig(i):
        return lambda rows, path, config: _plot_figure(f"Xi et al. Fig. {i} (d={rows[0].get('d')})",
                                                       (config or {}).get("num_test"))(rows, path)

    run = SYNTH / "run_0.5_1_2_5" / "synthetic-classifier.json"
    return ([(REAL / "mnist.json", _plot_mnist, ["mnist.png"]),
             (REAL / "mnist-mlp.json", _plot_mlp, ["mnist-mlp.png"]),
             (run, _plot, [str(run.with_suffix(".png")), str(SYNTH / "accuracy-vs-epsilon.png")])]
            + [(XI / f"xi-fig{i}.json", xi_fig(i), [f"xi-fig{i}.png"]) for i in range(1, 6)]
            + [(XI / "xi-compare.json", lambda rows, path, config: _plot_compare(rows, path), ["xi-compare.png"]),
               (XI / "xi-parkinson.json", lambda rows, path, config: _plot_parkinson(rows, path),
                ["xi-parkinson.png"])])


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="write the PNGs here instead of next to their JSON")
    a = p.parse_args(argv)
    written = []
    for src, plot, names in jobs():
        d = json.loads(src.read_text())
        for name in names:
            target = src.parent / name if a.out is None else a.out / Path(name).name
            target.parent.mkdir(parents=True, exist_ok=True)
            plot(d["rows"], target, d.get("config"))
            written.append(target)
            print(target)
    return written


if __name__ == "__main__":
    main()
