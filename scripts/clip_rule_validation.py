"""Validation of the release's default clipping radius in the unit box of public bounds (issue 26 item 3).

With public bounds a table is mapped into the unit box and released about the box's middle. The radius
``sqrt(d)/2`` (the ball that holds the whole box, ``Bounds.unit_clip_bound``) never clips a record inside the
bounds, but every block's noise scales with it (sums with ``B``, second moments with ``B^2``). A smaller public
radius ``f sqrt(d)/2`` pulls the records beyond it radially onto the sphere (bias) and divides the noise of the
sums by ``1/f`` and of the second moments by ``1/f^2``. This script scores the fractions ``f`` of
:data:`FRACTIONS` on VALIDATION splits only, exactly as ``scripts/covariance_rule_validation.py`` cuts them (the
study's 80/20 cut with its test part dropped unread, then 75/25 of the training part): the default release
(``covariance_type="auto"``, ``kl`` split, discrete noise, add/remove, delta 1e-5) at eps 0.5 / 1 / 2 / 5, 10
noise seeds, its Bayes classifier's accuracy on the validation rows; and at eps = 1 (5 seeds) logistic
regression trained on 4,000 synthetic rows of each release (the study's downstream path). The rule
(:data:`torchdpgmm.bounds.CLIP_FRACTION`) stays the code's default unless the fraction with the highest mean
Bayes accuracy over all (table, eps) cells beats it by more than :data:`MARGIN_SE` standard errors of their paired
difference over the cells (:func:`summarise`; until 2026-11-28 the highest mean alone decided); the JSON also gives
each fraction's worst cell against ``f = 1``.

Run: ``python scripts/clip_rule_validation.py`` (writes docs/results/clip-rule.json, a few minutes on 2 cores).

``--pipeline`` scores the same question for the accounted pipeline on tables (``DPSyntheticClassifier(bounds=...,
image_transform="none", n_components=d)``, :data:`PIPELINE_SEEDS` seeds): its PCA clip and class-stage radius at
``f sqrt(d)/2`` for f in :data:`PIPELINE_FRACTIONS` (the noisy mean's clip stays ``sqrt(d)/2``), its Bayes
classifier on the validation rows -> ``docs/results/clip-rule-pipeline.json``.

``--radius`` scores the private clip radius of :mod:`torchdpgmm.release.centring` (``clip_bound=None``: a share of
the budget on a noisy histogram of the distances to the released centre, the radius that holds a target quantile of
the records, floor 1/2) for the configs of :data:`RADIUS_CONFIGS` against the fixed radius 1/2, every classifier
applied to validation rows pulled onto its own ball (the consistent classifier) -> ``docs/results/radius-rule.json``.

``--pull`` scores the consistent classifier (validation rows pulled onto the release's ball, as
``DPGaussianMixture.predict`` does) against raw rows, for ``covariance_type`` auto and full -> ``docs/results/pull-rule.json``.

``--components`` (exploration for issue 37 item 3) scores Gaussians per class on tables through the pipeline's class
mixture (``DPSyntheticClassifier(bounds=...)``, ``components_per_class`` 1, 2, 4 or its rule) beside the default
``DPGaussianMixture`` -> ``docs/results/components-per-class-tables.json``.

``--centre`` scores the two-stage release of :mod:`torchdpgmm.release.centring` (a private centre with a share
``c`` of the budget, then the mixture clipped about it to a radius that is either a fraction ``f`` of ``sqrt(d)/2``
or a fixed length ``r`` in the unit box) for every pair of :data:`CENTRE_SHARES` and :data:`CENTRE_RADII`, beside the one-stage release about the box's middle at ``f = 0.5`` (the previous
default), same splits, eps, seeds and Bayes accuracy, and at eps = 1 logistic regression on synthetic rows
(:data:`SYNTH_SEEDS`) for the previous default and the best pair -> ``docs/results/centre-rule.json``. The rule
(:data:`torchdpgmm.release.centring.CENTRE_FRACTION`, :data:`torchdpgmm.bounds.CENTRED_CLIP_RADIUS`) is the pair
with the highest mean Bayes accuracy over all (table, eps) cells.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import covariance_rule_validation as cv  # noqa: E402  (the same tables and validation splits)

from torchdpgmm.release.sound import release_sound  # noqa: E402

FRACTIONS = (1.0, 0.7, 0.577, 0.5, 0.4, 0.3)
EPS = (0.5, 1.0, 2.0, 5.0)
SEEDS = tuple(range(10))
SYNTH_SEEDS = tuple(range(5))
N_SYNTH = 4000
DELTA = 1e-5
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "clip-rule.json"
PIPELINE_OUT = OUT.with_name("clip-rule-pipeline.json")
PIPELINE_FRACTIONS = (1.0, 0.5)
PIPELINE_SEEDS = tuple(range(5))
CENTRE_OUT = OUT.with_name("centre-rule.json")
CENTRE_SHARES = (0.05, 0.1, 0.2)
#: ("f", F): radius F sqrt(d)/2 (a fraction of the half-diagonal); ("r", R): radius R in the unit box, whatever d
CENTRE_RADII = (("f", 0.35), ("f", 0.25), ("r", 0.35), ("r", 0.5), ("r", 0.7))
BOX = "box 0.5"


def _release(Utr, ytr, K, eps, b, f, seed):
    return release_sound(Utr, torch.as_tensor(ytr), K, eps, DELTA, clip_bound=float(b.unit_clip_bound) * f,
                         center=b.unit_center, covariance_type="auto", generator=torch.Generator().manual_seed(seed))


def _synthetic_logreg(model, Uva, yva, seed) -> float:
    """Logistic regression (the study's: scaled, scikit-learn defaults) on synthetic rows clipped into the box."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xs, ys = model.sample(N_SYNTH, generator=torch.Generator().manual_seed(10_000 + seed))
    Xs, ys = Xs.clamp(0.0, 1.0).numpy(), ys.numpy()
    if len(np.unique(ys)) < 2:
        return float(np.mean(yva == ys[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(Xs, ys)
    return float(np.mean(clf.predict(Uva.numpy()) == yva))


def score_table(X, y, public_bounds, fractions) -> tuple[dict, dict, dict]:
    Utr, Uva, ytr, yva, b = cv.unit_split(X, y, public_bounds)
    K = int(y.max()) + 1
    yva_t = torch.as_tensor(yva)
    info = {"n_train": int(len(ytr)), "n_val": int(len(yva)), "d": int(X.shape[1]), "K": K,
            "majority_class_accuracy": float(np.mean(yva == np.bincount(ytr).argmax()))}
    bayes, synth = {}, {}
    for eps in EPS:
        for f in fractions:
            acc = []
            for seed in SEEDS:
                rel = _release(Utr, ytr, K, eps, b, f, seed)
                acc.append(float((rel.model.predict(Uva) == yva_t).double().mean()))
                if eps == 1.0 and seed in SYNTH_SEEDS:
                    synth.setdefault(f, []).append(_synthetic_logreg(rel.model, Uva, yva, seed))
            bayes[(eps, f)] = acc
    return info, bayes, synth


def score_pipeline(X, y, public_bounds, fractions) -> tuple[dict, dict]:
    """The pipeline's Bayes accuracy on the validation rows, per (eps, f): PCA clip and radius f sqrt(d)/2."""
    from torchdpgmm.estimator import DPSyntheticClassifier

    Xtr, Xva, ytr, yva = cv.validation_split(X, y)
    *_, b = cv.unit_split(X, y, public_bounds)
    K, d = int(y.max()) + 1, X.shape[1]
    info = {"n_train": int(len(ytr)), "n_val": int(len(yva)), "d": int(d), "K": K}
    acc = {}
    for eps in EPS:
        for f in fractions:
            r = f * float(b.unit_clip_bound)
            a = []
            for seed in PIPELINE_SEEDS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = DPSyntheticClassifier(eps, DELTA, classes=list(range(K)), bounds=b, image_transform="none",
                                                n_components=d, pca_clip=r, radius=r, random_state=seed).fit(Xtr, ytr)
                a.append(float(np.mean(est.predict(Xva) == yva)))
            acc[(eps, f)] = a
    return info, acc


def main_pipeline(out: pathlib.Path, names: list[str]) -> None:
    t0 = time.perf_counter()
    tabs = cv.tables()
    cells, tables = [], {}
    for name in names or list(tabs):
        X, y, pb = tabs[name]
        tables[name], acc = score_pipeline(X, y, pb, PIPELINE_FRACTIONS)
        for eps in EPS:
            cells.append({"table": name, "epsilon": eps,
                          "bayes": {str(f): float(np.mean(acc[(eps, f)])) for f in PIPELINE_FRACTIONS}})
        print(f"{name}: " + " ".join(f"{f:g}:{np.mean(acc[(1.0, f)]):.3f}" for f in PIPELINE_FRACTIONS), flush=True)
    res = {"study": "clip-rule-validation-pipeline", "script": "scripts/clip_rule_validation.py --pipeline",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "fractions": list(PIPELINE_FRACTIONS), "epsilons": list(EPS), "seeds": len(PIPELINE_SEEDS), "delta": DELTA,
           "release": "DPSyntheticClassifier(bounds, image_transform='none', n_components=d), pca_clip = radius = "
                      "f sqrt(d)/2, mean_clip sqrt(d)/2", "tables": tables, "cells": cells,
           "summary": summarise(cells, PIPELINE_FRACTIONS), "seconds": time.perf_counter() - t0}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    s = res["summary"]
    print(f"best fraction {s['rule_fraction']}: {s['per_fraction'][str(s['rule_fraction'])]}; wrote {out}")


def _radius(b, spec) -> float:
    kind, v = spec
    return float(b.unit_clip_bound) * v if kind == "f" else min(v, float(b.unit_clip_bound))


def _centred(Utr, ytr, K, eps, b, c, spec, seed):
    from torchdpgmm.release.centring import release_centred

    return release_centred(Utr, torch.as_tensor(ytr), K, eps, DELTA, clip_bound=_radius(b, spec),
                           ball_center=b.unit_center, ball_radius=float(b.unit_clip_bound), fraction=c,
                           covariance_type="auto", generator=torch.Generator().manual_seed(seed))


def _pair(c, spec) -> str:
    return f"centre {c:g} / {spec[0]} {spec[1]:g}"


#: a setting replaces the code's default (the centre share and radius; the clip fraction) only if its mean Bayes
#: accuracy over the cells beats the default's by more than this many standard errors of their paired difference
#: over the cells, so that the noise of one run does not move a default
MARGIN_SE = 2.0
#: how score_centre scores a release: "pulled" (the validation rows pulled onto the ball the release clipped its
#: records to, as DPGaussianMixture.predict does for covariance_type="auto") or "raw" (the rows as given: the
#: scoring of centre-rule.json before 2026-11-27, --raw-scoring)
CENTRE_SCORING = "pulled"


def _centre_rows(rel, Uva, b, name: str):
    """Validation rows as the estimator's predict gives them to ``rel``'s model (:data:`CENTRE_SCORING`): BOX pulled
    onto its ball about the box's middle, a centred release onto its ball about the released centre."""
    if CENTRE_SCORING == "raw":
        return Uva
    if name == BOX:  # a one-stage release about the box's middle, at the clip bound it records
        return cv.pulled(Uva, b.unit_center.to(Uva.dtype), float(rel.extras["clip_bound"]))
    return cv.estimator_rows(rel, Uva, "auto")


def score_centre(X, y, public_bounds) -> tuple[dict, dict, dict]:
    """Bayes accuracy on the validation rows per (eps, config); configs: BOX and every (share, fraction) pair."""
    Utr, Uva, ytr, yva, b = cv.unit_split(X, y, public_bounds)
    K = int(y.max()) + 1
    yva_t = torch.as_tensor(yva)
    info = {"n_train": int(len(ytr)), "n_val": int(len(yva)), "d": int(X.shape[1]), "K": K}
    configs = {BOX: lambda eps, s: _release(Utr, ytr, K, eps, b, 0.5, s)}
    for c in CENTRE_SHARES:
        for spec in CENTRE_RADII:
            configs[_pair(c, spec)] = (lambda c, spec: lambda eps, s: _centred(Utr, ytr, K, eps, b, c, spec, s))(c, spec)
    bayes, models = {}, {}
    for eps in EPS:
        for name, run in configs.items():
            acc = []
            for seed in SEEDS:
                rel = run(eps, seed)
                acc.append(float((rel.model.predict(_centre_rows(rel, Uva, b, name)) == yva_t).double().mean()))
            bayes[(eps, name)] = acc
    return info, bayes, {"configs": configs, "Uva": Uva, "yva": yva}


def main_centre(out: pathlib.Path, names: list[str]) -> None:
    t0 = time.perf_counter()
    tabs = cv.tables()
    cells, tables, synth = [], {}, {}
    keys = [BOX] + [_pair(c, spec) for c in CENTRE_SHARES for spec in CENTRE_RADII]
    for name in names or list(tabs):
        X, y, pb = tabs[name]
        tables[name], bayes, ctx = score_centre(X, y, pb)
        for eps in EPS:
            cells.append({"table": name, "epsilon": eps, "bayes": {k: float(np.mean(bayes[(eps, k)])) for k in keys},
                          "bayes_se": {k: float(np.std(bayes[(eps, k)], ddof=1) / np.sqrt(len(SEEDS))) for k in keys}})
        synth[name] = ctx
        print(f"{name}: " + " ".join(f"{k}:{np.mean(bayes[(1.0, k)]):.3f}" for k in keys), flush=True)
    mean = {k: float(np.mean([c["bayes"][k] for c in cells])) for k in keys}
    top = max(keys[1:], key=lambda k: mean[k])
    # the rule is the code's default; the setting of the highest mean replaces it only by more than twice the standard
    # error of the paired difference over the cells (MARGIN_SE), so that noise does not move a default
    from torchdpgmm.bounds import CENTRED_CLIP_RADIUS
    from torchdpgmm.release.centring import CENTRE_FRACTION

    default = _pair(CENTRE_FRACTION, ("r", CENTRED_CLIP_RADIUS))
    top_margin, top_se, replaces = _incumbent_rule(cells, top, default)
    best = top if replaces else default
    gain = [c["bayes"][best] - c["bayes"][BOX] for c in cells]
    worst = int(np.argmin(gain))
    synth_rows = []
    for name, ctx in synth.items():  # the study's downstream path at eps 1, previous default vs the rule
        row = {"table": name, "epsilon": 1.0}
        for k in (BOX, best):
            row[k] = float(np.mean([_synthetic_logreg(ctx["configs"][k](1.0, s).model, ctx["Uva"], ctx["yva"], s)
                                    for s in SYNTH_SEEDS]))
        synth_rows.append(row)
    res = {"study": "centre-rule-validation", "script": "scripts/clip_rule_validation.py --centre",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "shares": list(CENTRE_SHARES), "radii": [list(r) for r in CENTRE_RADII], "epsilons": list(EPS),
           "seeds": len(SEEDS), "synthetic_seeds": len(SYNTH_SEEDS), "n_synthetic": N_SYNTH, "delta": DELTA,
           "release": "release_centred (centre share c, clip f sqrt(d)/2 ('f') or r ('r', at most sqrt(d)/2) about the "
                      "released centre) vs release_sound "
                      "about the box's middle at f = 0.5; covariance_type='auto', kl, discrete, add-remove",
           "scoring": CENTRE_SCORING + (": validation rows pulled onto the ball each release clipped its records to, as "
                                        "DPGaussianMixture.predict does" if CENTRE_SCORING == "pulled" else
                                        ": validation rows as given"),
           "tables": tables, "cells": cells, "mean_bayes": mean,
           "summary": {"rule": best, "rule_share": float(best.split()[1]), "rule_radius_kind": best.split()[3],
                       "rule_radius": float(best.split()[4]),
                       "mean_gain_vs_box": float(np.mean(gain)), "worst_gain_vs_box": float(gain[worst]),
                       "worst_cell": f"{cells[worst]['table']} eps={cells[worst]['epsilon']:g}",
                       "cells_below_box": int(sum(g < 0 for g in gain)), "cells": len(cells),
                       "default": default, "highest_mean": top, "highest_mean_minus_default": top_margin,
                       "highest_mean_minus_default_se": top_se, "margin_se": MARGIN_SE},
           "synthetic_eps1": synth_rows,
           "synthetic_summary": {k: float(np.mean([r[k] for r in synth_rows])) for k in (BOX, best)},
           "seconds": time.perf_counter() - t0}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"rule {best}: {res['summary']}; synthetic {res['synthetic_summary']}; wrote {out}")


RADIUS_OUT = OUT.with_name("radius-rule.json")
#: (radius share, target quantile, z) of the private radius; "fixed 0.5" is the previous default (centre 0.1, r 0.5)
RADIUS_CONFIGS = ((0.05, 0.9, 2.0), (0.05, 0.8, 2.0), (0.05, 0.95, 2.0), (0.02, 0.9, 2.0), (0.1, 0.9, 2.0),
                  (0.05, 0.9, 1.0), (0.05, 0.9, 3.0), (0.05, 0.7, 2.0), (0.05, 0.5, 2.0), (0.02, 0.7, 2.0),
                  (0.02, 0.5, 2.0))
RADIUS_SEEDS = tuple(range(5))
FIXED = "fixed 0.5"


# The private radius becomes the estimator's default (torchdpgmm.bounds.PRIVATE_RADIUS) only where its best config
# has a higher mean Bayes accuracy than the fixed radius 1/2 with the same consistent classifier ("default" in the JSON).


def _radius_key(cfg) -> str:
    return f"share {cfg[0]:g} / q {cfg[1]:g} / z {cfg[2]:g}"


pulled = cv.pulled  # the public map the release applied to its records (one home: covariance_rule_validation)


def score_radius(X, y, public_bounds) -> tuple[dict, dict]:
    """Bayes accuracy on the validation rows per (eps, config): the previous default (fixed radius 1/2 about the
    private centre) with raw and with pulled validation rows, and every private-radius config (pulled rows, the
    consistent classifier), plus each config's mean released radius and share of training rows inside."""
    from torchdpgmm.release.centring import release_centred

    Utr, Uva, ytr, yva, b = cv.unit_split(X, y, public_bounds)
    K = int(y.max()) + 1
    yva_t, ytr_t = torch.as_tensor(yva), torch.as_tensor(ytr)
    info = {"n_train": int(len(ytr)), "n_val": int(len(yva)), "d": int(X.shape[1]), "K": K}
    kw = dict(ball_center=b.unit_center, ball_radius=float(b.unit_clip_bound), covariance_type="auto")
    acc, radius, inside = {}, {}, {}
    for eps in EPS:
        for seed in RADIUS_SEEDS:
            rel = release_centred(Utr, ytr_t, K, eps, DELTA, clip_bound=0.5, generator=torch.Generator().manual_seed(seed),
                                  **kw)
            c = rel.extras["centre"]
            acc.setdefault((eps, FIXED + " raw"), []).append(float((rel.model.predict(Uva) == yva_t).double().mean()))
            acc.setdefault((eps, FIXED), []).append(float((rel.model.predict(pulled(Uva, c, 0.5)) == yva_t).double().mean()))
            inside.setdefault((eps, FIXED), []).append(float(((Utr - c).norm(dim=-1) <= 0.5).double().mean()))
            for cfg in RADIUS_CONFIGS:
                k = _radius_key(cfg)
                rel = release_centred(Utr, ytr_t, K, eps, DELTA, clip_bound=None, radius_fraction=cfg[0],
                                      radius_quantile=cfg[1], radius_z=cfg[2], radius_floor=0.5,
                                      generator=torch.Generator().manual_seed(seed), **kw)
                c, R = rel.extras["centre"], rel.extras["clip_radius"]
                acc.setdefault((eps, k), []).append(float((rel.model.predict(pulled(Uva, c, R)) == yva_t).double().mean()))
                radius.setdefault((eps, k), []).append(float(R))
                inside.setdefault((eps, k), []).append(float(((Utr - c).norm(dim=-1) <= R).double().mean()))
    return info, {"acc": acc, "radius": radius, "inside": inside}


def main_radius(out: pathlib.Path, names: list[str]) -> None:
    t0 = time.perf_counter()
    tabs = cv.tables()
    keys = [FIXED + " raw", FIXED] + [_radius_key(c) for c in RADIUS_CONFIGS]
    cells, tables = [], {}
    for name in names or list(tabs):
        X, y, pb = tabs[name]
        tables[name], r = score_radius(X, y, pb)
        for eps in EPS:
            cells.append({"table": name, "epsilon": eps,
                          "bayes": {k: float(np.mean(r["acc"][(eps, k)])) for k in keys},
                          "bayes_se": {k: float(np.std(r["acc"][(eps, k)], ddof=1) / np.sqrt(len(RADIUS_SEEDS)))
                                       for k in keys},
                          "mean_radius": {k: float(np.mean(v)) for (e, k), v in r["radius"].items() if e == eps},
                          "train_share_inside": {k: float(np.mean(v)) for (e, k), v in r["inside"].items() if e == eps}})
        print(f"{name}: " + " ".join(f"{k}:{np.mean(r['acc'][(1.0, k)]):.3f}" for k in keys), flush=True)
    mean = {k: float(np.mean([c["bayes"][k] for c in cells])) for k in keys}
    best = max(keys[2:], key=lambda k: mean[k])
    gain = [c["bayes"][best] - c["bayes"][FIXED] for c in cells]
    worst = int(np.argmin(gain))
    res = {"study": "radius-rule-validation", "script": "scripts/clip_rule_validation.py --radius",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "configs": [list(c) for c in RADIUS_CONFIGS], "epsilons": list(EPS), "seeds": len(RADIUS_SEEDS),
           "delta": DELTA,
           "release": "release_centred (centre share 0.1) with a fixed radius 1/2 ('fixed 0.5': validation rows pulled "
                      "onto the ball, the consistent classifier; 'fixed 0.5 raw': raw rows) or a private radius "
                      "(share, target quantile q, z; floor 1/2; rows pulled onto its ball); covariance_type='auto', "
                      "kl, discrete, add-remove",
           "tables": tables, "cells": cells, "mean_bayes": mean,
           "summary": {"rule": best, "default": max(keys[1:], key=lambda k: mean[k]),
                       "private_radius_default": bool(mean[best] > mean[FIXED]),
                       "pulled_minus_raw_fixed": float(mean[FIXED] - mean[FIXED + " raw"]),
                       "mean_gain_vs_fixed": float(np.mean(gain)), "worst_gain_vs_fixed": float(gain[worst]),
                       "worst_cell": f"{cells[worst]['table']} eps={cells[worst]['epsilon']:g}",
                       "cells_below_fixed": int(sum(g < 0 for g in gain)), "cells": len(cells)},
           "seconds": time.perf_counter() - t0}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"rule {best}: {res['summary']}; means {mean}; wrote {out}")


PULL_OUT = OUT.with_name("pull-rule.json")
PULL_TYPES = ("auto", "full")
PULL_SEEDS = tuple(range(3))


def main_pull(out: pathlib.Path, names: list[str]) -> None:
    """The consistent classifier (validation rows pulled onto the release's ball, what DPGaussianMixture.predict does)
    against raw validation rows, for the default release (private centre, fixed radius 1/2) with covariance_type auto
    and full, same splits and epsilons, PULL_SEEDS seeds -> docs/results/pull-rule.json."""
    from torchdpgmm.bounds import CENTRED_CLIP_RADIUS
    from torchdpgmm.release.centring import release_centred

    t0 = time.perf_counter()
    tabs = cv.tables()
    cells = []
    for name in names or list(tabs):
        X, y, pb = tabs[name]
        Utr, Uva, ytr, yva, b = cv.unit_split(X, y, pb)
        K, yv = int(y.max()) + 1, torch.as_tensor(yva)
        for eps in EPS:
            cell = {"table": name, "epsilon": eps}
            for ct in PULL_TYPES:
                acc = {"pulled": [], "raw": []}
                for seed in PULL_SEEDS:
                    rel = release_centred(Utr, torch.as_tensor(ytr), K, eps, DELTA, clip_bound=CENTRED_CLIP_RADIUS,
                                          ball_center=b.unit_center, ball_radius=float(b.unit_clip_bound),
                                          covariance_type=ct, generator=torch.Generator().manual_seed(seed))
                    acc["pulled"].append(float((rel.model.predict(cv.pulled_onto_release(Uva, rel)) == yv)
                                               .double().mean()))
                    acc["raw"].append(float((rel.model.predict(Uva) == yv).double().mean()))
                cell[ct] = {k: float(np.mean(v)) for k, v in acc.items()}
            cells.append(cell)
        print(name, [(c["epsilon"], c["auto"], c["full"]) for c in cells if c["table"] == name], flush=True)
    summary = {}
    for ct in PULL_TYPES:
        gain = [c[ct]["pulled"] - c[ct]["raw"] for c in cells]
        worst = int(np.argmin(gain))
        summary[ct] = {"mean_pulled": float(np.mean([c[ct]["pulled"] for c in cells])),
                       "mean_raw": float(np.mean([c[ct]["raw"] for c in cells])), "mean_gain": float(np.mean(gain)),
                       "cells_pulled_below_raw": int(sum(g < 0 for g in gain)), "cells": len(cells),
                       "worst_gain": float(gain[worst]),
                       "worst_cell": f"{cells[worst]['table']} eps={cells[worst]['epsilon']:g}"}
    res = {"study": "pull-rule-validation", "script": "scripts/clip_rule_validation.py --pull",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "epsilons": list(EPS), "seeds": len(PULL_SEEDS), "delta": DELTA, "covariance_types": list(PULL_TYPES),
           "release": "release_centred (centre share 0.1, radius 1/2 about the released centre), kl, discrete, "
                      "add-remove; Bayes accuracy on validation rows pulled onto that ball ('pulled', the estimator's "
                      "predict) or as given ('raw')",
           "cells": cells, "summary": summary, "seconds": time.perf_counter() - t0}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"{summary}; wrote {out}")


COMPONENTS_OUT = OUT.with_name("components-per-class-tables.json")
COMPONENTS = (1, 2, 4, None)  # None: the pipeline's public rule (components_per_class=None)
COMPONENTS_EPS = (1.0, 5.0)
COMPONENTS_SEEDS = tuple(range(3))


def main_components(out: pathlib.Path, names: list[str]) -> None:
    """Issue 37 item 3, exploration: Gaussians per class on tables through the pipeline's class mixture
    (DPSyntheticClassifier(bounds=...) with its table defaults and components_per_class in COMPONENTS), Bayes accuracy
    on the validation rows, COMPONENTS_EPS x COMPONENTS_SEEDS -> docs/results/components-per-class-tables.json. Beside
    it the default DPGaussianMixture (one Gaussian per class) on the same rows."""
    from torchdpgmm.estimator import DPGaussianMixture, DPSyntheticClassifier

    t0 = time.perf_counter()
    tabs = cv.tables()
    cells = []
    for name in names or list(tabs):
        X, y, pb = tabs[name]
        Xtr, Xva, ytr, yva = cv.validation_split(X, y)
        *_, b = cv.unit_split(X, y, pb)
        K = int(y.max()) + 1
        for eps in COMPONENTS_EPS:
            cell = {"table": name, "epsilon": eps, "d": int(X.shape[1]), "K": K, "n_train": int(len(ytr))}
            for m in COMPONENTS:
                acc = []
                for seed in COMPONENTS_SEEDS:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est = DPSyntheticClassifier(eps, DELTA, classes=list(range(K)), bounds=b, components_per_class=m,
                                                    random_state=seed).fit(Xtr, ytr)
                    acc.append(float(np.mean(est.predict(Xva) == yva)))
                cell["pipeline components=" + ("rule" if m is None else str(m))] = float(np.mean(acc))
            acc = []
            for seed in COMPONENTS_SEEDS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = DPGaussianMixture(eps, DELTA, classes=list(range(K)), bounds=b, random_state=seed).fit(Xtr, ytr)
                acc.append(float(np.mean(est.predict(Xva) == yva)))
            cell["DPGaussianMixture default"] = float(np.mean(acc))
            cells.append(cell)
            print(cell, flush=True)
    keys = ["pipeline components=" + ("rule" if m is None else str(m)) for m in COMPONENTS] + ["DPGaussianMixture default"]
    mean = {k: float(np.mean([c[k] for c in cells])) for k in keys}
    res = {"study": "components-per-class-tables", "script": "scripts/clip_rule_validation.py --components",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "epsilons": list(COMPONENTS_EPS), "seeds": len(COMPONENTS_SEEDS), "delta": DELTA,
           "release": "DPSyntheticClassifier(bounds, table defaults, components_per_class=m) and "
                      "DPGaussianMixture(bounds) defaults; Bayes accuracy on validation rows",
           "cells": cells, "mean": mean, "seconds": time.perf_counter() - t0}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"{mean}; wrote {out}")


def _incumbent_rule(cells: list[dict], top: str, default: str) -> tuple[float, float, bool]:
    """How the setting ``top`` (the highest mean) does against the code's ``default`` over the cells: the mean and
    standard error of their paired Bayes-accuracy difference, and whether the mean passes :data:`MARGIN_SE` standard
    errors (only then does ``top`` replace the default: one run's noise does not move a default)."""
    paired = [c["bayes"][top] - c["bayes"][default] for c in cells]
    margin = float(np.mean(paired))
    se = float(np.std(paired, ddof=1) / np.sqrt(len(paired))) if len(paired) > 1 else 0.0
    return margin, se, margin > MARGIN_SE * se


def summarise(cells: list[dict], fractions) -> dict:
    """Each fraction's mean Bayes accuracy over the cells and worst cell against f = 1, and the rule: the code's
    :data:`torchdpgmm.bounds.CLIP_FRACTION` unless the fraction with the highest mean beats it by more than
    :data:`MARGIN_SE` standard errors of their paired difference over the cells (the centre's rule, ``--centre``)."""
    from torchdpgmm.bounds import CLIP_FRACTION

    out = {}
    for f in fractions:
        gain = [c["bayes"][str(f)] - c["bayes"]["1.0"] for c in cells]
        worst = int(np.argmin(gain))
        out[str(f)] = {"mean_bayes": float(np.mean([c["bayes"][str(f)] for c in cells])),
                       "mean_gain_vs_1": float(np.mean(gain)), "worst_gain_vs_1": float(gain[worst]),
                       "worst_cell": f"{cells[worst]['table']} eps={cells[worst]['epsilon']:g}",
                       "cells_below_1": int(sum(g < 0 for g in gain))}
    top = max(fractions, key=lambda f: out[str(f)]["mean_bayes"])
    margin, se, replaces = _incumbent_rule(cells, str(top), str(CLIP_FRACTION))
    return {"per_fraction": out, "default_fraction": CLIP_FRACTION, "highest_mean_fraction": top,
            "highest_mean_minus_default": margin, "highest_mean_minus_default_se": se, "margin_se": MARGIN_SE,
            "rule_fraction": top if replaces else CLIP_FRACTION}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    ap.add_argument("--tables", default="", help="comma-separated subset (exploration; default all)")
    ap.add_argument("--pipeline", action="store_true", help="the pipeline's clip bounds (-> clip-rule-pipeline.json)")
    ap.add_argument("--centre", action="store_true", help="the two-stage centred release (-> centre-rule.json)")
    ap.add_argument("--radius", action="store_true", help="the private clip radius (-> radius-rule.json)")
    ap.add_argument("--pull", action="store_true", help="pulled vs raw rows at predict (-> pull-rule.json)")
    ap.add_argument("--raw-scoring", action="store_true",
                    help="--centre scores the validation rows as given, not pulled as predict does (the old scoring)")
    ap.add_argument("--components", action="store_true",
                    help="Gaussians per class on tables via the pipeline (-> components-per-class-tables.json)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    global CENTRE_SCORING
    CENTRE_SCORING = "raw" if a.raw_scoring else "pulled"
    studies = ((a.components, main_components, COMPONENTS_OUT), (a.pull, main_pull, PULL_OUT),
               (a.radius, main_radius, RADIUS_OUT), (a.centre, main_centre, CENTRE_OUT),
               (a.pipeline, main_pipeline, PIPELINE_OUT))
    for chosen, study, default_out in studies:  # the first flag given, in this order, runs its study alone
        if chosen:
            study(default_out if a.out == OUT else a.out, [t for t in a.tables.split(",") if t])
            return
    t0 = time.perf_counter()
    tabs = cv.tables()
    names = [t for t in a.tables.split(",") if t] or list(tabs)
    cells, synth_rows, tables = [], [], {}
    for name in names:
        X, y, pb = tabs[name]
        info, bayes, synth = score_table(X, y, pb, FRACTIONS)
        tables[name] = info
        for eps in EPS:
            cells.append({"table": name, "epsilon": eps,
                          "bayes": {str(f): float(np.mean(bayes[(eps, f)])) for f in FRACTIONS},
                          "bayes_se": {str(f): float(np.std(bayes[(eps, f)], ddof=1) / np.sqrt(len(SEEDS)))
                                       for f in FRACTIONS}})
        synth_rows.append({"table": name, "epsilon": 1.0,
                           "synthetic_logreg": {str(f): float(np.mean(v)) for f, v in synth.items()}})
        print(f"{name}: " + " ".join(f"{f:g}:{np.mean(bayes[(1.0, f)]):.3f}" for f in FRACTIONS), flush=True)
    res = {"study": "clip-rule-validation", "script": "scripts/clip_rule_validation.py",
           "split": "validation: the study's 80/20 cut (test part unread), then 75/25 of its training part",
           "fractions": list(FRACTIONS), "epsilons": list(EPS), "seeds": len(SEEDS), "synthetic_seeds": len(SYNTH_SEEDS),
           "n_synthetic": N_SYNTH, "delta": DELTA, "release": "release_sound, covariance_type='auto', kl, discrete, add-remove",
           "tables": tables, "cells": cells, "synthetic_eps1": synth_rows, "summary": summarise(cells, FRACTIONS),
           "synthetic_summary": {str(f): float(np.mean([r["synthetic_logreg"][str(f)] for r in synth_rows]))
                                 for f in FRACTIONS},
           "seconds": time.perf_counter() - t0}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    s = res["summary"]
    print(f"rule fraction {s['rule_fraction']}: {s['per_fraction'][str(s['rule_fraction'])]}; wrote {a.out}")


if __name__ == "__main__":
    main()
