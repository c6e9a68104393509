"""The public names other code calls resolve to the right objects, whatever was imported before."""


import torchdpgmm as tdg


def test_public_names():
    import torchdpgmm.release  # noqa: F401  (binds the submodule on the package)
    import torchdpgmm.design  # noqa: F401

    assert callable(tdg.release) and callable(tdg.design_mechanism)
    for name in ("fit_labeled", "LabeledGMM", "kl_divergence", "gaussian_kl", "PrivacyRecord", "Release",
                 "DPGaussianMixture"):
        assert getattr(tdg, name) is not None
    for name in ("gaussian", "laplace", "wishart", "r1smg", "random_mapping"):
        assert callable(getattr(tdg.mechanisms, name))
    assert callable(tdg.privacy.gaussian_sigma)
    assert callable(tdg.em.fit_gmm) and callable(tdg.em.fit_skew_normal_mixture)


def test_release_callable_module_and_function_agree():
    import torch

    from torchdpgmm.release import release

    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    X = torch.randn(2, 40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = (torch.arange(40) % 2).expand(2, 40)
    a = tdg.release(X, y, 2, 1.0, 1e-5, mechanism="gaussian", mode="as-published", generator=g1)
    b = release(X, y, 2, 1.0, 1e-5, mechanism="gaussian", mode="as-published", generator=g2)
    assert torch.equal(a.model.means, b.model.means)


def test_every_listed_submodule_resolves():
    import types

    for name in dir(tdg):
        if name.startswith("_"):
            continue
        obj = getattr(tdg, name)
        assert obj is not None, name
        if name in tdg._SUBMODULES:
            assert isinstance(obj, types.ModuleType) and obj.__name__ == f"torchdpgmm.{name}", name


def test_the_release_family_lives_in_the_release_package():
    import importlib

    for module, names in {"torchdpgmm.release.sound": ("release_sound", "sound_statistics", "gdp_mu"),
                          "torchdpgmm.release.baselines": ("baseline_release", "BudgetSplit"),
                          "torchdpgmm.release.result": ("Release",),
                          "torchdpgmm.release.evaluation": ("evaluate", "check_settings"),
                          "torchdpgmm.release.dispatch": ("release", "REGISTRY", "AS_PUBLISHED_CAVEATS")}.items():
        mod = importlib.import_module(module)
        assert all(callable(getattr(mod, n)) or isinstance(getattr(mod, n), (dict, tuple)) for n in names), module
    assert tdg.Release is importlib.import_module("torchdpgmm.release.result").Release


def test_patching_the_package_function_patches_the_callable_module(monkeypatch):
    import torchdpgmm.release as rel

    monkeypatch.setattr(rel, "release", lambda *a, **k: "patched")
    assert tdg.release(1, 2) == "patched"


def test_audit_package_exposes_the_names_of_the_former_module():
    import torchdpgmm.audit as A

    # the public names of torchdpgmm/audit.py before it became a package (issue #28)
    former = ["AuditResult", "audit", "clopper_pearson_upper", "epsilon_lower_bound", "Statistic",
              "LinearDiscriminant", "from_batched_release", "release_features", "NeighbourPair",
              "outlier_label_flip", "hull_moving_point", "tiny_class", "extreme_clipping",
              "support_escape_statistic", "psd_escape_statistic", "mean_distance_statistic", "audit_many",
              "r1smg_ball_delta", "LikelihoodRatio", "gaussian_log_ratio", "laplace_log_ratio",
              "symmetric_gaussian_log_ratio", "symmetric_laplace_log_ratio", "sound_blocks",
              "noiseless_sound_blocks", "sound_log_ratio", "sound_pair_mu", "gdp_tradeoff", "dp_tradeoff",
              "gdp_epsilon_exact", "gdp_mu_exact", "audit_ceiling", "power_report", "worst_case_add_remove",
              "worst_case_replace_one"]
    assert sorted(A.__all__) == sorted(former)
    assert all(getattr(A, n).__module__.startswith("torchdpgmm.audit.") for n in former)
