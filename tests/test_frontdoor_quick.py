"""Issue 27 item 10: an explicit flag always beats ``--quick``, in every study family, through the command line.

Each test runs ``torchdpgmm experiment STUDY --quick`` with explicit flags and stops the study at its first
heavy call (monkeypatched to record its arguments and raise), then checks that the explicit values, not the
quick defaults, reached that call. The flags are given at values the quick mode would shrink, and one at
its own default value (an explicit flag wins even when it equals the default)."""
from __future__ import annotations

import types

import pytest
import torch

from torchdpgmm.cli import main


class _Stop(Exception):
    pass


def _stopper(seen: dict, **named):
    """A stand-in that records its positional arguments under ``named`` (name -> index) and stops the study."""
    def fake(*args, **kwargs):
        seen.update({k: (args[i] if i < len(args) else kwargs.get(k)) for k, i in named.items()})
        seen["kwargs"] = kwargs
        raise _Stop
    return fake


def _run(argv, tmp_path):
    with pytest.raises(_Stop):
        main([*argv, "--out", str(tmp_path / "o")])


def test_synthetic_family_trials_epsilons_n_and_grid(monkeypatch, tmp_path):
    from torchdpgmm.experiments import synthetic

    seen: dict = {}
    monkeypatch.setattr(synthetic, "kl_sweep", _stopper(seen, trials=0, n=1, eps=4))
    _run(["experiment", "fig2", "--quick", "--trials", "7", "--n", "80", "--epsilons", "1,3"], tmp_path)
    assert (seen["trials"], seen["n"], list(seen["eps"])) == (7, 80, [1.0, 3.0])  # quick: 3, 60, [0.5, 2]
    seen.clear()
    _run(["experiment", "fig3", "--quick", "--trials", "5", "--grid", "70,90"], tmp_path)
    assert (seen["trials"], seen["n"]) == (5, 70)  # quick: 3 trials, grid [60, 100]
    seen.clear()
    _run(["experiment", "fig2", "--quick"], tmp_path)  # nothing explicit: the quick defaults
    assert (seen["trials"], seen["n"], list(seen["eps"])) == (3, 60, [0.5, 2.0])


def test_xi_family_trials_sizes_and_num_test(monkeypatch, tmp_path):
    from torchdpgmm.experiments import xi, xi_parkinson

    seen: dict = {}
    monkeypatch.setattr(xi, "xi_trials", _stopper(seen, n=1, trials=2, num_test=4))
    _run(["experiment", "xi-fig1", "--quick", "--trials", "9", "--sizes", "3000", "--num-test", "50000"], tmp_path)
    assert (seen["n"], seen["trials"], seen["num_test"]) == (3000, 9, 50_000)  # quick: 500, 6, 2000
    seen.clear()
    monkeypatch.setattr(xi_parkinson, "bayes_error_mc", lambda *a, **k: torch.tensor(0.1))
    monkeypatch.setattr(xi_parkinson, "parkinson_trials", _stopper(seen, n=1, trials=2, num_test=5))
    _run(["experiment", "xi-parkinson", "--quick", "--trials", "8", "--sizes", "700", "--num-test", "3000"], tmp_path)
    assert (seen["n"], seen["trials"], seen["num_test"]) == (700, 8, 3000)  # quick: 500, 4, 2000


def test_em_family_trials_and_components(monkeypatch, tmp_path):
    from torchdpgmm.experiments import em

    seen: dict = {}

    def fake_sweep(name, Xtr, Xte, cfg, opts, rows, seed_offset):
        seen.update(trials=Xtr.shape[0], opts=opts)
        raise _Stop

    monkeypatch.setattr(em, "_sweep", fake_sweep)
    _run(["experiment", "ais", "--quick", "--trials", "5", "--iterations", "10", "--max-components", "4",
          "--epsilons", "2", "50"], tmp_path)
    assert seen["trials"] == 5  # quick: 2
    assert (seen["opts"]["iterations"], seen["opts"]["max_components"], seen["opts"]["epsilons"]) == (10, 4, [2.0, 50.0])
    seen.clear()
    _run(["experiment", "em-synthetic", "--quick", "--components", "2"], tmp_path)
    assert seen["opts"]["components"] == 2  # an explicit --components 2 is not replaced by this data set's 3


def test_realdata_family_iris_record_level_and_mnist_mlp_grid(monkeypatch, tmp_path):
    import torchdpgmm.montecarlo as mc
    import torchdpgmm.pipelines.dpsgd as dpsgd
    from torchdpgmm.experiments import realdata

    seen: dict = {}
    monkeypatch.setattr(realdata, "_try_release", _stopper(seen, eps=4))
    _run(["experiment", "iris", "--quick", "--trials", "6", "--epsilons", "0.5"], tmp_path)
    assert tuple(seen["eps"].shape) == (1, 6)  # one epsilon x 6 trials (quick: 3 trials)
    seen.clear()
    monkeypatch.setattr(mc, "synthetic_data", _stopper(seen, T=0, n=1))
    _run(["experiment", "record-level", "--quick", "--trials", "7", "--n", "1000"], tmp_path)
    assert (seen["T"], seen["n"]) == (7, 1000)  # quick: 4, 300
    # mnist-mlp: the configuration the command line builds, then the DP-SGD grid it resolves
    configs: list = []

    def stop_features(config):
        configs.append(config)
        raise _Stop

    monkeypatch.setattr(realdata, "_features", stop_features)
    _run(["experiment", "mnist-mlp", "--quick", "--trials", "4", "--dpsgd-grid", "0.5:3,0.1:2"], tmp_path)
    cfg = configs[-1]
    calls: list = []

    def fake_train(*a, epochs, lr, **k):
        calls.append((lr, epochs))
        return {"final_accuracy": 0.5, "noise_multiplier": 1.0, "epsilon_spent": 1.0, "iterations": [0],
                "accuracy": [0.5], "opacus": "x"}

    monkeypatch.setattr(dpsgd, "opacus_available", lambda: True)
    monkeypatch.setattr(dpsgd, "opacus_version", lambda: "x")
    monkeypatch.setattr(dpsgd, "train_dpsgd", fake_train)
    F = types.SimpleNamespace(X_train=torch.zeros(10, 2), y_train=torch.zeros(10, dtype=torch.long),
                              X_test=torch.zeros(4, 2), y_test=torch.zeros(4, dtype=torch.long))
    realdata._dpsgd_rows(cfg, F, [1.0], 1e-5, [])
    assert calls == [(0.5, 3), (0.1, 2)]  # quick: [(0.2, 1)]
    assert cfg.trials == 4 and cfg.is_given("trials")


def test_audit_family_draws_and_trials(monkeypatch, tmp_path):
    from torchdpgmm.experiments import audit

    seen: dict = {}
    real = audit._audit_options

    def stop_options(config):
        seen["opts"] = real(config)
        raise _Stop

    monkeypatch.setattr(audit, "_audit_options", stop_options)
    _run(["audit", "--quick", "--draws", "100000", "--published-draws", "700"], tmp_path)
    assert (seen["opts"]["draws"], seen["opts"]["published_draws"]) == (100_000, 700)  # quick: 2000, 600
    seen.clear()
    monkeypatch.setattr(audit, "synthetic_data", _stopper(seen, trials=0, N=1))
    _run(["experiment", "sound-utility", "--quick", "--trials", "6", "--num-records", "1000"], tmp_path)
    assert (seen["trials"], seen["N"]) == (6, 1000)  # quick: 4, 300


def test_synthetic_classifier_family_seeds_epsilons_and_dpsgd_grid(monkeypatch, tmp_path):
    from torchdpgmm.experiments import synthetic_classifier as sc

    fake = (torch.zeros(50, 784), torch.zeros(50, dtype=torch.long), torch.zeros(10, 784), torch.zeros(10, dtype=torch.long))
    monkeypatch.setattr(sc, "_load", lambda o, quick: ("fake", *fake))
    monkeypatch.setattr(sc, "_nonprivate", lambda *a, **k: None)
    seen: dict = {"eps": []}

    def release_rows(Xtr, ytr, Xte, yte, eps, o, cfg, dev, config, rows, trials):
        seen["eps"].append(eps)
        seen["seeds"] = config.pick("release_seeds", None, None)

    def dpsgd_run(Xf, yf, Xv, yv, eps, c, o, cfg, dev, g, K):
        seen.setdefault("grid", []).append(c)
        raise _Stop

    monkeypatch.setattr(sc, "_release_rows", release_rows)
    monkeypatch.setattr(sc, "_dpsgd_run", dpsgd_run)
    _run(["experiment", "synthetic-classifier", "--quick", "--epsilons", "2,5", "--release-seeds", "3",
          "--dpsgd-grid", "lr=1e-3;batch=1024;epochs=7;feature_fraction=0.1"], tmp_path)
    assert seen["eps"] == [2.0] and seen["seeds"] == 3  # quick: epsilons [2] of the default, 2 seeds
    assert seen["grid"][0]["epochs"] == 7  # quick: epochs 1


def test_tabular_family_draws(monkeypatch, tmp_path):
    from torchdpgmm.experiments import tabular

    draws: list = []
    monkeypatch.setattr(tabular, "_nonprivate_rows", lambda *a: [])
    monkeypatch.setattr(tabular, "_our_rows", lambda *a: [])

    def peer_rows(tab, eps, draw, *a):
        draws.append(draw)
        if draw == 2:  # the third draw: the explicit --draws 3 was kept
            raise _Stop
        return []

    monkeypatch.setattr(tabular, "_diffprivlib_rows", peer_rows)
    from torchdpgmm.data.tables import available_tables

    _run(["experiment", "tabular", "--quick", "--tables", available_tables()[0], "--epsilons", "1", "--draws", "3"],
         tmp_path)
    assert draws == [0, 1, 2]  # quick: one draw


@pytest.mark.parametrize("study, keys", [("xi-fig1", ("trials", "sizes", "num_test")), ("xi-fig2", ("sigmas", "sizes")),
                                         ("xi-parkinson", ("sizes", "epsilons", "trials")),
                                         ("sound-utility", ("epsilons", "trials"))])
def test_a_quick_study_states_the_settings_it_ran_not_the_full_ones(tmp_path, study, keys):
    import json

    from torchdpgmm.cli import main

    argv = ["experiment", study, "--quick", "--out", str(tmp_path)] + (["--num-test", "3000"] if study == "xi-fig1" else [])
    assert main(argv) == 0
    payload = json.loads((tmp_path / f"{study}.json").read_text())
    cfg, rows = payload["config"], payload["rows"]
    ran = {"trials": {r["trials"] for r in rows if "trials" in r},
           "sizes": {r["n"] for r in rows if r.get("n") is not None},
           "epsilons": {r["epsilon"] for r in rows if r.get("epsilon") is not None},
           "sigmas": {r["sigma"] for r in rows if "sigma" in r}}
    for key in keys:
        if key == "num_test":
            assert cfg["num_test"] == 3000  # an explicit flag beats --quick, in the rows and in the config
        elif key == "trials":
            assert {cfg["trials"]} == ran["trials"], (cfg["trials"], ran["trials"])
        elif study == "xi-parkinson":  # a size panel at epsilon, and an epsilon panel at n = grid_n
            extra = {"sizes": cfg["grid_n"], "epsilons": cfg["epsilon"]}[key]
            assert set(cfg[key]) | {extra} == ran[key], (key, cfg[key], ran[key])
        else:
            assert set(cfg[key]) == ran[key], (key, cfg[key], ran[key])
