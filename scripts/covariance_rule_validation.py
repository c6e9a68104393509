"""Validation of the noise-aware default covariance structure (``covariance_type="auto"``) of the sound release.

Compares full / tied / diag / auto (:mod:`torchdpgmm.release.covariance_rule`) on VALIDATION splits only. Every table
is first cut as the ``tabular`` study cuts it (80/20 stratified, ``random_state=0``); its 20% test part is
dropped unread, and the 80% training part is split again 75/25 (stratified, ``random_state=0``) into the
release's training rows and the validation rows scored here. Tables (:mod:`torchdpgmm.data.tables`):
LetterRecognition (26 classes, 16 features, documented range 0..15), digits (64 features, range 0..16),
digits pooled 2x2 into 16 features (range 0..64), wine, breast cancer, Pima and Parkinsons (two classes),
iris, a simulated letter-like table (26 Gaussian classes, 16 features, class-specific covariances), and the
mlbench exports present here (Glass, Ionosphere, Vowel, Sonar (range 0..1), Satellite (range 0..255)).
Bounds: the documented range where there is one, otherwise the min-max of the release's training rows (a
stand-in for "the user knows the range", as the study does; not a private-safe choice). Each table is mapped
into the unit box and released as the estimators release it by default
(:func:`torchdpgmm.bounds.release_in_unit_box`: since 2026-11-26 (later) a private centre first, then the
mixture clipped to ``Bounds.centred_clip_bound`` about it, :mod:`torchdpgmm.release.centring`; earlier runs
used one stage about the box's middle at ``Bounds.release_clip_bound``, and before that ``sqrt(d)/2``),
add/remove, delta 1e-5, eps 0.5 / 1 / 2 / 5, 10 noise seeds (the default discrete noise and ``kl`` split);
the score is the accuracy of the released model's Bayes classifier on the validation rows, given to it as
``DPGaussianMixture.predict`` gives them (:func:`estimator_rows`: ``auto`` and its variants on the rows pulled onto
the ball the release clipped its records to, the fixed types on the rows as given; before 2026-11-27 every type
was scored on the rows as given). ``auto`` is the
rule as released; ``auto_mean_shrinkage_flipped`` is the same release (same noise draws) with
:data:`torchdpgmm.release.covariance_rule.MEAN_SHRINKAGE` (the James-Stein weights of the class means, the
rule's step 6) flipped from its value in the rule; the JSON's ``mean_shrinkage`` says which was the rule, and
``mean_shrinkage_gain`` is accuracy with the James-Stein means minus accuracy without. ``auto_count_floor_off``
is the rule without its step 0 (the counts floored at ``min_count`` only, not at three noise stds):
``count_floor_gain`` is the rule's accuracy minus that. ``auto_one_class_weight`` is the rule with step 4's scalar
form (one weight per class, the mean over the directions: :data:`torchdpgmm.release.covariance_rule.PER_DIRECTION`
off): ``per_direction_gain`` is the rule's accuracy minus that.

Run: ``python scripts/covariance_rule_validation.py`` (writes docs/results/covariance-rule.json, a few minutes).
``--sweep-class-to-pooled rule,rule:0.1/16/inf,0.3,0.6,1,1.5,2,3,rule:0.08/16,rule:0.12/16,rule:0.1/12,rule:0.1/24,rule:0.1/32,rule:0.1/16/1,rule:0.1/16/3``
scores ``auto`` once per setting of the class blocks' precision over the pooled block's (a number: one ratio for every
table; ``rule``: :func:`torchdpgmm.release.covariance_rule.class_to_pooled_ratio` of each table's K, d and epsilon as
released; ``rule:A/D`` or ``rule:A/D/E``: that form with A per class, D dimensions and growth with epsilon from E on,
``inf`` for none) and writes only a summary per setting
(docs/results/class-to-pooled.json): the number of (table, eps) cells where ``auto`` is more than 1 point
below the best fixed type, the worst such difference and the mean accuracy of ``auto`` over the cells (how
the ratio rule was chosen; the fixed types are scored once).
``--seeds 10:30 --out F`` repeats any of these on noise seeds the rules were not chosen on (every choice above was made on
seeds 0..9, so their counts there are optimistic); ``--seeds 10:30 --sweep-class-to-pooled rule,rule:0.1/16/inf,0.3
--out docs/results/class-to-pooled-fresh-seeds.json`` is the committed check of the ratio rule.
``--seeds 10:30 --sweep-sampling-term 0,2,4,10,25 --out docs/results/sampling-term-fresh-seeds.json`` scores step 4's
weight with a class covariance's own sampling variance beside the noise (:func:`sweep_sampling_term`; tried, not in
the rule), summarised as the ratio sweep is.
``--class-to-pooled R`` / ``--counts-floor F`` / ``--noise-sds C`` (exploration only, not written unless
``--out``) evaluate the rule with one public ratio R of the class blocks' precision to the pooled block's for every
table / another
least share of the counts / another class-weight constant :data:`torchdpgmm.release.covariance_rule.NOISE_SDS`.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np
import torch
from sklearn import datasets
from sklearn.model_selection import train_test_split

from torchdpgmm.release import covariance_rule
from torchdpgmm.bounds import Bounds
from torchdpgmm.data.tables import available_tables, load_table
from torchdpgmm.bounds import release_in_unit_box

EPS = (0.5, 1.0, 2.0, 5.0)
FIXED = ("full", "tied", "diag")
AUTO_NM = "auto_mean_shrinkage_flipped"
AUTO_NC = "auto_count_floor_off"
AUTO_SC = "auto_one_class_weight"
TYPES = FIXED + ("auto", AUTO_NM, AUTO_NC, AUTO_SC)
MLBENCH = ("Glass", "Ionosphere", "Vowel", "Sonar", "Satellite")
SEEDS = tuple(range(10))
DELTA = 1e-5
RULE_MEANS = covariance_rule.MEAN_SHRINKAGE
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "covariance-rule.json"
SWEEP_OUT = OUT.with_name("class-to-pooled.json")


def _letter_like(rng: np.random.Generator, n: int = 20000, K: int = 26, d: int = 16):
    """26 Gaussian classes in 16 dimensions with distinct random covariances (a stand-in for letter)."""
    means = rng.uniform(0.3, 0.7, size=(K, d))
    covs = []
    for _ in range(K):
        A = rng.normal(size=(d, d)) * rng.uniform(0.01, 0.05, size=d)
        covs.append(A @ A.T + 1e-4 * np.eye(d))
    y = rng.integers(0, K, size=n)
    X = np.empty((n, d))
    for k in range(K):
        idx = np.flatnonzero(y == k)
        X[idx] = rng.multivariate_normal(means[k], covs[k], size=idx.size)
    return np.clip(X, 0.0, 1.0), y, (0.0, 1.0)


def tables() -> dict:
    """name -> (X, y, documented bounds or None)."""
    out = {}
    for name, key in (("letter", "LetterRecognition"), ("digits64", "digits"), ("wine", "wine"),
                      ("breast_cancer", "breast_cancer"), ("pima", "PimaIndiansDiabetes"),
                      ("parkinsons", "parkinsons")):
        t = load_table(key)
        out[name] = (t.X, t.y, t.public_bounds)
        if name == "digits64":
            out["digits16"] = (t.X.reshape(-1, 4, 2, 4, 2).sum((2, 4)).reshape(-1, 16), t.y, (0.0, 64.0))
    out["iris"] = (*datasets.load_iris(return_X_y=True), None)
    out["letter_like"] = _letter_like(np.random.default_rng(0))
    for key in MLBENCH:
        if key in available_tables():
            t = load_table(key)
            out[key] = (t.X, t.y, t.public_bounds)
    return out


def validation_split(X, y):
    """The study's 80/20 cut (test part dropped unread), then 75/25 of its training part."""
    Xst, _, yst, _ = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    return train_test_split(Xst, yst, test_size=0.25, stratify=yst, random_state=0)


def unit_split(X, y, public_bounds):
    """``(Utr, Uva, ytr, yva, bounds)``: the validation split mapped into the unit box of the table's bounds."""
    Xtr, Xva, ytr, yva = validation_split(X, y)
    if public_bounds is None:
        b = Bounds(Xtr.min(0), np.where(Xtr.max(0) > Xtr.min(0), Xtr.max(0), Xtr.min(0) + 1.0))
    else:
        b = Bounds.parse(public_bounds, n_features=X.shape[1])
    Utr = b.to_unit(torch.as_tensor(Xtr, dtype=torch.float64))
    Uva = b.to_unit(torch.as_tensor(Xva, dtype=torch.float64))
    return Utr, Uva, ytr, yva, b


def estimator_rows(rel, U: torch.Tensor, covariance_type: str) -> torch.Tensor:
    """Validation rows as ``DPGaussianMixture.predict`` gives them to the model: for the covariance types it pulls
    (:data:`torchdpgmm.estimator.PULLED_COVARIANCE_TYPES`, ``auto``) onto the ball the release clipped its records to
    (its released centre, its clip radius); the others as given."""
    from torchdpgmm.estimator import PULLED_COVARIANCE_TYPES

    if covariance_type.split("_")[0] not in PULLED_COVARIANCE_TYPES:
        return U
    return pulled_onto_release(U, rel)


def pulled_onto_release(U: torch.Tensor, rel) -> torch.Tensor:
    """``U`` pulled onto the ball a centred release clipped its records to: its released centre, the clip radius it
    records (``clip_radius``, or ``clip_bound`` where no private radius was released)."""
    c = torch.as_tensor(rel.extras["centre"], dtype=U.dtype)
    return pulled(U, c, float(rel.extras.get("clip_radius", rel.extras.get("clip_bound"))))


def pulled(U: torch.Tensor, centre: torch.Tensor, radius) -> torch.Tensor:
    """The public map the release applied to its records: ``U`` pulled onto the ball about ``centre``."""
    from torchdpgmm.mechanisms import clip_records

    return centre + clip_records(U, radius, center=centre)


def released_ratio(rel) -> float:
    """The class blocks' precision over the pooled block's that an ``auto`` release spent, read from its record's
    budget split (the record is the one home of what was released; the counts' floor scales both blocks alike)."""
    split = rel.privacy.split
    pre = "mixture_" if "mixture_second_moments" in split else ""  # two-stage release, or one stage
    return split[pre + "second_moments"] / split[pre + covariance_rule.POOLED]


def score_table(X, y, public_bounds, types: tuple[str, ...] = TYPES,
                seeds: tuple[int, ...] | None = None) -> tuple[dict, dict]:
    """``(info, {(eps, type): [accuracy per seed]})`` on the table's validation split; ``seeds`` default
    :data:`SEEDS`."""
    seeds = SEEDS if seeds is None else seeds
    Utr, Uva, ytr, yva, b = unit_split(X, y, public_bounds)
    K = int(y.max()) + 1
    ytr_t, yva_t = torch.as_tensor(ytr), torch.as_tensor(yva)
    info = {"n_train": int(len(ytr)), "n_val": int(len(yva)), "d": int(X.shape[1]), "K": K,
            "majority_class_accuracy": float(np.mean(yva == np.bincount(ytr).argmax())),
            "released_class_to_pooled": {}}
    acc = {}
    for eps in EPS:
        for ct in types:
            a = []
            covariance_rule.MEAN_SHRINKAGE = RULE_MEANS != (ct == AUTO_NM)
            covariance_rule.COUNT_FLOOR = ct != AUTO_NC
            covariance_rule.PER_DIRECTION = ct != AUTO_SC
            for seed in seeds:
                rel = release_in_unit_box(Utr, ytr_t, K, eps, DELTA, b,
                                          covariance_type="auto" if ct.startswith("auto") else ct,
                                          generator=torch.Generator().manual_seed(seed))
                a.append(float((rel.model.predict(estimator_rows(rel, Uva, ct)) == yva_t).double().mean()))
            if ct == "auto":
                info["released_class_to_pooled"][eps] = released_ratio(rel)
            covariance_rule.MEAN_SHRINKAGE = RULE_MEANS
            covariance_rule.COUNT_FLOOR = True
            covariance_rule.PER_DIRECTION = True
            acc[(eps, ct)] = a
    return info, acc


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--class-to-pooled", type=float, default=None)
    p.add_argument("--counts-floor", type=float, default=None)
    p.add_argument("--noise-sds", type=float, default=None, help="the class weight's constant (exploration)")
    p.add_argument("--tables", default=None, help="comma-separated subset (exploration)")
    p.add_argument("--out", default=None)
    p.add_argument("--seeds", default=None, metavar="FIRST:STOP",
                   help="noise seeds FIRST..STOP-1 instead of 0..9 (the seeds every rule was chosen on); fresh seeds "
                        "check a choice on noise it was not tuned on. Needs --out")
    p.add_argument("--sweep-class-to-pooled", default=None,
                   help="comma list of ratios (one for every table), 'rule' (as released) or 'rule:A/D[/E]' (A per "
                        "class, D dimensions, growth with epsilon from E on, inf: none): summary per setting")
    p.add_argument("--sweep-sampling-term", default=None,
                   help="comma list of a (0 is the rule): step 4's weight with a class covariance's sampling "
                        "variance a lambda^2 / (n_k - 1) beside the noise (exploration); needs --out")
    args = p.parse_args(argv)
    if args.seeds is not None:
        if not args.out:
            p.error("--seeds needs --out (the committed JSONs are the runs on seeds 0..9)")
        global SEEDS
        first, _, stop = args.seeds.partition(":")
        SEEDS = tuple(range(int(first), int(stop)))
    if args.sweep_class_to_pooled:
        return sweep_class_to_pooled(args.sweep_class_to_pooled.split(","), args.tables,
                                     pathlib.Path(args.out) if args.out else SWEEP_OUT)
    if args.sweep_sampling_term:
        if not args.out:
            p.error("--sweep-sampling-term needs --out")
        try:
            values = [float(v) for v in args.sweep_sampling_term.split(",")]
        except ValueError:
            p.error(f"--sweep-sampling-term must be comma-separated numbers, got {args.sweep_sampling_term!r}")
        if not all(0 <= v < float("inf") for v in values):
            p.error("--sweep-sampling-term values must be finite and >= 0 (0 is the rule)")
        return sweep_sampling_term(values, args.tables, pathlib.Path(args.out))
    if args.class_to_pooled is not None:  # one ratio for every table
        covariance_rule.CLASS_TO_POOLED, covariance_rule.CLASS_TO_POOLED_PER_CLASS = args.class_to_pooled, 0.0
    if args.counts_floor is not None:
        covariance_rule.COUNTS_FLOOR = args.counts_floor
    if args.noise_sds is not None:
        covariance_rule.NOISE_SDS = args.noise_sds
    out_path = pathlib.Path(args.out) if args.out else (
        OUT if args.class_to_pooled is None and args.counts_floor is None and args.noise_sds is None
        and not args.tables else None)
    t0 = time.time()
    rows, summary = [], {}
    for name, (X, y, pb) in tables().items():
        if args.tables and name not in args.tables.split(","):
            continue
        info, acc = score_table(X, y, pb)
        summary[name] = info
        for eps in EPS:
            m = {ct: float(np.mean(acc[(eps, ct)])) for ct in TYPES}
            rows += [{"table": name, "epsilon": eps, "covariance_type": ct, "accuracy_seeds": acc[(eps, ct)],
                      "accuracy": m[ct]} for ct in TYPES]
            best = max(FIXED, key=lambda c: m[c])
            summary[name][f"eps={eps:g}"] = {**m, "best_fixed": best, "best_fixed_accuracy": m[best],
                                             "auto_minus_best_fixed": m["auto"] - m[best],
                                             "auto_minus_tied": m["auto"] - m["tied"],
                                             "mean_shrinkage_gain": (m["auto"] - m[AUTO_NM]) * (1 if RULE_MEANS else -1),
                                             "count_floor_gain": m["auto"] - m[AUTO_NC],
                                             "per_direction_gain": m["auto"] - m[AUTO_SC]}
            print(f"{name:14s} eps={eps:<4g} " + " ".join(f"{c}={m[c]:.3f}" for c in TYPES)
                  + f"  auto-best={m['auto'] - m[best]:+.3f} flip={m[AUTO_NM] - m['auto']:+.3f}"
                  + f" floor={m['auto'] - m[AUTO_NC]:+.3f}", flush=True)
    cells = [(t, k, v) for t, s in summary.items() for k, v in s.items() if k.startswith("eps=")]
    worst = min(cells, key=lambda c: c[2]["auto_minus_best_fixed"])
    worst_tied = min(cells, key=lambda c: c[2]["auto_minus_tied"])
    worst_means = min(cells, key=lambda c: c[2]["mean_shrinkage_gain"])
    worst_floor = min(cells, key=lambda c: c[2]["count_floor_gain"])
    out = {"description": __doc__, "epsilons": EPS, "delta": DELTA, "adjacency": "add-remove", "seeds": SEEDS,
           "class_to_pooled": {"least": covariance_rule.CLASS_TO_POOLED,
                               "per_class": covariance_rule.CLASS_TO_POOLED_PER_CLASS,
                               "dim": covariance_rule.CLASS_TO_POOLED_DIM,
                               "epsilon": covariance_rule.CLASS_TO_POOLED_EPSILON,
                               "epsilon_max": covariance_rule.CLASS_TO_POOLED_EPSILON_MAX},
           "counts_floor": covariance_rule.COUNTS_FLOOR,
           "mean_shrinkage": RULE_MEANS,
           "split": "study's 80/20 (random_state=0, test part unread), then 75/25 train/validation of its training "
                    "part (stratified, random_state=0)",
           "rows": rows, "summary": summary,
           "worst_auto_minus_best_fixed": {"table": worst[0], "cell": worst[1],
                                           "value": worst[2]["auto_minus_best_fixed"]},
           "worst_auto_minus_tied": {"table": worst_tied[0], "cell": worst_tied[1],
                                     "value": worst_tied[2]["auto_minus_tied"]},
           "worst_mean_shrinkage_gain": {"table": worst_means[0], "cell": worst_means[1],
                                         "value": worst_means[2]["mean_shrinkage_gain"]},
           "worst_count_floor_gain": {"table": worst_floor[0], "cell": worst_floor[1],
                                      "value": worst_floor[2]["count_floor_gain"]},
           "mean_count_floor_gain": float(np.mean([c[2]["count_floor_gain"] for c in cells])),
           "mean_per_direction_gain": float(np.mean([c[2]["per_direction_gain"] for c in cells])),
           "auto_one_class_weight_cells_more_than_1_point_below_best_fixed": int(sum(
               c[2][AUTO_SC] < c[2]["best_fixed_accuracy"] - 0.01 for c in cells)),
           "auto_cells_more_than_1_point_below_best_fixed": int(sum(
               c[2]["auto_minus_best_fixed"] < -0.01 for c in cells)),
           "runtime_s": time.time() - t0}
    print("worst auto - best fixed:", out["worst_auto_minus_best_fixed"], "worst auto - tied:",
          out["worst_auto_minus_tied"], "worst mean-shrinkage gain:", out["worst_mean_shrinkage_gain"], "runtime",
          round(time.time() - t0, 1), "s")
    out["noise_sds"] = covariance_rule.NOISE_SDS
    if out_path is not None:
        _write_json(out_path, out)


def _ratio_setting(spec: str, rule: tuple[float, float, float]) -> dict:
    """A sweep entry: a number is one ratio for every table; ``rule`` is
    :func:`torchdpgmm.release.covariance_rule.class_to_pooled_ratio` as released; ``rule:A/D`` or ``rule:A/D/E`` the
    same form with ``A`` per class, ``D`` dimensions and growth with epsilon from ``E`` (``inf``: none) on (the least
    ratio kept). ``rule``: the released (least, per class, dim, epsilon)."""
    if spec == "rule" or spec.startswith("rule:"):
        a, _, rest = spec[5:].partition("/")
        dd, _, e = rest.partition("/")
        return {"spec": spec, "least": rule[0], "per_class": float(a) if a else rule[1],
                "dim": float(dd) if dd else rule[2], "epsilon": float(e) if e else rule[3]}
    return {"spec": spec, "least": float(spec), "per_class": 0.0, "dim": rule[2], "epsilon": rule[3]}


def _sweep_tables(only: str | None) -> tuple[dict, dict]:
    """A sweep's tables (``only``: a comma-separated subset) and their fixed types' accuracies, scored once: the fixed
    types do not depend on any setting of ``auto``'s rule."""
    data = {k: v for k, v in tables().items() if not only or k in only.split(",")}
    return data, {name: score_table(X, y, pb, FIXED)[1] for name, (X, y, pb) in data.items()}


def _write_json(path: pathlib.Path, out: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


def _sweep_row(spec: str, data: dict, fixed: dict, first: dict | None) -> dict:
    """One sweep setting (already applied to :mod:`covariance_rule`): ``auto`` on every table and epsilon against the
    fixed types scored once (``fixed``), its cells more than 1 point below the best fixed type, its mean, and, given
    the sweep's ``first`` row, the gain paired over the cells (same seeds, same fixed types)."""
    cells = []
    for name, (X, y, pb) in data.items():
        info, acc = score_table(X, y, pb, ("auto",))
        for eps in EPS:
            m = {"auto": float(np.mean(acc[(eps, "auto")])),
                 **{ct: float(np.mean(fixed[name][(eps, ct)])) for ct in FIXED}}
            best = max(FIXED, key=lambda c: m[c])
            ratio = info["released_class_to_pooled"][eps]  # as the release recorded it
            cells.append({"table": name, "epsilon": eps, "class_to_pooled": ratio,
                          "auto": m["auto"], "best_fixed": best, "best_fixed_accuracy": m[best],
                          "auto_minus_best_fixed": m["auto"] - m[best]})
    gaps = [c["auto_minus_best_fixed"] for c in cells]
    worst = min(cells, key=lambda c: c["auto_minus_best_fixed"])
    row = {"cells": len(cells),
           "cells_auto_more_than_1_point_below_best_fixed": int(sum(g < -0.01 for g in gaps)),
           "worst_auto_minus_best_fixed": worst, "mean_auto_accuracy": float(np.mean([c["auto"] for c in cells])),
           "per_cell": cells}
    if first is not None:
        diff = np.array([c["auto"] for c in cells]) - np.array([c["auto"] for c in first["per_cell"]])
        row["paired_gain_vs_first_setting"] = {"mean": float(diff.mean()),
                                               "se": float(diff.std(ddof=1) / np.sqrt(len(diff)))}
    print(f"{spec}: {row['cells_auto_more_than_1_point_below_best_fixed']} cells below best fixed - 1pt, "
          f"worst {worst['table']} eps {worst['epsilon']:g} {worst['auto_minus_best_fixed']:+.3f}, "
          f"mean auto {row['mean_auto_accuracy']:.4f}", flush=True)
    return row


def sweep_class_to_pooled(specs: list[str], only: str | None, out_path: pathlib.Path) -> None:
    """The validation at each setting of the class blocks' precision over the pooled block's (:func:`_ratio_setting`:
    one ratio for every table, or the rule of K and d); a summary per setting. The fixed types do not depend on it
    and are scored once."""
    t0 = time.time()
    keep = (covariance_rule.CLASS_TO_POOLED, covariance_rule.CLASS_TO_POOLED_PER_CLASS,
            covariance_rule.CLASS_TO_POOLED_DIM, covariance_rule.CLASS_TO_POOLED_EPSILON)
    data, fixed = _sweep_tables(only)
    result = []
    try:
        for spec in specs:
            st = _ratio_setting(spec, keep)
            (covariance_rule.CLASS_TO_POOLED, covariance_rule.CLASS_TO_POOLED_PER_CLASS,
             covariance_rule.CLASS_TO_POOLED_DIM, covariance_rule.CLASS_TO_POOLED_EPSILON) = (
                st["least"], st["per_class"], st["dim"], st["epsilon"])
            row = _sweep_row(spec, data, fixed, result[0] if result else None)
            result.append({"class_to_pooled": float(spec) if st["per_class"] == 0.0 else spec, "setting": st, **row})
    finally:
        (covariance_rule.CLASS_TO_POOLED, covariance_rule.CLASS_TO_POOLED_PER_CLASS,
         covariance_rule.CLASS_TO_POOLED_DIM, covariance_rule.CLASS_TO_POOLED_EPSILON) = keep
    out = {"description": "covariance_rule_validation.py --sweep-class-to-pooled: " + (__doc__ or "").splitlines()[0],
           "rule": {"least": keep[0], "per_class": keep[1], "dim": keep[2], "epsilon": keep[3],
                    "epsilon_max": covariance_rule.CLASS_TO_POOLED_EPSILON_MAX,
                    "form": "max(least, per_class * K * min(1, dim / d) * max(1, min(eps, epsilon_max) / epsilon)), "
                            "eps the mixture stage's epsilon"},
           "epsilons": EPS, "seeds": SEEDS, "delta": DELTA, "ratios": result, "runtime_s": time.time() - t0}
    _write_json(out_path, out)


def sweep_sampling_term(values: list[float], only: str | None, out_path: pathlib.Path) -> None:
    """Step 4's weight with the class covariance's own sampling variance beside the noise (exploration; the rule
    has none): ``x_ki = NOISE_SDS^2 (s_k^2 + a lambda_i^2 / (n_k - 1)) / lambda_i^2``, i.e. the rule's ``x_ki`` plus
    ``NOISE_SDS^2 a / (n_k - 1)``. ``a = 2`` is a Gaussian's (the variance of a sample variance, ``2 sigma^4 /
    (n - 1)``), ``a = kurtosis - 1`` in general: heavy-tailed columns (Pima's zeros) estimate their class
    covariances worse than the noise alone says, the finite-sample case for Friedman's (1989) regularised
    discriminant analysis. ``a = 0`` is the rule. The fixed types are scored once."""
    t0 = time.time()
    keep = covariance_rule._noise_ratio
    data, fixed = _sweep_tables(only)
    result = []
    try:
        for a in values:
            def ratio(evals, n_hat, v_f, floor, a=a):
                extra = covariance_rule.NOISE_SDS ** 2 * a / torch.clamp(n_hat - 1, min=1.0)
                return keep(evals, n_hat, v_f, floor) + extra.unsqueeze(-1)

            covariance_rule._noise_ratio = ratio
            row = _sweep_row(f"sampling term a = {a:g}", data, fixed, result[0] if result else None)
            result.append({"sampling_term": a, **row})
    finally:
        covariance_rule._noise_ratio = keep
    out = {"description": "covariance_rule_validation.py --sweep-sampling-term: " + (sweep_sampling_term.__doc__
                                                                                      or "").strip(),
           "epsilons": EPS, "seeds": SEEDS, "delta": DELTA, "settings": result, "runtime_s": time.time() - t0}
    _write_json(out_path, out)


if __name__ == "__main__":
    main()
