"""The released model's Bayes classifier (``covariance_type="auto"``) against diffprivlib's GaussianNB on
VALIDATION splits: the tabular study's target "no default release below GaussianNB", checked on data we hold.

The splits, bounds and release settings (the estimators' default release with bounds,
:func:`torchdpgmm.bounds.release_in_unit_box`) are exactly those of ``scripts/covariance_rule_validation.py`` (its
``tables`` and ``unit_split``: the study's 80/20 cut with the test part dropped unread, then 75/25 of the
training part; every table mapped into the unit box of its public or stand-in bounds; add/remove, delta 1e-5,
eps 0.5 / 1 / 2 / 5). GaussianNB (Vaidya, Shafiq, Basu & Hong 2013; diffprivlib, Holohan et al. 2019; pure
eps-DP) gets ``bounds = ([0]*d, [1]*d)`` on the same unit-box rows, which is its call on the original rows with the
original bounds up to the affine map its noise scales with. More noise draws than the validation of the rule
(small tables: ``SEEDS_SMALL``; tables with more than ``LARGE`` training rows: ``SEEDS_LARGE``): on a 36-row
validation set one draw's accuracy moves by 10 points, and the means compared here sit a few points apart.

Two steps, because diffprivlib does not install beside the project (``scripts/tabular_peers.py``)::

    python scripts/gaussiannb_validation.py ours WORKDIR                          # project env: splits + ours
    /work/venvs/diffprivlib/bin/python scripts/gaussiannb_validation.py gnb WORKDIR  # writes the JSON

The second step writes ``docs/results/covariance-rule-gaussiannb.json``: per table and eps both mean accuracies, their
standard errors over draws, the majority-class accuracy, and the cells where the released model is below.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)

EPS = (0.5, 1.0, 2.0, 5.0)
DELTA = 1e-5
SEEDS_SMALL, SEEDS_LARGE, LARGE = 100, 20, 2000
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "covariance-rule-gaussiannb.json"
#: ``--quick --out PATH`` (both steps; a smoke run of the same code, for the tests): two small tables, two epsilons,
#: three draws each; ``ours.json`` and the output record ``"quick": true``, and ``gnb`` refuses a WORKDIR whose
#: ``ours.json`` was written with another ``--quick`` than its own
QUICK = {"tables": ("iris", "wine"), "epsilons": (1.0, 5.0), "seeds": 3}


def ours(work: pathlib.Path, quick: bool = False) -> None:
    """Project environment: write the unit-box splits (``splits.npz``) and the rule's accuracies (``ours.json``);
    ``quick``: only :data:`QUICK`'s tables, epsilons and draws."""
    import torch

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from covariance_rule_validation import estimator_rows, tables, unit_split

    from torchdpgmm.bounds import release_in_unit_box

    work.mkdir(parents=True, exist_ok=True)
    arrays, acc, t0 = {}, {}, time.time()
    tabs = tables()
    for name, (X, y, pb) in (((n, tabs[n]) for n in QUICK["tables"]) if quick else tabs.items()):
        Utr, Uva, ytr, yva, b = unit_split(X, y, pb)
        arrays |= {f"{name}/Xtr": Utr.numpy(), f"{name}/Xva": Uva.numpy(), f"{name}/ytr": ytr, f"{name}/yva": yva}
        K, seeds = int(y.max()) + 1, SEEDS_LARGE if len(ytr) > LARGE else SEEDS_SMALL
        seeds = QUICK["seeds"] if quick else seeds
        yv = torch.as_tensor(yva)
        for eps in QUICK["epsilons"] if quick else EPS:
            acc[f"{name}|{eps:g}"] = []
            for s in range(seeds):  # the rows as DPGaussianMixture.predict gives them (auto: pulled onto the ball)
                rel = release_in_unit_box(Utr, torch.as_tensor(ytr), K, eps, DELTA, b, covariance_type="auto",
                                          generator=torch.Generator().manual_seed(s))
                acc[f"{name}|{eps:g}"].append(float((rel.model.predict(estimator_rows(rel, Uva, "auto")) == yv)
                                                    .double().mean()))
            print(f"{name} eps={eps:g} auto={np.mean(acc[f'{name}|{eps:g}']):.3f}", flush=True)
    np.savez(work / "splits.npz", **arrays)
    (work / "ours.json").write_text(json.dumps({"accuracy": acc, "runtime_s": time.time() - t0}
                                               | ({"quick": True} if quick else {})))


def gnb(work: pathlib.Path, out: pathlib.Path, quick: bool = False) -> None:
    """diffprivlib environment: GaussianNB on the same splits and draws count; the comparison JSON (``quick``: of a
    ``ours --quick`` run, recorded as ``"quick": true``)."""
    import warnings

    import diffprivlib
    from diffprivlib.models import GaussianNB

    warnings.filterwarnings("ignore")  # diffprivlib's PrivacyLeakWarning is about bounds, which are given here
    z = np.load(work / "splits.npz")
    mine = json.loads((work / "ours.json").read_text())["accuracy"]
    rows, below, t0 = [], [], time.time()
    for key, a in mine.items():
        name, eps = key.split("|")
        Xtr, Xva, ytr, yva = (z[f"{name}/{s}"] for s in ("Xtr", "Xva", "ytr", "yva"))
        d = Xtr.shape[1]
        g = [float((GaussianNB(epsilon=float(eps), bounds=(np.zeros(d), np.ones(d)), random_state=s)
                    .fit(Xtr, ytr).predict(Xva) == yva).mean()) for s in range(len(a))]
        row = {"table": name, "epsilon": float(eps), "draws": len(a), "n_train": int(len(ytr)), "d": int(d),
               "majority_class_accuracy": float(np.mean(yva == np.bincount(ytr).argmax())),
               "auto": float(np.mean(a)), "auto_se": float(np.std(a, ddof=1) / np.sqrt(len(a))),
               "gaussiannb": float(np.mean(g)), "gaussiannb_se": float(np.std(g, ddof=1) / np.sqrt(len(g)))}
        row["auto_minus_gaussiannb"] = row["auto"] - row["gaussiannb"]
        rows.append(row)
        if row["auto_minus_gaussiannb"] < 0:
            below.append(key)
        print(f"{key}: auto {row['auto']:.3f} gaussiannb {row['gaussiannb']:.3f}", flush=True)
    worst = min(rows, key=lambda r: r["auto_minus_gaussiannb"])
    out.write_text(json.dumps({
        **({"quick": True} if quick else {}),
        "description": __doc__, "delta": DELTA, "adjacency": "add-remove (ours); diffprivlib's own (n public)",
        "diffprivlib": diffprivlib.__version__, "rows": rows, "cells_below_gaussiannb": below,
        "worst_auto_minus_gaussiannb": {k: worst[k] for k in ("table", "epsilon", "auto_minus_gaussiannb")},
        "mean_auto_minus_gaussiannb": float(np.mean([r["auto_minus_gaussiannb"] for r in rows])),
        "runtime_s": {"ours": json.loads((work / "ours.json").read_text())["runtime_s"], "gaussiannb": time.time() - t0},
    }, indent=1) + "\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["ours", "gnb"])
    p.add_argument("work", type=pathlib.Path, help="folder for the splits and our accuracies")
    p.add_argument("--out", type=pathlib.Path, default=OUT, help="the gnb step's JSON")
    p.add_argument("--quick", action="store_true", help="smoke run on QUICK's tables (needs --out)")
    a = p.parse_args(argv)
    _args.check_quick_out(p, a.quick, a.out)
    if a.step == "gnb":
        _args.check_in(p, a.work / "ours.json", "work")
        if json.loads((a.work / "ours.json").read_text()).get("quick", False) != a.quick:
            p.error(f"work {a.work}: its ours.json is from a run {'without' if a.quick else 'with'} --quick; give gnb "
                    "the same --quick as ours")
        _args.check_out(p, a.out)
    ours(a.work, a.quick) if a.step == "ours" else gnb(a.work, a.out, a.quick)


if __name__ == "__main__":
    main()
