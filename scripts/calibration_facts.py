"""Facts about the Gaussian calibrations quoted in docs/core.md, written to JSON.

* the analytic Gaussian sigma (Balle & Wang 2018) for unit sensitivity at (eps, delta) = (1, 1e-5);
* the smallest epsilon at which the rule of condition (10) of Liu, Scaglione & Peisert (2025),
  ``sigma = sqrt(2 ln(2/delta)) / eps``, gives less noise than the analytic Gaussian mechanism needs,
  i.e. above which that rule is not (eps, delta)-DP (at delta = 1e-5).

Usage: ``python scripts/calibration_facts.py --out scripts/results/calibration``
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from scipy import optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)
from torchdpgmm.privacy import analytic_gaussian_sigma, gaussian_delta, paper_gaussian_sigma  # noqa: E402


def paper_rule_threshold(delta: float) -> float:
    """Smallest eps where the paper's sigma falls below the analytic sigma (bracketed root)."""
    gap = lambda e: paper_gaussian_sigma(e, delta) - analytic_gaussian_sigma(e, delta)  # noqa: E731
    return optimize.brentq(gap, 1.0, 100.0, xtol=1e-10)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output folder (writes calibration_facts.json)")
    args = p.parse_args(argv)
    _args.check_out(p, args.out, folder=True)
    delta = 1e-5
    threshold = paper_rule_threshold(delta)
    facts = {
        "delta": delta,
        "analytic_sigma_eps1": float(analytic_gaussian_sigma(1.0, delta)),
        "paper_sigma_eps1": float(paper_gaussian_sigma(1.0, delta)),
        "paper_rule_not_dp_above_eps": threshold,
        "paper_rule_delta_at_eps_10": float(gaussian_delta(paper_gaussian_sigma(10.0, delta), 10.0)),
    }
    assert math.isfinite(threshold)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration_facts.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
