"""Issue 27 leftovers (items 7, 9, 10, 13): explicit flags beat --quick, huge sample sizes are refused in one
line, failed writes name the user's path, and the Opacus DP-SGD path neither raises on bad rows nor reads N."""
from __future__ import annotations

import pytest

from torchdpgmm.cli import build_parser
from torchdpgmm.experiments import ExperimentConfig


class _Stop(Exception):
    pass


def _config(argv, tmp_path):
    args = build_parser().parse_args(argv + ["--out", str(tmp_path / "o")])
    common = {"out", "trials", "seed", "device", "backend", "quick", "command", "study"}
    options = {k: v for k, v in vars(args).items() if k not in common}
    return ExperimentConfig(out=args.out, trials=args.trials, seed=0, device="cpu", backend="local",
                            quick=args.quick, options=options)


def _seen_floats(monkeypatch, module):
    seen = []
    orig = module._floats

    def spy(s):
        out = orig(s)
        seen.append(out)
        return out

    monkeypatch.setattr(module, "_floats", spy)
    return seen


@pytest.mark.parametrize("quick", [True, False])
def test_explicit_epsilons_beat_quick_iris(monkeypatch, tmp_path, quick):
    import torchdpgmm.data as D
    from torchdpgmm.experiments import realdata as R

    seen = _seen_floats(monkeypatch, R)
    monkeypatch.setattr(D, "load_iris", lambda *a, **k: (_ for _ in ()).throw(_Stop()))
    cfg = _config(["experiment", "iris", "--epsilons", "0.7,3"] + (["--quick"] if quick else []), tmp_path)
    with pytest.raises(_Stop):
        R.run_iris(cfg)
    assert seen and seen[0] == [0.7, 3.0]


def test_quick_still_changes_the_default(monkeypatch, tmp_path):
    import torchdpgmm.data as D
    from torchdpgmm.experiments import realdata as R

    seen = _seen_floats(monkeypatch, R)
    monkeypatch.setattr(D, "load_iris", lambda *a, **k: (_ for _ in ()).throw(_Stop()))
    with pytest.raises(_Stop):
        R.run_iris(_config(["experiment", "iris", "--quick"], tmp_path))
    assert seen[0] == [1.0, 2.0]


def test_explicit_epsilons_and_records_beat_quick_utility(monkeypatch, tmp_path):
    from torchdpgmm.experiments import audit as AU

    seen = _seen_floats(monkeypatch, AU)
    got = {}

    def fake(trials, N, *a, **k):
        got["N"] = N
        raise _Stop()

    monkeypatch.setattr(AU, "synthetic_data", fake)
    cfg = _config(["experiment", "sound-utility", "--quick", "--epsilons", "0.3,0.6,1.2", "--num-records", "500"], tmp_path)
    with pytest.raises(_Stop):
        AU.run_utility(cfg)
    assert seen[0] == [0.3, 0.6, 1.2]
    assert got["N"] == 500


def test_explicit_draws_beat_quick_audit(tmp_path):
    from torchdpgmm.experiments import audit as AU

    o = AU._audit_options(_config(["audit", "--quick", "--draws", "123", "--published-draws", "45"], tmp_path))
    assert o["draws"] == 123 and o["published_draws"] == 45


# ------------------------------------------------------------------------------------------- item 7
def test_sample_far_too_many_rows_is_one_value_error():
    import numpy as np

    from torchdpgmm.estimator import DPGaussianMixture, DPSyntheticClassifier
    from torchdpgmm.modelfile import MAX_SAMPLE_ROWS

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), np.arange(40) % 2
    gm = DPGaussianMixture(epsilon=2.0, classes=[0, 1], clip_bound=5.0, random_state=0).fit(X, y)
    sc = DPSyntheticClassifier(5.0, classes=[0, 1], image_transform="none", n_components=1, mean_clip=20.0,
                               pca_clip=20.0, radius=10.0, components_per_class=1, random_state=0).fit(X, y)
    for est in (gm, sc):
        with pytest.raises(ValueError, match="n_samples must be <="):
            est.sample(10 ** 12)
        with pytest.raises(ValueError, match="n_samples must be <="):
            est.sample(MAX_SAMPLE_ROWS + 1)
        assert est.sample(3)[0].shape[0] == 3


# ------------------------------------------------------------------------------------------- item 9
def _small_csv(path):
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.arange(60) % 2
    X = rng.normal(size=(60, 2)) + 3.0 * y[:, None]
    lines = ["a,b,label"] + [f"{a},{b},{'cat' if c else 'dog'}" for (a, b), c in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


def _failing_writer(monkeypatch, errno_code, strerror):
    import torchdpgmm.modelfile as MF

    def fail(path, text):
        raise OSError(errno_code, strerror, str(path.parent / f".{path.name}.x9q1z.tmp"))

    monkeypatch.setattr(MF, "atomic_write_text", fail)


@pytest.mark.parametrize("code,reason", [(13, "permission denied"), (28, "disk is full"), (30, "read-only")])
def test_failed_write_names_the_out_path_in_plain_words(tmp_path, monkeypatch, capsys, code, reason):
    import os

    from torchdpgmm.cli import main

    _small_csv(tmp_path / "d.csv")
    release = ["release", "--data", str(tmp_path / "d.csv"), "--label-column", "label", "--features", "a,b",
               "--classes", "cat,dog",
               "--clip-bound", "10", "--epsilon", "1", "--delta", "1e-5"]
    assert main([*release, "--out", str(tmp_path / "m.json")]) == 0
    capsys.readouterr()
    _failing_writer(monkeypatch, code, os.strerror(code))
    cases = {
        "release": [*release, "--out", str(tmp_path / "m2.json")],
        "sample": ["sample", str(tmp_path / "m.json"), "-n", "5", "--out", str(tmp_path / "s.csv")],
        "synthesize": ["synthesize", "--data", str(tmp_path / "d.csv"), "--label-column", "label", "--classes",
                       "cat,dog", "--epsilon", "1", "--delta", "1e-5", "--image-transform", "none", "--bounds=-5:10",
                       "-n", "20", "--out", str(tmp_path / "syn")],
    }
    for name, argv in cases.items():
        assert main(argv) == 2, name
        err = "\n".join(ln for ln in capsys.readouterr().err.strip().splitlines()
                        if ": warning: " not in ln)  # the release's warnings come before it writes
        assert len(err.splitlines()) == 1, err
        assert argv[-1] in err and reason in err, err
        assert ".tmp" not in err and os.strerror(code) not in err and "Errno" not in err, err
    assert not (tmp_path / "m2.json").exists() and not (tmp_path / "s.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "m.json"]  # no temporary folder left


# ------------------------------------------------------------------------------------------- item 13
@pytest.mark.slow  # importing opacus alone takes seconds (the training itself is < 1 s)
def test_opacus_dpsgd_masks_bad_rows_and_takes_its_schedule_from_the_public_count():
    pytest.importorskip("opacus")
    import math

    import torch

    from torchdpgmm.pipelines.dpsgd import train_dpsgd

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (201,), generator=g)
    X = torch.randn(201, 3, generator=g) + y.unsqueeze(-1).float()
    X[5, 1] = float("nan")
    y[7] = 9  # outside the 3 public classes
    kw = dict(epsilon=2.0, delta=1e-5, epochs=2, lr=0.2, batch_size=32, hidden=(8,), num_classes=3, seed=1,
              n_public=150.0)
    r201 = train_dpsgd(X, y, X[:50], y[:50], **kw)
    r200 = train_dpsgd(X[:200], y[:200], X[:50], y[:50], **kw)
    # closed form of the schedule from the released count (Abadi et al. 2016): q = b / n, T = floor(E n / b)
    assert r201["steps"] == r200["steps"] == math.floor(2 * 150 / 32)
    assert r201["sampling_rate"] == pytest.approx(32 / 150) and r201["noise_multiplier"] == r200["noise_multiplier"]
    assert 0 < r201["epsilon_spent"] <= 2.0 + 1e-6 and math.isfinite(r201["final_accuracy"])


@pytest.mark.parametrize("flags", [["--epsilon", "1e9", "--delta", "1e-5"], ["--epsilon", "1", "--delta", "0.5"]])
def test_cli_refuses_a_meaningless_budget_before_reading_the_data(tmp_path, capsys, flags):
    """release refuses epsilon > 1e3 or delta >= 0.5 in one line before the data are read: a data file that
    does not exist is never reached (it would be a different error)."""
    from torchdpgmm.cli import main

    rc = main(["release", "--data", str(tmp_path / "missing.csv"), "--label-column", "y", "--classes", "a,b",
               "--clip-bound", "1", *flags, "--out", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "meaningful guarantee" in err and "missing.csv" not in err
    assert not (tmp_path / "m.json").exists()
