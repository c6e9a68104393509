"""covariance_type="auto": the full release shrunk toward the pooled covariance (torchdpgmm.release.sound)."""
import math

import numpy as np
import torch

from torchdpgmm.release.sound import kl_split, release_sound, shrinkage_weights


def _data(n=300, d=3, K=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    y = torch.arange(n) % K
    X = X * (0.5 + 0.2 * y[:, None]) + 0.1 * y[:, None]
    return X, y


def test_shrinkage_weight_matches_numpy():
    rng = np.random.default_rng(1)
    K, d, q = 3, 2, 0.7
    covs = np.stack([(lambda A: A @ A.T)(rng.normal(size=(d, d))) for _ in range(K)])
    n = np.array([5.0, 9.0, 30.0])
    lam, pool = shrinkage_weights(torch.as_tensor(covs), torch.as_tensor(n), q)
    w = n - 1
    pool_np = np.einsum("k,kij->ij", w, covs) / w.sum()
    noise = q ** 2 * d * (d + 1) / 2 / w ** 2
    dist = np.array([np.sum((c - pool_np) ** 2) for c in covs])
    ref = np.clip(noise / np.minimum(dist, np.sum(pool_np ** 2)), 0, 1)
    np.testing.assert_allclose(pool.numpy(), pool_np, rtol=1e-12)
    np.testing.assert_allclose(lam.numpy(), ref, rtol=1e-12)


def test_weight_limits():
    covs = torch.stack([torch.eye(2), 2 * torch.eye(2)]).double()
    n = torch.tensor([50.0, 50.0], dtype=torch.float64)
    assert float(shrinkage_weights(covs, n, 1e-9)[0].max()) < 1e-12   # no noise: no shrinkage
    assert float(shrinkage_weights(covs, n, 1e6)[0].min()) == 1.0     # noise dominates: pooled


def _rel(ct, eps, **kw):
    X, y = _data()
    return release_sound(X, y, 3, eps, 1e-5, clip_bound=1.0, center=torch.full((3,), 0.5), covariance_type=ct,
                         noise="continuous", generator=torch.Generator().manual_seed(3), **kw)


def test_huge_epsilon_auto_equals_full():
    split = kl_split(1.0, 3, covariance_type="tied", num_classes=3)
    a, f = _rel("auto", 1e7), _rel("full", 1e7, split=split)
    torch.testing.assert_close(a.model.covariances, f.model.covariances, atol=1e-6, rtol=0)
    X, y = _data()  # and both are the non-private class covariances (closed form, numpy)
    Z = X.numpy() - 0.5
    Z = Z / np.maximum(1.0, np.linalg.norm(Z, axis=1, keepdims=True))
    for k in range(3):
        np.testing.assert_allclose(a.model.covariances[k].numpy(), np.cov(Z[y.numpy() == k].T), atol=5e-5)


def test_record_is_that_of_full_with_the_same_split():
    split = kl_split(1.0, 3, covariance_type="tied", num_classes=3)
    a, f = _rel("auto", 1.0), _rel("full", 1.0, split=split)
    pa, pf = a.privacy, f.privacy  # the same blocks (up to the last bit of the renormalised split)
    assert (pa.epsilon, pa.delta, pa.adjacency, pa.accountant, pa.notes) == \
        (pf.epsilon, pf.delta, pf.adjacency, pf.accountant, pf.notes)
    assert [(b.name, b.mechanism, b.norm) for b in pa.blocks] == [(b.name, b.mechanism, b.norm) for b in pf.blocks]
    for ba, bf in zip(pa.blocks, pf.blocks):
        assert math.isclose(ba.noise_scale, bf.noise_scale, rel_tol=1e-12)
        assert math.isclose(ba.sensitivity, bf.sensitivity, rel_tol=1e-12)
    assert a.extras["covariance_type"] == "auto"


def test_estimator_accepts_auto_with_the_full_layout():
    """DPGaussianMixture(covariance_type="auto"): per-class covariances (full layout) that, with negligible
    noise, equal numpy's class covariances (the shrinkage weight goes to 0)."""
    import warnings

    import numpy as np

    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 4000)
    A = np.array([[1.0, 0.6], [0.0, 0.5]])
    X = np.where(y[:, None] == 0, rng.normal(size=(8000, 2)) @ A.T * 0.05 + 0.3, rng.normal(size=(8000, 2)) * 0.08 + 0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPGaussianMixture(epsilon=500.0, delta=1e-5, classes=[0, 1], bounds=(0, 1), covariance_type="auto",
                                random_state=0).fit(X, y)
    assert est.covariances_.shape == (2, 2, 2)
    for k in (0, 1):
        ref = np.cov(X[y == k].T)
        np.testing.assert_allclose(est.covariances_[k], ref, atol=2e-4)
