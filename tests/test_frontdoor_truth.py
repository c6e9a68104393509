"""Issue 38 (front doors tell the truth): parsing, files, start-up and the odometer's GDP accountant.

Each test failed on main at a2505e8."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from torchdpgmm.cli import main

ROOT = Path(__file__).resolve().parents[1]
AIS = ROOT / "torchdpgmm" / "data" / "ais.csv"
AIS_ARGS = ["--data", str(AIS), "--label-column", "sex", "--classes", "female,male", "--epsilon", "1",
            "--delta", "1e-5"]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---------------------------------------------------------------------------------------------- start-up (item 6)
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["release", "--help"], ["sample", "--help"], []])
def test_version_and_help_import_no_torch(argv):
    code = ("import sys\nfrom torchdpgmm.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'\nprint('ok')")
    r = subprocess.run([sys.executable, "-c", code, *argv], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr


def test_help_still_lists_the_study_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "experiment" in out and "audit" in out


@pytest.mark.parametrize("mode", ["'--bounds', 'Ht=140:210,Wt=30:150'", "'--mode', 'as-published'"],
                         ids=["sound", "as-published"])
def test_release_command_imports_no_scikit_learn(tmp_path, mode):
    """Issue 38 item 6 follow-up: ``torchdpgmm release`` (README's AIS example with bounds, sound mode) imported
    scikit-learn (0.8 s) for release_in_unit_box, child_seed and the seed note of torchdpgmm.estimator; they live in
    torchdpgmm.bounds and torchdpgmm.privacy.record now. ``--mode as-published`` imported it (2.4 s of CPU) for its
    caveat's text, now in torchdpgmm._validation. A fresh interpreter runs the command and lists what it
    imported."""
    code = ("import sys, torchdpgmm; from pathlib import Path; from torchdpgmm.cli import main; "
            "ais = Path(torchdpgmm.__file__).parent / 'data' / 'ais.csv'; "
            "rc = main(['release', '--data', str(ais), '--label-column', 'sex', '--features', 'Ht,Wt', '--classes', "
            f"'female,male', '--epsilon', '1', '--delta', '1e-5', {mode}, '--seed', '3', "
            "'--out', sys.argv[1]]); "
            "print('RC', rc, 'MODULES', sorted({m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.json")], capture_output=True, text=True,
                         timeout=300, env=_env())
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RC ")]
    assert line, out.stderr[-2000:]
    assert line[0].startswith("RC 0 ") and (tmp_path / "m.json").exists()
    mods = line[0].split("MODULES", 1)[1]
    assert "'sklearn'" not in mods and "'torchdpgmm'" in mods


# ---------------------------------------------------------------------------------------------- parsing, files (item 4)
def test_bounds_value_starting_with_minus_parses(tmp_path):
    rng = np.random.default_rng(0)
    p = tmp_path / "d.csv"
    rows = ["a,b,label"] + [f"{x:.3f},{z:.3f},{'p' if i % 2 else 'q'}"
                            for i, (x, z) in enumerate(rng.uniform(-400, 400, size=(60, 2)))]
    p.write_text("\n".join(rows) + "\n")
    out = tmp_path / "m.json"
    assert main(["release", "--data", str(p), "--label-column", "label", "--features", "a,b", "--classes", "p,q",
                 "--epsilon", "1", "--delta", "1e-5", "--bounds", "-500:500", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["bounds"]["lower"] == [-500.0, -500.0]


@pytest.mark.parametrize("cmd,out", [("release", "o.csv"), ("release", "o"), ("sample", "s.json")])
def test_out_with_the_wrong_extension_is_refused(tmp_path, capsys, cmd, out):
    if cmd == "release":
        argv = ["release", *AIS_ARGS, "--features", "Ht,Wt", "--bounds", "Ht=140:210,Wt=30:150"]
    else:
        argv = ["sample", str(tmp_path / "m.json"), "-n", "5"]
    assert main(argv + ["--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and (".json" in err[0] or ".csv" in err[0])
    assert list(tmp_path.iterdir()) == []


def test_release_help_says_clip_bound_is_optional_with_bounds(capsys):
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "required there unless --bounds" in out
    assert "needs --classes (the public class set) and --clip-bound." not in out


# ---------------------------------------------------------------------------------------------- odometer (item 8)
def test_gdp_odometer_refuses_a_discrete_record_in_one_line():
    from torchdpgmm.privacy.odometer import BudgetOdometer
    from torchdpgmm.release import release

    g = torch.Generator().manual_seed(0)
    X, y = torch.rand(60, 2, dtype=torch.float64, generator=g), torch.randint(0, 2, (60,), generator=g)
    rec = release(X, y, 2, 1.0, 1e-5, clip_bound=1.0, generator=g).privacy  # default: exact discrete noise
    assert {b.mechanism for b in rec.blocks} == {"discrete-gaussian"}
    odo = BudgetOdometer(10.0, 1e-5, accountant="gdp", allow_seeded=True)
    for call in (odo.would_spend, odo.spend):
        with pytest.raises(ValueError, match="zcdp") as exc:
            call(rec)
        assert "\n" not in str(exc.value) and "discrete-gaussian" in str(exc.value)
    assert odo.history == [] and odo.epsilon_spent() == 0.0
    # the zCDP odometer prices the same record: rho = sum (Delta/sigma)^2 / 2 over the blocks, eps by Bun &
    # Steinke's conversion rho + 2 sqrt(rho log(1/delta)) as an upper bound of the exact one
    zc = BudgetOdometer(10.0, 1e-5, accountant="zcdp", allow_seeded=True)
    rho = sum(b.count * (b.sensitivity / b.noise_scale) ** 2 / 2 for b in rec.blocks)
    assert 0 < zc.spend(rec) <= rho + 2 * np.sqrt(rho * np.log(1e5)) + 1e-9


def test_odometer_spends_the_samplers_distance_from_exact_draws():
    """A record's sampler_tv (the discrete samplers' total variation from exact draws) is spent too: the odometer's
    epsilon at delta is one at which the ideal composition's delta plus (1 + e^eps) times the summed TV stays within
    delta (checked with the zCDP accountant's delta, and Canonne, Kamath & Steinke's conversion by scipy)."""
    import dataclasses

    from scipy import optimize

    from torchdpgmm.privacy.odometer import BudgetExceededError, BudgetOdometer
    from torchdpgmm.release import release

    g = torch.Generator().manual_seed(0)
    X, y = torch.rand(60, 2, dtype=torch.float64, generator=g), torch.randint(0, 2, (60,), generator=g)
    rec = release(X, y, 2, 1.0, 1e-5, clip_bound=1.0).privacy  # default: exact discrete noise, fresh entropy
    assert 0 < rec.sampler_tv < 1e-18
    plain, tv = dataclasses.replace(rec, sampler_tv=0.0), 1e-7  # TV exaggerated, to be visible
    loose = dataclasses.replace(rec, sampler_tv=tv)
    spent = {}
    for name, r in (("plain", plain), ("loose", loose)):
        odo = BudgetOdometer(10.0, 1e-5, accountant="zcdp")
        odo.spend(r)
        odo.spend(r)
        spent[name] = odo.epsilon_spent()
        assert odo.would_spend(r) > spent[name]
    rho = 2 * sum(b.count * (b.sensitivity / b.noise_scale) ** 2 / 2 for b in rec.blocks)

    def cks_delta(eps):  # Canonne, Kamath & Steinke 2020, Cor. 13, minimised over the order by scipy
        f = lambda a: (a - 1) * (a * rho - eps) + (a - 1) * np.log1p(-1 / a) - np.log(a)  # noqa: E731
        return float(np.exp(optimize.minimize_scalar(f, bounds=(1 + 1e-9, 1e6), method="bounded").fun))

    assert cks_delta(spent["plain"]) == pytest.approx(1e-5, rel=1e-3)
    e = spent["loose"]
    assert e > spent["plain"] and cks_delta(e) + (1 + np.exp(e)) * 2 * tv <= 1e-5 * (1 + 1e-6)
    odo = BudgetOdometer(10.0, 1e-5, accountant="zcdp")  # samplers farther from exact than delta allows: refused
    with pytest.raises(BudgetExceededError, match="inf"):
        odo.spend(dataclasses.replace(rec, sampler_tv=1e-5))
    assert odo.history == [] and odo.epsilon_spent() == 0.0


# ---------------------------------------------------------------------------------------------- one budget rule (item 2)
def _xy3(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, 3)), np.array(["u", "v"])[np.arange(n) % 2]


BOX3 = ([0.0] * 3, [1.0] * 3)
ESTIMATORS = {
    "gmm bounds (two-stage default)": lambda e, d: _gmm(e, d, bounds=BOX3),
    "gmm bounds, centre box": lambda e, d: _gmm(e, d, bounds=BOX3, center="box"),
    "gmm clip bound": lambda e, d: _gmm(e, d, clip_bound=1.0),
    "synthetic classifier": lambda e, d: _syn(e, d),
}


def _gmm(eps, delta, **kw):
    from torchdpgmm.estimator import DPGaussianMixture

    return DPGaussianMixture(eps, delta, classes=["u", "v"], **kw)


def _syn(eps, delta):
    from torchdpgmm.estimator import DPSyntheticClassifier

    return DPSyntheticClassifier(eps, delta, classes=["u", "v"], image_transform="none", n_components=3, bounds=BOX3)


def test_one_budget_function_everywhere():
    import torchdpgmm._validation as V
    from torchdpgmm import release as R
    from torchdpgmm.release import dispatch

    assert R.check_privacy_strength is V.check_privacy_strength is dispatch.check_privacy_strength
    assert R.WeakPrivacyWarning is V.WeakPrivacyWarning
    assert (V.WARN_EPSILON, V.WARN_DELTA, V.REFUSE_EPSILON, V.REFUSE_DELTA) == (10.0, 1e-3, 1e3, 0.5)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimators_refuse_a_meaningless_budget_before_reading_the_data(name):
    class Unreadable:  # any read of the data would fail differently
        def __array__(self, *a, **k):
            raise AssertionError("the data were read")

    for eps, delta in ((1e6, 1e-5), (1.0, 0.5)):
        with pytest.raises(ValueError, match="meaningful guarantee") as exc:
            ESTIMATORS[name](eps, delta).fit(Unreadable(), Unreadable())
        assert "allow_weak_privacy" not in str(exc.value)  # the estimators have no such option


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("eps, delta, words", [(30.0, 1e-5, ["epsilon = 30 > 10"]),  # 500 is refused now: void
                                               (1.0, 1e-2, ["delta = 0.01 > 0.001"]),
                                               (20.0, 1e-2, ["epsilon = 20 > 10", "delta = 0.01 > 0.001"])])
def test_estimators_warn_once_per_weak_parameter(name, eps, delta, words):
    import warnings

    from torchdpgmm._validation import WeakPrivacyWarning

    X, y = _xy3()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ESTIMATORS[name](eps, delta).fit(X, y)
    weak = [str(w.message) for w in caught if issubclass(w.category, WeakPrivacyWarning)]
    assert len(weak) == len(words) and all(any(t in m for m in weak) for t in words), weak
    if name.startswith("gmm"):  # pointing at the caller's line
        assert all(w.filename == __file__ for w in caught if issubclass(w.category, WeakPrivacyWarning))


@pytest.mark.parametrize("flags, words", [(["--epsilon", "30", "--delta", "1e-5"], "epsilon = 30 > 10"),
                                          (["--epsilon", "1", "--delta", "0.01"], "delta = 0.01 > 0.001")])
@pytest.mark.parametrize("center", ["noisy-mean", "box"])
def test_release_command_warns_once_and_strict_refuses(tmp_path, capsys, flags, words, center):
    argv = ["release", "--data", str(AIS), "--label-column", "sex", "--classes", "female,male", "--features", "Ht,Wt",
            "--bounds", "Ht=140:210,Wt=30:150", "--center", center, *flags]
    assert main(argv + ["--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert sum(words in ln for ln in err) == 1 and all("warning" in ln for ln in err), err
    assert main(argv + ["--strict", "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0] and words in err[0] and "--strict" in err[0]
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("argv", [["experiment", "iris", "--epsilons", "0.5,20"], ["audit", "--epsilons", "20"],
                                  ["experiment", "record-level", "--delta", "0.01"]])
def test_studies_warn_on_a_weak_budget_before_they_run(tmp_path, capsys, monkeypatch, argv):
    import torchdpgmm.experiments as E

    ran = []
    monkeypatch.setattr(E, "run_study", lambda name, cfg: ran.append(name) or {"rows": [], "runtime_seconds": 0.0})
    assert main([*argv, "--out", str(tmp_path / "o")]) == 0 and ran
    err = capsys.readouterr().err
    assert ("epsilon = 20 > 10" in err or "delta = 0.01 > 0.001" in err) and "warning" in err


# ---------------------------------------------------------------------------------------------- features from the schema (item 3)
@pytest.mark.parametrize("extra", [["--features", "Ht,sex", "--clip-bound", "10"],
                                   ["--bounds", "Ht=140:210,sex=0:1"],
                                   ["--clip-bound", "10"],  # nothing names the features
                                   ["--bounds", "140:210", "--clip-bound", "10"]])
def test_release_features_come_from_public_schema_or_are_asked_for(tmp_path, capsys, extra):
    out = tmp_path / "m.json"
    assert main(["release", *AIS_ARGS, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("label column 'sex'" in err[0] or "--features" in err[0]), err
    assert list(tmp_path.iterdir()) == []


def test_release_without_features_takes_the_columns_the_bounds_name(tmp_path):
    out = tmp_path / "m.json"
    assert main(["release", *AIS_ARGS, "--bounds", "Wt=30:150,Ht=140:210", "--out", str(out)]) == 0
    m = json.loads(out.read_text())
    assert m["feature_names"] == ["Wt", "Ht"] and m["dim"] == 2
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"columns": {"Ht": [140, 210], "Wt": [30, 150]}}))
    assert main(["release", *AIS_ARGS, "--schema", str(schema), "--out", str(tmp_path / "n.json")]) == 0
    assert json.loads((tmp_path / "n.json").read_text())["feature_names"] == ["Ht", "Wt"]


def test_synthesize_takes_the_columns_the_bounds_name(tmp_path):
    out = tmp_path / "syn"
    assert main(["synthesize", *AIS_ARGS, "--image-transform", "none", "--bounds", "Ht=140:210,Wt=30:150",
                 "-n", "20", "--out", str(out)]) == 0
    assert (out / "synthetic.csv").read_text().splitlines()[0] == "Ht,Wt,label"


# ---------------------------------------------------------------------------------------------- no silent garbage (item 1)
def test_means_at_bounds_against_closed_form_probabilities():
    from scipy.stats import norm

    from torchdpgmm.release.diagnostics import MEAN_AT_BOUND_SDS, means_at_bounds

    rng = np.random.default_rng(0)
    counts, sums_std, K, trials = np.array([80.0, 120.0]), 3.0, 2, 4000
    s = sums_std / counts  # the noise std of each class's released mean
    # data at the lower bound of column 0, in the middle for column 1: column 0 is flagged when every class's
    # noise is below 2 s_k, probability Phi(2)^K; column 1 (0.5 away, 13+ noise sds) never
    hits = np.zeros(2)
    for _ in range(trials):
        means = np.array([0.0, 0.5]) + rng.normal(size=(K, 2)) * s[:, None]
        for j in means_at_bounds(means, counts, sums_std, [0.0, 0.0], [1.0, 1.0]):
            hits[j] += 1
    p = norm.cdf(MEAN_AT_BOUND_SDS) ** K
    assert abs(hits[0] / trials - p) < 4 * np.sqrt(p * (1 - p) / trials) and hits[1] == 0
    # a box narrower than 4 noise sds: every mean is within 2 sds of a bound, wherever it is
    assert means_at_bounds(rng.uniform(0, 1, (K, 3)), [3.0, 3.0], 3.0, [0.0] * 3, [1.0] * 3) == [0, 1, 2]
    assert means_at_bounds(None, counts, sums_std, [0.0], [1.0]) == []


def test_release_with_bounds_far_wider_than_the_data_warns_and_strict_refuses(tmp_path, capsys):
    argv = ["release", *AIS_ARGS, "--features", "Ht,Wt", "--bounds", "Ht=0:1e6,Wt=0:1e6"]
    assert main(argv + ["--seed", "1", "--out", str(tmp_path / "m.json")]) == 0  # README's example, wide bounds
    err = capsys.readouterr().err
    assert "released means of Ht, Wt are mostly noise" in err
    means = np.asarray(json.loads((tmp_path / "m.json").read_text())["means"])
    assert (means < 0).any()  # the garbage the warning is about: means below the lower bound 0
    # at epsilon 0.05 every mean's noise covers the unit box: a warning on every draw, so --strict always refuses
    low = [a if a != "1" else "0.05" for a in argv]  # --epsilon 1 -> 0.05
    assert low != argv and main(low + ["--strict", "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mostly noise" in err[0] and "--strict" in err[0]
    assert not (tmp_path / "s.json").exists()
    # README's example with its own bounds is not flagged
    assert main(["release", *AIS_ARGS, "--features", "Ht,Wt", "--bounds", "Ht=140:210,Wt=30:150", "--seed", "0",
                 "--out", str(tmp_path / "ok.json")]) == 0
    assert "mostly noise" not in capsys.readouterr().err


@pytest.mark.parametrize("center, clip, ok", [(None, 100.0, False), (None, 2 ** 0.5 + 1e-9, False), (None, 1.4, True),
                                              ("box", 0.72, False), ("box", 0.7, True)])
def test_a_clip_bound_that_holds_the_whole_box_is_refused(tmp_path, capsys, center, clip, ok):
    from torchdpgmm.estimator import DPGaussianMixture

    flags = ["--bounds", "Ht=140:210,Wt=30:150", "--clip-bound", repr(clip)] + ([] if center is None else
                                                                                  ["--center", center])
    out = tmp_path / "m.json"
    assert main(["release", *AIS_ARGS, "--features", "Ht,Wt", *flags, "--out", str(out)]) == (0 if ok else 2)
    err = capsys.readouterr().err.strip().splitlines()
    if not ok:  # sqrt(2)/2 about the box's middle, sqrt(2) about the private centre (d = 2)
        assert len(err) == 1 and "unit box" in err[0] and not out.exists()
    X, y = _xy3()
    est = DPGaussianMixture(1.0, 1e-5, classes=["u", "v"], bounds=([0, 0, 0], [1, 1, 1]), clip_bound=clip * 1.5 ** 0.5,
                            center=center)  # d = 3: the same ratios to sqrt(d)
    if ok:
        est.fit(X, y)
    else:
        with pytest.raises(ValueError, match="only adds noise"):
            est.fit(X, y)


# ---------------------------------------------------------------------------------------------- pandas out, bounds form (item 4)
def test_sample_of_an_estimator_fitted_on_a_dataframe_is_a_dataframe():
    pd = pytest.importorskip("pandas")
    from torchdpgmm.estimator import DPGaussianMixture

    X, y = _xy3()
    df = pd.DataFrame(X * 10, columns=["height", "weight", "age"])
    est = DPGaussianMixture(1.0, 1e-5, classes=["u", "v"], bounds={c: (0, 10) for c in df.columns}).fit(df, y)
    Xs, ys = est.sample(30)
    assert isinstance(Xs, pd.DataFrame) and list(Xs.columns) == ["height", "weight", "age"] and len(Xs) == 30
    assert isinstance(ys, pd.Series) and set(ys) <= {"u", "v"}
    assert ((Xs.to_numpy() >= 0) & (Xs.to_numpy() <= 10)).all()
    Xa, ya = DPGaussianMixture(1.0, 1e-5, classes=["u", "v"], bounds=(0, 1)).fit(X, y).sample(5)
    assert type(Xa) is np.ndarray and type(ya) is np.ndarray  # numpy in, numpy out


def test_bounds_as_lower_and_upper_arrays_have_one_reading_for_every_d():
    from torchdpgmm.bounds import Bounds

    three = Bounds.parse(([0, 10, 3], [5, 20, 9]), n_features=3)
    assert three.lower.tolist() == [0, 10, 3] and three.upper.tolist() == [5, 20, 9]
    one = Bounds.parse(([0], [5]), n_features=1)
    assert one.lower.tolist() == [0] and one.upper.tolist() == [5]
    with pytest.raises(ValueError, match="ambiguous") as exc:  # both readings valid: refused, never guessed
        Bounds.parse(([0, 10], [5, 20]), n_features=2)
    assert "\n" not in str(exc.value)
    pairs = Bounds.parse([(140, 210), (30, 150)], n_features=2)  # as arrays: lower 140 > upper 30, so pairs only
    assert pairs.lower.tolist() == [140, 30] and pairs.upper.tolist() == [210, 150]
    arrays = Bounds.parse(([5, 0], [10, 20]), n_features=2)  # as pairs (5, 0) is not valid: arrays only
    assert arrays.lower.tolist() == [5, 0] and arrays.upper.tolist() == [10, 20]


def test_second_moments_drowned_against_popoviciu_bound():
    from torchdpgmm.release.diagnostics import second_moments_drowned

    lo, hi = [0.0, 0.0], [1.0, 2.0]  # the widest column's largest variance (Popoviciu): 2^2 / 4 = 1
    # per class: the best-determined class (60 released rows) has variance noise std 66 / 60 = 1.1 > 1: drowned
    assert second_moments_drowned([50.0, 60.0], 66.0, lo, hi)
    assert not second_moments_drowned([50.0, 60.0], 54.0, lo, hi)  # 54 / 60 = 0.9 <= 1
    # counts below the public floor count as the floor
    assert not second_moments_drowned([-5.0, 2.0], 3.0, lo, hi, floor=4.0) and second_moments_drowned(
        [-5.0, 2.0], 3.0, lo, hi, floor=2.0)
    # covariance_type="auto": the pooled block over all 110 rows decides (noise 100 / 110 < 1, 121 / 110 > 1)
    assert not second_moments_drowned([50.0, 60.0], 1e9, lo, hi, pooled_std=100.0)
    assert second_moments_drowned([50.0, 60.0], None, lo, hi, pooled_std=121.0)
    assert not second_moments_drowned(None, 66.0, lo, hi)


def test_sweep_warns_once_and_synthesize_strict_refuses_before_reading(tmp_path, capsys, monkeypatch):
    import torchdpgmm.sweep as S

    monkeypatch.setattr(S, "run_sweep", lambda *a, **k: {"done": 0, "skipped": 0, "results": "r.csv"})
    assert main(["sweep", "--epsilons", "1,20,30", "--clip-bound", "1", "--no-progress",
                 "--out", str(tmp_path / "sw")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning" in err[0] and "epsilon = 30 > 10" in err[0]
    missing = tmp_path / "no-such-folder"  # never read: the budget is refused first
    assert main(["synthesize", "--data", str(missing), "--classes", "0,1", "--epsilon", "20", "--delta", "1e-5",
                 "--strict", "--out", str(tmp_path / "syn")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "epsilon = 20 > 10" in err[0] and "--strict" in err[0]
    assert not (tmp_path / "syn").exists()


def test_experiment_backend_ray_is_refused_not_run_locally(tmp_path, capsys):
    """No study schedules its trials on Ray: ``--backend ray`` was accepted, recorded in the JSON and ignored."""
    out = tmp_path / "ex"
    code = main(["experiment", "fig2", "--quick", "--backend", "ray", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--backend ray" in err[0] and "sweep" in err[0], err
    assert not out.exists()
