"""covariance_type="auto" (torchdpgmm.release.covariance_rule): the class and pooled second-moment blocks, their
accounting, and the full -> tied -> diag shrinkage, against independent numpy / brute-force computations."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm.release.covariance_rule import (CLASS_TO_POOLED, COUNTS_FLOOR, POOLED, auto_split, class_to_pooled_ratio,
                                               combine_second_moments, diagonal_weight, shrinkage_weights)
from torchdpgmm.release.sound import joint_mu, kl_split, release_sound, sensitivities


def _data(n=300, d=3, K=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    y = torch.arange(n) % K
    X = 0.5 + (X - 0.5) * (0.5 + 0.2 * y[:, None])  # inside the ball of radius sqrt(d)/2 around 0.5
    return X, y


def _rel(ct, eps, X=None, y=None, **kw):
    if X is None:
        X, y = _data()
    d = X.shape[-1]
    return release_sound(X, y, 3, eps, 1e-5, clip_bound=math.sqrt(d) / 2, center=torch.full((d,), 0.5),
                         covariance_type=ct, noise="continuous", generator=torch.Generator().manual_seed(3), **kw)


# ---------------------------------------------------------------- accounting of the two second-moment blocks

def _blocks(z, k, K):
    """All four blocks of one record (numpy, independent of the package)."""
    c = np.zeros(K)
    c[k] = 1.0
    s = np.zeros((K, len(z)))
    s[k] = z
    q = np.zeros((K, len(z), len(z)))
    q[k] = np.outer(z, z)
    return c, s, q, np.outer(z, z)


def _whitened_sq(b0, b1, scales):
    names = ("counts", "sums", "second_moments", POOLED)
    return sum(np.sum((x - y) ** 2) / scales[n] ** 2 for n, x, y in zip(names, b0, b1))


def _ball(rng, d, B, n):
    v = rng.normal(size=(n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    r = B * np.where(rng.random(n) < 0.5, 1.0, rng.random(n) ** (1 / d))
    return v * r[:, None]


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
def test_joint_mu_of_auto_by_brute_force(d, adjacency):
    """max over neighbouring datasets of sum_b ||Delta_b||^2 / sigma_b^2 (all four blocks) equals joint_mu^2."""
    rng = np.random.default_rng(d)
    B, K = 0.8, 3
    for trial in range(4):
        scales = dict(zip(("counts", "sums", "second_moments", POOLED), rng.uniform(0.2, 3.0, size=4)))
        mu = joint_mu(scales, B, d, adjacency=adjacency, covariance_type="auto")
        zs = _ball(rng, d, B, 400)
        zs = np.vstack([zs, B * np.eye(d)[:1], -B * np.eye(d)[:1], np.zeros((1, d))] +
                       ([B * np.eye(d)[1:2]] if d > 1 else []))
        zero = _blocks(np.zeros(d), 0, K)
        zero = (0 * zero[0],) + zero[1:]
        best = 0.0
        if adjacency == "add-remove":
            for z in zs:
                best = max(best, _whitened_sq(_blocks(z, 0, K), zero, scales))
        else:
            idx = rng.integers(0, len(zs), size=(4000, 2))
            pairs = [(zs[i], zs[j]) for i, j in idx] + [(zs[-3], zs[-3]), (zs[-3], zs[-2]), (zs[-3], zs[-1])]
            if d > 1:
                pairs.append((zs[-4], zs[-1]))
            for z, w in pairs:
                for kz, kw in ((0, 0), (0, 1)):
                    best = max(best, _whitened_sq(_blocks(z, kz, K), _blocks(w, kw, K), scales))
            # the interior optimum of the within-class case (t = z.z' = -a / (2 b_total) when it lies in range)
            for t in np.linspace(-B * B, B * B, 201):
                if d > 1:
                    z = np.zeros(d)
                    z[0] = B
                    w = np.zeros(d)
                    w[0], w[1] = t / B, math.sqrt(max(B * B - (t / B) ** 2, 0.0))
                    best = max(best, _whitened_sq(_blocks(z, 0, K), _blocks(w, 0, K), scales))
                else:
                    r = abs(t) / B
                    for w in (np.array([r]), np.array([-r])):
                        best = max(best, _whitened_sq(_blocks(np.array([B]), 0, K), _blocks(w, 0, K), scales))
        assert best <= mu * mu * (1 + 1e-9)
        assert best >= mu * mu * 0.995


def test_pooled_block_sensitivities_by_brute_force():
    """||z z^T||_F <= B^2 (add-remove), ||z z^T - z' z'^T||_F <= sqrt(2) B^2 (replace-one), attained; L1 of the
    upper triangle <= (d + 1) B^2 / 2, doubled under replace-one."""
    rng = np.random.default_rng(0)
    d, B = 3, 1.3
    zs = _ball(rng, d, B, 3000)
    add = max(np.linalg.norm(np.outer(z, z)) for z in zs)
    rep = max(np.linalg.norm(np.outer(z, z) - np.outer(w, w)) for z, w in zip(zs, zs[::-1]))
    iu = np.triu_indices(d)
    l1 = max(np.abs(np.outer(z, z)[iu]).sum() for z in list(zs) + [np.full(d, B / math.sqrt(d))])
    s2 = sensitivities(B, d, adjacency="add-remove", covariance_type="auto")
    s2r = sensitivities(B, d, adjacency="replace-one", covariance_type="auto")
    s1 = sensitivities(B, d, adjacency="add-remove", norm="l1", covariance_type="auto")
    s1r = sensitivities(B, d, adjacency="replace-one", norm="l1", covariance_type="auto")
    assert add <= s2[POOLED] * (1 + 1e-12) and add >= 0.99 * s2[POOLED]
    assert rep <= s2r[POOLED] * (1 + 1e-12) and rep >= 0.9 * s2r[POOLED]
    assert l1 <= s1[POOLED] * (1 + 1e-12) and l1 >= s1[POOLED] * (1 - 1e-12)
    assert s1r[POOLED] == pytest.approx(2 * s1[POOLED])


@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_record_has_one_block_per_noised_statistic(adjacency, noise):
    rel = release_sound(*_data(), 3, 1.0, 1e-5, clip_bound=1.0, center=torch.full((3,), 0.5), covariance_type="auto",
                        adjacency=adjacency, noise=noise, generator=torch.Generator().manual_seed(0))
    names = [b.name for b in rel.privacy.blocks]
    assert names == ["counts", "sums", "second_moments", POOLED]
    assert set(rel.privacy.split) == set(names) and math.isclose(sum(rel.privacy.split.values()), 1.0)
    assert rel.extras["covariance_type"] == "auto"
    if noise == "continuous":  # the blocks' whitened sensitivities recompose the calibrated mu (GDP)
        from torchdpgmm.privacy.calibration import gdp_mu

        tot = sum((b.sensitivity / b.noise_scale) ** 2 for b in rel.privacy.blocks)
        assert math.sqrt(tot) == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-9)


def test_auto_split_is_public_and_gives_the_class_block_the_pooled_share():
    base = kl_split(1.0, 4, covariance_type="tied", num_classes=5)
    assert base["counts"] > COUNTS_FLOOR  # the floor does not bind here
    sp = auto_split(base, 0.5)
    assert sp["second_moments"] == pytest.approx(0.5 * sp[POOLED])
    assert auto_split(base, num_classes=5, dim=4, epsilon=3.0) == auto_split(base, class_to_pooled_ratio(5, 4, 3.0))
    with pytest.raises(TypeError, match="num_classes, dim and epsilon"):  # no silent default ratio
        auto_split(base, num_classes=5, dim=4)
    assert sp["sums"] / sp["counts"] == pytest.approx(base["sums"] / base["counts"])
    assert sum(sp.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("K, d, eps, ratio", [(2, 8, 1.0, 0.3), (3, 4, 0.5, 0.3), (6, 9, 2.0, 0.6), (26, 16, 1.0, 2.6),
                                              (11, 10, 0.1, 1.1), (10, 64, 1.0, 0.3), (26, 32, 2.0, 1.3),
                                              (100, 1000, 1.0, 0.3), (11, 10, 5.0, 2.75), (26, 16, 4.0, 5.2),
                                              (2, 8, 5.0, 0.5), (2, 8, 3.0, 0.3), (10, 64, 8.0, 0.625),
                                              (26, 16, 1e6, 6.5)])
def test_class_to_pooled_ratio_grows_with_classes_and_epsilon_and_falls_with_dimension(K, d, eps, ratio):
    """r = max(0.3, 0.1 K min(1, 16/d) max(1, min(eps, 5)/2)): the values written out by hand from the formula."""
    assert class_to_pooled_ratio(K, d, eps) == pytest.approx(ratio, rel=1e-12)
    if ratio == 0.3:  # the floor itself, exactly (0.1 * 3 in floating point is 0.30000000000000004)
        assert class_to_pooled_ratio(K, d, eps) == CLASS_TO_POOLED


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_class_to_pooled_ratio_refuses_what_is_not_a_count(bad):
    with pytest.raises(ValueError, match="positive int"):
        class_to_pooled_ratio(bad, 4, 1.0)
    with pytest.raises(ValueError, match="positive int"):
        class_to_pooled_ratio(4, bad, 1.0)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, None, "1"])
def test_class_to_pooled_ratio_refuses_an_epsilon_that_is_not_a_positive_number(bad):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        class_to_pooled_ratio(4, 4, bad)


@pytest.mark.parametrize("mechanism, delta", [("kl", 1e-5), ("laplace", None)])
def test_auto_release_splits_by_the_ratio_of_its_classes_dimension_and_epsilon(mechanism, delta):
    """The sound release's "auto" split is auto_split of its base split at class_to_pooled_ratio(K, d, eps) of the
    epsilon it is given."""
    from torchdpgmm.release.sound import DEFAULT_SPLIT, sound_settings

    for K, d, eps in ((2, 5, 1.0), (26, 16, 1.0), (10, 40, 1.0), (11, 10, 5.0), (2, 4, 8.0)):
        st = sound_settings(d, K, eps, delta, clip_bound=1.0, covariance_type="auto", mechanism=mechanism)
        base = kl_split(1.0, d, covariance_type="tied", num_classes=K) if mechanism == "kl" else dict(DEFAULT_SPLIT)
        r = class_to_pooled_ratio(K, d, eps)
        assert st.split == pytest.approx(auto_split(base, r), rel=1e-12)
        assert st.split["second_moments"] / st.split[POOLED] == pytest.approx(r, rel=1e-12)


def test_auto_split_floors_the_counts_share():
    """Large d: the KL split leaves the counts under 1%; auto gives them COUNTS_FLOOR and keeps the other ratios."""
    base = kl_split(math.sqrt(33) / 2, 33, covariance_type="tied", num_classes=2)
    assert base["counts"] < 0.01
    sp = auto_split(base, 0.3)
    raw = {"sums": base["sums"], "second_moments": 0.3 * base["second_moments"], POOLED: base["second_moments"]}
    assert sp["counts"] == pytest.approx(COUNTS_FLOOR, rel=1e-12)
    for k, v in raw.items():
        assert sp[k] == pytest.approx((1 - COUNTS_FLOOR) * v / sum(raw.values()), rel=1e-12)


# ---------------------------------------------------------------- the estimate, against numpy

def test_combination_is_the_generalised_least_squares_estimate():
    """Q~ minimises sum_k ||Q^o_k - Q_k||^2 / sF^2 + ||P^o - sum_k Q_k||^2 / sP^2 (numpy lstsq, one entry)."""
    rng = np.random.default_rng(2)
    K, sf, sp = 4, 0.7, 0.3
    qo, po = rng.normal(size=(K, 2, 2)), rng.normal(size=(2, 2))
    q_adj, v_f, v_p = combine_second_moments(torch.as_tensor(qo), torch.as_tensor(po), sf, sp)
    A = np.vstack([np.eye(K) / sf, np.ones((1, K)) / sp])
    for i in range(2):
        for j in range(2):
            b = np.concatenate([qo[:, i, j] / sf, [po[i, j] / sp]])
            sol = np.linalg.lstsq(A, b, rcond=None)[0]
            np.testing.assert_allclose(q_adj[:, i, j].numpy(), sol, rtol=1e-12)
    cov = np.linalg.inv(A.T @ A)  # GLS covariance of the estimates (diagonal entries)
    assert v_f == pytest.approx(cov[0, 0], rel=1e-12)
    assert v_p == pytest.approx(cov.sum(), rel=1e-12)


def test_shrinkage_weights_match_numpy():
    """l_k = mean_i x/(1+x), x = (3 s_k / lambda_i)^2, lambda_i the floored eigenvalues of the pooled covariance and
    s_k = sqrt(v_f)/(n_k - 1): numpy eigenvalues and loops, with s_k checked by Monte Carlo as the std of a
    diagonal entry of V^T N V (the class noise N: diagonal variance v_f, off-diagonal v_f / 2)."""
    rng = np.random.default_rng(1)
    d, v_f, floor = 4, 0.4, 0.05
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    pool = Q @ np.diag([0.01, 0.3, 2.0, 5.0]) @ Q.T
    n = np.array([5.0, 40.0, 300.0])
    lam = shrinkage_weights(torch.as_tensor(pool), torch.as_tensor(n), v_f, floor=floor).numpy()
    ev, V = np.linalg.eigh(pool)
    assert ev.min() < floor  # the floor is exercised
    G = rng.normal(size=(40000, d, d)) * math.sqrt(v_f)
    N = (G + np.swapaxes(G, 1, 2)) / 2  # diagonal variance v_f, off-diagonal v_f / 2
    np.testing.assert_allclose(N[:, 0, 0].var(), v_f, rtol=0.03)
    np.testing.assert_allclose(N[:, 0, 1].var(), v_f / 2, rtol=0.03)
    rot = np.einsum("ji,njk,ki->ni", V, N, V)  # diagonal of V^T N V
    np.testing.assert_allclose(rot.var(0), v_f, rtol=0.03)
    for k in range(3):
        s = math.sqrt(v_f) / (n[k] - 1)
        want = np.mean([(3 * s / max(e, floor)) ** 2 / (1 + (3 * s / max(e, floor)) ** 2) for e in ev])
        assert lam[k] == pytest.approx(want, rel=1e-10)
    assert 1 > lam[0] > lam[1] > lam[2] > 0


def test_diagonal_weight_matches_numpy():
    rng = np.random.default_rng(4)
    d, v_p, dof = 4, 2.0, np.array(50.0)
    A = rng.normal(size=(d, d))
    pool = A @ A.T
    rho = float(diagonal_weight(torch.as_tensor(pool), torch.as_tensor(dof), v_p))
    s = np.sqrt(np.diag(pool))
    R = pool / np.outer(s, s)
    off = R - np.diag(np.diag(R))
    noise = sum(v_p / 2 / (pool[i, i] * pool[j, j]) for i in range(d) for j in range(d) if i != j) / dof ** 2
    assert rho == pytest.approx(min(1.0, noise / np.sum(off ** 2)), rel=1e-10)


def test_negligible_noise_gives_the_empirical_class_covariances():
    X, y = _data()
    rel = _rel("auto", 1e8)
    Z = X.numpy() - 0.5
    B = math.sqrt(3) / 2
    Z = Z * np.minimum(1.0, B / np.linalg.norm(Z, axis=1, keepdims=True))
    for k in range(3):
        np.testing.assert_allclose(rel.model.covariances[k].numpy(), np.cov(Z[y.numpy() == k].T), atol=1e-5)


def test_huge_noise_gives_one_pooled_covariance():
    """At eps -> 0 every class weight goes to 1: all classes share one (pooled, diagonalised) covariance."""
    X, y = _data(n=3000)
    rel = _rel("auto", 1e-3, X, y)
    C = rel.model.covariances.numpy()
    for k in (1, 2):
        np.testing.assert_allclose(C[k], C[0], rtol=0.05, atol=1e-3 * np.abs(C[0]).max())


def test_only_released_statistics_enter():
    """Two different datasets with the same clipped class sums and second moments (C -> H C with H orthogonal
    and H 1 = 1 inside each class) give the same model with the same noise seed."""
    X, y = _data(n=60)
    X2 = X.clone()
    rng = np.random.default_rng(0)
    for k in range(3):
        idx = torch.nonzero(y == k).flatten()
        C = X[idx] - X[idx].mean(0)
        n = len(idx)
        M = np.linalg.qr(np.column_stack([np.ones(n), rng.normal(size=(n, n - 1))]))[0]
        M[:, 0] *= np.sign(M[0, 0])
        R = np.linalg.qr(rng.normal(size=(n - 1, n - 1)))[0]  # rotate the complement of 1, keep 1 fixed
        H = M @ np.block([[np.ones((1, 1)), np.zeros((1, n - 1))], [np.zeros((n - 1, 1)), R]]) @ M.T
        X2[idx] = X[idx].mean(0) + torch.as_tensor(H) @ C
    assert not torch.allclose(X, X2)
    B = math.sqrt(3) / 2
    assert float(torch.linalg.norm(X2 - 0.5, dim=1).max()) < B  # no clipping: the statistics are equal
    a, b = _rel("auto", 1.0, X, y), _rel("auto", 1.0, X2, y)
    torch.testing.assert_close(a.model.covariances, b.model.covariances, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(a.model.means, b.model.means, rtol=1e-9, atol=1e-12)


def test_estimator_default_is_auto_with_the_full_layout():
    """DPGaussianMixture() defaults to covariance_type="auto": per-class covariances (full layout) that, with
    negligible noise, equal numpy's class covariances."""
    import warnings

    from torchdpgmm import DPGaussianMixture
    from torchdpgmm.release import allow_weak_privacy

    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 4000)
    A = np.array([[1.0, 0.6], [0.0, 0.5]])
    X = np.where(y[:, None] == 0, rng.normal(size=(8000, 2)) @ A.T * 0.05 + 0.3, rng.normal(size=(8000, 2)) * 0.08 + 0.7)
    assert DPGaussianMixture().covariance_type == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # clip_bound = sqrt(d)/2 in the unit box: nothing inside the bounds is clipped (the default clips at half
        # of it, which biases these covariances; tests/test_estimator_tables.py checks that default)
        with allow_weak_privacy():  # epsilon 500: negligible noise, beyond a meaningful guarantee
            est = DPGaussianMixture(epsilon=500.0, delta=1e-5, classes=[0, 1], bounds=(0, 1),
                                    clip_bound=np.sqrt(2) / 2, random_state=0).fit(X, y)
    assert est.covariances_.shape == (2, 2, 2)
    assert [b.name for b in est.privacy_.blocks][-1] == POOLED
    for k in (0, 1):
        np.testing.assert_allclose(est.covariances_[k], np.cov(X[y == k].T), atol=2e-4)


# ---------------------------------------------------------------- step 6: the class means (James-Stein)

def _mean_case(seed=5, d=5, K=3):
    rng = np.random.default_rng(seed)
    means = rng.uniform(-0.3, 0.3, size=(K, d))
    n = np.array([12.0, 30.0, 55.0])[:K]
    A = rng.normal(size=(K, d, d))
    cov = A @ np.swapaxes(A, 1, 2) + 0.5 * np.eye(d)
    return means, n, np.linalg.inv(cov)


def test_mean_shrinkage_weights_match_a_monte_carlo_of_the_noise():
    """l_k = (d - 2)/d E[D-noise^T P_k D-noise] / (D_k^T P_k D_k), the noise of D_k = m_k - sum_j w_j m_j drawn
    in numpy from its first-order model e_j = (e_s - m_j e_c) / n_j (independent sums and count noise)."""
    from torchdpgmm.release.covariance_rule import mean_shrinkage_weights

    means, n, prec = _mean_case()
    K, d = means.shape
    ss, sc = 0.4, 1.5
    lam = mean_shrinkage_weights(torch.as_tensor(means), torch.as_tensor(n), torch.as_tensor(prec), ss, sc).numpy()
    rng = np.random.default_rng(0)
    R = 200000
    e = (rng.normal(size=(R, K, d)) * ss - means[None] * rng.normal(size=(R, K, 1)) * sc) / n[None, :, None]
    w = n / n.sum()
    D = means - w @ means
    noise_D = e - np.einsum("j,rjd->rd", w, e)[:, None, :]
    for k in range(K):
        T = np.mean(np.einsum("rd,de,re->r", noise_D[:, k], prec[k], noise_D[:, k]))
        ref = min(1.0, max(0.0, (d - 2) / d * T / (D[k] @ prec[k] @ D[k])))
        assert lam[k] == pytest.approx(ref, rel=0.02)
    assert 0 < lam.min() and lam.max() < 1  # the case is interior (the clamp is not what is tested)


def test_mean_shrinkage_limits():
    """No noise: the released means unchanged; huge noise: every class at the count-weighted pooled mean; d <= 2:
    no shrinkage (James-Stein's d - 2); the result stays in the clipping ball."""
    from torchdpgmm.release.covariance_rule import shrunk_means

    means, n, prec = _mean_case()
    args = (torch.as_tensor(means), torch.as_tensor(n), torch.as_tensor(prec))
    m0, l0 = shrunk_means(*args, 0.0, 0.0, clip_bound=10.0)
    np.testing.assert_allclose(m0.numpy(), means, rtol=0, atol=1e-15)
    assert float(l0.abs().max()) == 0.0
    m1, l1 = shrunk_means(*args, 1e6, 1e6, clip_bound=10.0)
    np.testing.assert_allclose(m1.numpy(), np.broadcast_to(n @ means / n.sum(), means.shape), atol=1e-14)
    np.testing.assert_allclose(l1.numpy(), 1.0)
    m2, l2 = shrunk_means(args[0][:, :2], args[1], args[2][:, :2, :2], 1e6, 1e6, clip_bound=10.0)
    assert float(l2.abs().max()) == 0.0
    np.testing.assert_allclose(m2.numpy(), means[:, :2], atol=1e-15)
    m3, _ = shrunk_means(*args, 0.0, 0.0, clip_bound=0.1)
    np.testing.assert_allclose(np.linalg.norm(m3.numpy(), axis=1), 0.1, rtol=1e-12)  # every mean was outside
    np.testing.assert_allclose(m3.numpy() / 0.1, means / np.linalg.norm(means, axis=1, keepdims=True), rtol=1e-12)


def test_auto_release_projects_means_and_records_the_weights(monkeypatch):
    """The rule (James-Stein off): negligible noise gives numpy's class means; huge noise gives the released means
    projected onto the clipping ball, weights 0. With MEAN_SHRINKAGE on: the same covariances, every class at one
    mean inside the ball, weights 1. (Step 0's count floor off, so that the raw means leave the ball.)"""
    from torchdpgmm.release import covariance_rule

    assert covariance_rule.MEAN_SHRINKAGE is False
    monkeypatch.setattr(covariance_rule, "COUNT_FLOOR", False)
    X, y = _data(n=600, d=4)
    rel = _rel("auto", 1e8, X, y)
    Z = X.numpy() - 0.5
    for k in range(3):
        np.testing.assert_allclose(rel.model.means[k].numpy() - 0.5, Z[y.numpy() == k].mean(0), atol=1e-6)
    sh = rel.extras["shrinkage"]
    assert set(sh) == {"class_covariances", "pooled_to_diagonal", "class_means"}
    assert float(sh["class_means"].abs().max()) == 0.0
    off = _rel("auto", 1e-3, X, y)
    assert float(off.extras["shrinkage"]["class_means"].abs().max()) == 0.0
    Moff = off.model.means.numpy() - 0.5
    r = np.linalg.norm(Moff, axis=1)  # noise of order 1 / eps: projected onto the ball of radius B = 1
    assert r.max() == pytest.approx(1.0, rel=1e-12) and (r <= 1.0 + 1e-12).all()
    assert np.abs(Moff[1] - Moff[0]).max() > 0.1
    try:
        covariance_rule.MEAN_SHRINKAGE = True
        on_small = _rel("auto", 1e8, X, y)
        big = _rel("auto", 1e-3, X, y)
    finally:
        covariance_rule.MEAN_SHRINKAGE = False
    assert float(on_small.extras["shrinkage"]["class_means"].max()) < 1e-6
    np.testing.assert_allclose(big.extras["shrinkage"]["class_means"].numpy(), 1.0)
    torch.testing.assert_close(off.model.covariances, big.model.covariances, rtol=0, atol=0)
    M = big.model.means.numpy()
    np.testing.assert_allclose(M[1:], np.broadcast_to(M[0], M[1:].shape), atol=1e-12)
    assert np.linalg.norm(M[0] - 0.5) <= 1.0 * (1 + 1e-12)


@pytest.mark.parametrize("ct", ["full", "tied", "diag"])
def test_fixed_types_do_not_shrink_means(ct):
    """The fixed types keep the raw released means s_k / n_k: at huge noise they stay apart and may leave the
    clipping ball (no shrinkage, no projection), and their extras carry no rule weights."""
    X, y = _data(n=600, d=4)
    rel = _rel(ct, 1e-3, X, y)
    M = rel.model.means.numpy()
    assert "shrinkage" not in rel.extras
    assert np.abs(M[1] - M[0]).max() > 1.0
    assert np.linalg.norm(M - 0.5, axis=1).max() > math.sqrt(4) / 2


def test_mean_shrinkage_maps_over_batch_dims_and_num_draws():
    """Batch dims first: a stack of cases gives each case's weights; a num_draws release keeps every draw's means
    in the clipping ball."""
    from torchdpgmm.release.covariance_rule import shrunk_means

    cases = [_mean_case(seed=s) for s in (5, 6, 7)]
    m, n, p = (torch.as_tensor(np.stack([c[i] for c in cases])) for i in range(3))
    bm, bl = shrunk_means(m, n, p, 0.4, 1.5, clip_bound=0.5)
    for i in range(3):
        om, ol = shrunk_means(m[i], n[i], p[i], 0.4, 1.5, clip_bound=0.5)
        torch.testing.assert_close(bm[i], om, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(bl[i], ol, rtol=1e-12, atol=1e-15)
    X, y = _data(n=300, d=4)
    rel = _rel("auto", 0.01, X, y, num_draws=3)
    assert rel.model.means.shape == (3, 3, 4) and rel.extras["shrinkage"]["class_means"].shape == (3, 3)
    assert (torch.linalg.vector_norm(rel.model.means - 0.5, dim=-1) <= 1.0 + 1e-12).all()


# ---------------------------------------------------------------- step 0: counts floored at three noise stds

def test_floored_counts_against_numpy(monkeypatch):
    from torchdpgmm.release import covariance_rule
    from torchdpgmm.release.covariance_rule import NOISE_SDS, floored_counts

    c = torch.tensor([[-40.0, 1.0, 5.0, 30.0, 500.0], [2.0, 3.0, 9.0, 10.0, -1.0]], dtype=torch.float64)
    got = floored_counts(c, 3.0, 2.0).numpy()
    np.testing.assert_array_equal(got, np.maximum(c.numpy(), max(2.0, NOISE_SDS * 3.0)))
    np.testing.assert_array_equal(floored_counts(c, 0.1, 2.0).numpy(), np.maximum(c.numpy(), 2.0))
    for bad in (-1.0, float("nan"), float("inf"), None, True):
        with pytest.raises(ValueError, match="sigma_c must be a finite number"):
            floored_counts(c, bad, 2.0)
    monkeypatch.setattr(covariance_rule, "COUNT_FLOOR", False)
    np.testing.assert_array_equal(floored_counts(c, 3.0, 2.0).numpy(), np.maximum(c.numpy(), 2.0))


@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_auto_release_floors_unresolved_counts(monkeypatch, noise):
    """Same noise draws with and without step 0: on a tiny table at eps 0.5 every count the floor lifts becomes
    exactly 3 sigma_c and the others are untouched; on a table whose counts sit far above the floor the two
    releases are identical bit for bit. Fixed types never floor above min_count."""
    from torchdpgmm.release import covariance_rule

    def rel(X, y, eps, ct="auto"):
        d = X.shape[-1]
        return release_sound(X, y, 3, eps, 1e-5, clip_bound=math.sqrt(d) / 2, center=torch.full((d,), 0.5),
                             covariance_type=ct, noise=noise, generator=torch.Generator().manual_seed(11))

    X, y = _data(n=30, d=3)
    on = rel(X, y, 0.5)
    sigma_c = on.extras["noise"]["sigma_counts"]
    monkeypatch.setattr(covariance_rule, "COUNT_FLOOR", False)
    off = rel(X, y, 0.5)
    raw = off.model.counts.numpy()  # the noisy counts floored at min_count = 2 only
    np.testing.assert_array_equal(on.model.counts.numpy(), np.maximum(raw, 3 * sigma_c))
    assert (raw < 3 * sigma_c).any()  # the floor binds here (sigma_c ~ 20 against counts of 10)
    np.testing.assert_allclose(on.model.weights.numpy(), on.model.counts.numpy() / on.model.counts.numpy().sum())
    Xb, yb = _data(n=30000, d=3)
    off_b = rel(Xb, yb, 5.0)
    assert (off_b.model.counts.numpy() > 3 * off_b.extras["noise"]["sigma_counts"]).all()
    monkeypatch.setattr(covariance_rule, "COUNT_FLOOR", True)
    on_b = rel(Xb, yb, 5.0)
    for a, b in ((on_b.model.counts, off_b.model.counts), (on_b.model.means, off_b.model.means),
                 (on_b.model.covariances, off_b.model.covariances)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for ct in ("full", "tied", "diag"):
        assert rel(X, y, 0.5, ct).model.counts.min() < 3 * sigma_c


def test_mostly_noise_floor_follows_the_count_floor():
    """The warning's floor of a count is the one the release applied: 3 sigma_c for auto, min_count otherwise;
    an empty table under auto (every count at the floor) is called mostly noise, the 30000-row table is not."""
    from torchdpgmm.release.diagnostics import mostly_noise, sound_count_noise

    X, y = _data(n=30000, d=3)
    auto, full = _rel("auto", 1.0, X, y), _rel("full", 1.0, X, y)
    counts, std, floor = sound_count_noise(auto)
    assert std == auto.extras["noise"]["sigma_counts"] and floor == pytest.approx(max(2.0, 3 * std), rel=1e-15)
    assert sound_count_noise(full)[2] == 2.0
    assert not mostly_noise(counts, std, floor=floor)
    empty = _rel("auto", 1.0, X[:0], y[:0])
    assert mostly_noise(*sound_count_noise(empty)[:2], floor=sound_count_noise(empty)[2])


def test_per_direction_class_shrinkage_matches_numpy(monkeypatch):
    """Step 4 per direction: Sigma_k = P + D^1/2 (S_k - P) D^1/2, D = V diag(1 - w_k) V^T over the eigenvectors V of
    the (diagonal-shrunk) pooled covariance P, w_ki = x/(1+x), x = (3 s_k / lambda_i)^2 with the floored eigenvalues;
    numpy from the released moments, steps 1-3 written out (PER_DIRECTION on, the tables' default). With one weight
    for every direction the form is (1 - l) S_k + l P (the scalar rule), and the result stays PSD when S_k is."""
    from torchdpgmm.release import covariance_rule as cr

    monkeypatch.setattr(cr, "PER_DIRECTION", True)
    rng = np.random.default_rng(7)
    K, d = 3, 5
    n = np.array([40.0, 200.0, 900.0])
    A = rng.normal(size=(K, d, d))
    S = A @ np.swapaxes(A, 1, 2) / d + 0.2 * np.eye(d)
    mu = rng.normal(size=(K, d))
    sums = n[:, None] * mu
    q = (n[:, None, None] - 1) * S + n[:, None, None] * mu[:, :, None] * mu[:, None, :]
    p = q.sum(0) + rng.normal(scale=0.3, size=(d, d))
    p = (p + p.T) / 2
    sf, sp = 4.0, 2.0
    got = cr.shrunk_covariances(*(torch.as_tensor(a) for a in (n, sums, q, p)), sf, sp)
    # numpy: steps 1-3, then step 4 per direction
    ratio = (sp / sf) ** 2
    qa = q + ((p - q.sum(0)) / (K + ratio))[None]
    v_p = 1 / (1 / sp ** 2 + 1 / (K * sf ** 2))
    v_f = sf ** 2 * (1 - 1 / (ratio + K))
    m = sums / n[:, None]
    cov = (qa - n[:, None, None] * m[:, :, None] * m[:, None, :]) / (n - 1)[:, None, None]
    w = n - 1
    dof = w.sum()
    pool = (w[:, None, None] * cov).sum(0) / dof
    rho = float(cr.diagonal_weight(torch.as_tensor(pool), torch.as_tensor(dof), v_p))
    pool = (1 - rho) * pool + rho * np.diag(np.diag(pool))
    ev, V = np.linalg.eigh(pool)
    lam = np.maximum(ev, math.sqrt(d * v_p) / dof)
    want = []
    for k in range(K):
        x = 9 * v_f / w[k] ** 2 / lam ** 2
        half = V @ np.diag(np.sqrt(1 / (1 + x))) @ V.T
        want.append(pool + half @ (cov[k] - pool) @ half)
        assert float(got["class_shrinkage"][k]) == pytest.approx(np.mean(x / (1 + x)), rel=1e-10)
    np.testing.assert_allclose(got["covariances"].numpy(), np.array(want), rtol=1e-9, atol=1e-12)
    assert np.linalg.eigvalsh(got["covariances"].numpy()).min() > 0
    # one weight for every direction: the scalar form
    l = 0.37
    half = math.sqrt(1 - l) * np.eye(d)
    np.testing.assert_allclose(pool + half @ (cov[0] - pool) @ half, (1 - l) * cov[0] + l * pool, atol=1e-12)
