"""Peers of the ``tabular`` study, run from their own environments (issue 26 item 5).

Two steps, so that every peer sees exactly the study's split and public bounds:

    PYTHONPATH=. /work/main/.venv/bin/python scripts/tabular_peers.py prepare DIR
    /work/venvs/PEER/bin/python scripts/tabular_peers.py run DIR [OUT] --peer PEER [--methods ...]
        [--epsilons 1] [--draws 1] [--first-draw 0] [--tables a,b] [--time-limit CPU_S] [--wall-limit S] [--bins 8]
    python3 scripts/tabular_peers.py fill DIR [OUT] --peer PEER ...   # 'not attempted' rows for the rest
    python3 scripts/tabular_peers.py merge OTHER/peers.json [OUT]      # rows and run records of another run

Many fits side by side (the lent GPU machine's 16 CPU cores): ``scripts/tabular_peers_batch.sh JOBS DIR OUT
WORKERS SECONDS`` runs one ``run`` per line of JOBS (``scripts/tabular_peers_device_jobs.txt`` and
``scripts/tabular_peers_device_jobs_2.txt`` are the lists run on 2026-11-26), all with ``--deadline`` (no fit starts with under 30 s left before it; each fit's limits are cut
to what is left), into one OUT/peers.json; ``merge`` then brings its rows here. On that machine the peer's
pure-Python wheels were installed with ``pip install --no-deps --ignore-requires-python --target`` beside its
own numpy / pandas / scikit-learn / jax (smartnoise-synth declares Python < 3.12; MST and AIM ran on 3.12; to
fit the 64 MiB that travel to that machine, opendp's shared library was stripped of its debug symbols with
``strip --strip-unneeded`` and the wheel re-zipped, and opacus, used by DP-CTGAN only, was left behind);
the versions are in each run's ``environment``. The same seed does not give the same synthesizer draw across
environments (jax versions), so a draw index names a seed, not a reproducible result.

``prepare`` (the project's environment) writes, per table, the study's 80/20 stratified split
(``torchdpgmm.experiments.tabular._split``, seed 0) and its bounds (``_bounds``: documented public bounds, or
the training split's min-max as the study's stand-in) to ``DIR/NAME.npz``, and ``DIR/manifest.json``.
``run`` needs only numpy, pandas, scikit-learn and the peer; it merges its rows into ``OUT/peers.json``
(default ``docs/results/tabular``), replacing rows with the same (table, epsilon, draw, method, downstream),
and rewrites the file after every table, so a run cut short leaves its finished tables.

Peers (``--peer``), delta = 1e-5 where the peer takes one:

- ``diffprivlib``: GaussianNB (Vaidya, Shafiq, Basu & Hong 2013) and LogisticRegression (objective
  perturbation, Chaudhuri, Monteleoni & Sarwate 2011), Holohan et al. 2019; pure eps-DP. Exactly as the study
  calls them: GaussianNB with ``bounds=(lower, upper)`` on the rows clipped into the bounds;
  LogisticRegression on the rows mapped into the centred unit box of the bounds with ``data_norm = sqrt(d)/2``
  (the ball that holds the box). Adjacency: diffprivlib takes the record count n as public and bounds a
  sum's change by ``upper - lower`` (replacing one record), not add/remove.
- ``snsynth`` (smartnoise-synth): MST (McKenna, Miklau & Sheldon 2021), AIM (McKenna, Mullins, Sheldon &
  Miklau 2022) on the discretised table; DP-CTGAN (Rosenblatt et al. 2020) on the continuous columns with the
  public bounds (``MinMaxTransformer``) and the label one-hot. Add/remove (private-pgm's Gaussian
  measurements of sensitivity 1; DP-SGD's per-example clipping).
- ``dpmm``: PrivBayes (Zhang et al. 2017) and MST, Mahiou et al. 2025, on the discretised table.

Discretisation (MST, AIM, PrivBayes): every column into ``--bins`` equal-width bins over the study's bounds
(``discretise``), the label a categorical column; every bin and class is declared as a public category (a
transformer / domain fitted on a frame of all categories, never on the data), so no budget goes to
preprocessing and nothing is read off the data. Synthetic rows are mapped back to bin midpoints
(``undiscretise``). A synthesizer samples min(N_train, the study's max_synth) rows; scikit-learn's
LogisticRegression and HistGradientBoostingClassifier (the study's ``_downstream``: same settings, hgb max_iter
from the study's config) are trained on them and tested on the real held-out split. Each fit runs in a child
process killed after ``--time-limit`` seconds; a killed or failed fit is a row with accuracy None and its
status. A peer that does not import is recorded as "not installed".

Install recipe (outside the repository, one environment per peer; torch first, from the machine's local CPU
wheel, so that opacus does not pull a multi-GB CUDA build). Versions each run used are recorded in
``peers.json`` ``runs[*].environment``; this session's: diffprivlib 0.6.6 + scikit-learn 1.5.2; smartnoise-synth
1.0.8 + mbi 1.1.0 + opacus 0.14.0 + torch 2.13.0+cpu; dpmm 0.1.9 (+ numpy 1.26.4, scikit-learn 1.5.0).

    python3 -m venv /work/venvs/diffprivlib
    /work/venvs/diffprivlib/bin/pip install "diffprivlib==0.6.6" "scikit-learn<1.6" pandas
    python3 -m venv /work/venvs/snsynth
    /work/venvs/snsynth/bin/pip install torch==2.13.0
    /work/venvs/snsynth/bin/pip install smartnoise-synth==1.0.8 scikit-learn packaging
    python3 -m venv /work/venvs/dpmm
    /work/venvs/dpmm/bin/pip install dpmm==0.1.9

Clashing pins (why three environments, and none of them the project's): diffprivlib 0.6.6 imports
``sklearn.tree._tree.DOUBLE``, gone in scikit-learn >= 1.6 (the project runs 1.9); dpmm 0.1.9 pins
numpy==1.26.4, pandas==2.1.0, scikit-learn==1.5.0, disjoint-set==0.7.4 (smartnoise-synth needs >= 0.9);
smartnoise-synth 1.0.8 pins opacus<0.15 (the project's "opacus" extra wants >= 1.4) and imports ``packaging``
without declaring it. pyproject's ``tabular-peers`` extra is the diffprivlib + smartnoise-synth set.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

DELTA = 1e-5
EPSILONS = (0.5, 1.0, 2.0, 5.0)
ROW_KEYS = ("table", "epsilon", "draw", "downstream", "privacy", "method", "fit_seconds", "accuracy", "status")
ROW_ID = ("table", "epsilon", "draw", "method", "downstream")
METHODS = {"diffprivlib": ("gaussiannb", "logreg"), "snsynth": ("mst", "aim", "dpctgan"), "dpmm": ("privbayes", "mst")}
LABEL = {("diffprivlib", "gaussiannb"): "diffprivlib GaussianNB", ("diffprivlib", "logreg"): "diffprivlib LogisticRegression",
         ("snsynth", "mst"): "smartnoise MST", ("snsynth", "aim"): "smartnoise AIM",
         ("snsynth", "dpctgan"): "smartnoise DP-CTGAN", ("dpmm", "privbayes"): "dpmm PrivBayes", ("dpmm", "mst"): "dpmm MST"}
PRIVACY = {"diffprivlib": "pure eps-DP (delta = 0)", "snsynth": "(eps, delta)-DP", "dpmm": "(eps, delta)-DP"}
ADJACENCY = {"diffprivlib": "replace-one (n public)", "snsynth": "add-remove", "dpmm": "add-remove"}
PACKAGE = {"diffprivlib": "diffprivlib", "snsynth": "snsynth", "dpmm": "dpmm"}
DIST = {"diffprivlib": "diffprivlib", "snsynth": "smartnoise-synth", "dpmm": "dpmm"}


# ----------------------------------------------------------------------------------------------- prepare
def prepare(out: Path, seed: int = 0, tables: list[str] | None = None) -> dict:
    """The study's split and bounds for every table (or ``tables``) -> ``out/NAME.npz`` + ``manifest.json``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from torchdpgmm.data.tables import available_tables, load_table
    from torchdpgmm.experiments.tabular import _bounds, _split

    out.mkdir(parents=True, exist_ok=True)
    manifest = {"seed": seed, "split": "80/20 stratified (torchdpgmm.experiments.tabular._split)", "tables": {}}
    for name in tables or available_tables():
        t = load_table(name)
        Xtr, Xte, ytr, yte = _split(t.X, t.y, seed)
        b, src = _bounds(t, Xtr)
        n_classes = int(t.y.max()) + 1  # the table's documented label set, as the study takes it
        np.savez_compressed(out / f"{name}.npz", Xtr=Xtr, Xte=Xte, ytr=ytr, yte=yte, lower=np.asarray(b.lower, float),
                 upper=np.asarray(b.upper, float), n_classes=n_classes)
        manifest["tables"][name] = {"n_train": len(Xtr), "n_test": len(Xte), "d": int(Xtr.shape[1]),
                                    "classes": n_classes, "bounds_source": src}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


# ------------------------------------------------------------------------------------- the column maps
def discretise(X: np.ndarray, lower: np.ndarray, upper: np.ndarray, bins: int) -> np.ndarray:
    """Bin index ``floor(bins * (clip(x) - lower) / (upper - lower))`` in ``0..bins-1`` per column (the upper
    bound itself falls into the last bin; a value outside the bounds is clipped into them first)."""
    U = (np.clip(X, lower, upper) - lower) / (upper - lower)
    return np.minimum(np.floor(U * bins), bins - 1).astype(np.int64)


def undiscretise(B: np.ndarray, lower: np.ndarray, upper: np.ndarray, bins: int) -> np.ndarray:
    """Bin midpoints ``lower + (b + 1/2) (upper - lower) / bins`` (inside the bounds)."""
    return lower + (np.asarray(B, float) + 0.5) * (upper - lower) / bins


def to_centred_unit(X: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``clip((X - lower) / (upper - lower), 0, 1) - 1/2``: the study's centred unit box (Bounds.to_unit - 0.5)."""
    return np.clip((X - lower) / (upper - lower), 0.0, 1.0) - 0.5


def make_row(table, epsilon, draw, method, downstream, privacy, fit_seconds, accuracy, status, **extra) -> dict:
    """One row in the study's schema (``ROW_KEYS``), extra fields after them."""
    return {"table": table, "epsilon": epsilon, "draw": draw, "downstream": downstream, "privacy": privacy,
            "method": method, "fit_seconds": fit_seconds, "accuracy": accuracy, "status": status, **extra}


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with every row that ``new`` re-measures (same ``ROW_ID``) replaced, order kept."""
    key = lambda r: tuple(r.get(k) for k in ROW_ID)  # noqa: E731
    fresh = {key(r) for r in new}
    return [r for r in old if key(r) not in fresh] + list(new)


# ------------------------------------------------------------------------------------------- downstream
def _downstream(hgb_iter: int):
    """The study's downstream models (torchdpgmm.experiments.tabular._downstream), rebuilt here because the
    peer environments do not hold torchdpgmm."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"logreg": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
            "hgb": lambda: HistGradientBoostingClassifier(max_iter=hgb_iter, random_state=0)}


def synthetic_accuracy(Xs, ys, Xte, yte, hgb_iter: int) -> dict[str, float]:
    """Accuracy on the real test split of each downstream model trained on synthetic rows (one synthetic class
    only: that class everywhere, as the study does)."""
    out = {}
    for name, make in _downstream(hgb_iter).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = np.full(len(Xte), ys[0]) if len(np.unique(ys)) < 2 else make().fit(Xs, ys).predict(Xte)
        out[name] = float(np.mean(pred == yte))
    return out


# ------------------------------------------------------------------------------------------ diffprivlib
def diffprivlib_rows(name, z, eps, draw, seed=0) -> list[dict]:
    """The study's diffprivlib calls (tabular._diffprivlib_rows): same bounds, data_norm, random_state."""
    from diffprivlib.models import GaussianNB, LogisticRegression

    lo, hi, rs = z["lower"], z["upper"], seed * 1000 + draw
    base = dict(table=name, epsilon=eps, draw=draw, downstream="direct", privacy=PRIVACY["diffprivlib"])
    extra = {"adjacency": ADJACENCY["diffprivlib"], "delta": 0.0}
    rows = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nb = GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=rs).fit(np.clip(z["Xtr"], lo, hi), z["ytr"])
    s = time.perf_counter() - t0
    rows.append(make_row(**base, method=LABEL["diffprivlib", "gaussiannb"], fit_seconds=s,
                         accuracy=float(np.mean(nb.predict(z["Xte"]) == z["yte"])), status="ran", **extra))
    Utr, Ute = to_centred_unit(z["Xtr"], lo, hi), to_centred_unit(z["Xte"], lo, hi)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = LogisticRegression(epsilon=eps, data_norm=np.sqrt(Utr.shape[1]) / 2, random_state=rs).fit(Utr, z["ytr"])
    s = time.perf_counter() - t0
    rows.append(make_row(**base, method=LABEL["diffprivlib", "logreg"], fit_seconds=s,
                         accuracy=float(np.mean(lr.predict(Ute) == z["yte"])), status="ran", **extra))
    return rows


# ---------------------------------------------------------------------------------------- synthesizers
def public_categories(cards: list[int], columns: list[str]):
    """A frame listing every category of every column (column j cycles 0..cards[j]-1): public facts only,
    used to fit the peers' category maps so that no domain is read off the data."""
    import pandas as pd

    m = max(cards)
    return pd.DataFrame({c: np.arange(m) % k for c, k in zip(columns, cards)})


def _snsynth_discrete(method, B, cards, eps, n):
    """smartnoise-synth MST / AIM on integer columns whose categories are declared from ``cards``."""
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform import LabelTransformer, TableTransformer

    cols = [f"c{j}" for j in range(B.shape[1])]
    tt = TableTransformer([LabelTransformer(nullable=False) for _ in cols])
    tt.fit(public_categories(cards, cols))
    s = Synthesizer.create(method, epsilon=eps, delta=DELTA, verbose=False)
    t0 = time.perf_counter()
    s.fit(pd.DataFrame(B, columns=cols), transformer=tt, preprocessor_eps=0.0)
    fit_s = time.perf_counter() - t0
    return fit_s, np.asarray(pd.DataFrame(s.sample(n)), dtype=float)


def _snsynth_dpctgan(X, y, lo, hi, n_classes, eps, n):
    """smartnoise-synth DP-CTGAN on the continuous columns (MinMaxTransformer with the public bounds) and the
    label one-hot (categories declared from the public class set); the peer's default hyper-parameters, CPU."""
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform import ChainTransformer, LabelTransformer, MinMaxTransformer, OneHotEncoder, TableTransformer

    cols = [f"x{j}" for j in range(X.shape[1])]
    tt = TableTransformer([MinMaxTransformer(lower=float(a), upper=float(b), negative=True, nullable=False)
                           for a, b in zip(lo, hi)] + [ChainTransformer([LabelTransformer(nullable=False), OneHotEncoder()])])
    m = max(n_classes, 2)
    pub = pd.DataFrame({c: np.where(np.arange(m) % 2 == 0, a, b) for c, a, b in zip(cols, lo, hi)})
    pub["label"] = np.arange(m) % n_classes
    tt.fit(pub)
    df = pd.DataFrame(np.clip(X, lo, hi), columns=cols)
    df["label"] = y
    # the peer's default batch of 500 exceeds the small tables (opacus refuses a sample rate above 1)
    batch = int(min(500, len(X) - len(X) % 2))
    s = Synthesizer.create("dpctgan", epsilon=eps, delta=DELTA, cuda=False, verbose=False, batch_size=batch)
    t0 = time.perf_counter()
    s.fit(df, transformer=tt, preprocessor_eps=0.0)
    fit_s = time.perf_counter() - t0
    S = np.asarray(pd.DataFrame(s.sample(n)), dtype=float)
    return fit_s, S, S[:, :-1]


def _fit_sample(peer, method, z, eps, n, bins, seed, q):
    """Child process: fit one synthesizer, sample ``n`` rows, put ("ok", Xs, ys, fit_s, sample_s) or ("error", why)."""
    try:
        np.random.seed(seed)
        try:
            import torch

            torch.manual_seed(seed)
            torch.set_num_threads(1)  # 2 shared cores
        except Exception:  # noqa: BLE001 - torch is optional for the marginal-based peers
            pass
        lo, hi, K = z["lower"], z["upper"], int(z["n_classes"])
        t0, c0 = time.perf_counter(), time.process_time()
        if peer == "snsynth" and method == "dpctgan":
            fit_s, S, Xs = _snsynth_dpctgan(z["Xtr"], z["ytr"], lo, hi, K, eps, n)
        else:
            B = np.column_stack([discretise(z["Xtr"], lo, hi, bins), z["ytr"]])
            cards = [bins] * (B.shape[1] - 1) + [K]
            fit = _snsynth_discrete if peer == "snsynth" else _dpmm_discrete
            fit_s, S = fit(method, B, cards, eps, n)
            Xs = undiscretise(S[:, :-1], lo, hi, bins)
        # CPU seconds of fit + sample together (the peers' samplers are cheap next to their fits)
        q.put(("ok", Xs, S[:, -1].astype(np.int64), fit_s, time.process_time() - c0, time.perf_counter() - t0 - fit_s))
    except Exception as e:  # noqa: BLE001 - reported in the row
        q.put(("error", f"failed: {type(e).__name__}: {str(e)[:200]}"))


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, all its threads (``/proc/PID/stat`` fields 14-15), in seconds."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _wait(p, q, cpu_limit: float, wall_limit: float):
    """The child's result, or None once it has used ``cpu_limit`` CPU seconds or ``wall_limit`` wall seconds."""
    t0, cpu = time.perf_counter(), 0.0
    while p.is_alive():
        try:
            return q.get(timeout=1.0), cpu, time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - queue.Empty: keep waiting
            cpu = max(cpu, _cpu_seconds(p.pid))
            if cpu > cpu_limit or time.perf_counter() - t0 > wall_limit:
                return None, cpu, time.perf_counter() - t0
    try:
        return q.get(timeout=2.0), cpu, time.perf_counter() - t0
    except Exception:  # noqa: BLE001 - the child died without a result
        return ("error", "failed: the fitting process died without a result"), cpu, time.perf_counter() - t0


def synthesizer_rows(peer, method, name, z, eps, draw, bins, time_limit, max_synth, hgb_iter, seed=0,
                     wall_limit=None) -> list[dict]:
    """One fit of one synthesizer in a child process, killed once it has used ``time_limit`` CPU seconds (or
    ``wall_limit`` wall seconds: the machine is shared), then the downstream rows."""
    n = int(min(len(z["Xtr"]), max_synth))
    wall_limit = wall_limit or 4 * time_limit
    extra = {"adjacency": ADJACENCY[peer], "delta": DELTA, "n_synthetic": n, "cpu_limit_s": time_limit,
             "wall_limit_s": wall_limit, "bins": None if method == "dpctgan" else bins}
    ctx = mp.get_context("spawn")  # a fresh interpreter: no OpenMP / torch state inherited through fork
    q = ctx.Queue()
    p = ctx.Process(target=_fit_sample, args=(peer, method, dict(z), eps, n, bins, seed * 1000 + draw, q))
    load = os.getloadavg()[0]
    p.start()
    res, cpu, wall = _wait(p, q, time_limit, wall_limit)
    if p.is_alive():
        p.kill()
    p.join()
    base = dict(table=name, epsilon=eps, draw=draw, privacy=PRIVACY[peer], method=LABEL[peer, method])
    extra.update(load_average=round(load, 1), process_cpu_seconds=round(cpu, 1), process_wall_seconds=round(wall, 1))
    if res is None or res[0] != "ok":
        status = (f"timed out: {cpu:.0f} CPU s / {wall:.0f} wall s (limits {time_limit:g} CPU s, "
                  f"{wall_limit:g} wall s)") if res is None else res[1]
        return [make_row(**base, downstream=f"synthetic->{d}", fit_seconds=None, accuracy=None,
                         status=status, **extra) for d in ("logreg", "hgb")]
    _, Xs, ys, fit_s, fit_cpu, sample_s = res
    acc = synthetic_accuracy(Xs, ys, z["Xte"], z["yte"], hgb_iter)
    return [make_row(**base, downstream=f"synthetic->{d}", fit_seconds=fit_s, accuracy=acc[d], status="ran",
                     fit_cpu_seconds=fit_cpu, sample_seconds=sample_s, **extra) for d in ("logreg", "hgb")]


def _dpmm_discrete(method, B, cards, eps, n):
    """dpmm's MST / PrivBayes pipeline with its own DP binning disabled (the columns are already bins) and the
    domain given as the public cardinalities; compress=True (the peer's default)."""
    import pandas as pd
    from dpmm.pipelines import MSTPipeline, PrivBayesPipeline

    cols = [f"c{j}" for j in range(B.shape[1])]
    pipe = {"mst": MSTPipeline, "privbayes": PrivBayesPipeline}[method](
        epsilon=eps, delta=DELTA, disable_processing=True, n_jobs=1)
    seed = int(np.random.randint(2**31 - 1))  # from the child's seeded global state
    t0 = time.perf_counter()
    pipe.fit(pd.DataFrame(B.astype(np.int64), columns=cols), domain=dict(zip(cols, map(int, cards))), random_state=seed)
    fit_s = time.perf_counter() - t0
    return fit_s, np.asarray(pipe.generate(n_records=n, random_state=seed + 1)[cols], dtype=float)


# ------------------------------------------------------------------------------------------------ run
NOTES = [
    "Peers of the tabular study, on exactly its split and bounds (scripts/tabular_peers.py prepare writes them "
    "with torchdpgmm.experiments.tabular._split/_bounds); rows in the study's schema, merged by the study.",
    "diffprivlib GaussianNB / LogisticRegression: pure eps-DP (delta = 0) under diffprivlib's own adjacency, "
    "which takes n as public and bounds a record's influence by replacing it (not add/remove as the DP GMM).",
    "smartnoise MST / AIM and dpmm MST / PrivBayes run on columns cut into equal-width bins over the study's "
    "bounds (bins field), the label categorical; every bin and class declared public, no preprocessing budget. "
    "Synthetic rows are bin midpoints: within-bin detail is lost, which costs these peers accuracy on "
    "continuous tables; more bins cost them noise.",
    "smartnoise DP-CTGAN runs on the continuous columns with the study's bounds (MinMaxTransformer) and its "
    "default hyper-parameters on CPU except batch_size = min(500, N_train rounded down to even) (the default "
    "500 exceeds the small tables and opacus refuses a sample rate above 1); it trains until its own accountant's eps passes the target, so the model "
    "it releases may have spent up to one epoch more than eps (the peer's accounting, not ours).",
    "Each synthesizer fit runs in a child process killed once it has used cpu_limit_s CPU seconds (all its "
    "threads, read from /proc) or wall_limit_s wall seconds, whichever comes first: status 'timed out: ...', "
    "accuracy None. The limit is in CPU time because the machine is shared (2 cores, load average ~12 during "
    "these runs, recorded per row as load_average): a fit got ~10-15% of a core, so wall time was several "
    "times the CPU time. fit_seconds of a finished fit is the wall time of fit() alone (fit_cpu_seconds: fit "
    "and sampling), both inflated by the shared machine; they are no like-for-like timing.",
    "Tables run smallest n*d first; a synthesizer that timed out on skip-after tables is marked 'not run' on "
    "the larger rest. Rows absent for a (table, eps, draw, method) were not attempted (no time left in the "
    "session); each run's record (runs) lists its command and tables_done.",
]


def _versions(peer) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for d in (DIST[peer], "numpy", "scikit-learn", "pandas", "scipy", "torch", "opacus", "mbi", "opendp", "jax"):
        try:
            out[d] = version(d)
        except PackageNotFoundError:
            pass
    return out


def _study_config(out: Path) -> dict:
    """max_synth and hgb_iter of the study's committed run beside OUT (its defaults otherwise)."""
    cfg = {}
    f = out / "tabular.json"
    if f.is_file():
        cfg = json.loads(f.read_text()).get("config", {})
    return {"max_synth": int(cfg.get("max_synth") or 4000), "hgb_iter": int(cfg.get("hgb_iter") or 100)}


def write_peers(path: Path, rows: list[dict], notes: list[str] | None, run_info: dict | list[dict]) -> None:
    """Merge ``rows`` into ``path`` (see ``merge_rows``), set ``notes`` (None: keep the file's) and add the run
    record(s) ``run_info`` (one replaces an earlier record of the same run: same ``started`` and ``command``);
    under an exclusive lock, since runs of different peers may share the file."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _write_peers(path, rows, notes, [run_info] if isinstance(run_info, dict) else list(run_info))


def _write_peers(path: Path, rows: list[dict], notes: list[str] | None, runs: list[dict]) -> None:
    pj = json.loads(path.read_text()) if path.is_file() else {}
    pj["study"] = "tabular-peers"
    pj["rows"] = merge_rows(pj.get("rows", []), rows)
    if notes:  # every run of this script writes the same notes; per-run facts sit in runs
        pj["notes"] = list(notes)
    key = lambda r: (r.get("started"), r.get("command"))  # noqa: E731
    fresh = {key(r) for r in runs}
    pj["runs"] = [r for r in pj.get("runs", []) if key(r) not in fresh] + runs
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(pj, indent=1, default=float))
    tmp.replace(path)


def run(a) -> None:
    data, out = a.data, a.out
    manifest = json.loads((data / "manifest.json").read_text())
    names = [t for t in manifest["tables"] if not a.tables or t in a.tables]
    names.sort(key=lambda t: manifest["tables"][t]["n_train"] * manifest["tables"][t]["d"])  # fast tables first
    methods = a.methods or list(METHODS[a.peer])
    eps_list = a.epsilons or [1.0]
    study = _study_config(out)
    try:
        __import__(PACKAGE[a.peer])
        have = None
    except Exception as e:  # noqa: BLE001 - any import failure means the peer cannot run here
        have = f"not installed ({type(e).__name__}: {str(e)[:120]})"
    info = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "peer": a.peer, "methods": methods,
            "epsilons": eps_list, "draws": a.draws, "first_draw": a.first_draw, "tables_planned": names, "tables_done": [],
            "time_limit_s": a.time_limit, "deadline": a.deadline, "bins": a.bins, **study,
            "command": " ".join([sys.executable, "scripts/tabular_peers.py", *a.argv]), "environment": _versions(a.peer),
            "cpu": f"{os.cpu_count()} cores (shared)"}
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # as the study: 2 shared cores
    except Exception:  # noqa: BLE001
        pass
    t_start = time.perf_counter()
    timeouts = dict.fromkeys(methods, 0)
    rows = []  # every row of this run, re-merged at each write (a concurrent writer cannot lose them for good)
    for name in names:
        z = dict(np.load(data / f"{name}.npz"))
        for eps in eps_list:
            for draw in range(a.first_draw, a.first_draw + a.draws):
                for m in methods:
                    if have is not None:
                        rows += [make_row(name, eps, draw, LABEL[a.peer, m], d, PRIVACY[a.peer], None, None, have)
                                 for d in (("direct",) if a.peer == "diffprivlib" else ("synthetic->logreg", "synthetic->hgb"))]
                    elif a.peer == "diffprivlib":
                        rows += [r for r in diffprivlib_rows(name, z, eps, draw) if r["method"] == LABEL[a.peer, m]]
                    elif a.deadline is not None and a.deadline - time.time() < MIN_FIT_SECONDS:
                        why = (f"not run: under {MIN_FIT_SECONDS:g} s were left before the run's deadline "
                               f"({time.strftime('%H:%M:%SZ', time.gmtime(a.deadline))})")
                        rows += [make_row(name, eps, draw, LABEL[a.peer, m], d, PRIVACY[a.peer], None, None, why)
                                 for d in ("synthetic->logreg", "synthetic->hgb")]
                    elif timeouts[m] >= a.skip_after:
                        why = (f"not run: timed out on {timeouts[m]} smaller tables at {a.time_limit:g} CPU s "
                               "(tables run smallest n*d first)")
                        rows += [make_row(name, eps, draw, LABEL[a.peer, m], d, PRIVACY[a.peer], None, None, why,
                                          cpu_limit_s=a.time_limit) for d in ("synthetic->logreg", "synthetic->hgb")]
                    else:
                        cpu_limit, wall_limit = fit_limits(a.time_limit, a.wall_limit, a.deadline)
                        rows += synthesizer_rows(a.peer, m, name, z, eps, draw, a.bins, cpu_limit,
                                                 study["max_synth"], study["hgb_iter"], wall_limit=wall_limit)
                        timeouts[m] += rows[-1]["status"].startswith("timed out")
                        info["load_average"] = os.getloadavg()
                    r = rows[-1]
                    print(f"{name} eps={eps:g} draw={draw} {r['method']} {r['downstream']}: {r['accuracy']} "
                          f"({r['status']}, {r['fit_seconds'] or 0:.1f} s)", flush=True)
        info["tables_done"].append(name)
        info["seconds"] = time.perf_counter() - t_start
        write_peers(out / "peers.json", rows, NOTES, info)


#: a fit is not started with fewer wall seconds than this left before ``--deadline``
MIN_FIT_SECONDS = 30.0


def fit_limits(time_limit: float, wall_limit: float | None, deadline: float | None,
               now: float | None = None) -> tuple[float, float]:
    """``(cpu_limit, wall_limit)`` of one fit: the run's limits (wall default 4 x cpu), each cut to the wall
    seconds left before ``deadline`` (a Unix time; None: no deadline), so that a batch of runs on a lent
    machine ends before the machine is taken back."""
    wall = wall_limit or 4 * time_limit
    if deadline is None:
        return time_limit, wall
    left = deadline - (time.time() if now is None else now)
    return min(time_limit, left), min(wall, left)


def merge(a) -> None:
    """Merge the rows and run records of another peers.json (``a.data``: e.g. a batch run on a lent machine)
    into ``OUT/peers.json`` (rows with the same id replaced, see ``merge_rows``; each run recorded once)."""
    src = json.loads(Path(a.data).read_text())
    write_peers(a.out / "peers.json", src.get("rows", []), src.get("notes"), src.get("runs", []))


FILL_STATUS = "not run to the end: the session's time ran out (not started, or stopped mid-fit)"


def fill(a) -> None:
    """Rows for every (table, eps, draw, method) of the plan that no run wrote: 'not attempted'."""
    manifest = json.loads((a.data / "manifest.json").read_text())
    path = a.out / "peers.json"
    have = {tuple(r.get(k) for k in ROW_ID) for r in (json.loads(path.read_text())["rows"] if path.is_file() else [])}
    downs = ("direct",) if a.peer == "diffprivlib" else ("synthetic->logreg", "synthetic->hgb")
    rows = [make_row(t, eps, draw, LABEL[a.peer, m], d, PRIVACY[a.peer], None, None, FILL_STATUS)
            for t in manifest["tables"] if not a.tables or t in a.tables for eps in a.epsilons
            for draw in range(a.draws) for m in (a.methods or METHODS[a.peer]) for d in downs
            if (t, eps, draw, LABEL[a.peer, m], d) not in have]
    info = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "peer": a.peer, "step": "fill",
            "rows_added": len(rows), "command": " ".join([sys.executable, "scripts/tabular_peers.py", *a.argv])}
    write_peers(path, rows, NOTES, info)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["prepare", "run", "fill", "merge"])
    ap.add_argument("data", type=Path, help="the prepared folder (merge: the peers.json to merge in)")
    ap.add_argument("out", type=Path, nargs="?", default=Path("docs/results/tabular"))
    ap.add_argument("--peer", choices=sorted(METHODS), default="diffprivlib")
    ap.add_argument("--methods", default="", help="comma-separated, of the peer's: " + str(METHODS))
    ap.add_argument("--epsilons", default="1", help="comma-separated (default 1)")
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--first-draw", type=int, default=0,
                    help="index of the first noise draw (draws first..first+draws-1; a draw's seed is its index)")
    ap.add_argument("--tables", default="")
    ap.add_argument("--time-limit", type=float, default=180.0, help="CPU seconds per synthesizer fit")
    ap.add_argument("--wall-limit", type=float, default=None, help="wall seconds per fit (default 4 x time limit)")
    ap.add_argument("--skip-after", type=int, default=2,
                    help="a synthesizer that timed out on this many tables is not run on the (larger) rest")
    ap.add_argument("--deadline", type=float, default=None,
                    help="Unix time: no fit starts with under 30 s left before it, and every fit's limits are cut "
                         "to the seconds left (a batch on a lent machine)")
    ap.add_argument("--bins", type=int, default=8, help="equal-width bins per column (MST, AIM, PrivBayes)")
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    a.tables = [t for t in a.tables.split(",") if t]
    a.methods = [m for m in a.methods.split(",") if m]
    bad = [m for m in a.methods if m not in METHODS[a.peer]]
    if bad or a.draws < 1 or a.first_draw < 0 or a.bins < 2 or a.time_limit <= 0:
        ap.exit(2, f"tabular_peers: bad arguments ({bad or 'draws >= 1, first draw >= 0, bins >= 2, time limit > 0'})\n")
    a.epsilons = [float(e) for e in a.epsilons.split(",") if e]
    if a.step == "prepare":
        prepare(a.data, tables=a.tables)
    elif a.step == "fill":
        fill(a)
    elif a.step == "merge":
        merge(a)
    else:
        run(a)


if __name__ == "__main__":
    main()
