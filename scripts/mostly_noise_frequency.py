"""How often the front doors call a release of a clean public table "mostly noise" (issue 37 item 5).

For each table of the tabular study (its 80/20 split and bounds, ``torchdpgmm.experiments.tabular``), each epsilon
and each estimator (``DPGaussianMixture(bounds=...)`` and ``DPSyntheticClassifier(bounds=...)``, their defaults),
``--draws`` fits with fresh seeds: how many issued the warning "the release is mostly noise", and the fits' mean
accuracy on the held-out split beside the majority class's share there (a release that classifies near that share
says little). The classes are right and every cell is a number, so a warning here is either apt (too few rows for
this epsilon) or a false alarm; the accuracy says which.

    python scripts/mostly_noise_frequency.py --out docs/results/mostly-noise-frequency.json
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)

MESSAGE = "the release is mostly noise"


def _cell(make, Xtr, ytr, Xte, yte, draws: int, seed0: int) -> dict:
    warned, acc = 0, []
    for s in range(draws):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            est = make(seed0 + s).fit(Xtr, ytr)
        warned += any(str(r.message).startswith(MESSAGE) for r in rec)
        acc.append(float(np.mean(est.predict(Xte) == yte)))
    return {"warned": warned, "draws": draws, "mean_accuracy": float(np.mean(acc))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", default=None, help="comma-separated table names (default: the study's, all available)")
    p.add_argument("--epsilons", default="0.5,1,2,5", type=_args.csv_of(_args.positive_float, "numbers > 0"))
    p.add_argument("--draws", type=_args.whole(1), default=10)
    p.add_argument("--seed", type=_args.whole(0), default=0, help="the study's split seed")
    p.add_argument("--out", type=Path, default=Path("docs/results/mostly-noise-frequency.json"))
    args = p.parse_args(argv)
    from torchdpgmm.data.tables import TABLE_NAMES, available_tables, load_table

    if args.tables is not None:
        _args.check_names(p, "--tables", args.tables.split(","), TABLE_NAMES)
    _args.check_out(p, args.out)
    from torchdpgmm.estimator import DPGaussianMixture, DPSyntheticClassifier
    from torchdpgmm.experiments.tabular import DELTA, _bounds, _split

    torch.set_num_threads(1)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    rows, t0 = [], time.perf_counter()
    for name in args.tables.split(",") if args.tables else available_tables():
        tab = load_table(name)
        Xtr, Xte, ytr, yte = _split(tab.X, tab.y, args.seed)
        b, _ = _bounds(tab, Xtr)
        classes = list(range(int(tab.y.max()) + 1))
        majority = float(np.bincount(yte).max() / len(yte))
        for eps in epsilons:
            for label, cls in (("DPGaussianMixture", DPGaussianMixture), ("DPSyntheticClassifier", DPSyntheticClassifier)):
                make = lambda s, cls=cls, eps=eps: cls(eps, DELTA, classes=classes, bounds=b, random_state=s)  # noqa: E731
                cell = _cell(make, Xtr, ytr, Xte, yte, args.draws, 1000 * (args.seed + 1))
                rows.append({"table": name, "n_train": len(Xtr), "d": int(tab.X.shape[1]), "epsilon": eps,
                             "estimator": label, "majority_share": majority, **cell})
                print(f"{name} eps {eps:g} {label}: warned {cell['warned']}/{cell['draws']}, "
                      f"accuracy {cell['mean_accuracy']:.3f} (majority {majority:.3f})", flush=True)
    out = {"script": "scripts/mostly_noise_frequency.py", "message": MESSAGE, "delta": DELTA, "draws": args.draws,
           "split_seed": args.seed, "rows": rows, "seconds": time.perf_counter() - t0,
           "environment": {"python": platform.python_version(), "torch": torch.__version__}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
