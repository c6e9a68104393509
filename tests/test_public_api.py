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
