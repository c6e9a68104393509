"""How k releases add up: the epsilon spent after k identical Gaussian releases, by each accountant.

    python scripts/budget_composition.py [--out docs/results/budget/composition.json]

Each release is one Gaussian mechanism of L2 sensitivity 1 calibrated to (epsilon0, delta0) = (0.5, 1e-6)
by the analytic Gaussian rule (Balle & Wang 2018; ``torchdpgmm.privacy.analytic_gaussian_sigma``). After k
releases the script asks every accountant of ``torchdpgmm.privacy`` for the epsilon at the budget's delta
(1e-5): GDP (exact for Gaussians, Dong, Roth & Su 2019), PLD (dp-accounting's privacy loss distributions),
RDP (dp-accounting; looser conversion) and zCDP, beside basic composition (k epsilon0 at k delta0, Dwork &
Roth 2014 Thm 3.16). docs/budget.md renders the table from the JSON (``scripts/task_pages.py``).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (benchmarks/_args.py: the command-line checks shared by the benchmarks and scripts)

OUT = ROOT / "docs" / "results" / "budget" / "composition.json"
EPS0, DELTA0, DELTA, KS = 0.5, 1e-6, 1e-5, (1, 2, 5, 10, 20, 50)


def compute() -> dict:
    from torchdpgmm.privacy import (GaussianEvent, GDPAccountant, PLDAccountant, RDPAccountant, ZCDPAccountant,
                                    analytic_gaussian_sigma)

    sigma = float(analytic_gaussian_sigma(EPS0, DELTA0))
    rows = []
    for k in KS:
        row = {"releases": k, "basic_epsilon": k * EPS0, "basic_delta": k * DELTA0}
        for name, acc in (("gdp", GDPAccountant()), ("pld", PLDAccountant()), ("rdp", RDPAccountant()),
                          ("zcdp", ZCDPAccountant())):
            row[f"{name}_epsilon"] = float(acc.compose(GaussianEvent(1.0, sigma), count=k).get_epsilon(DELTA))
        rows.append(row)
    return {"config": {"epsilon_per_release": EPS0, "delta_per_release": DELTA0, "delta": DELTA,
                       "sensitivity": 1.0, "sigma": sigma, "calibration": "analytic Gaussian (Balle & Wang 2018)"},
            "rows": rows,
            "written_at_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    _args.check_out(p, a.out)
    res = compute()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["rows"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
