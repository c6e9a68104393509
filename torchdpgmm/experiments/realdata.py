"""Real-data studies of Liu, Scaglione & Peisert (2025): Iris (Figs 6-7), MNIST-style PCA -> GMM classifier (Figs 10-11),
-> synthetic data -> MLP (Fig. 12) with a DP-SGD comparison, and record-level DP (Fig. 13).

Studies (``torchdpgmm experiment NAME --out DIR``):

* ``iris`` -- KL(released || fitted) vs epsilon for every mechanism (Fig. 6); per-class marginal density
  of the first feature (histogram, non-private fit, one release per mechanism) at eps=2 (Fig. 7).
* ``mnist`` -- sample N=5000 training images, PCA to d=5, fit the 10-class GMM (eq. 2), release under
  (eps, 1e-5); KL and GMM-classifier accuracy on the full test split vs epsilon (Figs 10-11).
* ``mnist-mlp`` -- N synthetic points per release with the released class histogram, MLP
  d->256->128->10 trained as in the paper (SGD, batch 128, lr 0.01, one epoch) and a longer variant;
  references: real data, non-private GMM synthetic data; DP-SGD (Opacus) on the same features.
* ``record-level`` -- per-record clipping to norm B, the (31)/(32) mean noise, KL vs B at eps=1 on the
  synthetic data of Sec. V-A (Fig. 13).

All Monte Carlo repetitions are batched: one release call returns the whole (epsilon x trial) grid, one
``train_mlps`` call trains every MLP of the study at once.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from torchdpgmm._validation import check_no_repeats
from torchdpgmm.experiments import ExperimentConfig, Study, StudyResult, mean_ci

ALL_MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
#: the mnist studies also run the exact-KL variant of the design and the sound record-level mode
MNIST_MECHANISMS = ("kl", "kl-exact", "laplace", "gaussian", "colored", "r1smg", "kl-sound")
DELTA = 1e-5


def quick_option(config: ExperimentConfig, key: str, full: Any, quick: Any) -> Any:
    """:meth:`ExperimentConfig.pick`: a value the user gave always wins; ``--quick`` only changes the default."""
    return config.pick(key, full, quick)


def _adjacency_note(adjacency: str) -> str:
    """What each side of the comparison protects (issue #13 item 7: the same adjacency on both sides)."""
    return (f"Adjacency: the sound record-level release ('kl-sound') and DP-SGD BOTH use {adjacency} "
            f"(records; --adjacency). The as-published mechanisms protect LABELS only (one label flipped; noise "
            "calibrated to the actual data), so their rows are not a like-for-like privacy comparison with either.")


# ----------------------------------------------------------------------------- helpers
def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v.strip()]


def _names(s: str) -> list[str]:
    return [v.strip() for v in s.split(",") if v.strip()]


def _eps_axis(ax, values) -> None:
    """Log x axis labelled at the swept values only (no overlapping minor labels)."""
    import matplotlib.ticker as mt

    vals = sorted({float(v) for v in values if v is not None})
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(mt.NullFormatter())
    if vals:
        ax.set_xticks(vals)
        ax.set_xticklabels([f"{v:g}" for v in vals])


def _set_threads(config: ExperimentConfig) -> None:
    n = int(config.options.get("threads") or 0)
    if n > 0:
        torch.set_num_threads(n)


def _summ(values: torch.Tensor, prefix: str) -> dict[str, Any]:
    """Mean, 95% t-interval and median over a 1-d tensor of trials (NaN-free); KL is heavy-tailed, so both."""
    v = values.detach().to(torch.float64).reshape(-1).cpu()
    s = mean_ci(v, dim=0)
    return {prefix: float(s["mean"]), f"{prefix}_ci_low": float(s["ci_low"]), f"{prefix}_ci_high": float(s["ci_high"]),
            f"{prefix}_median": float(v.median()) if v.numel() else float("nan")}


#: study mechanism name -> (release mechanism, keyword arguments)
MECHANISM_ALIASES = {
    "kl-exact": ("kl", {"variant": "exact-kl"}),
    "kl-global": ("kl", {"variant": "global"}),
}


def _stack_releases(rels):
    """Stack releases with batch ``(T,)`` into one object with ``.model`` of batch ``(E, T)`` and the privacy record."""
    from types import SimpleNamespace

    from torchdpgmm.mixture import LabeledGMM

    ms = [r.model for r in rels]
    counts = None if any(m.counts is None for m in ms) else torch.stack([m.counts for m in ms])
    model = LabeledGMM(torch.stack([m.weights for m in ms]), torch.stack([m.means for m in ms]),
                       torch.stack([m.covariances for m in ms]), counts=counts, validate_args=False)
    return SimpleNamespace(model=model, privacy=rels[0].privacy)


def _with_kl(rel, X, y, K, mask):
    """A sound release with the study's ``.kl``: :func:`torchdpgmm.release.evaluation.evaluate`, the KL to the
    non-private eq. (2) fit of the raw, unclipped records (Appendix B, as the as-published releases report it; NaN
    where that fit's covariance is singular). The sound release keeps no non-private value, so the study evaluates."""
    from types import SimpleNamespace

    from torchdpgmm.release.evaluation import evaluate

    return SimpleNamespace(model=rel.model, kl=evaluate(rel, X, y, mask=mask).kl, privacy=rel.privacy)


def _release(X, y, K, eps, delta, mechanism, generator, mask=None, **kw):
    """One release call for the whole (epsilon x trial) grid ``eps (E, T)``.

    ``kl-sound`` (record-level, :func:`torchdpgmm.release.sound.release_sound`) takes a scalar epsilon, so it loops
    over the E values, each call batched over the T trials.
    """
    from torchdpgmm.release import release

    if mechanism == "kl-sound":
        eps = torch.as_tensor(eps, dtype=torch.float64)
        if eps.dim() == 0:
            return _with_kl(release(X, y, K, float(eps), delta, mechanism="kl", mode="sound", generator=generator,
                                    mask=mask, **kw), X, y, K, mask)
        T = eps.shape[-1]
        Xb = X.expand(T, *X.shape[-2:]) if X.dim() == 2 else X
        yb = y.expand(T, y.shape[-1]) if y.dim() == 1 else y
        rels = [release(Xb, yb, K, float(e), delta, mechanism="kl", mode="sound", generator=generator, mask=mask, **kw)
                for e in eps[:, 0].tolist()]
        return _with_kl(_stack_releases(rels), X, y, K, mask)
    mech, extra = MECHANISM_ALIASES.get(mechanism, (mechanism, {}))
    return release(X, y, K, eps, delta, mechanism=mech, mode="as-published", generator=generator, mask=mask,
                   **extra)


def _try_release(notes: list[str], *args, **kw):
    """Run a release; if the mechanism is missing or fails, say so in the notes and return None.

    A study keeps going with the other mechanisms; the failure is written into the output, never hidden.
    """
    try:
        return _release(*args, **kw)
    except (NotImplementedError, ImportError) as exc:
        notes.append(f"mechanism {args[5]!r} NOT RUN (not available): {exc}")
    except Exception as exc:  # noqa: BLE001 - reported in the study output
        notes.append(f"mechanism {args[5]!r} FAILED: {type(exc).__name__}: {exc}")
    return None


def _privacy_notes(rel) -> list[str]:
    try:
        return list(rel.privacy.notes)
    except Exception:
        return []


# ----------------------------------------------------------------------------- iris (Figs 6-7)
def _iris_args(p) -> None:
    p.add_argument("--epsilons", default=None, help="comma list of epsilon (default 0.25,...,8; quick 1,2)")
    p.add_argument("--mechanisms", default=",".join(ALL_MECHANISMS) + ",kl-exact", help="comma list of mechanisms")
    p.add_argument("--delta", type=float, default=DELTA)
    p.add_argument("--density-epsilon", type=float, default=2.0, help="epsilon of the density panel (Fig. 7)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")


def run_iris(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.data import load_iris
    from torchdpgmm.mixture import fit_labeled

    _set_threads(config)
    o = config.options
    eps_list = _floats(quick_option(config, "epsilons", "0.25,0.5,1,2,4,8", "1,2"))
    mechs = _names(o.get("mechanisms", ",".join(ALL_MECHANISMS) + ",kl-exact"))
    delta = float(o.get("delta", DELTA))
    T = int(config.pick("trials", config.trials or 100, 3))  # an explicit --trials beats --quick
    dev = torch.device(config.device)
    X, y = load_iris()
    X, y = X.to(dev), y.to(dev)
    K = 3
    fitted = fit_labeled(X, y, K)
    eps = torch.tensor(eps_list, dtype=torch.float64, device=dev).unsqueeze(-1).expand(len(eps_list), T)
    rows: list[dict[str, Any]] = []
    notes = ["Iris: scikit-learn's copy, each feature standardised to mean 0 / variance 1 (Sec. V-B); N=150, d=4, K=3."]
    dens_eps = float(o.get("density_epsilon", 2.0))
    released_for_density: dict[str, Any] = {}
    for i, m in enumerate(mechs):
        t0 = time.perf_counter()
        rel = _try_release(notes, X, y, K, eps, delta, m, config.generator(100 + i))
        if rel is None:
            continue
        secs = time.perf_counter() - t0
        for j, e in enumerate(eps_list):
            kl = rel.kl[j]
            finite = torch.isfinite(kl)
            row = {"kind": "kl", "epsilon": e, "mechanism": m, "trials": T, "finite_trials": int(finite.sum())}
            row.update(_summ(kl[finite], "kl") if bool(finite.any()) else {"kl": float("inf")})
            row["seconds_all_eps"] = secs
            rows.append(row)
        one = _release(X, y, K, torch.tensor(dens_eps, dtype=torch.float64), delta, m, config.generator(200 + i)) if m != "kl-sound" else None
        if one is not None:
            released_for_density[m] = one.model
        for n_ in _privacy_notes(rel):
            if n_ not in notes:
                notes.append(n_)
    # Fig. 7: first feature, per class
    grid = torch.linspace(float(X[:, 0].min()) - 1.0, float(X[:, 0].max()) + 1.0, 121, dtype=torch.float64, device=dev)
    edges = torch.linspace(float(X[:, 0].min()), float(X[:, 0].max()), 13, dtype=torch.float64)
    for k in range(K):
        xk = X[y == k, 0].cpu()
        hist = torch.histc(xk, bins=12, min=float(edges[0]), max=float(edges[-1]))
        width = float(edges[1] - edges[0])
        for b in range(12):
            rows.append({"kind": "histogram", "class": k, "bin_left": float(edges[b]), "bin_right": float(edges[b + 1]),
                         "density": float(hist[b]) / (xk.numel() * width)})
        sources = {"non-private": fitted, **released_for_density}
        for name, model in sources.items():
            mu = model.means[..., k, 0].reshape(())
            var = model.covariances[..., k, 0, 0].reshape(())
            dens = torch.exp(-0.5 * (grid - mu) ** 2 / var) / torch.sqrt(2 * math.pi * var)
            for xv, dv in zip(grid.tolist(), dens.tolist()):
                rows.append({"kind": "density", "class": k, "source": name, "epsilon": None if name == "non-private" else dens_eps,
                             "x": xv, "density": dv})
    return StudyResult(rows=rows, config={"trials": T, "epsilons": eps_list, "mechanisms": mechs, "delta": delta},
                       notes=notes, plot=lambda rows_, path: _plot_iris(rows_, path, delta=delta))


#: scikit-learn's Iris labels 0, 1, 2 (public: the dataset's documented classes) and its first feature
IRIS_CLASSES = ("setosa", "versicolor", "virginica")
IRIS_FEATURE0 = "sepal length (standardised: mean 0, variance 1)"


def _plot_iris(rows, path: Path, delta: float | None = None) -> None:
    """Fig. 6 (KL vs epsilon) over Fig. 7 (one panel per class): settings in the title, the legends beside
    the axes (never over a curve), the classes by name."""
    import matplotlib.pyplot as plt

    klr = [r for r in rows if r.get("kind") == "kl"]
    ks = sorted({r["class"] for r in rows if r.get("kind") == "histogram"})
    trials = max((int(r["trials"]) for r in klr), default=0)
    dens_eps = next((r["epsilon"] for r in rows if r.get("kind") == "density" and r.get("epsilon") is not None), None)
    fig = plt.figure(figsize=(12, 8.5))
    gs = fig.add_gridspec(2, max(len(ks), 1))
    ax = fig.add_subplot(gs[0, :])
    for m in dict.fromkeys(r["mechanism"] for r in klr):
        rr = [r for r in klr if r["mechanism"] == m and isinstance(r.get("kl"), (int, float))]
        ax.plot([r["epsilon"] for r in rr], [r["kl"] for r in rr], marker="o", label=m)
    _eps_axis(ax, [r["epsilon"] for r in klr])
    ax.set_yscale("log"), ax.set_xlabel("epsilon (privacy budget)")
    ax.set_ylabel("mean KL(released || fitted), nats")
    ax.set_title(f"Fig. 6: mean KL over {trials} trials per point", fontsize=10)
    ax.legend(fontsize=8, title="mechanism", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    for i, k in enumerate(ks):
        ax = fig.add_subplot(gs[1, i])
        h = [r for r in rows if r.get("kind") == "histogram" and r["class"] == k]
        ax.bar([r["bin_left"] for r in h], [r["density"] for r in h], width=[r["bin_right"] - r["bin_left"] for r in h],
               align="edge", color="0.85", label="data (histogram)")
        dr = [r for r in rows if r.get("kind") == "density" and r["class"] == k]
        for s in dict.fromkeys(r["source"] for r in dr):
            rr = [r for r in dr if r["source"] == s]
            ax.plot([r["x"] for r in rr], [r["density"] for r in rr], "k--" if s == "non-private" else "-", label=s, lw=1)
        name = IRIS_CLASSES[k] if 0 <= k < len(IRIS_CLASSES) else str(k)
        ax.set_title(f"Fig. 7: class {name}", fontsize=10)
        ax.set_xlabel(IRIS_FEATURE0, fontsize=8)
        if i == 0:
            ax.set_ylabel("density (per standard deviation)")
    handles, labels = fig.axes[-1].get_legend_handles_labels() if ks else ([], [])
    if handles:
        fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=min(len(labels), 8), frameon=False,
                   title=f"Fig. 7 curves: the class's Gaussian, one release at epsilon = {dens_eps:g}"
                   if dens_eps is not None else "Fig. 7 curves", title_fontsize=8)
    head = (f"Iris (N=150, d=4, K=3, features standardised), Liu, Scaglione & Peisert (2025) Figs 6-7; "
            f"delta={delta:g}, " if delta is not None else
            "Iris (N=150, d=4, K=3, features standardised), Liu, Scaglione & Peisert (2025) Figs 6-7; ")
    mode = "as-published mode, label-flip adjacency"
    if any(r["mechanism"] == "kl-sound" for r in klr):
        mode += " (kl-sound: sound mode, record-level)"
    import textwrap

    eps_txt = ", ".join(f"{e:g}" for e in sorted({r["epsilon"] for r in klr}))
    fig.suptitle(textwrap.fill(head + f"epsilon in {{{eps_txt}}}, {trials} trials, {mode}", 130), fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- MNIST-style features
def _mnist_common_args(p) -> None:
    p.add_argument("--dataset", default="fashion-mnist", choices=["mnist", "fashion-mnist", "digits"],
                   help="image data (default fashion-mnist: Debian's dataset-fashion-mnist)")
    p.add_argument("--data-dir", default=None, help="folder of IDX files (raw or .gz); fashion-mnist defaults to Debian's")
    p.add_argument("--n-train", type=int, default=5000, help="private training sample size N (default 5000)")
    p.add_argument("--pca-dim", type=int, default=5, help="PCA dimension d (default 5)")
    p.add_argument("--pca-fit", default="private", choices=["private", "public"],
                   help="fit PCA on the private sample (paper; not accounted) or on a disjoint public split")
    p.add_argument("--epsilons", default=None, help="comma list of epsilon (default 0.25,0.5,1,2,5,10; quick 1,2)")
    p.add_argument("--delta", type=float, default=DELTA)
    p.add_argument("--adjacency", default="add-remove", choices=["add-remove", "replace-one"],
                   help="record adjacency of the sound release and of DP-SGD, the same on both sides (default add-remove)")
    p.add_argument("--clip-bound", type=float, default=10.0,
                   help="public L2 bound B for the sound record-level release on PCA features (default 10)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")


def _features(config: ExperimentConfig):
    from torchdpgmm.pipelines.features import load_image_split, prepare_features

    o = config.options
    ds = o.get("dataset", "fashion-mnist")
    ddir = o.get("data_dir")
    Xtr, ytr = load_image_split(ds, ddir, "train")
    Xte, yte = load_image_split(ds, ddir, "test")
    n = int(o.get("n_train", 5000))
    pca_fit = o.get("pca_fit", "private")
    if config.quick and not config.is_given("n_train"):  # an explicit --n-train beats --quick
        avail = Xtr.shape[0] // (2 if pca_fit == "public" else 1)
        n = min(n, 1000, avail)
    feats = prepare_features(Xtr, ytr, Xte, yte, n_train=n, n_components=int(o.get("pca_dim", 5)), pca_fit=pca_fit,
                             n_public=min(5000, Xtr.shape[0] - n), generator=config.host_generator(1))  # host rows
    dev = torch.device(config.device)
    for f in ("X_train", "y_train", "X_test", "y_test"):
        setattr(feats, f, getattr(feats, f).to(dev))
    return ds, feats


def run_mnist(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.pipelines.gmm import gmm_accuracy

    _set_threads(config)
    o = config.options
    ds, F = _features(config)
    eps_list = _floats(quick_option(config, "epsilons", "0.25,0.5,1,2,5,10", "1,2"))
    mechs = _names(quick_option(config, "mechanisms", ",".join(MNIST_MECHANISMS), "kl,gaussian,kl-sound"))
    delta = float(o.get("delta", DELTA))
    T = int(config.pick("trials", config.trials or 20, 2))  # an explicit --trials beats --quick
    K = 10
    fitted = fit_labeled(F.X_train, F.y_train, K)
    rows: list[dict[str, Any]] = []
    base_acc = float(gmm_accuracy(fitted, F.X_test, F.y_test))
    rows.append({"epsilon": None, "mechanism": "non-private", "kl": 0.0, "gmm_accuracy": base_acc, "trials": 1})
    notes = [f"dataset {ds}, N={F.X_train.shape[0]} private training images, PCA d={F.X_train.shape[1]}, test n={F.X_test.shape[0]}",
             F.note, f"non-private Gaussian classifier accuracy {base_acc:.4f}"]
    eps = torch.tensor(eps_list, dtype=torch.float64, device=F.X_train.device).unsqueeze(-1).expand(len(eps_list), T)
    B = float(o.get("clip_bound", 10.0))
    adj = o.get("adjacency", "add-remove")
    for i, m in enumerate(mechs):
        kw = {"clip_bound": B, "adjacency": adj} if m == "kl-sound" else {}
        t0 = time.perf_counter()
        rel = _try_release(notes, F.X_train, F.y_train, K, eps, delta, m, config.generator(100 + i), **kw)
        if rel is None:
            continue
        acc = gmm_accuracy(rel.model, F.X_test, F.y_test)  # (E, T)
        secs = time.perf_counter() - t0
        for j, e in enumerate(eps_list):
            row = {"epsilon": e, "mechanism": m, "trials": T}
            kl = rel.kl[j]
            finite = torch.isfinite(kl)
            row.update(_summ(kl[finite], "kl") if bool(finite.any()) else {"kl": float("inf")})
            row.update(_summ(acc[j], "gmm_accuracy"))
            row["adjacency"] = f"{adj} (records clipped to ||x||<={B:g})" if m == "kl-sound" else "label-flip"
            row["seconds_all_eps"] = secs
            rows.append(row)
        for n_ in _privacy_notes(rel):
            if n_ not in notes:
                notes.append(n_)
    cfg = {"dataset": ds, "n_train": F.X_train.shape[0], "pca_fit": F.pca_fit, "pca_dim": int(o.get("pca_dim", 5)),
           "trials": T, "epsilons": eps_list, "mechanisms": mechs, "delta": delta}
    return StudyResult(rows=rows, config=cfg, notes=notes, plot=lambda rows_, path: _plot_mnist(rows_, path, cfg))


_LABEL_LEVEL = ("kl", "kl-exact", "kl-global", "laplace", "gaussian", "colored", "r1smg")


def _settings_line(config: dict | None, rows) -> str:
    """Data set, N, PCA, delta, trials and the adjacency of each mechanism, for a figure's title."""
    c = config or {}
    adj = {}
    for r in rows:
        if r.get("epsilon") is not None and r.get("mechanism") not in adj:
            a = r.get("adjacency")
            if a is None and r["mechanism"] in _LABEL_LEVEL:
                a = "label"         # the as-published mechanisms are label-level by definition
            adj[r["mechanism"]] = "label-level" if a in ("label", "label-flip") else (a or "not recorded in this JSON")
    trials = max((int(r.get("trials") or 0) for r in rows), default=0)
    parts = [c.get("dataset"), f"N={c['n_train']}" if c.get("n_train") else None,
             f"PCA d={c['pca_dim']} fitted on {c.get('pca_fit')} data" if c.get("pca_dim") else None,
             f"delta={c['delta']:g}" if c.get("delta") is not None else None, f"trials={trials}" if trials else None,
             "adjacency: " + ", ".join(f"{m} {a}" for m, a in adj.items()) if adj else None]
    return ", ".join(p for p in parts if p)


def _plot_mnist(rows, path: Path, config: dict | None = None) -> None:
    """Figs 10-11: mean KL (no interval drawn: it is heavy-tailed; the JSON holds its t interval) and the
    GMM classifier's test accuracy with the rows' 95% Student-t interval over trials, drawn as stored."""
    import textwrap

    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.8))
    for m in dict.fromkeys(r["mechanism"] for r in rows if r["epsilon"] is not None):
        rr = [r for r in rows if r["mechanism"] == m and r["epsilon"] is not None]
        a1.plot([r["epsilon"] for r in rr], [r["kl"] for r in rr], marker="o", label=m)
        acc = [r["gmm_accuracy"] for r in rr]
        lo = [a - r.get("gmm_accuracy_ci_low", a) for a, r in zip(acc, rr)]
        hi = [r.get("gmm_accuracy_ci_high", a) - a for a, r in zip(acc, rr)]
        a2.errorbar([r["epsilon"] for r in rr], acc, yerr=[lo, hi], marker="o", capsize=2, label=m)
    base = [r for r in rows if r["mechanism"] == "non-private"]
    if base:
        a2.axhline(base[0]["gmm_accuracy"], color="k", ls="--", label="non-private")
    _eps_axis(a1, [r["epsilon"] for r in rows]), _eps_axis(a2, [r["epsilon"] for r in rows])
    a1.set_yscale("log"), a1.set_xlabel("epsilon (privacy budget)"), a1.set_ylabel("mean KL(released || fitted), nats")
    a1.set_title("Fig. 10: mean KL over trials (no interval drawn)", fontsize=9)
    a2.set_xlabel("epsilon (privacy budget)"), a2.set_ylabel("test accuracy (fraction correct)")
    a2.set_title("Fig. 11: GMM classifier, mean and 95% t-interval over trials", fontsize=9)
    a2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    fig.suptitle(textwrap.fill("Liu, Scaglione & Peisert (2025) Figs 10-11: " + _settings_line(config, rows), 130, break_on_hyphens=False),
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- MLP on synthetic data (Fig. 12)
def _mlp_args(p) -> None:
    _mnist_common_args(p)
    p.set_defaults(epsilons=None)  # default 0.5,1,2,5; quick 1 (resolved in run_mnist_mlp)
    p.add_argument("--mechanisms", default=None,
                   help="mechanisms whose releases feed the MLP (default kl,kl-exact,kl-sound; quick kl,kl-sound)")
    p.add_argument("--long-epochs", type=int, default=20, help="epochs of the longer-trained variant (default 20)")
    p.add_argument("--long-lr", default="0.01,0.03,0.1",
                   help="comma list of learning rates of the longer variant, all trained in one batch; the table "
                        "reports the best per curve (tuned on test accuracy, like DP-SGD) (default 0.01,0.03,0.1)")
    p.add_argument("--long-eval-every", type=int, default=5, help="epochs between evaluations of the long variant")
    p.add_argument("--dpsgd", default="auto", choices=["auto", "off"], help="DP-SGD rows via Opacus when installed")
    p.add_argument("--dpsgd-grid", default="0.2:5,0.2:20,0.5:5,0.5:20",
                   help="DP-SGD configurations lr:epochs (batch 128, clip 1); the best by test accuracy is 'tuned'")


def run_mnist_mlp(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.pipelines.gmm import gmm_accuracy, synthesize
    from torchdpgmm.pipelines.mlp import train_mlps

    _set_threads(config)
    o = config.options
    ds, F = _features(config)
    eps_list = _floats(quick_option(config, "epsilons", "0.5,1,2,5", "1"))
    mechs = _names(quick_option(config, "mechanisms", "kl,kl-exact,kl-sound", "kl,kl-sound"))
    delta = float(o.get("delta", DELTA))
    T = int(config.pick("trials", config.trials or 5, 2))  # an explicit --trials beats --quick
    K, N, d = 10, F.X_train.shape[0], F.X_train.shape[1]
    dev = F.X_train.device
    B = float(o.get("clip_bound", 10.0))
    adj = o.get("adjacency", "add-remove")
    notes = [f"dataset {ds}, N={N}, PCA d={d}, test n={F.X_test.shape[0]}", F.note, _adjacency_note(adj),
             "Synthetic sets: N points per release drawn class by class with the released histogram round(N * pi~)."]
    fitted = fit_labeled(F.X_train, F.y_train, K)
    eps = torch.tensor(eps_list, dtype=torch.float64, device=dev).unsqueeze(-1).expand(len(eps_list), T)
    groups: list[tuple[dict[str, Any], torch.Tensor, torch.Tensor]] = []  # (labels, X (T,N,d), y (T,N))
    gmm_rows: list[dict[str, Any]] = []
    base_acc = float(gmm_accuracy(fitted, F.X_test, F.y_test))
    gmm_rows.append({"kind": "gmm-classifier", "epsilon": None, "mechanism": "non-private", "gmm_accuracy": base_acc})
    for i, m in enumerate(mechs):
        kw = {"clip_bound": B, "adjacency": adj} if m == "kl-sound" else {}
        rel = _try_release(notes, F.X_train, F.y_train, K, eps, delta, m, config.generator(100 + i), **kw)
        if rel is None:
            continue
        acc = gmm_accuracy(rel.model, F.X_test, F.y_test)
        Xs, ys, mask = synthesize(rel.model, N, generator=config.generator(300 + i))
        for j, e in enumerate(eps_list):
            r = {"kind": "gmm-classifier", "epsilon": e, "mechanism": m,
                 "adjacency": adj if m == "kl-sound" else "label-flip"}
            r.update(_summ(acc[j], "gmm_accuracy"))
            kl = rel.kl[j]
            r.update(_summ(kl[torch.isfinite(kl)], "kl") if bool(torch.isfinite(kl).any()) else {"kl": float("inf")})
            gmm_rows.append(r)
            groups.append(({"epsilon": e, "mechanism": m}, Xs[j], ys[j]))
    # references: real data and non-private GMM synthetic data (T seeds each)
    groups.append(({"epsilon": None, "mechanism": "real-data"}, F.X_train.expand(T, N, d), F.y_train.expand(T, N)))
    from torchdpgmm.mixture import LabeledGMM

    fittedT = LabeledGMM(fitted.weights.expand(T, K), fitted.means.expand(T, K, d),
                         fitted.covariances.expand(T, K, d, d), counts=fitted.counts.expand(T, K), validate_args=False)
    Xn, yn, _ = fittedT.sample_counts(generator=config.generator(400))
    groups.append(({"epsilon": None, "mechanism": "non-private-gmm"}, Xn, yn))
    Xall = torch.cat([g[1] for g in groups]).to(torch.float32)
    yall = torch.cat([g[2] for g in groups])
    M = Xall.shape[0]
    steps_per_epoch = math.ceil(N / 128)
    long_epochs = int(config.pick("long_epochs", o.get("long_epochs", 20), 2))  # explicit flags beat --quick
    long_lrs = _floats(str(config.pick("long_lr", o.get("long_lr", "0.01,0.03,0.1"), "0.01")))
    long_every = steps_per_epoch * max(1, int(config.pick("long_eval_every", o.get("long_eval_every", 5), 1)))
    # (name, epochs, learning rates, eval every): the paper's exact settings, then the longer, lr-tuned variant
    variants = [("paper", 1, [0.01], 2), ("long", long_epochs, long_lrs, long_every)]
    rows: list[dict[str, Any]] = list(gmm_rows)
    timing: dict[str, float] = {}
    for vi, (vname, epochs, lrs, every) in enumerate(variants):
        L = len(lrs)
        lr_t = torch.tensor(lrs, dtype=torch.float32, device=dev).repeat_interleave(M)  # model order: (lr, group, trial)
        t0 = time.perf_counter()
        res = train_mlps(Xall.repeat(L, 1, 1), yall.repeat(L, 1), F.X_test, F.y_test, num_classes=K, epochs=epochs,
                         lr=lr_t, batch_size=128, eval_every=every, generator=config.generator(500 + vi))
        timing[vname] = time.perf_counter() - t0
        notes.append(f"MLP variant {vname}: {M * L} MLPs trained at once ({epochs} epoch(s), lr {lrs}, batch 128) "
                     f"in {timing[vname]:.1f} s")
        for li, lr in enumerate(lrs):
            for gi, (lab, _, _) in enumerate(groups):
                s0 = li * M + gi * T
                accs = res.accuracy[s0 : s0 + T]  # (T, evals)
                for ti, it in enumerate(res.iterations.tolist()):
                    r = {"kind": "mlp", "variant": vname, **lab, "iteration": it, "epoch": it / steps_per_epoch,
                         "epochs": epochs, "lr": lr}
                    r.update(_summ(accs[:, ti], "accuracy"))
                    rows.append(r)
    # DP-SGD on the same features, same (eps, delta), the same record-level adjacency as kl-sound
    rows += _dpsgd_rows(config, F, eps_list, delta, notes)
    _write_mlp_table(config.out, rows, eps_list, notes)
    cfg = {"dataset": ds, "n_train": N, "pca_fit": F.pca_fit, "pca_dim": int(o.get("pca_dim", 5)), "trials": T,
           "epsilons": eps_list, "mechanisms": mechs, "delta": delta, "clip_bound": B, "mlp_seconds": timing}
    return StudyResult(rows=rows, config=cfg, notes=notes, plot=lambda rows_, path: _plot_mlp(rows_, path, cfg))


def _replace_one_dpsgd(X, y, X_test, y_test, epsilon, delta, *, epochs, lr, batch_size, max_grad_norm, seed,
                       eval_every=None, n_public=None, num_classes=10):
    """DP-SGD under replace-one (PLD accountant, REPLACE_ONE), with the keys of ``train_dpsgd``'s result."""
    from torchdpgmm.pipelines.dpsgd_fast import (calibrate_noise_multiplier, dpsgd_schedule, mlp_logits,
                                                 pipeline_epsilon, train_dpsgd_fast)

    n_pub = float(X.shape[0]) if n_public is None else float(n_public)  # public under replace-one
    q, steps = dpsgd_schedule(n_pub, batch_size, epochs)
    nm = calibrate_noise_multiplier(epsilon, delta, q, steps, adjacency="replace-one")
    dev = X.device  # trained where the features are, with a generator of that device (the generator rule)
    out = train_dpsgd_fast(X, y, num_classes=num_classes, noise_multiplier=nm, sampling_rate=q, steps=steps,
                           lr=1e-3, clip=max_grad_norm, generator=torch.Generator(device=dev).manual_seed(seed),
                           device=dev, n_public=n_pub)
    with torch.no_grad():
        pred = mlp_logits(out["params"], X_test.to(dev, torch.float32)).argmax(-1)
        acc = float((pred == y_test.to(dev)).double().mean())
    return {"iterations": [0, steps], "accuracy": [float("nan"), acc], "final_accuracy": acc, "noise_multiplier": nm,
            "epsilon_spent": pipeline_epsilon(nm, q, steps, delta, adjacency="replace-one"), "opacus": None}


def _dpsgd_rows(config, F, eps_list, delta, notes) -> list[dict[str, Any]]:
    from torchdpgmm.pipelines.dpsgd import opacus_available, opacus_version, train_dpsgd

    o = config.options
    if o.get("dpsgd", "auto") == "off":
        notes.append("DP-SGD rows switched off (--dpsgd off).")
        return []
    if not opacus_available():
        notes.append("DP-SGD NOT RUN: opacus is not installed (pip install 'torchdpgmm[opacus]'); no DP-SGD rows.")
        return [{"kind": "dpsgd", "mechanism": "dp-sgd", "status": "opacus not installed"}]
    spec = quick_option(config, "dpsgd_grid", o.get("dpsgd_grid") or "0.2:5,0.2:20,0.5:5,0.5:20", "0.2:1")
    grid = [(float(a), int(b)) for a, b in (c.split(":") for c in _names(spec))]  # an explicit --dpsgd-grid wins
    adj = o.get("adjacency", "add-remove")
    if adj == "add-remove":
        notes.append(f"DP-SGD: Opacus {opacus_version()}, MLP d->256->128->10, batch 128 (Poisson), clip 1.0, RDP "
                     f"accountant; grid lr:epochs {grid}; 'tuned' = best final test accuracy over the grid (tuning not "
                     "privacy-accounted: generous to DP-SGD). Adjacency add-remove, as the kl-sound release.")
    else:
        notes.append(f"DP-SGD: replace-one adjacency (as the kl-sound release) is outside Opacus' accountant, so DP-SGD "
                     "runs through torchdpgmm.pipelines.dpsgd_fast (ghost clipping, Adam lr 1e-3, batch 128 Poisson, "
                     f"clip 1.0) with dp-accounting's PLD accountant under REPLACE_ONE; epochs from the grid {grid}.")
        train_dpsgd = _replace_one_dpsgd
    rows: list[dict[str, Any]] = []
    n_train = F.X_train.shape[0]  # the study's --n-train (public: the study chose it), not a count of valid rows
    spe = math.ceil(n_train / 128)
    for e in eps_list:
        best = None
        for ci, (lr, ep) in enumerate(grid):
            t0 = time.perf_counter()  # the study's own runtime: the trainer returns no timing
            r = train_dpsgd(F.X_train, F.y_train, F.X_test, F.y_test, e, delta, epochs=ep, lr=lr, batch_size=128,
                            max_grad_norm=1.0, seed=int(config.seed) * 1000 + ci, eval_every=spe,
                            n_public=float(n_train))  # the study's public sample size, never a count of the data
            seconds = time.perf_counter() - t0
            rows.append({"kind": "dpsgd-config", "mechanism": "dp-sgd", "epsilon": e, "lr": lr, "epochs": ep, "adjacency": adj,
                         "accuracy": r["final_accuracy"], "noise_multiplier": r["noise_multiplier"],
                         "epsilon_spent": r["epsilon_spent"], "seconds": seconds})
            if best is None or r["final_accuracy"] > best[0]["final_accuracy"]:
                best = (r, lr, ep)
        r, lr, ep = best
        for it, acc in zip(r["iterations"], r["accuracy"]):
            rows.append({"kind": "dpsgd", "mechanism": "dp-sgd", "variant": "tuned", "epsilon": e, "iteration": it, "adjacency": adj,
                         "epoch": it / spe, "accuracy": acc, "lr": lr, "epochs": ep,
                         "noise_multiplier": r["noise_multiplier"], "opacus": r["opacus"]})
    return rows


def _write_mlp_table(out: Path, rows, eps_list, notes) -> None:
    """Markdown summary written next to the JSON: final accuracies per epsilon, side by side."""

    def last(kind, **k):
        rr = [r for r in rows if r.get("kind") == kind and all(r.get(a) == b for a, b in k.items())]
        if not rr:
            return None
        if kind in ("mlp", "dpsgd"):
            top = max(r["iteration"] for r in rr)
            rr = [max((r for r in rr if r["iteration"] == top), key=lambda r: r["accuracy"])]  # best lr (tuned)
        return rr[0]

    def fmt(r, key="accuracy"):
        if r is None or r.get(key) is None:
            return "-"
        lo, hi = r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
        if lo is None or hi is None or not all(map(math.isfinite, (lo, hi))):
            return f"{r[key]:.3f}"
        lr = f", lr {r['lr']:g}" if key == "accuracy" and r.get("variant") == "long" else ""
        return f"{r[key]:.3f} ({lo:.3f}-{hi:.3f}{lr})"

    mechs = list(dict.fromkeys(r["mechanism"] for r in rows if r.get("kind") == "gmm-classifier" and r["epsilon"] is not None))
    head = ["epsilon"]
    for m in mechs:
        head += [f"GMM classifier [{m}]", f"MLP on synth, paper [{m}]", f"MLP on synth, long [{m}]"]
    head += ["DP-SGD tuned (Opacus)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in eps_list:
        cells = [f"{e:g}"]
        for m in mechs:
            cells += [fmt(last("gmm-classifier", epsilon=e, mechanism=m), "gmm_accuracy"),
                      fmt(last("mlp", variant="paper", epsilon=e, mechanism=m)),
                      fmt(last("mlp", variant="long", epsilon=e, mechanism=m))]
        cells.append(fmt(last("dpsgd", epsilon=e)))
        lines.append("| " + " | ".join(cells) + " |")
    refs = []
    base = last("gmm-classifier", mechanism="non-private")
    if base:
        refs.append(f"non-private Gaussian classifier: {base['gmm_accuracy']:.3f}")
    for m in ("real-data", "non-private-gmm"):
        for v in ("paper", "long"):
            r = last("mlp", variant=v, mechanism=m)
            if r:
                refs.append(f"MLP {v} on {m}: {fmt(r)}")
    text = ("# mnist-mlp summary (final test accuracy, mean and 95% CI over trials)\n\n"
            "'paper' = the paper's exact MLP training (1 epoch, lr 0.01); 'long' = more epochs, best learning rate "
            "of the grid by final test accuracy (as for DP-SGD: tuning not privacy-accounted).\n\n") + "\n".join(lines) + "\n\n"
    text += "References: " + "; ".join(refs) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "mnist-mlp.md").write_text(text)


def _plot_mlp(rows, path: Path, config: dict | None = None) -> None:
    """Fig. 12: test accuracy of the MLP trained on each release's synthetic data, per epoch (mean over trials,
    the lr with the best final mean; no interval drawn, the JSON holds the t intervals), and DP-SGD's tuned
    curve (one model per epsilon)."""
    import textwrap

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    for ax, v in zip(axes, ("paper", "long")):
        mr = [r for r in rows if r.get("kind") == "mlp" and r["variant"] == v]
        for key in dict.fromkeys((r["mechanism"], r["epsilon"]) for r in mr):
            rr = [r for r in mr if (r["mechanism"], r["epsilon"]) == key]
            top = max(r["iteration"] for r in rr)
            best_lr = max((r for r in rr if r["iteration"] == top), key=lambda r: r["accuracy"])["lr"]
            rr = [r for r in rr if r["lr"] == best_lr]  # the tuned curve
            style = {"real-data": "k-", "non-private-gmm": "r-"}.get(key[0], "-")
            lab = key[0] if key[1] is None else f"{key[0]} eps={key[1]:g}"
            ax.plot([r["epoch"] for r in rr], [r["accuracy"] for r in rr], style, label=f"{lab} (lr {best_lr:g})", lw=1)
        if v == "long":
            # a "not run" row (opacus missing) has no epsilon and no curve
            dr = [r for r in rows if r.get("kind") == "dpsgd" and r.get("epsilon") is not None]
            for e in dict.fromkeys(r["epsilon"] for r in dr):
                rr = [r for r in dr if r["epsilon"] == e]
                ax.plot([r["epoch"] for r in rr], [r["accuracy"] for r in rr], ":", label=f"DP-SGD eps={e:g}")
        ax.set_xlabel("epoch"), ax.set_ylabel("test accuracy (fraction correct)")
        ax.set_title({"paper": "paper's settings: 1 epoch, lr 0.01", "long": "long: more epochs, lr tuned"}[v]
                     + "; mean over trials, no interval drawn", fontsize=9)
        ax.legend(fontsize=5.5, loc="lower right", ncol=2)
    fig.suptitle(textwrap.fill("Liu, Scaglione & Peisert (2025) Fig. 12: MLP d-256-128-10 trained on synthetic "
                               "data of each release vs DP-SGD; " + _settings_line(config, rows), 140, break_on_hyphens=False), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- record-level DP (Fig. 13)
def _record_args(p) -> None:
    p.add_argument("--clip-bounds", default=None, help="comma list of clipping bounds B (default 1,...,50; quick 2,20)")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=DELTA)
    p.add_argument("--n", type=int, default=1000, help="points per dataset (Sec. V-A: 1000)")
    p.add_argument("--classes", type=int, default=5)
    p.add_argument("--dim", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")


def run_record_level(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.kl import kl_divergence
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.pipelines.record import record_level_release

    _set_threads(config)
    o = config.options
    bounds = _floats(quick_option(config, "clip_bounds", "1,2,3,5,7.5,10,15,20,30,50", "2,20"))
    if not all(0 < b < math.inf for b in bounds):
        raise ValueError(f"--clip-bounds must be finite and > 0, got {','.join(f'{b:g}' for b in bounds)}")
    check_no_repeats("--clip-bounds", bounds)  # the same bound twice: two rows of one setting, from different draws
    eps = float(o.get("epsilon", 1.0))
    delta = float(o.get("delta", DELTA))
    T = int(config.pick("trials", config.trials or 50, 4))  # explicit --trials / --n beat --quick
    n = int(config.pick("n", o.get("n", 1000), 300))
    K, d = int(o.get("classes", 5)), int(o.get("dim", 3))
    data = synthetic_data(T, n, num_classes=K, dim=d, generator=config.generator(1), device=config.device)
    X, y = data.X, data.y
    full_fit = fit_labeled(X, y, K)
    rows: list[dict[str, Any]] = []
    notes = [
        f"Synthetic data of Sec. V-A: T={T} datasets, N={n}, K={K}, d={d}; {data.redrawn} trials redrawn for small classes.",
        "kl = KL(released || non-private fit of the CLIPPED data) (what the released mechanism perturbs); "
        "kl_vs_unclipped = KL(released || non-private fit of the raw data), which adds the clipping bias.",
        "Mean noise from (31): Gamma_k^{-1} = 8 B^2 ln(2/delta)/(N_k^2 eps_k^2) I; the printed (32) has B, not B^2.",
        "As-published record-level (Sec. IV-C, change one record): weights released exactly, Wishart charged "
        "3 gamma/(2N_k) without rescaling for B (Jiang et al. assume ||x|| <= 1), budget split by objective (12).",
    ]
    norms = torch.linalg.vector_norm(X, dim=-1)
    for b in bounds:
        B = torch.tensor(b, dtype=torch.float64)
        rel, fit_c, info = record_level_release(X, y, K, eps, delta, B, generator=config.generator(int(b * 1000) + 7))
        kl_c = kl_divergence(rel, fit_c)
        kl_u = kl_divergence(rel, full_fit)
        row = {"clip_bound": b, "mechanism": "kl-record (as published)", "epsilon": eps, "trials": T,
               "clipped_fraction": float((norms > b).to(torch.float64).mean())}
        row.update(_summ(kl_c, "kl"))
        row.update(_summ(kl_u, "kl_vs_unclipped"))
        row["mean_noise_variance_median"] = float(info["mean_noise_variance"].median())
        rows.append(row)
        try:
            from torchdpgmm.release import release

            # replace-one, as labelled and as the as-published rows (change one record); the sound mode's
            # default is add-remove, so it is named here
            srel = release(X, y, K, eps, delta, mechanism="kl", mode="sound", clip_bound=b, adjacency="replace-one",
                           generator=config.generator(int(b * 1000) + 9))
        except (NotImplementedError, ImportError) as exc:
            if not any("sound" in n_ for n_ in notes):
                notes.append(f"sound mode not available: {exc}")
            continue
        from torchdpgmm.pipelines.record import clip_records

        fit_cb = fit_labeled(clip_records(X, b), y, K)
        row = {"clip_bound": b, "mechanism": "kl-sound (replace-one)", "epsilon": eps, "trials": T,
               "adjacency": str(getattr(srel.privacy.adjacency, "value", srel.privacy.adjacency)),
               "clipped_fraction": float((norms > b).to(torch.float64).mean())}
        row.update(_summ(kl_divergence(srel.model, fit_cb), "kl"))
        row.update(_summ(kl_divergence(srel.model, full_fit), "kl_vs_unclipped"))
        rows.append(row)
    return StudyResult(rows=rows, config={"clip_bounds": bounds, "epsilon": eps, "delta": delta, "trials": T, "n": n,
                                          "classes": K, "dim": d}, notes=notes,
                       plot=lambda rows_, path: _plot_record(rows_, path, delta=delta, n=n, k=K, d=d))


def _plot_record(rows, path: Path, delta: float | None = None, n: int | None = None, k: int | None = None,
                 d: int | None = None) -> None:
    """Fig. 13: KL vs the clipping bound; the settings (N, K, d, epsilon, delta, trials, adjacency) in the title."""
    import textwrap

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    for ax, stat in zip(axes, ("", "_median")):
        for m in dict.fromkeys(r["mechanism"] for r in rows):
            rr = [r for r in rows if r["mechanism"] == m]
            ax.plot([r["clip_bound"] for r in rr], [r["kl" + stat] for r in rr], marker="o", label=f"{m}: vs clipped fit")
            ax.plot([r["clip_bound"] for r in rr], [r["kl_vs_unclipped" + stat] for r in rr], ls="--", marker="x",
                    label=f"{m}: vs raw fit")
        _eps_axis(ax, [r["clip_bound"] for r in rows])
        ax.set_yscale("log"), ax.set_xlabel("clipping bound B (record norm, data units)")
        ax.set_ylabel(f"{'median' if stat else 'mean'} KL(released || fit), nats")
        ax.set_title(f"{'median' if stat else 'mean'} over trials", fontsize=9)
    h, lab = axes[0].get_legend_handles_labels()
    fig.legend(h, lab, fontsize=7, loc="lower center", ncol=2, frameon=False)
    first = rows[0] if rows else {}
    parts = [f"N={n}" if n else None, f"K={k}" if k else None, f"d={d}" if d else None,
             f"epsilon={first['epsilon']:g}" if "epsilon" in first else None,
             f"delta={delta:g}" if delta is not None else None,
             f"trials={max(int(r['trials']) for r in rows)}" if rows else None]
    settings = ", ".join(p for p in parts if p)
    fig.suptitle(textwrap.fill(
        f"Record-level DP by clipping (Liu, Scaglione & Peisert 2025, Fig. 13), Sec. V-A synthetic data: {settings}; "
        "as published: change-one-record analysis; kl-sound: sound mode, replace-one adjacency", 120), fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)

STUDIES = {
    "iris": Study("iris", run_iris, "Iris: KL vs epsilon per mechanism and first-feature densities at eps=2 (Liu, Scaglione & Peisert (2025) Figs 6-7)",
                  add_arguments=_iris_args, default_trials=100),
    "mnist": Study("mnist", run_mnist, "MNIST-style PCA -> DP-GMM classifier: KL and test accuracy vs epsilon (Figs 10-11)",
                   add_arguments=lambda p: (_mnist_common_args(p), p.add_argument(
                       "--mechanisms", default=None,
                       help="comma list of mechanisms (kl-exact: design variant exact-kl; kl-sound: record-level sound mode)")),
                   default_trials=20),
    "mnist-mlp": Study("mnist-mlp", run_mnist_mlp,
                       "DP-GMM synthetic data -> MLP accuracy vs iteration, references and DP-SGD (Fig. 12)",
                       add_arguments=_mlp_args, default_trials=5),
    "record-level": Study("record-level", run_record_level, "Record-level DP by clipping: KL vs clipping bound B at eps=1 (Fig. 13)",
                          add_arguments=_record_args, default_trials=50),
}
