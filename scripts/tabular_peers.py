"""Synthesizer peers for the ``tabular`` study, run from a separate environment (issue 26 item 5).

Two steps, so that the peers see exactly the study's split and bounds:

    .venv/bin/python scripts/tabular_peers.py prepare DIR          # study's 80/20 split and bounds -> DIR/*.npz
    .venv-peers/bin/python scripts/tabular_peers.py run DIR OUT [--time-limit S] [--tables a,b] [--methods mst,aim]

``run`` fits smartnoise-synth's MST (McKenna, Miklau & Sheldon 2021) and AIM (McKenna et al. 2022) at eps = 1,
delta = 1e-5 on columns discretised into ``--bins`` equal-width bins over the SAME public bounds (the label a
categorical column), samples N_train rows (bin midpoints mapped back into the bounds), trains scikit-learn's
HistGradientBoostingClassifier and LogisticRegression on them and tests on the real held-out split. Each fit
runs in a child process killed after ``--time-limit`` seconds (recorded as "timed out"). A peer that cannot be
imported is recorded as "not installed". Writes OUT/peers.json ({"rows": [...], "notes": [...]}), which the
study merges when it sits beside tabular.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

EPS, DELTA = 1.0, 1e-5


def prepare(out: Path, seed: int = 0) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from torchdpgmm.data.tables import available_tables, load_table
    from torchdpgmm.experiments.tabular import _bounds, _split

    out.mkdir(parents=True, exist_ok=True)
    for name in available_tables():
        t = load_table(name)
        Xtr, Xte, ytr, yte = _split(t.X, t.y, seed)
        b, src = _bounds(t, Xtr)
        np.savez(out / f"{name}.npz", Xtr=Xtr, Xte=Xte, ytr=ytr, yte=yte, lower=b.lower, upper=b.upper,
                 n_classes=int(t.y.max()) + 1, bounds_source=src)
        print(name, Xtr.shape, src)


def _fit_sample(method, df, n, q):
    try:
        from snsynth import Synthesizer

        kw = {"verbose": False} if method == "mst" else {}
        s = Synthesizer.create(method, epsilon=EPS, delta=DELTA, **kw)
        s.fit(df, categorical_columns=list(df.columns), preprocessor_eps=0.0)
        q.put(("ok", s.sample(n).to_numpy()))
    except Exception as e:  # noqa: BLE001 - reported in the row
        q.put(("error", f"{type(e).__name__}: {str(e)[:200]}"))


def run(data: Path, out: Path, time_limit: float, bins: int, tables, methods) -> None:
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows, notes = [], [f"eps={EPS}, delta={DELTA}, {bins} equal-width bins per column over the study's bounds, "
                       f"time limit {time_limit:g} s per fit"]
    try:
        import snsynth  # noqa: F401
        have = "ran"
    except Exception as e:  # noqa: BLE001
        have = f"not installed ({type(e).__name__})"
    for f in sorted(data.glob("*.npz")):
        name = f.stem
        if tables and name not in tables:
            continue
        z = np.load(f)
        lo, hi = z["lower"], z["upper"]
        width = (hi - lo) / bins
        B = np.clip(((np.clip(z["Xtr"], lo, hi) - lo) / width).astype(int), 0, bins - 1)
        df = pd.DataFrame(np.column_stack([B, z["ytr"]]), columns=[f"c{j}" for j in range(B.shape[1])] + ["label"])
        # every bin and class is a public category: pin the domain so the synthesizer does not read it from data
        for m in methods:
            base = {"table": name, "epsilon": EPS, "draw": 0, "method": f"smartnoise {m.upper()}",
                    "privacy": "(eps, delta)-DP", "bins": bins}
            if have != "ran":
                rows.append({**base, "downstream": "synthetic->hgb", "accuracy": None, "fit_seconds": None, "status": have})
                continue
            q = mp.Queue()
            p = mp.Process(target=_fit_sample, args=(m, df, len(df), q))
            t0 = time.perf_counter()
            p.start()
            p.join(time_limit)
            secs = time.perf_counter() - t0
            if p.is_alive():
                p.kill()
                p.join()
                rows.append({**base, "downstream": "synthetic->hgb", "accuracy": None, "fit_seconds": secs,
                             "status": f"timed out after {time_limit:g} s"})
                continue
            st, val = q.get() if not q.empty() else ("error", "no result")
            if st != "ok":
                rows.append({**base, "downstream": "synthetic->hgb", "accuracy": None, "fit_seconds": secs, "status": val})
                continue
            S = np.asarray(val, dtype=float)
            Xs, ys = lo + (S[:, :-1] + 0.5) * width, S[:, -1].astype(int)
            for dn, mk in (("hgb", lambda: HistGradientBoostingClassifier(random_state=0)),
                           ("logreg", lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)))):
                pred = np.full(len(z["yte"]), ys[0]) if len(np.unique(ys)) < 2 else mk().fit(Xs, ys).predict(z["Xte"])
                rows.append({**base, "downstream": f"synthetic->{dn}", "accuracy": float(np.mean(pred == z["yte"])),
                             "fit_seconds": secs, "status": "ran"})
            print(name, m, rows[-1]["accuracy"], f"{secs:.0f} s", flush=True)
            out.mkdir(parents=True, exist_ok=True)
            (out / "peers.json").write_text(json.dumps({"rows": rows, "notes": notes}, indent=2))
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps({"rows": rows, "notes": notes}, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["prepare", "run"])
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path, nargs="?", default=Path("docs/results/tabular"))
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--bins", type=int, default=8)
    ap.add_argument("--tables", default="")
    ap.add_argument("--methods", default="mst,aim")
    a = ap.parse_args()
    if a.step == "prepare":
        prepare(a.data)
    else:
        run(a.data, a.out, a.time_limit, a.bins, [t for t in a.tables.split(",") if t], a.methods.split(","))


if __name__ == "__main__":
    main()
