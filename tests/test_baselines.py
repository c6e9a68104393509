"""Baselines of Liu, Scaglione & Peisert 2025, Sec. V-A: sensitivities (brute force), projections, label-flip differences."""
import itertools

import numpy as np
import pytest
import torch

from torchdpgmm.release.baselines import (
    BudgetSplit,
    clip_l1,
    data_bound_l1,
    project_simplex,
    wu_sensitivities,
)


def _np_fit(X, y, K):
    pis, mus, Ss = [], [], []
    for k in range(K):
        Xk = X[y == k]
        mu = Xk.mean(0)
        pis.append(len(Xk) / len(X))
        mus.append(mu)
        Ss.append((Xk - mu).T @ (Xk - mu) / (len(Xk) - 1))
    return np.array(pis), np.array(mus), np.array(Ss)


def test_wu_sensitivities_formula():
    s = wu_sensitivities(200, 4, torch.tensor([1.0, 2.0], dtype=torch.float64))
    np.testing.assert_allclose(s["weights"].numpy(), [4 / 200, 4 / 200])
    np.testing.assert_allclose(s["means"].numpy(), [16 / 200, 32 / 200])
    np.testing.assert_allclose(
        s["covariances"].numpy(), [(12 * 200 * 4 + 8 * 16) / 200**2, (12 * 200 * 4 * 4 + 8 * 16 * 4) / 200**2]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wu_sensitivities_bound_label_flips_brute_force(seed):
    # every label-flip neighbour of small random datasets in the L1 ball (some rows on its boundary),
    # restricted to Wu et al.'s regime N_k >= n/(2K): L1 changes stay within the stated sensitivities
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(40):
        n, K, d, R = int(rng.integers(12, 30)), int(rng.integers(2, 4)), int(rng.integers(1, 4)), 1.5
        X = rng.normal(size=(n, d))
        X = X / np.maximum(1.0, np.abs(X).sum(1, keepdims=True) / R)
        X[: n // 3] = X[: n // 3] / np.abs(X[: n // 3]).sum(1, keepdims=True) * R
        y = rng.integers(0, K, n)
        if np.bincount(y, minlength=K).min() < n / (2 * K) + 1:
            continue
        S = {k: float(v) for k, v in wu_sensitivities(n, K, R).items()}
        p, m, C = _np_fit(X, y, K)
        for i, k2 in itertools.product(range(n), range(K)):
            if k2 == y[i]:
                continue
            y2 = y.copy()
            y2[i] = k2
            if np.bincount(y2, minlength=K).min() < n / (2 * K):
                continue
            p2, m2, C2 = _np_fit(X, y2, K)
            assert np.abs(p - p2).sum() <= S["weights"] + 1e-12
            assert np.abs(m - m2).sum(1).max() <= S["means"] + 1e-12
            assert np.abs(C - C2).sum((1, 2)).max() <= S["covariances"] + 1e-12
            checked += 1
    assert checked > 100


def test_wu_mean_sensitivity_is_attained():
    # the label-flip mean change is at most 2R/N_k <= 4KR/n when N_k >= n/(2K); it is attained by
    # class k = {+R e1, -R e1} with N_k = n/(2K): flipping +R e1 out moves mu_k from 0 to -R e1
    n, K, R = 8, 2, 1.0
    X = np.array([[R], [-R], [0.1], [0.2], [0.3], [0.1], [0.2], [0.3]])
    y = np.array([0, 0, 1, 1, 1, 1, 1, 1])
    def means(lab):
        return np.array([X[lab == k].mean(0) for k in range(K)])

    y2 = y.copy()
    y2[0] = 1
    change = np.abs(means(y) - means(y2)).sum(1).max()
    assert change == pytest.approx(float(wu_sensitivities(n, K, R)["means"]))


def _cvx_simplex(v, floor):
    import cvxpy as cp

    p = cp.Variable(len(v))
    cp.Problem(cp.Minimize(cp.sum_squares(p - v)), [cp.sum(p) == 1, p >= floor]).solve(solver=cp.CLARABEL)
    return p.value


def test_project_simplex_matches_qp():
    rng = np.random.default_rng(0)
    V = rng.normal(scale=2.0, size=(5, 5))
    floors = np.array([0.0, 0.01, 0.1, 0.19, 0.05])
    P = project_simplex(torch.tensor(V), torch.tensor(floors)).numpy()
    for v, f, p in zip(V, floors, P):
        np.testing.assert_allclose(p, _cvx_simplex(v, f), atol=1e-6)
    assert np.allclose(P.sum(1), 1.0) and np.all(P >= floors[:, None] - 1e-12)


def test_project_simplex_invariants():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(4, 3, 6, generator=g, dtype=torch.float64) * 3
    p = project_simplex(v, 0.02)
    assert p.shape == v.shape
    assert torch.allclose(p.sum(-1), torch.ones(4, 3, dtype=torch.float64))
    assert bool((p >= 0.02 - 1e-15).all())
    assert torch.allclose(project_simplex(p, 0.02), p, atol=1e-12)  # idempotent
    inside = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    assert torch.allclose(project_simplex(inside, 0.05), inside)  # feasible points are fixed


def test_clip_l1_and_bound():
    X = torch.tensor([[[3.0, -1.0], [0.2, 0.1], [0.0, -5.0]]], dtype=torch.float64)
    assert torch.allclose(data_bound_l1(X), torch.tensor([5.0], dtype=torch.float64))
    mask = torch.tensor([[True, True, False]])
    assert torch.allclose(data_bound_l1(X, mask), torch.tensor([4.0], dtype=torch.float64))
    C = clip_l1(X, 1.0)
    assert torch.allclose(C[0, 0], torch.tensor([0.75, -0.25], dtype=torch.float64))
    assert torch.allclose(C[0, 1], X[0, 1])  # inside the ball: untouched
    assert bool((C.abs().sum(-1) <= 1.0 + 1e-12).all())
    Cb = clip_l1(X.expand(2, 3, 2), torch.tensor([1.0, 10.0], dtype=torch.float64))
    assert torch.allclose(Cb[1], X[0])


def test_budget_split_validation():
    assert BudgetSplit().as_dict() == pytest.approx({"weights": 1 / 3, "means": 1 / 3, "covariances": 1 / 3})
    with pytest.raises(ValueError, match="sum to 1"):
        BudgetSplit(0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="> 0"):
        BudgetSplit(0.0, 0.5, 0.5)
