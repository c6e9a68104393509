"""Re-draw the figures of the synthetic studies (fig1..fig5) from their committed JSON, without re-running.

    python scripts/replot_synthetic.py --out DIR [--results scripts/results/synthetic]

Reads ``RESULTS/figN.json`` (written by ``torchdpgmm experiment figN``) and writes ``DIR/figN.png`` with the
study's own plot function (:func:`torchdpgmm.experiments.plotting.plot_curves`), so the figure follows the
current plotting style. Nothing is recomputed: the curves and intervals come from the JSON rows.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.experiments.synthetic import STUDIES, _plot_factory  # noqa: E402

_SPECS = {  # study -> (swept parameter, title, log x-axis); titles as in torchdpgmm.experiments.synthetic
    "fig1": ("epsilon", "Fig. 1: proposed mechanism, mean KL and 95% CI", True),
    "fig2": ("epsilon", "Fig. 2: KL vs epsilon", True),
    "fig3": ("n", "Fig. 3: KL vs N (epsilon = 1)", True),
    "fig4": ("k", "Fig. 4: KL vs K (N = 1000, epsilon = 1)", False),
    "fig5": ("d", "Fig. 5: KL vs d (K = 5, N = 1000, epsilon = 1)", False),
}


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the PNG files")
    p.add_argument("--results", default=str(Path(__file__).parent / "results" / "synthetic"),
                   help="directory holding figN.json (default scripts/results/synthetic)")
    p.add_argument("--studies", default=",".join(_SPECS), help="comma-separated subset of fig1..fig5")
    a = p.parse_args(argv)
    names = [s.strip() for s in a.studies.split(",") if s.strip()]
    if not names:
        p.error("--studies: give at least one of " + ", ".join(_SPECS))
    _args.check_names(p, "--studies", names, [s for s in _SPECS if s in STUDIES])
    for name in names:
        _args.check_in(p, Path(a.results) / f"{name}.json", "--results")
    out = Path(a.out)
    _args.check_out(p, out, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        src = Path(a.results) / f"{name}.json"
        rows = json.loads(src.read_text())["rows"]
        x, title, logx = _SPECS[name]
        _plot_factory(x, title, logx)(rows, out / f"{name}.png")
        written.append(out / f"{name}.png")
        print(out / f"{name}.png")
    return written


if __name__ == "__main__":
    main()
