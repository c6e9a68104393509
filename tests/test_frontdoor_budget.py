"""Issue 27 items 5 and 6 at every front door: no entry point defaults to the mode that is not DP, a budget that
protects nothing (epsilon > 1e3, delta >= 0.5) is refused, and a weak one (epsilon > 10, delta > 1e-3) warns:
``release()``, both estimators, the accounted pipeline, and the command line's release, synthesize, sweep and
studies (refused before any data are read or any trial runs, in one line with no Python-only advice)."""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch

from torchdpgmm.cli import build_parser, main
from torchdpgmm.estimator import DPGaussianMixture, DPSyntheticClassifier
from torchdpgmm.release import WeakPrivacyWarning

MEANINGLESS = [(1e9, 1e-5), (1.0, 0.5)]
BOUNDS = [(0.0, 1.0)] * 3


def _xy(n=80, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, 3)), np.array(["u", "v"])[np.arange(n) % 2]


def _synthetic(eps, delta):
    return DPSyntheticClassifier(eps, delta, classes=["u", "v"], image_transform="none", n_components=3, bounds=BOUNDS)


def test_no_front_door_defaults_to_as_published():
    from torchdpgmm import release as release_module

    assert inspect.signature(release_module.release).parameters["mode"].default == "sound"
    assert DPGaussianMixture().mode == "sound"
    for command in (["release"], ["sweep"]):
        sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices).choices[command[0]]
        assert sub.get_default("mode") == "sound"


@pytest.mark.parametrize("eps, delta", MEANINGLESS)
def test_synthetic_classifier_and_pipeline_refuse_a_meaningless_budget(eps, delta):
    X, y = _xy()
    with pytest.raises(ValueError, match="meaningful guarantee"):
        _synthetic(eps, delta).fit(X, y)


@pytest.mark.parametrize("eps, delta, words", [(20.0, 1e-5, "epsilon = 20 > 10"), (1.0, 1e-2, "delta = 0.01 > 0.001")])
def test_synthetic_classifier_warns_on_a_weak_budget(eps, delta, words):
    X, y = _xy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _synthetic(eps, delta).fit(X, y)
    assert any(issubclass(w.category, WeakPrivacyWarning) and words in str(w.message) for w in caught)


def test_synthesize_warns_on_a_weak_budget(tmp_path, capsys):
    X, y = _xy()
    data = tmp_path / "t.csv"
    data.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{lab}\n" for r, lab in zip(X, y)))
    assert main(["synthesize", "--data", str(data), "--label-column", "label", "--classes", "u,v", "--epsilon", "20",
                 "--delta", "1e-5", "--image-transform", "none", "--bounds", "a=0:1,b=0:1,c=0:1",
                 "--out", str(tmp_path / "o")]) == 0
    assert "epsilon = 20 > 10" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["sweep", "--epsilons", "1,2000", "--clip-bound", "1"],
    ["sweep", "--delta", "0.5", "--clip-bound", "1"],
    ["experiment", "iris", "--epsilons", "0.5,5000"],
    ["experiment", "xi-fig1", "--epsilon", "0.1", "5000"],
    ["experiment", "record-level", "--delta", "0.6"],
    ["audit", "--epsilons", "2000"],
])
def test_sweeps_and_studies_refuse_a_meaningless_budget_before_any_trial(tmp_path, capsys, argv):
    out = tmp_path / "o"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "meaningful guarantee" in err and "allow_weak_privacy" not in err
    assert not out.exists()


def test_release_cli_refusal_offers_no_python_only_override(tmp_path, capsys):
    assert main(["release", "--data", str(tmp_path / "missing.csv"), "--label-column", "y", "--classes", "a,b",
                 "--clip-bound", "1", "--epsilon", "1e9", "--delta", "1e-5", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "meaningful guarantee" in err and "allow_weak_privacy" not in err


# a valid public setting that raised IndexError: the rule's 8 components per class on fewer than 4 features
@pytest.mark.parametrize("d", [1, 2, 3])
def test_pipeline_caps_the_components_rule_at_two_per_released_direction(d):
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, components_rule, release_pipeline

    assert components_rule(2.0) > 2 * d  # the rule asks for more than the initial centres can take
    X = torch.rand(200, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    y = torch.arange(200) % 2
    cfg = PipelineConfig(transform="none", n_components=d, mean_clip=1.0, pca_clip=1.0, radius=1.0)
    rel = release_pipeline(X, y, num_classes=2, epsilon=2.0, delta=1e-5, config=cfg,
                           generator=torch.Generator().manual_seed(0))
    assert rel.config.components_per_class == 2 * d and rel.model.means.shape == (2, 2 * d, d)
    with pytest.raises(ValueError, match="components_per_class must be <= 2 x n_components"):
        release_pipeline(X, y, num_classes=2, epsilon=2.0, delta=1e-5,
                         config=PipelineConfig(transform="none", n_components=d, mean_clip=1.0, pca_clip=1.0,
                                               radius=1.0, components_per_class=2 * d + 1))


def test_the_discrete_samplers_share_of_delta_is_said_where_it_matters():
    """At epsilon near 40 the exact discrete samplers' (1 + e^epsilon) sampler_tv passes delta (found by an
    independent accounting review, 2026-11-27): a WeakPrivacyWarning naming delta_sampler, once; none at epsilon 1."""
    import warnings

    import numpy as np

    from torchdpgmm import DPGaussianMixture
    from torchdpgmm._validation import WeakPrivacyWarning

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 3, 300)
    for eps, expected in ((1.0, 0), (40.0, 1)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = DPGaussianMixture(epsilon=eps, delta=1e-5, classes=[0, 1, 2], clip_bound=5.0).fit(X, y)
        said = [w for w in caught if issubclass(w.category, WeakPrivacyWarning) and "delta_sampler" in str(w.message)]
        assert len(said) == expected, [str(w.message) for w in caught]
        assert (float(m.privacy_.delta_sampler) > 1e-5) == bool(expected)
        assert str(w.filename) == __file__ if (w := (said or [None])[0]) else True  # said at the user's line


def test_a_release_the_samplers_leave_void_is_refused_and_nothing_kept_or_written(tmp_path, capsys):
    """Where delta + delta_sampler reaches the budget rule's 0.5 (between epsilon 40 and 60 here, with the default discrete noise)
    the release claimed nothing yet was returned and written with a warning (found by probing the front doors,
    2026-11-28). The estimator now raises one line and keeps no model; the command line exits 2 and writes nothing;
    epsilon 40 (delta_sampler about 0.01) still releases with the warning."""
    import numpy as np

    from sklearn.exceptions import NotFittedError

    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 3, 300)
    for eps in (60.0, 999.0):
        m = DPGaussianMixture(epsilon=eps, delta=1e-5, classes=[0, 1, 2], clip_bound=5.0)
        with pytest.raises(ValueError, match="too large for the exact discrete noise.*nothing was released"):
            m.fit(X, y)
        with pytest.raises(NotFittedError):
            m.predict(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPGaussianMixture(epsilon=40.0, delta=1e-5, classes=[0, 1, 2], clip_bound=5.0).fit(X, y)
    data = tmp_path / "t.csv"
    data.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{lab}\n" for r, lab in zip(X, y)))
    out = tmp_path / "m.json"
    assert main(["release", "--data", str(data), "--label-column", "label", "--classes", "0,1,2", "--epsilon", "999",
                 "--delta", "1e-5", "--bounds", "a=-5:5,b=-5:5,c=-5:5", "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "nothing was released" in ln]
    assert len(err) == 1 and not out.exists()


def test_the_odometer_takes_a_stated_record_with_its_samplers_delta():
    import numpy as np

    from torchdpgmm import DPGaussianMixture
    from torchdpgmm.privacy import BudgetOdometer, NoisedBlock, PrivacyRecord

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 3, 300)
    fit = lambda eps, delta: DPGaussianMixture(epsilon=eps, delta=delta, classes=[0, 1, 2],  # noqa: E731
                                               clip_bound=5.0).fit(X, y).privacy_
    with pytest.warns(UserWarning):
        high = fit(40.0, 1e-6)
    with pytest.raises(ValueError, match="samplers' 0.01"):  # 1e-6 + 1e-2 is above the odometer's 1e-5
        BudgetOdometer(100.0, 1e-5).spend(high)
    from torchdpgmm.release import release

    with pytest.warns(UserWarning):  # the library's release() returns it (with the warning); the estimator refuses
        void = release(torch.as_tensor(X), torch.as_tensor(y), 3, 60.0, 1e-6, clip_bound=5.0).privacy
    with pytest.raises(ValueError, match="guarantee is void"):
        BudgetOdometer(100.0, 1e-5).spend(void)
    assert BudgetOdometer(2.0, 1e-5).spend(fit(1.0, 1e-6)) < 1.0 + 1e-9  # small epsilon: as before
    huge = PrivacyRecord(1000.0, 1e-6, "add-remove", "t", "sound",
                         blocks=(NoisedBlock("d", "discrete-gaussian", 3.0, 0.01),), covered=True)
    with pytest.raises(ValueError, match="overflows a float"):
        BudgetOdometer(1000.0, 1e-5).spend(huge)


# --- budgets too small to calibrate: one clear line, not an internal message (session 14) ---

def test_a_stage_that_delta_alone_covers_is_refused_before_any_data_is_read(monkeypatch):
    """A Gaussian mechanism with ``mu <= mu0``, ``2 Phi(mu0 / 2) - 1 = delta`` (scipy, independent of the code), is
    (0, delta)-DP: the pipeline's class stage then had epsilon 0 and failed mid-release with "epsilon must be finite
    and > 0, got 0.0" (a user's epsilon 0.01 with delta 0.1). It is refused up front, naming the stage."""
    from scipy.stats import norm

    from torchdpgmm.pipelines import synthetic_classifier
    from torchdpgmm.pipelines.class_mixture import check_stage_budgets, stage_mus

    for delta in (1e-5, 0.1):
        mu0 = 2 * norm.ppf((1 + delta) / 2)
        check_stage_budgets(mu0 * 1.01, delta, 1)  # a positive epsilon: accepted
        with pytest.raises(ValueError, match="class stage gets mu = .* alone already covers"):
            check_stage_budgets(mu0 * 0.99, delta, 1)
    mus = stage_mus(1.0, 8)  # the default split 0.5 / 0.06 / 0.44 of mu^2
    assert mus == pytest.approx({"class": 0.5 ** 0.5, "cells": 0.44 ** 0.5})

    def no_data(*a, **k):
        raise AssertionError("the data were read before the budget was checked")

    monkeypatch.setattr(synthetic_classifier, "private_projection", no_data)
    X, y = _xy()
    with pytest.raises(ValueError, match="too small for the class mixture"):
        _synthetic(1e-2, 0.1).fit(X, y)


def test_a_budget_beyond_the_discrete_sampler_is_refused_in_one_line(tmp_path, capsys):
    """The default release's discrete noise has a largest scale (2^25 grid units); a budget that needs more said
    "discrete Gaussian sigma must lie in [0.25, 2^25] (grid units)". Over a grid of tiny budgets every fit either
    releases or gives the new message; the command line gives it as one line, exit 2, nothing written."""
    X, y = _xy()
    outcomes = set()
    for eps in (1e-3, 1e-6, 1e-9):
        for delta in (1e-5, 1e-12):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    DPGaussianMixture(eps, delta, classes=["u", "v"], bounds=BOUNDS).fit(X, y)
                outcomes.add("released")
            except ValueError as e:
                assert ("too small for the discrete noise" in str(e) and "grid units" in str(e)
                        or "too small for the two-stage release" in str(e)), e  # (where delta covers a stage)
                outcomes.add("refused")
    assert outcomes == {"released", "refused"}
    data = tmp_path / "t.csv"
    data.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{lab}\n" for r, lab in zip(X, y)))
    out = tmp_path / "m.json"
    assert main(["release", "--data", str(data), "--label-column", "label", "--classes", "u,v", "--epsilon", "1e-6",
                 "--delta", "1e-12", "--bounds", "a=0:1,b=0:1,c=0:1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "too small for the discrete noise" in err
    assert not out.exists()


def test_a_sweep_beyond_the_discrete_laplace_sampler_is_refused_before_any_trial(tmp_path, capsys):
    """The discrete Laplace sampler's largest scale (2^40 grid units) is passed at epsilon 1e-9: the sweep said
    "discrete Laplace scale must lie in [2^-20, 2^40] (grid units)"; now the budget's one line, nothing written."""
    out = tmp_path / "o"
    assert main(["sweep", "--mechanisms", "laplace", "--epsilons", "1e-9,1", "--clip-bound", "1", "--trials", "10",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "too small for the discrete noise" in err
    assert not out.exists()


def test_the_command_line_ignores_a_python_override_scope(tmp_path, capsys):
    """allow_weak_privacy() is Python's; cli.main run inside it keeps the command's refusals (a review found that
    the scope reached the command's checks and a void release was written)."""
    from torchdpgmm.release import allow_weak_privacy

    X, y = _xy(300)
    data = tmp_path / "t.csv"
    data.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{lab}\n" for r, lab in zip(X, y)))
    out = tmp_path / "m.json"
    for eps, words in (("1e9", "meaningful guarantee"), ("999", "nothing was released")):
        with allow_weak_privacy():
            assert main(["release", "--data", str(data), "--label-column", "label", "--classes", "u,v", "--epsilon",
                         eps, "--delta", "1e-5", "--bounds", "a=0:1,b=0:1,c=0:1", "--out", str(out)]) == 2
        assert words in capsys.readouterr().err and not out.exists()
    with allow_weak_privacy():  # the same scope does let the estimator measure (with warnings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DPGaussianMixture(999.0, 1e-5, classes=["u", "v"], bounds=BOUNDS).fit(X, y)


def test_a_refused_fit_is_not_fitted_for_scikit_learn():
    """A refusal after the inputs were validated left n_features_in_ behind, so scikit-learn's check_is_fitted
    took the estimator for fitted (a review finding)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    X, y = _xy(300)
    est = DPGaussianMixture(60.0, 1e-5, classes=["u", "v"], bounds=BOUNDS)
    with pytest.raises(ValueError, match="nothing was released"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert hasattr(est, "n_features_in_")
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_the_two_stage_release_checks_both_stages_before_reading_data(monkeypatch):
    """With 30 columns the centre stage's noise fits the sampler and the mixture stage's does not: the mixture stage
    used to refuse after the centre stage had read the data (a review finding); both are calibrated first now."""
    import torchdpgmm.release.sound as sound

    reads = []
    real = sound._clipped_statistics
    monkeypatch.setattr(sound, "_clipped_statistics", lambda *a, **k: reads.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 1, (300, 30)), rng.integers(0, 2, 300)
    with pytest.raises(ValueError, match="too small for the discrete noise"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPGaussianMixture(3e-4, 1e-12, classes=[0, 1], bounds=(0, 1)).fit(X, y)
    assert reads == []
