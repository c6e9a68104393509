"""The ``tabular`` study (issue 26 item 5): DP class-conditional GMMs on public tables, beside peers.

For every table (:mod:`torchdpgmm.data.tables`): an 80/20 stratified split with a fixed seed; public bounds
where the table's documentation states them, otherwise the TRAINING split's min-max (a stand-in for bounds
a user would know, recorded per table as ``bounds_source``). Every method sees the same bounds.

Methods, at eps in {0.5, 1, 2, 5}, delta 1e-5, add/remove, several noise draws:
- ``DPGaussianMixture`` in sound mode (Liu, Scaglione & Peisert 2025), released in the unit box of the
  bounds (centred at its middle, clip bound sqrt(d)/2), with its default covariance_type and with "full"
  and "tied" explicitly; used as a Bayes classifier and as a synthetic-data source (N_synth rows mapped
  back into the bounds, then scikit-learn's LogisticRegression and HistGradientBoostingClassifier trained
  on them and tested on the real held-out split);
- diffprivlib's GaussianNB and LogisticRegression (Holohan et al. 2019; pure eps-DP, delta = 0) with the
  same bounds, when importable;
- non-private QDA (reg_param chosen on a validation split of the training split) and HistGradientBoosting.
Peers run from a separate environment by ``scripts/tabular_peers.py`` (smartnoise-synth MST/AIM, dpmm) are
merged from ``peers.json`` beside the output when present. The issue's targets are computed from the rows.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from . import ExperimentConfig, Study, StudyResult

EPSILONS = (0.5, 1.0, 2.0, 5.0)
DELTA = 1e-5
TRAIN_MINMAX = "train-min-max (stand-in for public knowledge)"
QDA_GRID = (0.0, 0.01, 0.03, 0.1, 0.3, 0.6, 0.9)


def _args(p) -> None:
    p.add_argument("--tables", default=None, help="comma-separated table names (default: all available)")
    p.add_argument("--epsilons", default=None, help="comma-separated epsilons (default 0.5,1,2,5)")
    p.add_argument("--draws", type=int, default=None, help="noise draws per epsilon (default 3)")
    p.add_argument("--max-synth", type=int, default=4000, help="synthetic rows per release (at most N_train)")
    p.add_argument("--hgb-iter", type=int, default=100, help="boosting iterations of the downstream HGB on synthetic rows")


def _split(X, y, seed):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)


def _bounds(tab, Xtr):
    from torchdpgmm.bounds import Bounds

    if tab.public_bounds is not None:
        lo, hi = tab.public_bounds
        return Bounds([lo] * Xtr.shape[1], [hi] * Xtr.shape[1], names=tab.names), "public (table documentation)"
    lo, hi = Xtr.min(0), Xtr.max(0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    return Bounds(lo, hi, names=tab.names), TRAIN_MINMAX


def _fit_predict(model, Xs, ys, Xte):
    """Train a downstream model on synthetic rows; one synthetic class only gives that class everywhere."""
    if len(np.unique(ys)) < 2:
        return np.full(len(Xte), ys[0])
    return model.fit(Xs, ys).predict(Xte)


def _downstream(hgb_iter: int = 100):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"logreg": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
            "hgb": lambda: HistGradientBoostingClassifier(max_iter=hgb_iter, random_state=0)}


def _cov_types() -> list[tuple[str, str]]:
    from torchdpgmm.estimator import DPGaussianMixture

    default = DPGaussianMixture().covariance_type
    out = [("default", default)]
    out += [(c, c) for c in ("full", "tied") if c != default]
    return out


def _dpgmm_rows(tab, eps, draw, seed, b, Xtr, ytr, Xte, yte, classes, n_synth, hgb_iter=100):
    from torchdpgmm.estimator import DPGaussianMixture

    rows = []
    Utr, Ute = b.to_unit(Xtr) - 0.5, b.to_unit(Xte) - 0.5  # centred unit box: a public shift
    for label, cov in _cov_types():
        t0 = time.perf_counter()
        est = DPGaussianMixture(eps, DELTA, classes=classes, clip_bound=b.unit_clip_bound, mode="sound",
                                adjacency="add-remove", covariance_type=cov,
                                random_state=seed * 1000 + draw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Utr, ytr)
        fit_s = time.perf_counter() - t0
        method = f"DPGaussianMixture[{label}={cov}]" if label == "default" else f"DPGaussianMixture[{cov}]"
        base = {"table": tab.name, "epsilon": eps, "draw": draw, "method": method, "fit_seconds": fit_s,
                "covariance_type": cov, "default": label == "default", "privacy": "(eps, delta)-DP, sound"}
        rows.append({**base, "downstream": "bayes", "accuracy": float(np.mean(est.predict(Ute) == yte))})
        Us, ys = est.sample(n_synth)
        Xs = b.from_unit(np.asarray(Us) + 0.5)
        for name, make in _downstream(hgb_iter).items():
            t1 = time.perf_counter()
            pred = _fit_predict(make(), Xs, ys, Xte)
            rows.append({**base, "downstream": f"synthetic->{name}", "accuracy": float(np.mean(pred == yte)),
                         "train_seconds": time.perf_counter() - t1, "n_synthetic": n_synth})
    return rows


def _diffprivlib_rows(tab, eps, draw, seed, b, Xtr, ytr, Xte, yte):
    base = {"table": tab.name, "epsilon": eps, "draw": draw, "privacy": "pure eps-DP (delta = 0)"}
    try:
        from diffprivlib.models import GaussianNB, LogisticRegression
    except Exception as e:  # noqa: BLE001 - any import failure means the peer cannot run here
        why = f"not installed ({type(e).__name__}: {str(e)[:120]})"
        return [{**base, "method": m, "downstream": "direct", "accuracy": None, "fit_seconds": None, "status": why}
                for m in ("diffprivlib GaussianNB", "diffprivlib LogisticRegression")]
    rows = []
    rs = seed * 1000 + draw
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nb = GaussianNB(epsilon=eps, bounds=(b.lower, b.upper), random_state=rs).fit(np.clip(Xtr, b.lower, b.upper), ytr)
    rows.append({**base, "method": "diffprivlib GaussianNB", "downstream": "direct", "fit_seconds": time.perf_counter() - t0,
                 "accuracy": float(np.mean(nb.predict(Xte) == yte)), "status": "ran"})
    Utr, Ute = b.to_unit(Xtr) - 0.5, b.to_unit(Xte) - 0.5
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = LogisticRegression(epsilon=eps, data_norm=b.unit_clip_bound, random_state=rs).fit(Utr, ytr)
    rows.append({**base, "method": "diffprivlib LogisticRegression", "downstream": "direct",
                 "fit_seconds": time.perf_counter() - t0, "accuracy": float(np.mean(lr.predict(Ute) == yte)), "status": "ran"})
    return rows


def _qda_score(m, Xa, ya, Xv, yv) -> float:
    try:
        return float(np.mean(m.fit(Xa, ya).predict(Xv) == yv))
    except Exception:  # noqa: BLE001 - a rank-deficient class covariance at this reg_param
        return -1.0


def _nonprivate_rows(tab, seed, Xtr, ytr, Xte, yte):
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis as QDA
    from sklearn.ensemble import HistGradientBoostingClassifier

    Xa, Xv, ya, yv = _split(Xtr, ytr, seed + 1)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = [(_qda_score(QDA(reg_param=r), Xa, ya, Xv, yv), -r) for r in QDA_GRID]
        reg, qda = -max(scores)[1], None
        for r in [g for g in QDA_GRID if g >= reg]:  # a singular class covariance: the next larger reg_param
            reg = r
            try:
                qda = QDA(reg_param=r).fit(Xtr, ytr)
                break
            except Exception:  # noqa: BLE001 - sklearn raises on a rank-deficient class covariance
                continue
    base = {"table": tab.name, "epsilon": None, "draw": 0, "downstream": "direct", "privacy": "none"}
    rows = [{**base, "method": "non-private QDA", "reg_param": reg, "fit_seconds": time.perf_counter() - t0,
             "accuracy": None if qda is None else float(np.mean(qda.predict(Xte) == yte)),
             "status": "ran" if qda is not None else "failed: a class covariance is singular at every reg_param"}]
    t0 = time.perf_counter()
    hgb = HistGradientBoostingClassifier(random_state=0).fit(Xtr, ytr)
    rows.append({**base, "method": "non-private HGB", "fit_seconds": time.perf_counter() - t0,
                 "accuracy": float(np.mean(hgb.predict(Xte) == yte))})
    return rows


def _mean(rows, **match):
    acc = [r["accuracy"] for r in rows if r.get("accuracy") is not None and all(r.get(k) == v for k, v in match.items())]
    return float(np.mean(acc)) if acc else None


def compute_targets(rows: list[dict[str, Any]], peer_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 26's targets from the rows: (1) at eps=1 the best DP synthetic-data classifier (mean over draws)
    within 1 point of, or above, the best peer per table, and above MST; (2) the default release's Bayes
    accuracy at or above diffprivlib's GaussianNB at every table and eps."""
    tables = list(dict.fromkeys(r["table"] for r in rows))
    per_table, t2 = {}, []
    for t in tables:
        ours = {(r["method"], r["downstream"]) for r in rows if r["table"] == t and r["epsilon"] == 1.0
                and r["method"].startswith("DPGaussianMixture") and r["downstream"].startswith("synthetic")}
        best = max(((_mean(rows, table=t, epsilon=1.0, method=m, downstream=d), f"{m} {d}") for m, d in ours),
                   default=(None, None), key=lambda x: -1 if x[0] is None else x[0])
        peers = {}
        for r in [*rows, *peer_rows]:
            if r.get("table") == t and r.get("epsilon") == 1.0 and r.get("accuracy") is not None and \
                    not r["method"].startswith("DPGaussianMixture"):
                key = f"{r['method']} {r['downstream']}"
                peers[key] = _mean([*rows, *peer_rows], table=t, epsilon=1.0, method=r["method"], downstream=r["downstream"])
        bp = max(peers.items(), key=lambda kv: kv[1], default=(None, None))
        mst = max((v for k, v in peers.items() if "MST" in k), default=None)
        per_table[t] = {"best_dp_synthetic": best[0], "best_dp_synthetic_method": best[1], "best_peer": bp[1],
                        "best_peer_method": bp[0], "best_mst": mst,
                        "within_1_point_or_above": None if bp[1] is None or best[0] is None else best[0] >= bp[1] - 0.01,
                        "above_mst": None if mst is None or best[0] is None else best[0] > mst}
        for eps in sorted({r["epsilon"] for r in rows if r["table"] == t and r["epsilon"] is not None}):
            dflt = next((r["method"] for r in rows if r.get("default") and r["table"] == t), None)
            a = _mean(rows, table=t, epsilon=eps, method=dflt, downstream="bayes")
            nb = _mean(rows, table=t, epsilon=eps, method="diffprivlib GaussianNB", downstream="direct")
            t2.append({"table": t, "epsilon": eps, "default_bayes": a, "diffprivlib_gaussiannb": nb,
                       "met": None if nb is None or a is None else a >= nb})
    v1 = [p["within_1_point_or_above"] for p in per_table.values()]
    vm = [p["above_mst"] for p in per_table.values() if p["above_mst"] is not None]
    v2 = [x["met"] for x in t2]
    return {"eps1_synthetic_vs_best_peer": {"per_table": per_table,
                                            "met": all(v1) if v1 and None not in v1 else None,
                                            "above_mst_on": f"{sum(vm)} of {len(vm)} tables with an MST row"},
            "default_release_vs_diffprivlib_gaussiannb": {"per_table_eps": t2,
                                                          "met": all(v2) if v2 and None not in v2 else None,
                                                          "computable": None not in v2}}


def run(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.data.tables import available_tables, load_table

    o = config.options
    names = o.get("tables").split(",") if o.get("tables") else available_tables()
    eps_list = [float(e) for e in o["epsilons"].split(",")] if o.get("epsilons") else list(EPSILONS)
    draws = int(config.pick("draws", o.get("draws") or 3, 1))  # an explicit --draws beats --quick
    max_synth = int(o.get("max_synth") or 4000)
    hgb_iter = int(o.get("hgb_iter") or 100)
    rows, tinfo = [], {}
    t0, load0 = time.perf_counter(), os.getloadavg()
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(int(o.get("threads") or 1))  # 2 shared cores: OpenMP oversubscription slows HGB
    for name in names:
        tab = load_table(name)
        Xtr, Xte, ytr, yte = _split(tab.X, tab.y, config.seed)
        b, src = _bounds(tab, Xtr)
        classes = list(range(int(tab.y.max()) + 1))  # public: the table's documented label set
        n_synth = min(len(Xtr), max_synth)
        tinfo[name] = {"n_train": len(Xtr), "n_test": len(Xte), "d": tab.X.shape[1], "classes": len(classes),
                       "bounds_source": src, "source": tab.source, "n_synthetic": n_synth}
        rows += _nonprivate_rows(tab, config.seed, Xtr, ytr, Xte, yte)
        for eps in eps_list:
            for draw in range(draws):
                rows += _dpgmm_rows(tab, eps, draw, config.seed, b, Xtr, ytr, Xte, yte, classes, n_synth, hgb_iter)
                rows += _diffprivlib_rows(tab, eps, draw, config.seed, b, Xtr, ytr, Xte, yte)
        print(f"tabular: {name} done at {time.perf_counter() - t0:.0f} s", flush=True)
        Path(config.out).mkdir(parents=True, exist_ok=True)  # checkpoint: removed once tabular.json is written
        (Path(config.out) / "tabular.partial.json").write_text(json.dumps(
            {"tables": tinfo, "rows": rows, "seconds": time.perf_counter() - t0}, default=str))
    limiter.restore_original_limits()
    peers_path = Path(o.get("peers") or Path(config.out) / "peers.json")
    peer_rows, peer_info = [], "absent"
    if peers_path.is_file():
        pj = json.loads(peers_path.read_text())
        peer_rows = [r for r in pj.get("rows", []) if r.get("table") in names]
        peer_info = {"path": str(peers_path), "notes": pj.get("notes", []), "rows": len(peer_rows)}
    targets = compute_targets(rows, peer_rows)
    notes = ["diffprivlib models are pure eps-DP (delta = 0); DPGaussianMixture is (eps, delta)-DP with delta = 1e-5.",
             "Bounds: public where the table's documentation states them, otherwise the training split's min-max "
             "(a stand-in for public knowledge; see tables[*].bounds_source). The same bounds feed every method.",
             "DPGaussianMixture is released in the bounds' unit box centred at its middle with clip bound sqrt(d)/2; "
             "synthetic rows are mapped back into the bounds before the downstream models are trained.",
             "Class labels are treated as public (the table's documented label set)."]
    return StudyResult(rows=rows + peer_rows, notes=notes, plot=_plot,
                       config={"tables": tinfo, "epsilons": eps_list, "delta": DELTA, "draws": draws,
                               "adjacency": "add-remove", "split": "80/20 stratified, random_state=seed",
                               "peers": peer_info, "targets": targets, "max_synth": max_synth, "hgb_iter": hgb_iter,
                               "load": {"start": load0, "end": os.getloadavg(), "seconds": time.perf_counter() - t0}})


def _plot(rows, path: Path) -> None:
    import matplotlib.pyplot as plt

    tables = list(dict.fromkeys(r["table"] for r in rows))
    nc = 4
    nr = (len(tables) + nc - 1) // nc
    fig, axes = plt.subplots(nr, nc, figsize=(4 * nc, 3 * nr), squeeze=False)
    series = [(m, d) for m, d in dict.fromkeys((r["method"], r["downstream"]) for r in rows
                                               if r.get("epsilon") is not None and r.get("accuracy") is not None)]
    for ax, t in zip(axes.flat, tables):
        for m, d in series:
            eps = sorted({r["epsilon"] for r in rows if r["table"] == t and r["method"] == m and r["epsilon"] is not None})
            acc = [_mean(rows, table=t, epsilon=e, method=m, downstream=d) for e in eps]
            if eps and any(a is not None for a in acc):
                ax.plot(eps, acc, marker="o", ms=3, lw=1, label=f"{m} {d}")
        for r in rows:
            if r["table"] == t and r.get("privacy") == "none" and r.get("accuracy") is not None:
                ax.axhline(r["accuracy"], ls="--", lw=0.8, color="k" if "QDA" in r["method"] else "0.5")
        ax.set_xscale("log"), ax.set_title(t, fontsize=9), ax.set_ylim(0, 1)
        ax.set_xlabel("epsilon (delta=1e-5, add/remove)", fontsize=7), ax.set_ylabel("test accuracy", fontsize=7)
    for ax in list(axes.flat)[len(tables):]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, lab, fontsize=6, loc="lower center", ncol=4)
    fig.suptitle("DP GMM (Bayes and synthetic-data classifiers) vs peers; mean of noise draws; dashed: non-private "
                 "QDA (black) / HGB (grey)", fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)


STUDIES = {
    "tabular": Study("tabular", run, "DP class-conditional GMM on public tables (bounds, Bayes and synthetic-data "
                     "classifiers) vs diffprivlib, non-private QDA/HGB and optional synthesizer peers",
                     add_arguments=_args),
}
