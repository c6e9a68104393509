"""Smoke tests of the Xi et al. reproductions (``--quick``) through the CLI."""
from __future__ import annotations

import json

import pytest

from torchdpgmm.cli import main
from torchdpgmm.experiments.xi import PAPER_TABLE1, correlated_model, fig1_model


def test_models_match_the_paper():
    m = fig1_model()
    assert m.weights.tolist() == pytest.approx([0.7, 0.3])
    assert m.covariances[0].diagonal().tolist() == [0.36, 1.21, 3.24, 5.76, 0.64]
    c = correlated_model(3, 2.0)
    assert c.covariances[1].tolist() == [[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]
    assert c.means[1].tolist() == [1.0, 1.0, 1.0] and c.covariances[0].diagonal().tolist() == [1.0] * 3
    assert PAPER_TABLE1[20][5] == 0.05


def test_table1_quick(tmp_path, capsys):
    assert main(["experiment", "xi-table1", "--out", str(tmp_path), "--quick", "--trials", "3",
                 "--num-test", "3000"]) == 0
    out = capsys.readouterr().out
    assert "(0.18)" in out  # the paper's value is printed beside ours
    rows = json.loads((tmp_path / "xi-table1.json").read_text())["rows"]
    assert {"d", "sigma", "bayes_error", "paper_bayes_error"} <= set(rows[0])
    r = rows[0]
    assert (r["d"], r["sigma"], r["paper_bayes_error"]) == (5, 1, 0.18)
    # no-noise plug-in error at n=500 is close to the paper's 0.18 (prior 0.5) even in a tiny run
    assert abs(r["bayes_error"] - 0.18) < 0.03
    assert (tmp_path / "xi-table1.png").exists()


def test_fig1_quick(tmp_path):
    assert main(["experiment", "xi-fig1", "--out", str(tmp_path), "--quick", "--trials", "3",
                 "--num-test", "2000"]) == 0
    payload = json.loads((tmp_path / "xi-fig1.json").read_text())
    rows = payload["rows"]
    assert [r["n"] for r in rows] == [500, 1000]
    for r in rows:
        assert r["nonprivate_error_mean"] < 0.03  # paper: < 0.01 without noise
        assert r["dp_error_mean"] > r["nonprivate_error_mean"]
    assert any("Parkinson" in n for n in payload["notes"])


def test_fig2_quick_flags(tmp_path):
    assert main(["experiment", "xi-fig2", "--out", str(tmp_path), "--quick", "--trials", "2", "--num-test", "1000",
                 "--sigmas", "2", "--sizes", "800", "--cov-bound", "exact"]) == 0
    rows = json.loads((tmp_path / "xi-fig2.json").read_text())["rows"]
    assert len(rows) == 1 and rows[0]["sigma"] == 2.0 and rows[0]["cov_bound"] == "exact" and rows[0]["d"] == 5


def test_compare_quick_or_clear_error(tmp_path, capsys):
    try:
        import torchdpgmm.release  # noqa: F401
    except ImportError:
        assert main(["experiment", "xi-compare", "--out", str(tmp_path), "--quick"]) == 2
        assert "torchdpgmm.release.release" in capsys.readouterr().err
        return
    assert main(["experiment", "xi-compare", "--out", str(tmp_path), "--quick", "--trials", "2",
                 "--num-test", "500", "--sizes", "600", "--mechanisms", "kl", "laplace"]) == 0
    rows = json.loads((tmp_path / "xi-compare.json").read_text())["rows"]
    assert {r["mechanism"] for r in rows} == {"xi-upper", "xi-exact", "nonprivate", "kl", "laplace"}
    assert all(0.0 <= r["bayes_error_mean"] <= 1.0 for r in rows)


def test_theorem41_study_quick(tmp_path):
    assert main(["experiment", "xi-theorem41", "--out", str(tmp_path), "--quick", "--p", "0.95"]) == 0
    rows = json.loads((tmp_path / "xi-theorem41.json").read_text())["rows"]
    by = {(r["quantiles"], r["form"]): r for r in rows}
    assert by[("corrected", "interval")]["holds"] and by[("corrected", "paper")]["holds"]
    assert not by[("paper", "interval")]["holds"]  # printed quantiles: coverage ~0.33 < 0.95^8


def test_one_trial_writes_the_study(tmp_path):
    """One trial has no t-interval (None in the rows): the figures used to refuse it after every trial had
    run (matplotlib's isfinite on None), so nothing was written. The band is now left out."""
    assert main(["experiment", "xi-fig1", "--out", str(tmp_path), "--trials", "1", "--sizes", "200",
                 "--num-test", "1000"]) == 0
    rows = json.loads((tmp_path / "xi-fig1.json").read_text())["rows"]
    assert rows[0]["dp_error_ci_low"] is None and (tmp_path / "xi-fig1.png").exists()
    try:
        import torchdpgmm.release  # noqa: F401
    except ImportError:
        return
    assert main(["experiment", "xi-compare", "--out", str(tmp_path), "--quick", "--trials", "1", "--sizes", "200",
                 "--num-test", "500", "--mechanisms", "kl"]) == 0
    assert (tmp_path / "xi-compare.png").exists() and (tmp_path / "xi-compare.csv").exists()


def test_bad_sizes_are_one_line(tmp_path, capsys):
    """--sizes 0 printed a traceback (torch's RuntimeError, rc 1) after the optimal error had run."""
    assert main(["experiment", "xi-fig1", "--out", str(tmp_path), "--trials", "2", "--sizes", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--sizes must be integers >= 4" in err
    assert main(["experiment", "xi-parkinson", "--out", str(tmp_path), "--trials", "2", "--sizes", "3"]) == 2
    assert "--sizes must be integers >= 4" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
