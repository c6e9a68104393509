import math

import numpy as np
import torch

import torchdpgmm as tdg


def _rand_model(gen, batch=(), K=3, d=2):
    w = torch.rand(*batch, K, generator=gen, dtype=torch.float64) + 0.1
    w = w / w.sum(-1, keepdim=True)
    mu = torch.randn(*batch, K, d, generator=gen, dtype=torch.float64)
    A = torch.randn(*batch, K, d, d, generator=gen, dtype=torch.float64)
    S = A @ A.transpose(-1, -2) + 0.3 * torch.eye(d, dtype=torch.float64)
    return tdg.LabeledGMM(w, mu, S)


def _np_gauss_kl(m0, S0, m1, S1):
    d = len(m0)
    S1i = np.linalg.inv(S1)
    return 0.5 * (np.trace(S1i @ S0) + (m1 - m0) @ S1i @ (m1 - m0) - d
                  + np.linalg.slogdet(S1)[1] - np.linalg.slogdet(S0)[1])


def test_gaussian_kl_matches_numpy(gen):
    p, q = _rand_model(gen, (5,)), _rand_model(gen, (5,))
    kl = tdg.gaussian_kl(p.means, p.covariances, q.means, q.covariances)
    for t in range(5):
        for k in range(3):
            ref = _np_gauss_kl(p.means[t, k].numpy(), p.covariances[t, k].numpy(),
                               q.means[t, k].numpy(), q.covariances[t, k].numpy())
            assert math.isclose(kl[t, k].item(), ref, rel_tol=1e-10)


def test_kl_zero_on_self_and_nonnegative(gen):
    p, q = _rand_model(gen, (50,)), _rand_model(gen, (50,))
    assert torch.all(tdg.kl_divergence(p, p).abs() < 1e-12)
    assert torch.all(tdg.kl_divergence(p, q) > 0)


def test_kl_matches_monte_carlo(gen):
    p, q = _rand_model(gen, K=3, d=2), _rand_model(gen, K=3, d=2)
    x, y = p.sample(200000, gen)
    ratio = p.joint_log_prob(x, y) - q.joint_log_prob(x, y)
    est, se = ratio.mean().item(), ratio.std().item() / math.sqrt(len(ratio))
    exact = tdg.kl_divergence(p, q).item()
    assert abs(est - exact) < 3 * se


def test_kl_zero_weight_conventions():
    mu = torch.zeros(2, 1, dtype=torch.float64)
    S = torch.ones(2, 1, 1, dtype=torch.float64)
    p = tdg.LabeledGMM(torch.tensor([1.0, 0.0]).double(), mu, S)
    q = tdg.LabeledGMM(torch.tensor([0.5, 0.5]).double(), mu, S)
    assert math.isclose(tdg.kl_divergence(p, q).item(), math.log(2), rel_tol=1e-12)
    assert math.isinf(tdg.kl_divergence(q, p).item())


def test_mvdigamma_matches_scipy():
    from scipy.special import digamma
    from torchdpgmm.kl import mvdigamma
    a, d = 2.3, 4
    ref = sum(digamma(a + (1 - i) / 2) for i in range(1, d + 1))
    assert math.isclose(mvdigamma(torch.tensor(a, dtype=torch.float64), d).item(), ref, rel_tol=1e-12)


def test_kl_class_with_zero_weight_may_have_a_singular_covariance():
    """fit_labeled(min_count=0) gives an empty class weight 0 and no covariance (NaN): kl_divergence factored
    it anyway (LinAlgError), although such a class contributes nothing (p weight 0) or +inf (q weight 0)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, 2, dtype=torch.float64, generator=g)
    y = torch.arange(20) % 2
    p = tdg.fit_labeled(X, y, 3, min_count=0)
    assert p.weights[2] == 0 and not bool(torch.isfinite(p.covariances[2]).all())
    q = tdg.fit_labeled(torch.cat([X, X[:4] + 1]), torch.cat([y, torch.full((4,), 2)]), 3)
    ref = sum(p.weights[k].item() * (math.log(p.weights[k].item() / q.weights[k].item())
                                     + _np_gauss_kl(p.means[k].numpy(), p.covariances[k].numpy(),
                                                    q.means[k].numpy(), q.covariances[k].numpy()))
              for k in range(2))  # Appendix B over the classes p gives weight
    assert math.isclose(tdg.kl_divergence(p, q).item(), ref, rel_tol=1e-12)
    assert tdg.kl_divergence(q, p).item() == math.inf  # q's class 2 has weight 0 in p: +inf, as documented
    assert tdg.kl_divergence(p, p).item() == 0.0
