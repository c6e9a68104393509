"""Smoke tests: the EM studies and the EM benchmark run end to end in quick mode."""
import json

import pytest
import torch


def test_ais_study_quick(tmp_path):
    from torchdpgmm.cli import main

    main(["experiment", "ais", "--out", str(tmp_path), "--quick", "--seed", "1"])
    out = json.loads((tmp_path / "ais.json").read_text())
    kinds = {r["kind"] for r in out["rows"]}
    assert kinds == {"loglik_vs_epsilon", "ic_vs_G"}
    methods = {r["method"] for r in out["rows"]}
    assert {"DP-MSNM", "DPGMM", "DP-EM (LLG)", "SAGMM", "EM-GMM (non-private)", "EM-MSNM (non-private)"} <= methods
    assert (tmp_path / "ais.csv").exists() and (tmp_path / "ais.png").exists()
    ll = [r for r in out["rows"] if r["kind"] == "loglik_vs_epsilon"]
    eps = {r["epsilon"] for r in ll if r["method"] == "DP-EM (LLG)"}
    sag = [r for r in ll if r["method"] == "SAGMM"]
    assert {r["epsilon"] for r in sag} == eps and len(eps) >= 2
    for r in sag:  # finite held-out log-likelihoods, evaluated on rows not used for fitting
        assert r["finite_trials"] == r["trials"] and r["n"] + r["n_test"] == 202
        assert r["mode"] == "sound" and r["adjacency"] == "replace-one"
    assert {r["mode"] for r in ll if r["method"] in ("DPGMM", "DP-MSNM")} == {"as-published"}


def test_em_synthetic_study_quick(tmp_path):
    from torchdpgmm.cli import main

    main(["experiment", "em-synthetic", "--out", str(tmp_path), "--quick"])
    out = json.loads((tmp_path / "em-synthetic.json").read_text())
    assert any("3D Road" in n for n in out["notes"])
    assert all(r["G"] >= 1 for r in out["rows"])


def test_bench_em_smoke(tmp_path, load_script):
    mod = load_script("benchmarks/bench_em.py")
    out = tmp_path / "bench.json"
    threads = torch.get_num_threads()
    try:
        mod.main(["--smoke", "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    res = json.loads(out.read_text())
    assert res["max_rel_loglik_diff"] < 1e-6
    assert res["skew_normal"]["max_rel_loglik_diff"] < 1e-8  # same EM as the direct implementation
    assert res["torch_threads"] >= 1


def test_load_ais():
    from torchdpgmm.data.ais import AIS_NUMERIC_COLUMNS, load_ais

    X = load_ais()
    assert X.shape == (202, len(AIS_NUMERIC_COLUMNS)) and X.dtype == torch.float64
    pair, cols = load_ais(["BMI", "Bfat"], return_columns=True)
    assert cols == ("BMI", "Bfat")
    # first row of the CSV: BMI 20.56, Bfat 19.75
    assert pair[0].tolist() == [20.56, 19.75]
    with pytest.raises(ValueError, match="columns"):
        load_ais(["sex"])
