"""Figures 1-5 of Liu, Scaglione & Peisert (2025, Sec. V-A): KL divergence of released GMMs on synthetic data.

Data: the Sec. V-A model (:func:`torchdpgmm.montecarlo.synthetic_data`): Dirichlet(1) weights, means
``U[-10,10]^d``, ``Wishart_d(d+1, I)`` covariances, ``N`` i.i.d. points; defaults ``N=1000, K=5, d=3,
delta=1e-5, lambda=1e-3``. The metric is the realised ``KL(released || fitted)`` (Appendix B), averaged
over trials, with a Student-t 95% confidence interval.

* ``fig1`` -- the proposed mechanism (all three design variants) vs epsilon, 200 trials.
* ``fig2`` -- every mechanism vs epsilon (7 values), 100 trials.
* ``fig3`` -- vs the data size N at epsilon = 1.
* ``fig4`` -- vs the number of classes K at N = 1000, epsilon = 1.
* ``fig5`` -- vs the dimension d at K = 5, N = 1000, epsilon = 1.

The paper prints no grids; ours are the ``*_GRID`` constants below (overridable by flags). Every
mechanism sees the same datasets within a study (common random numbers), so differences between
mechanisms are paired. Rows carry ``mechanism``, ``variant``, the swept parameter and the fixed ones,
``mean``, ``ci_low``, ``ci_high`` (linear Student-t interval), ``ci_low_log``, ``ci_high_log`` (the
interval the log-scale figure draws: delta method on the log mean, see
:mod:`torchdpgmm.experiments.plotting`), ``trials``.
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import torch

from torchdpgmm._validation import byte_count, check_no_repeats
from torchdpgmm.experiments import ExperimentConfig, Study, StudyResult

__all__ = ["STUDIES", "MECHANISM_VARIANTS", "kl_sweep", "EPS_GRID", "N_GRID", "K_GRID", "D_GRID"]

# 7 values below ~9.4, where the paper's Gaussian rule stops being (eps, delta)-DP at delta = 1e-5
EPS_GRID = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
N_GRID = (200, 500, 1000, 2000, 5000)
K_GRID = (2, 3, 4, 5, 6, 8, 10)
D_GRID = (2, 3, 4, 5, 6, 8, 10)
#: trials per seeded block of the studies fig1-fig5 (the sweep chooses its own, :func:`torchdpgmm.sweep.auto_block_size`)
BLOCK_SIZE = 40

# (label, mechanism, variant)
MECHANISM_VARIANTS: tuple[tuple[str, str, str | None], ...] = (
    ("kl/as-published", "kl", "as-published"),
    ("kl/global", "kl", "global"),
    ("kl/exact-kl", "kl", "exact-kl"),
    ("colored", "colored", None),
    ("gaussian", "gaussian", None),
    ("laplace", "laplace", None),
    ("r1smg", "r1smg", None),
)
KL_ONLY = tuple(m for m in MECHANISM_VARIANTS if m[1] == "kl")

#: the metric and its unit (KL with natural logarithms) on every figure of this module
Y_LABEL = "KL(released || fitted) in nats, log scale"

DEFAULTS = {"n": 1000, "k": 5, "d": 3, "delta": 1e-5, "lam": 1e-3, "epsilon": 1.0}


def _bytes_per_trial(n: int, k: int, d: int, n_eps: int) -> float:
    # dominant working set: the label-flip difference vectors (K, N, d) of the SDP and the fit's (K, N, d)
    # intermediates (once per dataset, whatever the epsilon grid), plus per-epsilon (K, d, d) parameters;
    # a factor 16 of headroom for solver temporaries
    return 8.0 * 16 * (k * n * d + n_eps * k * d * d * 8)


def kl_sweep(
    trials: int,
    n: int,
    k: int,
    d: int,
    epsilons: Sequence[float],
    delta: float,
    lam: float,
    mechanisms: Sequence[tuple[str, str, str | None]],
    seed: int,
    device: str = "cpu",
    solver: str = "dual",
    memory_budget: float | None = None,
    progress: bool | None = None,
) -> dict[str, list]:
    """Realised KL of every mechanism at every epsilon on shared synthetic datasets, streamed.

    Returns ``{label: [RunningStats per epsilon]}`` (:class:`torchdpgmm.montecarlo.RunningStats`: exact
    mean/variance, log-grid quantiles), so memory is that of one block whatever ``trials``. Trials run in
    fixed blocks of ``BLOCK_SIZE`` (smaller only when one block would not fit ``memory_budget``); each block
    draws its data and all its noise from one generator seeded from ``(seed, block index)`` (see
    :func:`torchdpgmm.montecarlo.run_chunked`), so a trial's draws do not depend on the memory budget. The
    epsilon values form a leading batch dimension of one ``release`` call per mechanism, so the fit and the
    SDPs are solved once per dataset.
    """
    from tqdm.auto import tqdm

    from torchdpgmm.montecarlo import DEFAULT_MEMORY_BUDGET, RunningStats, chunk_size_for_budget, run_chunked

    E = len(epsilons)
    budget = memory_budget or DEFAULT_MEMORY_BUDGET
    block = min(BLOCK_SIZE, chunk_size_for_budget(trials, _bytes_per_trial(n, k, d, E), budget))
    n_chunks = -(-trials // block)
    disable: bool | None = not progress
    if progress is None:  # a bar on long runs (many trials or several chunks), on a terminal only (as the sweep's)
        disable = None if trials >= 50 or n_chunks > 1 else True   # tqdm: None = off unless stderr is a terminal
    bar = tqdm(total=n_chunks * len(mechanisms), desc=f"N={n} K={k} d={d}", unit="mechanism x chunk",
               disable=disable, leave=False)
    stats = {label: [RunningStats() for _ in range(E)] for label, _, _ in mechanisms}

    def one_chunk(T: int, g: torch.Generator) -> None:
        for label, kl in _chunk_kls(T, n, k, d, epsilons, delta, lam, mechanisms, solver, device, g):
            for j in range(E):
                stats[label][j].update(kl[j])
            bar.set_postfix_str(label)
            bar.update(1)

    try:
        run_chunked(one_chunk, trials, seed=seed, device=device, progress=False, combine=lambda parts: None,
                    block_size=block)  # the budget is already in ``block``
    finally:
        bar.close()
    return stats


def _chunk_kls(T, n, k, d, epsilons, delta, lam, mechanisms, solver, device, g):
    """Yield ``(label, kl (E, T))`` for one chunk of ``T`` synthetic datasets, every mechanism."""
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    data = synthetic_data(T, n, k, d, generator=g, device=device)
    X, y = data.X, data.y  # one fit / one SDP per dataset; the epsilon grid broadcasts in front
    eps = torch.tensor(list(epsilons), dtype=X.dtype, device=X.device)[:, None]
    base_design = None
    for label, mech, variant in mechanisms:
        kw: dict[str, Any] = {"mechanism": mech, "mode": "as-published", "generator": g}
        if mech == "kl":
            kw.update(variant=variant, solver=solver, lam=lam)
            if base_design is not None:
                # same data, same SDP: re-design the other variants without re-solving (reduction 1)
                kw["design"] = base_design.at(eps, variant=variant)
        r = release(X, y, k, eps, delta, **kw)
        if mech == "kl" and base_design is None:
            base_design = r.design
        yield label, r.kl


def _rows(stats: dict[str, list], mechanisms, x_name: str, x_values, fixed: dict[str, Any]):
    from torchdpgmm.experiments.plotting import log_interval_columns

    rows = []
    for label, mech, variant in mechanisms:
        for j, x in enumerate(x_values):
            st = stats[label][j]
            if st is None:
                continue
            s = st.summary()
            row = {"mechanism": mech, "variant": variant, "label": label, x_name: x}
            row.update({kk: vv for kk, vv in fixed.items() if kk != x_name})
            row.update(mean=s["mean"], ci_low=s["ci_low"], ci_high=s["ci_high"], median=s["median"],
                       q05=s["q05"], q95=s["q95"], nonfinite=s["nonfinite"], trials=s["n"] + s["nonfinite"],
                       q25=st.quantile(0.25), q75=st.quantile(0.75))  # the figure's interquartile band
            # the interval the log-scale figure draws (delta method on log mean), stored so that every
            # plotted number is in the JSON; ci_low/ci_high is the linear Student-t interval
            row.update(log_interval_columns(float(s["mean"]), float(s["ci_low"]), float(s["ci_high"])))
            rows.append(row)
    return rows


def _plot_factory(x_name: str, title: str, logx: bool):
    """Plot function for :class:`StudyResult`: :func:`torchdpgmm.experiments.plotting.plot_curves` with the
    fixed settings of the rows (the releases run in the default as-published mode, label-flip adjacency).

    The realised KL is heavy-tailed (a few trials carry most of a mean), so the figure draws the median over
    trials with its interquartile band (the rows' ``median``, ``q25``, ``q75``); rows written before the
    quartiles were stored are drawn as means with their 95% interval, and the figure says which."""
    def plot(rows, path):
        from torchdpgmm.experiments.plotting import plot_curves, series_from_rows

        first = rows[0] if rows else {}
        settings = {k: first[k] for k in ("n", "k", "d", "epsilon", "delta", "lam") if k in first and k != x_name}
        settings.update(trials=max((int(r["trials"]) for r in rows), default=0), mode="as-published",
                        adjacency="label-flip")
        statistic = "median" if rows and all("q25" in r and "q75" in r for r in rows) else "mean"
        return plot_curves(series_from_rows(rows, x_name, drawn=("ci_low_log", "ci_high_log"), statistic=statistic),
                           path, x_label={"epsilon": "epsilon (privacy budget, unitless)", "n": "N (records)",
                                          "k": "K (classes)", "d": "d (dimension)"}[x_name],
                           y_label=Y_LABEL, title=title, settings=settings, logx=logx, logy=True,
                           statistic=statistic)

    return plot


def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v.strip()]


def _ints(s: str) -> list[int]:
    return [int(v) for v in s.split(",") if v.strip()]


def _common_args(p: argparse.ArgumentParser, sweep: str) -> None:
    p.add_argument("--n", type=int, default=DEFAULTS["n"], help="data size N (default 1000)")
    p.add_argument("--k", type=int, default=DEFAULTS["k"], help="number of classes K (default 5)")
    p.add_argument("--d", type=int, default=DEFAULTS["d"], help="dimension d (default 3)")
    p.add_argument("--delta", type=float, default=DEFAULTS["delta"], help="delta (default 1e-5)")
    p.add_argument("--lam", type=float, default=DEFAULTS["lam"], help="smoothing lambda of eq. (15) (default 1e-3)")
    p.add_argument("--solver", default="dual", choices=["dual", "cvxpylayers"], help="SDP solver (default dual)")
    if sweep == "epsilon":
        p.add_argument("--epsilons", type=_floats, default=list(EPS_GRID), help="comma-separated epsilon grid")
    else:
        p.add_argument("--epsilon", type=float, default=DEFAULTS["epsilon"], help="epsilon (default 1)")
        grid = {"n": N_GRID, "k": K_GRID, "d": D_GRID}[sweep]
        p.add_argument("--grid", type=_ints, default=list(grid), help=f"comma-separated {sweep} grid")
    p.add_argument("--memory-budget", type=byte_count, default=None,
                   help="bytes of working memory per chunk of trials, e.g. 2e9, 512MiB or 4GB (default 1 GiB, at "
                        "least 16MiB); results are streamed")
    p.add_argument(
        "--mechanisms", default=None,
        help="comma-separated subset of " + ",".join(m[0] for m in MECHANISM_VARIANTS),
    )


def _select(opts: dict, default) -> tuple:
    sel = opts.get("mechanisms")
    if not sel:
        return tuple(default)
    names = [s.strip() for s in sel.split(",") if s.strip()]
    known = {m[0]: m for m in MECHANISM_VARIANTS}
    bad = [s for s in names if s not in known]
    if bad:
        raise ValueError(f"--mechanisms: unknown {bad}; choose from {list(known)}")
    check_no_repeats("--mechanisms", names)   # one label's statistics would take both runs' trials
    return tuple(known[s] for s in names)


def _check_numbers(n: int, k: int, d: int, epsilons: Sequence[float], *, eps_flag: str = "--epsilons",
                   grid: str | None = None) -> None:
    """The study's public sizes and epsilons, named by their flags (one line; the releases' own messages name
    internal parameters such as num_classes, or print a tensor). ``grid``: the parameter ``--grid`` sets."""
    import math

    from torchdpgmm.montecarlo import default_min_class_size

    flags = {p: ("--grid" if p == grid else f"--{p}") for p in ("n", "k", "d")}
    for p, v, lo in (("k", k, 2), ("d", d, 1)):
        if v < lo:
            raise ValueError(f"{flags[p]} must hold values >= {lo}, got {v}" if p == grid else
                             f"{flags[p]} must be >= {lo}, got {v}")
    need = k * default_min_class_size(d)
    if n < need:   # synthetic_data gives every class d + 1 records
        raise ValueError(f"N = {n} ({flags['n']}) is too small for K = {k} ({flags['k']}) classes in d = {d} "
                         f"({flags['d']}) dimensions: each class needs d + 1 = {d + 1} records, so N >= {need}")
    bad = [e for e in epsilons if not (math.isfinite(e) and e > 0)]
    if bad:
        what = "a positive finite number" if eps_flag == "--epsilon" else "positive finite numbers"
        raise ValueError(f"{eps_flag} must be {what}, got {bad[0]:g}")


def _run_eps(cfg: ExperimentConfig, name: str, default_mechs, title: str) -> StudyResult:
    o = dict(DEFAULTS)
    o.update({k: v for k, v in cfg.options.items() if v is not None})
    mechs = _select(cfg.options, default_mechs)
    eps = list(o.get("epsilons", EPS_GRID))
    trials = int(cfg.trials or 100)
    n, k, d = int(o["n"]), int(o["k"]), int(o["d"])
    # --quick shrinks only what the user did not give (ExperimentConfig.pick)
    eps, trials, n = cfg.pick("epsilons", eps, [0.5, 2.0]), cfg.pick("trials", trials, min(trials, 3)), \
        int(cfg.pick("n", n, min(n, 60)))
    check_no_repeats("--epsilons", eps)
    _check_numbers(n, k, d, eps)
    here = tuple(m for m in mechs if not (m[1] == "r1smg" and d <= 2))   # as fig3-fig5: R1SMG needs d > 2
    kls = kl_sweep(trials, n, k, d, eps, o["delta"], o["lam"], here, cfg.seed, cfg.device, o.get("solver", "dual"),
                   memory_budget=o.get("memory_budget"))
    fixed = {"n": n, "k": k, "d": d, "delta": o["delta"], "lam": o["lam"]}
    rows = _rows(kls, here, "epsilon", eps, fixed)
    notes = _ratio_notes(kls, eps)
    if len(here) < len(mechs):
        notes.append(f"r1smg skipped at d={d}: R1SMG needs d > 2 (Ji & Li 2024)")
    return StudyResult(rows=rows, config={"trials": trials, "epsilons": eps, "n": n, "k": k, "d": d,
                                          "mechanisms": [m[0] for m in mechs]},
                       notes=notes, plot=_plot_factory("epsilon", title, True))


def _ratio_notes(kls, eps) -> list[str]:
    notes = []
    if "kl/exact-kl" in kls and "kl/as-published" in kls:
        r = [a.mean / b.mean for a, b in zip(kls["kl/exact-kl"], kls["kl/as-published"])]
        notes.append("mean KL ratio exact-kl / as-published per epsilon: "
                     + ", ".join(f"{e:g}: {float(x):.3g}" for e, x in zip(eps, r)))
    return notes


def _run_param(cfg: ExperimentConfig, name: str, param: str, title: str) -> StudyResult:
    o = dict(DEFAULTS)
    o.update({k: v for k, v in cfg.options.items() if v is not None})
    mechs = _select(cfg.options, MECHANISM_VARIANTS)
    grid = list(o.get("grid", {"n": N_GRID, "k": K_GRID, "d": D_GRID}[param]))
    trials = int(cfg.trials or 100)
    n = int(o["n"])
    trials = cfg.pick("trials", trials, min(trials, 3))  # --quick shrinks only what the user did not give
    grid = list(cfg.pick("grid", grid, {"n": [60, 100], "k": [2, 3], "d": [3, 4]}[param]))
    n = int(cfg.pick("n", n, min(n, 100)))
    eps = float(o["epsilon"])
    check_no_repeats("--grid", grid)   # each grid index seeds its own trials: a repeat is two different rows
    for x in grid:
        _check_numbers(*(int(x) if p == param else v for p, v in (("n", n), ("k", int(o["k"])), ("d", int(o["d"])))),
                       [eps], eps_flag="--epsilon", grid=param)
    per = {m[0]: [] for m in mechs}
    notes = []
    for i, x in enumerate(grid):
        nn, kk, dd = n, int(o["k"]), int(o["d"])
        if param == "n":
            nn = int(x)
        elif param == "k":
            kk = int(x)
        else:
            dd = int(x)
        here = tuple(m for m in mechs if not (m[1] == "r1smg" and dd <= 2))
        if len(here) < len(mechs):
            notes.append(f"r1smg skipped at d={dd}: R1SMG needs d > 2 (Ji & Li 2024)")
        kls = kl_sweep(trials, nn, kk, dd, [eps], o["delta"], o["lam"], here, cfg.seed + 1000 * (i + 1),
                       cfg.device, o.get("solver", "dual"), memory_budget=o.get("memory_budget"))
        for lab in per:
            per[lab].append(kls[lab][0] if lab in kls else None)   # None: mechanism skipped here
    fixed = {"n": n, "k": int(o["k"]), "d": int(o["d"]), "epsilon": eps, "delta": o["delta"], "lam": o["lam"]}
    rows = _rows(per, mechs, param, grid, fixed)
    return StudyResult(rows=rows, config={"trials": trials, "grid": grid, "epsilon": eps,
                                          "mechanisms": [m[0] for m in mechs]},
                       notes=notes, plot=_plot_factory(param, title, param == "n"))


STUDIES = {
    "fig1": Study(
        "fig1",
        lambda cfg: _run_eps(cfg, "fig1", KL_ONLY, "Fig. 1: proposed mechanism, mean KL and 95% CI"),
        "Liu, Scaglione & Peisert (2025) Fig. 1: KL of the proposed mechanism (3 design variants) vs epsilon, 95% CI",
        lambda p: _common_args(p, "epsilon"),
        default_trials=200,
    ),
    "fig2": Study(
        "fig2",
        lambda cfg: _run_eps(cfg, "fig2", MECHANISM_VARIANTS, "Fig. 2: KL vs epsilon"),
        "Liu, Scaglione & Peisert (2025) Fig. 2: KL vs epsilon for every mechanism (N=1000, K=5, d=3, delta=1e-5)",
        lambda p: _common_args(p, "epsilon"),
        default_trials=100,
    ),
    "fig3": Study(
        "fig3",
        lambda cfg: _run_param(cfg, "fig3", "n", "Fig. 3: KL vs N (epsilon = 1)"),
        "Liu, Scaglione & Peisert (2025) Fig. 3: KL vs the data size N at epsilon=1",
        lambda p: _common_args(p, "n"),
        default_trials=100,
    ),
    "fig4": Study(
        "fig4",
        lambda cfg: _run_param(cfg, "fig4", "k", "Fig. 4: KL vs K (N = 1000, epsilon = 1)"),
        "Liu, Scaglione & Peisert (2025) Fig. 4: KL vs the number of classes K at N=1000, epsilon=1",
        lambda p: _common_args(p, "k"),
        default_trials=100,
    ),
    "fig5": Study(
        "fig5",
        lambda cfg: _run_param(cfg, "fig5", "d", "Fig. 5: KL vs d (K = 5, N = 1000, epsilon = 1)"),
        "Liu, Scaglione & Peisert (2025) Fig. 5: KL vs the dimension d at K=5, N=1000, epsilon=1",
        lambda p: _common_args(p, "d"),
        default_trials=100,
    ),
}
