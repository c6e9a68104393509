"""scripts/tabular_peers.py, the parts that need no peer installed (< 5 s): ``prepare`` reproduces the study's
split and bounds, the column maps agree with numpy's digitize, rows follow the study's schema and merge by
id, and a peer that does not import gives "not installed" rows in a peers.json the study can read."""
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tp(load_script):
    return load_script("scripts/tabular_peers.py")


def test_prepare_is_the_studys_split_and_bounds(tp, tmp_path):
    from sklearn.model_selection import train_test_split

    from torchdpgmm.data.tables import load_table

    man = tp.prepare(tmp_path, tables=["wine"])
    z = np.load(tmp_path / "wine.npz")
    t = load_table("wine")
    Xtr, Xte, ytr, yte = train_test_split(t.X, t.y, test_size=0.2, stratify=t.y, random_state=0)
    np.testing.assert_array_equal(z["Xtr"], Xtr)
    np.testing.assert_array_equal(z["yte"], yte)
    # wine documents no bounds: the study's stand-in is the training split's min-max
    np.testing.assert_array_equal(z["lower"], Xtr.min(0))
    np.testing.assert_array_equal(z["upper"], Xtr.max(0))
    assert int(z["n_classes"]) == 3
    assert man["tables"]["wine"]["n_train"] == len(Xtr)
    assert json.loads((tmp_path / "manifest.json").read_text())["tables"]["wine"]["d"] == 13


def test_discretise_matches_numpy_digitize(tp):
    rng = np.random.default_rng(0)
    lo, hi, bins = np.array([-1.0, 0.0, 10.0]), np.array([1.0, 5.0, 12.0]), 7
    X = rng.uniform(lo - 0.5, hi + 0.5, size=(500, 3))
    X[:3] = [lo, hi, (lo + hi) / 2]  # the bounds themselves and the middle
    ref = np.column_stack([np.clip(np.digitize(X[:, j], np.linspace(lo[j], hi[j], bins + 1)[1:-1]), 0, bins - 1)
                           for j in range(3)])
    B = tp.discretise(X, lo, hi, bins)
    np.testing.assert_array_equal(B, ref)
    assert B.min() == 0 and B.max() == bins - 1
    edges = [np.linspace(lo[j], hi[j], bins + 1) for j in range(3)]
    mid = np.column_stack([(edges[j][:-1] + edges[j][1:])[B[:, j]] / 2 for j in range(3)])
    np.testing.assert_allclose(tp.undiscretise(B, lo, hi, bins), mid, atol=1e-12)
    # a midpoint falls back into its own bin
    np.testing.assert_array_equal(tp.discretise(mid, lo, hi, bins), B)


def test_rows_have_the_studys_schema_and_merge_by_id(tp):
    study = json.loads((ROOT / "docs/results/tabular/tabular.json").read_text())["rows"]
    dpl = [r for r in study if r["method"].startswith("diffprivlib")][0]
    assert set(tp.ROW_KEYS) == set(dpl)  # the study's own peer rows carry exactly these fields
    r = tp.make_row("wine", 1.0, 0, "smartnoise MST", "synthetic->hgb", "(eps, delta)-DP", 3.0, 0.5, "ran", bins=8)
    assert list(r)[:len(tp.ROW_KEYS)] == list(tp.ROW_KEYS) and r["bins"] == 8
    old = [r, {**r, "downstream": "synthetic->logreg"}]
    new = [{**r, "accuracy": 0.7}]
    merged = tp.merge_rows(old, new)
    assert len(merged) == 2 and [m["accuracy"] for m in merged if m["downstream"] == "synthetic->hgb"] == [0.7]


def test_uninstalled_peer_gives_status_rows_the_study_reads(tp, tmp_path):
    import importlib.util

    from torchdpgmm.experiments import tabular

    if importlib.util.find_spec("dpmm") is not None:
        pytest.skip("dpmm is installed here")
    tp.prepare(tmp_path / "data", tables=["wine"])
    tp.main(["run", str(tmp_path / "data"), str(tmp_path / "out"), "--peer", "dpmm", "--draws", "2"])
    pj = json.loads((tmp_path / "out" / "peers.json").read_text())
    rows = pj["rows"]
    assert len(rows) == 2 * 2 * 2  # 2 methods x 2 draws x 2 downstream models
    assert all(r["status"].startswith("not installed") and r["accuracy"] is None for r in rows)
    assert {r["method"] for r in rows} == {"dpmm PrivBayes", "dpmm MST"}
    assert pj["runs"][0]["tables_done"] == ["wine"] and "--peer dpmm" in pj["runs"][0]["command"]
    # the study's target computation reads these rows: no accuracy, no peer value; one with an accuracy counts
    ours = [{"table": "wine", "epsilon": 1.0, "draw": 0, "method": "DPGaussianMixture[tied]",
             "downstream": "synthetic->hgb", "accuracy": 0.6}]
    t = tabular.compute_targets(ours, rows)["eps1_synthetic_vs_best_peer"]["per_table"]["wine"]
    assert t["best_peer"] is None
    mst = [r for r in rows if r["method"] == "dpmm MST" and r["downstream"] == "synthetic->hgb"]
    tp.main(["fill", str(tmp_path / "data"), str(tmp_path / "out"), "--peer", "dpmm", "--draws", "3"])
    filled = json.loads((tmp_path / "out" / "peers.json").read_text())["rows"]
    assert len(filled) == 3 * 2 * 2 and filled[:len(rows)] == rows  # only the missing draw 2 added
    assert {r["status"] for r in filled[len(rows):]} == {tp.FILL_STATUS}
    t = tabular.compute_targets(ours, [*rows, {**mst[0], "accuracy": 0.7}])
    p = t["eps1_synthetic_vs_best_peer"]["per_table"]["wine"]
    assert p["best_peer_method"] == "dpmm MST synthetic->hgb" and p["best_mst"] == pytest.approx(0.7)


def test_bad_arguments_exit_2(tp, tmp_path):
    with pytest.raises(SystemExit) as e:
        tp.main(["run", str(tmp_path), "--peer", "dpmm", "--methods", "aim"])
    assert e.value.code == 2
    assert not (tmp_path / "peers.json").exists()


def test_fit_limits_are_cut_to_the_deadline(tp):
    assert tp.fit_limits(100.0, None, None) == (100.0, 400.0)  # no deadline: wall default 4 x CPU
    assert tp.fit_limits(100.0, 150.0, None) == (100.0, 150.0)
    assert tp.fit_limits(100.0, None, 1000.0, now=940.0) == (60.0, 60.0)  # 60 s left cuts both
    assert tp.fit_limits(100.0, 300.0, 1000.0, now=800.0) == (100.0, 200.0)


def test_merge_replaces_rows_by_id_and_adds_each_run_once(tp, tmp_path):
    r = tp.make_row("wine", 1.0, 0, "smartnoise MST", "synthetic->hgb", "(eps, delta)-DP", 3.0, 0.5, "ran")
    here = tmp_path / "here"
    tp.write_peers(here / "peers.json", [r, {**r, "draw": 1}], ["n"], {"started": "t0", "command": "a"})
    other = tmp_path / "other" / "peers.json"
    tp.write_peers(other, [{**r, "accuracy": 0.9}, {**r, "draw": 2}], ["n"], {"started": "t1", "command": "b"})
    argv = ["merge", str(other), str(here)]
    tp.main(argv)
    tp.main(argv)  # merging twice changes nothing
    pj = json.loads((here / "peers.json").read_text())
    assert sorted((x["draw"], x["accuracy"]) for x in pj["rows"]) == [(0, 0.9), (1, 0.5), (2, 0.5)]
    assert [x["command"] for x in pj["runs"]] == ["a", "b"]
