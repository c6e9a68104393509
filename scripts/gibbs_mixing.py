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
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)
from torchdpgmm import bounds as B  # noqa: E402
from torchdpgmm.data.tables import load_table  # noqa: E402
from torchdpgmm.estimator import DPGaussianMixture  # noqa: E402
from torchdpgmm.experiments.tabular import DELTA, _bounds, _split  # noqa: E402

CASES = (("digits", None), ("Sonar", None), ("breast_cancer", "full"), ("Ionosphere", "full"))
EPS = (1.0, 5.0)
SWEEPS = (5, 10, 20, 30, 100)
LONG = 300
OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "gibbs-mixing.json"
#: ``--quick --out PATH``, a smoke run of the same code (tests): one case of each covariance setting, one epsilon,
#: fewer chains and sweeps and a shorter reference run (its length is "long_run_sweeps" in the JSON)
QUICK = {"cases": (("digits", None), ("breast_cancer", "full")), "epsilons": (1.0,), "sweeps": (5, 10), "long": 20,
         "n": 200}


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
    p.add_argument("--n", type=_args.whole(2), default=None, help="chains (default 10000; --quick: 200)")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--quick", action="store_true", help="smoke run on QUICK's settings (needs --out)")
    args = p.parse_args(argv)
    _args.check_quick_out(p, args.quick, args.out)
    _args.check_out(p, args.out)
    cases, epsilons, compared, long = ((QUICK["cases"], QUICK["epsilons"], QUICK["sweeps"], QUICK["long"])
                                       if args.quick else (CASES, EPS, SWEEPS, LONG))
    if args.n is None:
        args.n = QUICK["n"] if args.quick else 10000
    t0, rows = time.time(), []
    for name, cov in cases:
        tab = load_table(name)
        Xtr, _, ytr, _ = _split(tab.X, tab.y, 0)
        b, _ = _bounds(tab, Xtr)
        classes = sorted(set(tab.y.tolist()))
        for eps in epsilons:
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

            ref, ref2 = run(long, 1), run(long, 2)
            z = m.means[0].numpy() + np.random.default_rng(0).normal(size=(20000, d)) @ L.numpy().T  # untruncated
            inside = float(np.mean(np.all((z >= lo.numpy()) & (z <= hi.numpy()), axis=1)))
            row = {"table": name, "d": d, "epsilon": eps, "covariance_type": est.covariance_type,
                   "class0_mass_inside_estimate": inside,
                   "floor_two_runs_of_300": compare(ref2, ref),
                   "sweeps": {str(s): compare(run(s, 10 + s), ref) for s in compared}}
            rows.append(row)
            print(name, eps, row["floor_two_runs_of_300"], {k: round(v["max_abs_z_mean"], 1)
                                                           for k, v in row["sweeps"].items()}, flush=True)
    out = {"description": __doc__, "n_chains": args.n, "long_run_sweeps": long, "rows": rows,
           "gibbs_sweeps_default": B.GIBBS_SWEEPS, "runtime_s": time.time() - t0}
    if args.quick:
        out |= {"quick": True, "epsilons": list(epsilons), "sweeps_compared": list(compared)}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
