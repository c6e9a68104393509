"""How many sweeps the truncated sampler's Gibbs fallback needs (torchdpgmm.bounds.GIBBS_SWEEPS).

For released models of the tabular study's tables where rows reach the fallback (64-column digits and 60-column
Sonar with the default covariance, 30-column breast cancer and 33-column Ionosphere with ``"full"``, at eps 1 and
5): class 0's Gaussian restricted to the bounds, ``n`` chains from its untruncated draws clipped into the box, run
for S sweeps; each S is compared with a run of 300 sweeps, and so are two independent runs of 300 sweeps (the
noise floor of the comparison at this ``n``): the largest |z| of a column mean's difference, the largest relative
difference of a column's standard deviation and the largest difference of a correlation. A chain that has not
mixed after S sweeps shows above the floor.

Run: ``python scripts/gibbs_mixing.py`` (writes docs/results/gibbs-mixing.json; ~10 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

import numpy as np
import torch

from torchdpgmm import bounds as B
from torchdpgmm.data.tables import load_table
from torchdpgmm.estimator import DPGaussianMixture
from torchdpgmm.experiments.tabular import DELTA, _bounds, _split

CASES = (("digits", None), ("Sonar", None), ("breast_cancer", "full"), ("Ionosphere", "full"))
EPS = (1.0, 5.0)
SWEEPS = (5, 10, 20, 30, 100)
LONG = 300
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "gibbs-mixing.json"


def compare(a: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    n = len(ref)
    se = np.sqrt(a.var(0) / n + ref.var(0) / n) + 1e-300
    keep = ref.std(0) > 0
    ca, cr = np.corrcoef(a[:, keep].T), np.corrcoef(ref[:, keep].T)
    return {"max_abs_z_mean": float(np.max(np.abs(a.mean(0) - ref.mean(0))[keep] / se[keep])),
            "max_rel_sd": float(np.max(np.abs(a.std(0)[keep] / ref.std(0)[keep] - 1))),
            "max_abs_corr": float(np.max(np.abs(ca - cr)))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    t0, rows = time.time(), []
    for name, cov in CASES:
        tab = load_table(name)
        Xtr, _, ytr, _ = _split(tab.X, tab.y, 0)
        b, _ = _bounds(tab, Xtr)
        classes = sorted(set(tab.y.tolist()))
        for eps in EPS:
            kw = {} if cov is None else {"covariance_type": cov}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = DPGaussianMixture(eps, DELTA, classes=classes, bounds=b, random_state=1, **kw).fit(Xtr, ytr)
            m = est.model_
            d = m.means.shape[-1]
            lo = torch.as_tensor(np.asarray(est.bounds_.lower, dtype=np.float64))
            hi = torch.as_tensor(np.asarray(est.bounds_.upper, dtype=np.float64))
            y = torch.zeros(args.n, dtype=torch.long)
            L = torch.linalg.cholesky(m.covariances[0])

            def run(sweeps: int, seed: int) -> np.ndarray:
                g = torch.Generator().manual_seed(seed)
                x0 = m.means[y] + torch.randn(args.n, d, dtype=torch.float64, generator=g) @ L.mT
                return B._gibbs_inside(x0, m.means[y], m.covariances, lo, hi, g, sweeps, labels=y).numpy()

            ref, ref2 = run(LONG, 1), run(LONG, 2)
            z = m.means[0].numpy() + np.random.default_rng(0).normal(size=(20000, d)) @ L.numpy().T  # untruncated
            inside = float(np.mean(np.all((z >= lo.numpy()) & (z <= hi.numpy()), axis=1)))
            row = {"table": name, "d": d, "epsilon": eps, "covariance_type": est.covariance_type,
                   "class0_mass_inside_estimate": inside,
                   "floor_two_runs_of_300": compare(ref2, ref),
                   "sweeps": {str(s): compare(run(s, 10 + s), ref) for s in SWEEPS}}
            rows.append(row)
            print(name, eps, row["floor_two_runs_of_300"], {k: round(v["max_abs_z_mean"], 1)
                                                           for k, v in row["sweeps"].items()}, flush=True)
    out = {"description": __doc__, "n_chains": args.n, "long_run_sweeps": LONG, "rows": rows,
           "gibbs_sweeps_default": B.GIBBS_SWEEPS, "runtime_s": time.time() - t0}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
