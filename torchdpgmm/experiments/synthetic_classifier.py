"""Study ``synthetic-classifier``: one accounted DP pipeline -> synthetic data -> classifiers, vs DP-SGD.

``torchdpgmm experiment synthetic-classifier --dataset fashion-mnist --epsilons 0.5,1,2,5 --out DIR`` writes
``DIR/synthetic-classifier.json`` (+ CSV, PNG). Per epsilon and release seed, the whole pipeline of
:mod:`torchdpgmm.pipelines.synthetic_classifier` (14x14 DCT -> noisy mean -> DP PCA -> unit ball -> sound
class mixture) is released once on the full training set, and that ONE release feeds several classifiers
at no extra privacy cost: the released model's Bayes rule (``dpgmm-bayes``), an MLP trained on fresh
synthetic samples (``dpgmm-synthetic-mlp``) and a scikit-learn logistic regression on synthetic samples
(``dpgmm-synthetic-logreg``). The same pipeline with one Gaussian per class (``dpgmm-bayes-1comp``) shows
what several components add.

Baselines: DP-SGD (``dp-sgd``) on features from the same DP PCA, whose budget is charged to DP-SGD too
(dp-accounting PLD over the feature step and all sampled steps), the SAME adjacency as the release,
tuned over a stated grid on a validation split carved from the training set (never on test), then
retrained on the full training set; it pays its budget per model. Non-private references at the same
``d``: QDA on non-private PCA features (``non-private-bayes``) and an MLP on them (``non-private-mlp``).
"""
from __future__ import annotations

import itertools
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

from torchdpgmm.experiments import ExperimentConfig, Study, StudyResult, mean_ci

DELTA = 1e-5
DEFAULT_GRID = "lr=1e-3,3e-3,1e-2;batch=1024,4096;epochs=5,15;feature_fraction=0.1,0.3"
#: DP image generators scored the same way (train on synthetic, test on real) at eps = 1: DPImageBench
#: (CCS 2025) and Dockhorn et al. (2023), as quoted in the project's issue #20; reference lines only
PUBLISHED_EPS1 = {
    "mnist": {"DP-MERF": 80.0, "DPDM": 95.3, "PrivImage": 94.0, "DP-FETA": 95.6},
    "fashion-mnist": {"DP-MERF": 62.0, "DPDM": 79.4, "PrivImage": 79.9, "DP-FETA": 81.7},
}


def _floats(s: str) -> list[float]:
    return [float(v) for v in str(s).split(",") if v.strip()]


def parse_grid(spec: str) -> list[dict[str, float]]:
    """``"lr=a,b;batch=..;epochs=..;feature_fraction=.."`` -> the list of all combinations."""
    axes = {}
    for part in spec.split(";"):
        k, v = part.split("=")
        axes[k.strip()] = _floats(v)
    if set(axes) != {"lr", "batch", "epochs", "feature_fraction"}:
        raise ValueError("the DP-SGD grid needs lr, batch, epochs and feature_fraction")
    return [dict(zip(axes, c)) for c in itertools.product(*axes.values())]


def _args(p) -> None:
    p.add_argument("--dataset", default="fashion-mnist", choices=["mnist", "fashion-mnist"])
    p.add_argument("--data-dir", default=None, help="folder of IDX files (fashion-mnist defaults to Debian's)")
    p.add_argument("--epsilons", default="0.5,1,2,5")
    p.add_argument("--delta", type=float, default=DELTA)
    p.add_argument("--adjacency", default="add-remove", choices=["add-remove", "replace-one"],
                   help="the same adjacency for the release and DP-SGD (default add-remove)")
    p.add_argument("--release-seeds", type=int, default=5, help="independent releases per epsilon (noise draws)")
    p.add_argument("--model-seeds", type=int, default=2, help="releases per epsilon that also train MLP/logreg")
    p.add_argument("--dpsgd-seeds", type=int, default=2, help="final DP-SGD runs per epsilon (after tuning)")
    p.add_argument("--dpsgd-grid", default=DEFAULT_GRID, help=f"DP-SGD tuning grid (default {DEFAULT_GRID})")
    p.add_argument("--dpsgd", default="on", choices=["on", "off"])
    p.add_argument("--n-val", type=int, default=10000, help="validation rows carved from the training set")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")


def _load(o, quick):
    from torchdpgmm.pipelines.features import load_image_split

    ds, ddir = o.get("dataset", "fashion-mnist"), o.get("data_dir")
    Xtr, ytr = load_image_split(ds, ddir, "train")
    Xte, yte = load_image_split(ds, ddir, "test")
    if quick:
        Xtr, ytr, Xte, yte = Xtr[:3000], ytr[:3000], Xte[:1000], yte[:1000]
    return ds, Xtr.reshape(Xtr.shape[0], -1), ytr.to(torch.int64), Xte.reshape(Xte.shape[0], -1), yte.to(torch.int64)


def _summary(rows, method, eps, accs, **extra) -> None:
    t = torch.tensor(accs, dtype=torch.float64)
    s = mean_ci(t)
    rows.append({"kind": "summary", "method": method, "epsilon": eps, "accuracy": float(s["mean"]),
                 "accuracy_ci_low": float(s["ci_low"]), "accuracy_ci_high": float(s["ci_high"]),
                 "n_seeds": len(accs), **extra})


def _nonprivate(Xtr, ytr, Xte, yte, fit, val, cfg, dev, gen, rows, notes, quick=False) -> None:
    """QDA and an MLP on non-private PCA features (same transform, d and ball scaling as the pipeline)."""
    from torchdpgmm.pipelines.class_mixture import ClassMixture
    from torchdpgmm.pipelines.dp_pca import DPPCA, project_to_ball
    from torchdpgmm.pipelines.pca import fit_pca
    from torchdpgmm.pipelines.synthetic_classifier import public_transform
    from torchdpgmm.pipelines.trainer import accuracy, train_on_sampler

    F, Ft = public_transform(Xtr, cfg.transform), public_transform(Xte, cfg.transform)
    p = fit_pca(F, cfg.n_components)
    pca = DPPCA(mean=p.mean, components=p.components, eigenvalues=p.explained_variance,
                count=torch.ones((), dtype=torch.float64, device=p.mean.device))
    U, Ut = project_to_ball(F, pca, cfg.radius), project_to_ball(Ft, pca, cfg.radius)
    t0 = time.perf_counter()
    K = int(ytr.max()) + 1
    oh = torch.nn.functional.one_hot(ytr, K).to(U.dtype)
    n = oh.sum(0)
    means = (oh.T @ U) / n.unsqueeze(-1)
    D = U.unsqueeze(0) - means.unsqueeze(1)  # (K, N, d)
    covs = torch.einsum("nk,kni,knj->kij", oh, D, D) / (n - 1)[:, None, None]
    qda = ClassMixture(weights=n / n.sum(), comp_weights=torch.ones(K, 1, dtype=U.dtype, device=U.device),
                       means=means.unsqueeze(1),
                       covariances=covs.unsqueeze(1))  # plain QDA: empirical Gaussian per class, no regularisation
    acc = float((qda.predict(Ut) == yte).double().mean())
    common = {"components_per_class": 1, "accounted": False, "adjacency": None, "hyperparameters": "none (QDA)"}
    rows.append({"kind": "summary", "method": "non-private-bayes", "epsilon": None, "accuracy": acc, "n_seeds": 1,
                 "seconds": time.perf_counter() - t0, **common})

    def real_sampler(n, generator=None):  # drawn on the rows' device with the trainer's (device) generator
        idx = fit[torch.randint(0, len(fit), (n,), generator=generator, device=U.device)]
        return U[idx], ytr[idx]

    t0 = time.perf_counter()
    res = train_on_sampler(real_sampler, d=U.shape[1], num_classes=int(ytr.max()) + 1, n_per_epoch=len(fit),
                           generator=gen, device=dev, validation=(U[val], ytr[val]), max_epochs=2 if quick else 30)
    rows.append({"kind": "summary", "method": "non-private-mlp", "epsilon": None, "accuracy": accuracy(res.model, Ut, yte),
                 "n_seeds": 1, "seconds": time.perf_counter() - t0, **common,
                 "hyperparameters": "Adam 1e-3, batch 256, early stopping on the validation split"})
    notes.append(f"non-private references at d={cfg.n_components}: PCA fitted on the raw training set (not private)")


def _release_rows(Xtr, ytr, Xte, yte, eps, o, cfg, dev, config, rows, trials) -> None:
    """Releases per seed; the first ``model_seeds`` also train an MLP and a logistic regression on synthetic data."""
    from sklearn.linear_model import LogisticRegression

    from torchdpgmm.pipelines.synthetic_classifier import components_rule, release_pipeline
    from torchdpgmm.pipelines.trainer import accuracy, train_on_sampler

    delta, adj = float(o.get("delta", DELTA)), o.get("adjacency", "add-remove")
    K, N = int(ytr.max()) + 1, Xtr.shape[0]
    seeds = int(config.pick("release_seeds", o.get("release_seeds", 5), 2))  # explicit flags beat --quick
    mseeds = min(seeds, int(config.pick("model_seeds", o.get("model_seeds", 2), 1)))
    m_rule = cfg.components_per_class or components_rule(eps)
    # the rule's choice, and the other option for comparison (several components vs one per class)
    m_alt = 1 if m_rule > 1 else 8
    variants = [("dpgmm-bayes", m_rule)] + ([(f"dpgmm-bayes-{m_alt}comp", m_alt)] if eps >= 2 else [])
    acc: dict[str, list[float]] = {}
    secs: dict[str, list[float]] = {}
    common = {"accounted": True, "adjacency": adj, "hyperparameters": "fixed public defaults (PipelineConfig)"}
    for s in range(seeds):
        for method, m in variants:
            from dataclasses import replace

            g = config.generator(10_000 + 100 * s + m)
            t_rel = time.perf_counter()  # the study's own timing: the release carries none
            rel = release_pipeline(Xtr, ytr, num_classes=K, epsilon=eps, delta=delta, adjacency=adj,
                                   config=replace(cfg, components_per_class=m), generator=g)
            t_rel = time.perf_counter() - t_rel
            assert rel.privacy.epsilon <= eps * (1 + 1e-9)
            Ut = rel.features(Xte)
            a = float((rel.model.predict(Ut) == yte).double().mean())
            acc.setdefault(method, []).append(a)
            secs.setdefault(method, []).append(t_rel)
            trials.append({"kind": "trial", "method": method, "epsilon": eps, "seed": s, "accuracy": a,
                           "components_per_class": m, "release_seconds": t_rel,
                           "privacy_epsilon": rel.privacy.epsilon, "blocks": len(rel.privacy.blocks), **common})
            if method != "dpgmm-bayes" or s >= mseeds:
                continue
            def sampler(n, generator=None, _m=rel.model):
                Xs_, ys_ = _m.sample(n, generator=generator)
                return Xs_.to(torch.float32), ys_
            t0 = time.perf_counter()
            res = train_on_sampler(sampler, d=Ut.shape[1], num_classes=K, n_per_epoch=N, generator=g, device=dev,
                                   max_epochs=2 if config.quick else 30)
            a_mlp = accuracy(res.model, Ut, yte)
            t_mlp = time.perf_counter() - t0
            t0 = time.perf_counter()
            Xs, ys = rel.model.sample(N, generator=g)
            lr = LogisticRegression(max_iter=300).fit(Xs.cpu().numpy(), ys.cpu().numpy())  # scikit-learn: host
            a_lr = float((torch.as_tensor(lr.predict(Ut.cpu().numpy())) == yte.cpu()).double().mean())
            t_lr = time.perf_counter() - t0
            for meth, a_, t_ in (("dpgmm-synthetic-mlp", a_mlp, t_mlp), ("dpgmm-synthetic-logreg", a_lr, t_lr)):
                acc.setdefault(meth, []).append(a_)
                secs.setdefault(meth, []).append(t_rel + t_)
                trials.append({"kind": "trial", "method": meth, "epsilon": eps, "seed": s, "accuracy": a_,
                               "components_per_class": m, "train_seconds": t_, **common})
    for method, a in acc.items():
        m = m_alt if method.endswith("comp") else m_rule
        rs = secs[method if method.endswith("comp") else "dpgmm-bayes"]
        _summary(rows, method, eps, a, components_per_class=m, seconds=sum(secs[method]) / len(secs[method]),
                 release_seconds=sum(rs) / len(rs), **common)


def _dpsgd_features(X, y_unused, eps, delta, frac, cfg, adj, g):
    """DP PCA features for DP-SGD (charged ``frac`` of mu^2), whitened by the released eigenvalues."""
    from torchdpgmm.pipelines._privacy import gdp_mu
    from torchdpgmm.pipelines.synthetic_classifier import private_projection, public_transform

    mu_f = gdp_mu(eps, delta) * math.sqrt(frac)
    pca, _ = private_projection(public_transform(X, cfg.transform), mu_f, cfg, adjacency=adj, generator=g)
    scale = pca.eigenvalues.clamp_min(1e-6).sqrt()
    # the DP PCA's released count (noisy under add/remove, the public number of rows under replace-one) is the
    # N of DP-SGD's schedule: already paid for, never the exact private N
    n_released = float(pca.count.reshape(-1)[0])
    return (lambda Z: (pca.transform(public_transform(Z, cfg.transform)) / scale).to(torch.float32)), mu_f, n_released


def _dpsgd_run(Xf, yf, Xe, ye, eps, c, o, cfg, dev, g, num_classes: int):
    from torchdpgmm.pipelines.dpsgd_fast import (calibrate_noise_multiplier, dpsgd_schedule, mlp_logits,
                                                 pipeline_epsilon, train_dpsgd_fast)

    delta, adj = float(o.get("delta", DELTA)), o.get("adjacency", "add-remove")
    K = int(num_classes)  # the classes the DP-GMM rows use (the dataset's, fixed for the study)
    t0 = time.perf_counter()
    feat, mu_f, n_released = _dpsgd_features(Xf, yf, eps, delta, c["feature_fraction"], cfg, adj, g)
    q, steps = dpsgd_schedule(n_released, c["batch"], c["epochs"])  # from the released count, not the private N
    nm = calibrate_noise_multiplier(float(eps), delta, q, steps, adjacency=adj, feature_mu=float(mu_f))
    t1 = time.perf_counter()
    out = train_dpsgd_fast(feat(Xf), yf, num_classes=K, noise_multiplier=nm, sampling_rate=q, steps=steps, lr=c["lr"],
                           generator=g, device=dev, n_public=n_released)
    train_seconds = time.perf_counter() - t1  # the study's own timing; nothing released carries it
    with torch.no_grad():
        pred = mlp_logits(out["params"], feat(Xe).to(dev)).argmax(-1)
    spent = pipeline_epsilon(nm, q, steps, delta, adjacency=adj, feature_mu=mu_f)
    return float((pred == ye.to(pred.device)).double().mean()), {"noise_multiplier": nm, "steps": steps, "epsilon_spent": spent,
                                                 "seconds": time.perf_counter() - t0, "train_seconds": train_seconds}


def _dpsgd_rows(Xtr, ytr, Xte, yte, fit, val, eps, o, cfg, dev, config, rows, trials, notes) -> None:
    grid = parse_grid(o.get("dpsgd_grid", DEFAULT_GRID))
    shrink = config.quick and not config.is_given("dpsgd_grid")  # an explicit --dpsgd-grid beats --quick
    if shrink:
        grid = grid[:1]
    adj = o.get("adjacency", "add-remove")
    K = int(ytr.max()) + 1  # the dataset's classes, as the DP-GMM rows take them (a public fact of the study)
    best = None
    for i, c in enumerate(grid):
        g = config.generator(50_000 + i)
        if shrink:
            c = dict(c, epochs=1)
        a, info = _dpsgd_run(Xtr[fit], ytr[fit], Xtr[val], ytr[val], eps, c, o, cfg, dev, g, K)
        trials.append({"kind": "dpsgd-config", "method": "dp-sgd", "epsilon": eps, "val_accuracy": a, **c, **info,
                       "adjacency": adj})
        if best is None or a > best[0]:
            best = (a, c)
    accs, secs = [], []
    for s in range(int(config.pick("dpsgd_seeds", o.get("dpsgd_seeds", 2), 1))):
        a, info = _dpsgd_run(Xtr, ytr, Xte, yte, eps, best[1], o, cfg, dev, config.generator(60_000 + s), K)
        accs.append(a)
        secs.append(info["seconds"])
        trials.append({"kind": "trial", "method": "dp-sgd", "epsilon": eps, "seed": s, "accuracy": a, **best[1], **info,
                       "accounted": True, "adjacency": adj})
    _summary(rows, "dp-sgd", eps, accs, components_per_class=None, accounted=True, adjacency=adj,
             seconds=sum(secs) / len(secs), hyperparameters=f"tuned on validation over {len(grid)} configs: best {best[1]}",
             val_accuracy=best[0], **{f"chosen_{k}": v for k, v in best[1].items()})


def _write_partial(out, rows, trials, eps, seconds) -> None:
    """Rows so far, after each epsilon (``DIR/synthetic-classifier.partial.json``): a long run that is cut off
    still leaves every finished epsilon on disk; removed once the final JSON is written."""
    import json

    from torchdpgmm.experiments import _jsonable

    Path(out).mkdir(parents=True, exist_ok=True)
    from torchdpgmm.modelfile import atomic_write_text

    atomic_write_text(Path(out) / "synthetic-classifier.partial.json", json.dumps(
        {"last_epsilon": eps, "seconds": seconds, "rows": _jsonable(rows + trials)}, indent=1))


def run(config: ExperimentConfig) -> StudyResult:
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

    o = config.options
    if int(o.get("threads") or 0) > 0:
        torch.set_num_threads(int(o["threads"]))
    load0 = os.getloadavg()
    ds, Xtr, ytr, Xte, yte = _load(o, config.quick)
    cfg = PipelineConfig(n_components=8) if config.quick else PipelineConfig()
    eps_list = _floats(o.get("epsilons", "0.5,1,2,5"))
    if config.quick and not config.is_given("epsilons"):  # an explicit --epsilons beats --quick
        eps_list = eps_list[:1]
    dev = torch.device(config.device)
    # every image on the study's device (releases, DP PCA, classifiers and DP-SGD run there)
    Xtr, ytr, Xte, yte = (t.to(dev) for t in (Xtr, ytr, Xte, yte))
    n_val = min(int(o.get("n_val", 10000)), Xtr.shape[0] // 5)
    # public split rule: a host-side permutation with a CPU generator (the generator rule), then on the device
    perm = torch.randperm(Xtr.shape[0], generator=torch.Generator().manual_seed(12345), device="cpu").to(dev)
    val, fit = perm[:n_val], perm[n_val:]
    rows: list[dict[str, Any]] = []
    trials: list[dict[str, Any]] = []
    adj = o.get("adjacency", "add-remove")
    notes = [f"dataset {ds}: {Xtr.shape[0]} private training images, {Xte.shape[0]} test images; delta {o.get('delta', DELTA)}",
             f"adjacency {adj} for the DP-GMM pipeline AND for DP-SGD (dp-accounting PLD, same relation)",
             f"pipeline defaults (public, chosen on Fashion-MNIST's validation split, fixed for every data set): {cfg.to_dict()}",
             "one release serves every classifier trained from it (Bayes rule, MLP, logistic regression) at no extra "
             "privacy cost; DP-SGD pays its whole budget for ONE model",
             "DP-SGD features: the same DP PCA (its budget share feature_fraction is charged to DP-SGD), whitened by the "
             "released eigenvalues; hyperparameters tuned on a validation split carved from the training set (the "
             "tuning itself is not privacy-accounted, as is usual; the DP-GMM defaults were also chosen on "
             "Fashion-MNIST's training data, and on MNIST are an untouched transfer)"]
    t0 = time.perf_counter()
    _nonprivate(Xtr, ytr, Xte, yte, fit, val, cfg, dev, config.generator(7), rows, notes, quick=config.quick)
    per_eps = []  # wall time of each epsilon (every release, classifier and the whole DP-SGD grid)
    for eps in eps_list:
        t_eps = time.perf_counter()
        _release_rows(Xtr, ytr, Xte, yte, eps, o, cfg, dev, config, rows, trials)
        if o.get("dpsgd", "on") == "on":
            _dpsgd_rows(Xtr, ytr, Xte, yte, fit, val, eps, o, cfg, dev, config, rows, trials, notes)
        per_eps.append({"epsilon": eps, "seconds": time.perf_counter() - t_eps, "load_average_end": os.getloadavg()})
        _write_partial(config.out, rows, trials, eps, time.perf_counter() - t0)
    for r in rows:
        r.setdefault("dataset", ds)
        r.setdefault("d", cfg.n_components)
    refs = [{"kind": "reference", "method": f"published {k}", "epsilon": 1.0, "accuracy": v / 100, "dataset": ds,
             "source": "DPImageBench (CCS 2025); Dockhorn et al. 2023; as quoted in issue #20"}
            for k, v in PUBLISHED_EPS1.get(ds, {}).items()]
    environment = {"load_average_start": load0, "load_average_end": os.getloadavg(), "threads": torch.get_num_threads(),
                   "cpu_count": os.cpu_count(), "device": str(dev), "seconds_total": time.perf_counter() - t0,
                   "seconds_per_epsilon": per_eps}
    study_cfg = {"dataset": ds, "epsilons": eps_list, "adjacency": adj, "pipeline": cfg.to_dict(),
                 "dpsgd_grid": o.get("dpsgd_grid", DEFAULT_GRID), "load": environment,
                 "delta": float(o.get("delta", DELTA)), "n_train": int(Xtr.shape[0])}
    return StudyResult(rows=rows + refs + trials, notes=notes, config=study_cfg,
                       plot=lambda rows_, path: _plot(rows_, path, study_cfg))


def _plot(rows, path: Path, config: dict | None = None) -> None:
    """Test accuracy vs epsilon: mean and 95% Student-t interval over noise draws (the rows' ``accuracy_ci_low``
    / ``accuracy_ci_high``, drawn as stored; a method with one draw has no bar), non-private references
    dashed, published DP image generators at epsilon 1 as crosses; settings in the title."""
    import textwrap

    import matplotlib.pyplot as plt

    c = config or {}
    fig, ax = plt.subplots(figsize=(9, 5.2))
    summ = [r for r in rows if r.get("kind") == "summary"]
    for m in dict.fromkeys(r["method"] for r in summ if r["epsilon"] is not None):
        rr = sorted((r for r in summ if r["method"] == m), key=lambda r: r["epsilon"])
        e = [r["epsilon"] for r in rr]
        a = [r["accuracy"] for r in rr]
        lo = [r["accuracy"] - r["accuracy_ci_low"] if r.get("accuracy_ci_low") is not None else 0 for r in rr]
        hi = [r["accuracy_ci_high"] - r["accuracy"] if r.get("accuracy_ci_high") is not None else 0 for r in rr]
        seeds = sorted({int(r.get("n_seeds") or 1) for r in rr})
        ax.errorbar(e, a, yerr=[lo, hi], marker="o", capsize=3,
                    label=f"{m} ({'/'.join(map(str, seeds))} draws per point)")
    for r in summ:
        if r["epsilon"] is None:
            ax.axhline(r["accuracy"], ls="--", lw=1, color="k" if "bayes" in r["method"] else "0.5",
                       label=f"{r['method']} (no privacy)")
    for r in rows:
        if r.get("kind") == "reference":
            ax.plot([r["epsilon"]], [r["accuracy"]], "x", ms=8, label=r["method"] + " (eps=1, literature)")
    import matplotlib.ticker as mt

    ax.set_xscale("log")
    ticks = sorted({float(r["epsilon"]) for r in summ if r["epsilon"] is not None})
    ax.xaxis.set_minor_formatter(mt.NullFormatter())
    if ticks:
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("epsilon (privacy budget, log scale)"), ax.set_ylabel("test accuracy (fraction correct)")
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    ds = next((r.get("dataset") for r in summ if r.get("dataset")), c.get("dataset", ""))
    d = next((r.get("d") for r in summ if r.get("d")), None)
    adj = sorted({r["adjacency"] for r in summ if r.get("adjacency")})
    n = f"N={c['n_train']} training images" if c.get("n_train") else "the full training split"
    delta = f"delta={c['delta']:g}" if c.get("delta") is not None else "delta as in the JSON config"
    ax.set_title(textwrap.fill(
        f"DP synthetic data for classifiers, {ds}: {n}, DP PCA d={d}, {delta}, adjacency "
        f"{'/'.join(adj) or '?'} for every DP method (releases and DP-SGD); bars: mean and 95% Student-t "
        f"interval over independent noise draws", 105, break_on_hyphens=False), fontsize=8.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


STUDIES = {
    "synthetic-classifier": Study(
        "synthetic-classifier", run,
        "One accounted DP pipeline (DCT -> DP PCA -> DP class mixture) -> synthetic data -> Bayes/MLP/logreg, vs DP-SGD",
        add_arguments=_args),
}
