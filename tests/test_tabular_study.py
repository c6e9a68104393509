"""Smoke test of the tabular study on tiny data (< 5 s): rows, bounds source, and the computed targets."""
import json

import numpy as np
import pytest

from torchdpgmm.experiments import ExperimentConfig, run_study
from torchdpgmm.experiments import tabular


def test_tabular_study_small(tmp_path):
    cfg = ExperimentConfig(out=tmp_path, options={"tables": "ais", "epsilons": "1", "draws": 1, "max_synth": 200})
    payload = run_study("tabular", cfg)
    rows = payload["rows"]
    assert {r["downstream"] for r in rows if r["method"].startswith("DPGaussianMixture")} == \
        {"bayes", "synthetic->logreg", "synthetic->hgb"}
    assert payload["config"]["tables"]["ais"]["bounds_source"] == tabular.TRAIN_MINMAX
    for r in rows:
        assert r["accuracy"] is None or 0.0 <= r["accuracy"] <= 1.0
    dpl = [r for r in rows if r["method"].startswith("diffprivlib")]
    try:
        import diffprivlib.models  # noqa: F401
    except Exception:
        assert dpl and all(r["status"].startswith("not installed") for r in dpl)
    assert json.loads((tmp_path / "tabular.json").read_text())["study"] == "tabular"
    assert (tmp_path / "tabular.csv").is_file() and (tmp_path / "tabular.png").is_file()


def test_targets_computed_from_rows():
    """Hand-made rows with known means: the target fields follow from them (independent of any release)."""
    def row(method, downstream, acc, eps=1.0, draw=0, **kw):
        return {"table": "t", "epsilon": eps, "draw": draw, "method": method, "downstream": downstream,
                "accuracy": acc, **kw}
    rows = [row("DPGaussianMixture[default=full]", "bayes", 0.6, default=True),
            row("DPGaussianMixture[default=full]", "synthetic->hgb", 0.70, draw=0, default=True),
            row("DPGaussianMixture[default=full]", "synthetic->hgb", 0.80, draw=1, default=True),
            row("diffprivlib GaussianNB", "direct", 0.65)]
    peers = [row("smartnoise MST", "synthetic->hgb", 0.755)]
    t = tabular.compute_targets(rows, peers)
    p = t["eps1_synthetic_vs_best_peer"]["per_table"]["t"]
    assert p["best_dp_synthetic"] == pytest.approx(0.75) and p["best_peer"] == pytest.approx(0.755)
    assert p["within_1_point_or_above"] is True and p["above_mst"] is False
    t2 = t["default_release_vs_diffprivlib_gaussiannb"]
    assert t2["met"] is False and t2["per_table_eps"][0]["default_bayes"] == pytest.approx(0.6)


def test_tables_loader_public_bounds():
    from torchdpgmm.data.tables import load_table

    d = load_table("digits")
    assert d.X.shape[1] == 64 and d.public_bounds == (0.0, 16.0)
    assert np.all((d.X >= 0) & (d.X <= 16))
