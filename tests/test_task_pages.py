"""The measured tables of the task pages (docs/budget.md, docs/synthetic-data.md, docs/montecarlo.md), of
docs/realdata.md and docs/decisions.md are rendered from committed JSON by scripts/task_pages.py; the budget
table's JSON is recomputed here by scripts/budget_composition.py and compared with an independent
closed form."""
import json
import math
from pathlib import Path

import pytest
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]


def test_task_page_blocks_are_up_to_date(load_script):
    assert load_script("scripts/task_pages.py").main(["--check"]) == 0, "run: python scripts/task_pages.py"


def test_a_stale_block_is_reported(load_script, tmp_path, monkeypatch):
    mod = load_script("scripts/task_pages.py")
    page = tmp_path / "budget.md"
    page.write_text("x\n<!-- generated: budget-composition -->\nold numbers\n<!-- /generated -->\n")
    monkeypatch.setattr(mod, "blocks", lambda: {"budget-composition": (page, lambda: "NEW")})
    assert mod.main(["--check"]) == 1
    assert mod.main([]) == 0 and "NEW" in page.read_text() and "old numbers" not in page.read_text()
    assert mod.main(["--check"]) == 0


def _gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps with delta(eps) <= delta for mu-GDP (Dong, Roth & Su 2019, Cor. 2.13), by bisection (scipy)."""
    d = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


def test_budget_composition_json_matches_the_gdp_closed_form(load_script, tmp_path):
    """k Gaussian releases of sensitivity 1 and std sigma are sqrt(k)/sigma-GDP; the committed JSON and a fresh
    run agree with that closed form, and PLD agrees with GDP (exact for Gaussians)."""
    mod = load_script("scripts/budget_composition.py")
    committed = json.loads((ROOT / "docs" / "results" / "budget" / "composition.json").read_text())
    assert mod.main(["--out", str(tmp_path / "c.json")]) == 0
    fresh = json.loads((tmp_path / "c.json").read_text())
    sigma = committed["config"]["sigma"]
    for c, f in zip(committed["rows"], fresh["rows"]):
        assert c["releases"] == f["releases"]
        ref = _gdp_epsilon(math.sqrt(c["releases"]) / sigma, committed["config"]["delta"])
        for row in (c, f):
            assert row["gdp_epsilon"] == pytest.approx(ref, rel=1e-6)
            assert row["pld_epsilon"] == pytest.approx(ref, rel=1e-3)
            assert row["rdp_epsilon"] >= row["gdp_epsilon"]
            assert row["basic_epsilon"] == pytest.approx(0.5 * row["releases"])
