"""How the synthetic-classifier pipeline's public defaults were chosen: Bayes-rule accuracy on a validation
split carved from Fashion-MNIST's TRAINING set (never the test set), one factor at a time around the
defaults of ``PipelineConfig``.

    python scripts/synth_validation.py --out DIR [--epsilons 1,5] [--seeds 2] [--data-dir DIR] [--only A;B]
        [--suffix=-NAME] [--geometry]

``docs/results/synth-validation-class-rule.json`` (the class stage's covariance rule, issue #26 item 3: the
tabular noise-aware rule ``class_rule=auto`` with the pipeline's class-to-pooled ratio 1 and with the tables' old
0.3, against ``class_rule=legacy``, same release seeds) was written by ``--out docs/results --suffix=-class-rule
--epsilons 0.5,1,2 --seeds 4 --threads 2 --only "class_rule=legacy;class_rule=auto;class_rule=auto,class_to_pooled=0.3"``
(the command its JSON records; before 2026-11-28 the third setting was ``class_to_pooled=1`` and ``class_rule=auto``
meant 0.3, the default when it was written), and ``synth-validation-class-rule-eps5.json`` by ``--suffix=-class-rule-eps5
--epsilons 5 --seeds 4 --threads 2 --only "class_rule=legacy;class_rule=auto"``.

``synth-validation-cellclip.json`` (the cell clip and the components rule) was written by
``--epsilons 1,2,5 --seeds 4 --suffix=-cellclip --geometry --only "default;components=1;components=4;
components=8;components=16;components=8,cell_clip=0.4;components=8,cell_clip=0.5;components=8,cell_clip=0.8;
components=8,cell_clip=1;components=8,cell_clip=2"`` with ``TORCH_THREADS=2``.

Writes ``DIR/synth-validation<SUFFIX>.json``: one row per (setting, epsilon) with the mean validation accuracy over
release seeds. The split rule (a fixed public permutation, the first 10,000 rows held out) is the one the
study uses for DP-SGD tuning.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

VARIATIONS = {
    "default": {},
    "transform=none": {"transform": "none", "mean_clip": 14.0, "pca_clip": 10.0},
    "d=20": {"n_components": 20},
    "d=60": {"n_components": 60},
    "d=100": {"n_components": 100},
    "radius=4": {"radius": 4.0},
    "radius=5": {"radius": 5.0},
    "radius=6": {"radius": 6.0},
    "radius=12": {"radius": 12.0},
    "pca_clip=7": {"pca_clip": 7.0},
    "pca_clip=14": {"pca_clip": 14.0},
    "pca_fraction=0.1": {"pca_fraction": 0.1},
    "pca_fraction=0.35": {"pca_fraction": 0.35},
    "shrink=0.5": {"shrink": 0.5},
    "shrink=3": {"shrink": 3.0},
    "components=1": {"components_per_class": 1},
    "components=2": {"components_per_class": 2},
    "components=3": {"components_per_class": 3},
    "components=4": {"components_per_class": 4},
    "components=8": {"components_per_class": 8},
    "components=12": {"components_per_class": 12},
    "components=8,lloyd_rank=40": {"components_per_class": 8, "lloyd_rank": 40},
    "components=8,lloyd_rank=3": {"components_per_class": 8, "lloyd_rank": 3},
    "components=8,lloyd_rank=10": {"components_per_class": 8, "lloyd_rank": 10},
    "components=8,mixture_shrink=1": {"components_per_class": 8, "mixture_shrink": 1.0},
    "components=8,mixture_shrink=4": {"components_per_class": 8, "mixture_shrink": 4.0},
    "components=8,mixture_shrink=12": {"components_per_class": 8, "mixture_shrink": 12.0},
    "components=8,stage_split=0.3/0.06/0.64": {"components_per_class": 8, "stage_split": (0.3, 0.06, 0.64)},
    "components=8,stage_split=0.6/0.06/0.34": {"components_per_class": 8, "stage_split": (0.6, 0.06, 0.34)},
    "components=8,lloyd_steps=3": {"components_per_class": 8, "lloyd_steps": 3},
    "components=16": {"components_per_class": 16},
    "components=24": {"components_per_class": 24},
    "components=32": {"components_per_class": 32},
    "components=16,lloyd_steps=3": {"components_per_class": 16, "lloyd_steps": 3},
    "components=16,lloyd_steps=4": {"components_per_class": 16, "lloyd_steps": 4},
    "components=16,lloyd_rank=3": {"components_per_class": 16, "lloyd_rank": 3},
    "components=16,lloyd_rank=8": {"components_per_class": 16, "lloyd_rank": 8},
    "components=16,cell_floor=0.15": {"components_per_class": 16, "cell_floor": 0.15},
    "components=16,cell_floor=0.5": {"components_per_class": 16, "cell_floor": 0.5},
    "components=16,mixture_shrink=4": {"components_per_class": 16, "mixture_shrink": 4.0},
    "components=16,mixture_shrink=16": {"components_per_class": 16, "mixture_shrink": 16.0},
    "components=16,stage_split=0.35/0.06/0.59": {"components_per_class": 16, "stage_split": (0.35, 0.06, 0.59)},
    "components=16,stage_split=0.5/0.12/0.38": {"components_per_class": 16, "stage_split": (0.5, 0.12, 0.38)},
    "components=8,cell_clip=0.4": {"components_per_class": 8, "cell_clip": 0.4},
    "components=8,cell_clip=0.5": {"components_per_class": 8, "cell_clip": 0.5},
    "components=8,cell_clip=0.8": {"components_per_class": 8, "cell_clip": 0.8},
    "components=8,cell_clip=1": {"components_per_class": 8, "cell_clip": 1.0},
    "components=8,cell_clip=2": {"components_per_class": 8, "cell_clip": 2.0},
    "covariance=diag": {"covariance_type": "diag"},
    "covariance=tied": {"covariance_type": "tied"},
    "class_rule=legacy": {"class_rule": "legacy"},
    "class_rule=auto": {"class_rule": "auto"},
    **{f"class_rule=auto,class_to_pooled={r:g}": {"class_rule": "auto", "class_to_pooled": r} for r in (0.3, 0.5, 1.0, 2.0)},
}


def _geometry(X, y, eps: float) -> dict:
    """Where the training records sit in the unit ball of the default release (seed 1000): quantiles of ``||u||``
    and of the distance from ``u`` to the nearest released component mean of its own class (the scale that
    ``cell_clip`` has to cover)."""
    from torchdpgmm.pipelines.synthetic_classifier import release_pipeline

    rel = release_pipeline(X, y, num_classes=10, epsilon=eps, delta=1e-5, generator=torch.Generator().manual_seed(1000))
    U = rel.features(X)
    dist = (U.unsqueeze(1) - rel.model.means[y]).norm(dim=-1).min(1).values
    qs = torch.tensor([0.1, 0.5, 0.9, 0.99], dtype=U.dtype)
    return {"epsilon": eps, "components_per_class": rel.extras["components_per_class"], "quantiles": qs.tolist(),
            "norm": torch.quantile(U.norm(dim=-1), qs).tolist(), "distance_to_nearest_mean": torch.quantile(dist, qs).tolist()}


def main(argv=None) -> None:
    from torchdpgmm.data import load_fashion_mnist
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--epsilons", default="1,5")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--only", default="", help="semicolon list of variation names (default all)")
    p.add_argument("--suffix", default="", help="file name suffix: DIR/synth-validation<SUFFIX>.json")
    p.add_argument("--geometry", action="store_true",
                   help="also record, for the default release at each epsilon, quantiles of the records' norms in the "
                        "unit ball and of their distance to the nearest released component mean of their class")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: $TORCH_THREADS, else 1)")
    p.add_argument("--fit-rows", type=int, default=None,
                   help="release on the first this many rows of the fitting part only (default all 50,000; a bounded "
                        "run on a busy machine; the validation rows are the same)")
    a = p.parse_args(argv)
    threads = a.threads if a.threads is not None else int(os.environ.get("TORCH_THREADS", "1"))
    torch.set_num_threads(threads)
    X, y = load_fashion_mnist(a.data_dir, split="train")
    X = X.reshape(X.shape[0], -1)
    perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(12345))
    val, fit = perm[:10000], perm[10000:]
    fit = fit if a.fit_rows is None else fit[:a.fit_rows]
    names = [n for n in a.only.split(";") if n] or list(VARIATIONS)
    rows = []
    for name in names:
        for eps in (float(e) for e in a.epsilons.split(",")):
            cfg = replace(PipelineConfig(), **VARIATIONS[name])
            accs, secs = [], []
            for s in range(a.seeds):
                t0 = time.perf_counter()  # timed here: the release carries no wall time
                rel = release_pipeline(X[fit], y[fit], num_classes=10, epsilon=eps, delta=1e-5, config=cfg,
                                       generator=torch.Generator().manual_seed(1000 + s))
                t_rel = time.perf_counter() - t0
                accs.append(float((rel.predict(X[val]) == y[val]).double().mean()))
                secs.append(t_rel)
            rows.append({"setting": name, "epsilon": eps, "val_accuracy": sum(accs) / len(accs), "per_seed": accs,
                         "components_per_class": rel.extras["components_per_class"], "release_seconds": sum(secs) / len(secs),
                         "config": cfg.to_dict()})
            print(f"{name:20s} eps={eps:g} val={rows[-1]['val_accuracy']:.4f}", flush=True)
    geometry = [_geometry(X[fit], y[fit], eps) for eps in (float(e) for e in a.epsilons.split(","))] \
        if a.geometry else None
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"synth-validation{a.suffix}.json").write_text(json.dumps(
        {"rows": rows, "geometry": geometry, "split": "Fashion-MNIST train, permutation seed 12345, first 10000 rows = validation",
         "fit_rows": int(fit.numel()), "validation_rows": int(val.numel()), "delta": 1e-5,
         "release_seeds": [1000 + s for s in range(a.seeds)], "threads": threads,
         "command": "python scripts/synth_validation.py " + " ".join(argv if argv is not None else sys.argv[1:]),
         "load_average": os.getloadavg(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1))


if __name__ == "__main__":
    main()
