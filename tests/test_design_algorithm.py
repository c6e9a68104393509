"""Algorithm 1 (Liu, Scaglione & Peisert 2025) and its variants against literal, unbatched numpy/cvxpy computations."""
import itertools
import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import digamma, expit

from torchdpgmm.design import design_mechanism, mapping_pmf, neighbour_counts
from torchdpgmm.design.algorithm import _uniform_composition_kl


def _data(seed, T, N, K, d, shift=2.0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(N).remainder(K).expand(T, N).clone()
    y = y[:, torch.randperm(N, generator=g)]
    X = torch.randn(T, N, d, generator=g, dtype=torch.float64) + shift * y.unsqueeze(-1).double()
    return X, y


# ---------------------------------------------------------------- literal Algorithm 1 (numpy + cvxpy)

def _compositions(N, K):
    for cuts in itertools.combinations(range(1, N), K - 1):
        b = (0,) + cuts + (N,)
        yield np.array([b[i + 1] - b[i] for i in range(K)], dtype=float)


def _literal_algorithm1(X, y, K, eps, delta, lam=1e-3, tol=1e-3, max_iter=20):
    cp = pytest.importorskip("cvxpy")  # the literal SDP only: the module collects without cvxpy (GPU image)
    X, y = np.asarray(X), np.asarray(y)
    N, d = X.shape
    Nk = np.array([(y == k).sum() for k in range(K)], dtype=float)
    pi = Nk / N
    mu = np.stack([X[y == k].mean(0) for k in range(K)])
    Sig = np.stack([np.cov(X[y == k].T, ddof=1) for k in range(K)])
    Sinv = np.linalg.inv(Sig)
    # all N(K-1) adjacent datasets, literally
    diffs = [[] for _ in range(K)]
    for n in range(N):
        for kp in range(K):
            if kp == y[n]:
                continue
            y2 = y.copy()
            y2[n] = kp
            for k in range(K):
                diffs[k].append(mu[k] - X[y2 == k].mean(0))
    L = 2 * math.log(2 / delta)
    # the weights' mapping: f = (1 - lam) f' + lam / |S| over all of S (brute force)
    S = list(_compositions(N, K))
    nb = []
    for i in range(K):
        for j in range(K):
            if i != j:
                c = Nk.copy(); c[i] -= 1; c[j] += 1
                nb.append(c)

    def objective(eps0, gam, Ginv):
        ck = 0.5 * (d * np.log(gam) + (d + 1) / gam * np.trace(Sinv, axis1=1, axis2=2)
                    + np.einsum("kij,kji->k", Sinv, Ginv))
        def g(c):
            p = c / N
            return float((p * (np.log(p / pi) + ck)).sum())
        z = math.exp(eps0) + len(nb)
        tot = 0.0
        for c in S:
            f = lam / len(S)
            if np.array_equal(c, Nk):
                f += (1 - lam) * math.exp(eps0) / z
            elif any(np.array_equal(c, b) for b in nb):
                f += (1 - lam) / z
            tot += f * g(c)
        const = (d * math.log(2) + sum(digamma((d + 1) / 2 + (1 - i) / 2) for i in range(1, d + 1))) / 2
        return tot - const

    eps0 = eps / 3
    epsk = np.full(K, eps / 3)
    hist = []
    prev = None
    for it in range(1, max_iter + 1):
        gam = np.minimum((d + 1) / d * np.trace(Sinv, axis1=1, axis2=2), 2 * Nk * (eps - eps0 - epsk) / 3)  # (22)
        Ginv = np.zeros((K, d, d))
        for k in range(K):                                                           # (23), literal LMI
            Xv = cp.Variable((d, d), symmetric=True)
            e2 = cp.Variable()
            cons = [Xv >> 0, e2 >= 1e-12, e2 <= (eps - eps0 - 3 * gam[k] / (2 * Nk[k])) ** 2]
            for v in diffs[k]:
                v = v.reshape(d, 1)
                cons.append(cp.bmat([[cp.reshape(e2 / L, (1, 1), order="C"), v.T], [v, Xv]]) >> 0)
            cp.Problem(cp.Minimize(cp.trace(Sinv[k] @ Xv)), cons).solve(solver=cp.CLARABEL)
            Ginv[k] = Xv.value
            epsk[k] = math.sqrt(e2.value)
        eps0 = eps - np.max(epsk + 3 * gam / (2 * Nk))                                 # (25)
        obj = objective(eps0, gam, Ginv)
        hist.append(dict(eps0=eps0, eps_k=epsk.copy(), gamma=gam.copy(), Ginv=Ginv.copy(), obj=obj))
        if prev is not None and abs(obj - prev) <= tol:
            break
        prev = obj
    return hist


def test_as_published_reproduces_literal_algorithm1():
    K, d, N = 3, 2, 30
    X, y = _data(0, 1, N, K, d)
    eps, delta = 1.2, 1e-5
    hist = _literal_algorithm1(X[0].numpy(), y[0].numpy(), K, eps, delta)
    D = design_mechanism(X[0], y[0], K, eps, delta, variant="as-published", solver="dual")
    assert int(D.iterations) == len(hist)
    assert len(D.trace) == len(hist)
    for step, ref in zip(D.trace, hist):
        assert step["eps0"].item() == pytest.approx(ref["eps0"], rel=1e-6)
        assert np.allclose(step["eps_k"].numpy(), ref["eps_k"], rtol=1e-5)
        assert np.allclose(step["gamma"].numpy(), ref["gamma"], rtol=1e-6)
        assert step["objective"].item() == pytest.approx(ref["obj"], abs=1e-5)
    last = hist[-1]
    assert np.allclose(D.mean_noise_cov.numpy(), last["Ginv"], rtol=1e-4, atol=1e-8)
    assert D.objective.item() == pytest.approx(last["obj"], abs=1e-5)
    # the cvxpylayers path gives the same design
    D2 = design_mechanism(X[0], y[0], K, eps, delta, variant="as-published", solver="cvxpylayers")
    assert torch.allclose(D2.sdp_opt, D.sdp_opt, rtol=1e-5)
    assert torch.allclose(D2.mean_noise_cov, D.mean_noise_cov, rtol=1e-4)


def test_uniform_composition_closed_form_brute_force():
    N, K = 13, 3
    counts = torch.tensor([4.0, 6.0, 3.0], dtype=torch.float64)
    pi = counts.numpy() / N
    S = list(_compositions(N, K))
    ref = np.mean([((c / N) * np.log(c / N / pi)).sum() for c in S])
    assert _uniform_composition_kl(counts).item() == pytest.approx(ref, rel=1e-12)


def test_neighbour_counts_and_mapping_pmf():
    counts = torch.tensor([[3.0, 5.0, 2.0]])
    nb = neighbour_counts(counts)
    assert nb.shape == (1, 6, 3)
    assert torch.all(nb.sum(-1) == 10)
    assert torch.all(((nb - counts.unsqueeze(-2)).abs().sum(-1)) == 2)
    assert len({tuple(r.tolist()) for r in nb[0]}) == 6
    p = mapping_pmf(counts.double(), torch.tensor([0.7], dtype=torch.float64), 1e-3)
    assert p.sum().item() == pytest.approx(1 - 1e-3)
    assert (p[0, 0] / p[0, 1]).item() == pytest.approx(math.exp(0.7))
    assert p[0, 0].item() == pytest.approx((1 - 1e-3) * math.exp(0.7) / (math.exp(0.7) + 6))


def test_global_is_optimal_against_scipy():
    K, d, N = 3, 2, 300
    X, y = _data(1, 1, N, K, d)
    eps, delta, lam = 0.8, 1e-5, 1e-3
    D = design_mechanism(X[0], y[0], K, eps, delta, variant="global")
    Dp = design_mechanism(X[0], y[0], K, eps, delta, variant="as-published")
    assert D.objective.item() <= Dp.objective.item() + 1e-12
    # independent optimisation of (P2) over (eps0, gamma_k) with scipy from several starts
    Nk = D.counts.numpy(); pi = Nk / N
    s = D.sdp_opt.numpy(); tr = np.trace(np.linalg.inv(D.covariances.numpy()), axis1=1, axis2=2)
    L = 2 * math.log(2 / delta)
    w = (1 - lam) * pi + lam / K
    nbkl = 0.0
    for i in range(K):
        for j in range(K):
            if i != j:
                c = Nk.copy(); c[i] -= 1; c[j] += 1
                nbkl += ((c / N) * np.log(c / Nk)).sum()

    def f(z):
        e0 = eps * expit(z[0])
        u = expit(np.asarray(z[1:]))
        b = eps - e0
        gam = u * 2 * Nk * b / 3
        ek = b * (1 - u)
        c = 0.5 * (d * np.log(gam) + (d + 1) * tr / gam + L * s / ek ** 2)
        return (1 - lam) * nbkl / (math.exp(e0) + K * (K - 1)) + (w * c).sum()
    best = min(minimize(f, np.r_[z0, np.zeros(K)], method="Nelder-Mead",
                        options=dict(xatol=1e-10, fatol=1e-13, maxiter=20000)).fun for z0 in (-5.0, 0.0, 3.0))
    ours = D.objective.item() + D._ctx["const12"] - lam * D._ctx["unif_kl0"].item()
    assert ours <= best + 1e-7


def test_exact_kl_term_against_direct_monte_carlo():
    from scipy.stats import wishart
    K, d, N = 2, 3, 100
    X, y = _data(2, 1, N, K, d)
    D = design_mechanism(X[0], y[0], K, 1.0, 1e-5, variant="exact-kl", kl_draws=512)
    Sig = D.covariances[0].numpy()
    gam = D.gamma[0].item()
    rng = np.random.default_rng(0)
    Ws = wishart(df=d + 1, scale=np.eye(d) / gam).rvs(20000, random_state=rng)
    Si = np.linalg.inv(Sig)
    vals = np.array([np.trace(Si @ W) - np.linalg.slogdet(np.eye(d) + Si @ W)[1] for W in Ws])
    ref, se = 0.5 * vals.mean(), 0.5 * vals.std() / math.sqrt(len(vals))
    eig = D._ctx["eigs0"][0]
    est = 0.5 * (eig / gam - torch.log1p(eig / gam)).sum(-1).mean().item()
    assert abs(est - ref) < 4 * se + 0.05 * ref
    # the Hermite table matches direct evaluation from the same draws
    tab = D._ctx["table"]
    assert tab is not None
    gs = torch.tensor([[3e-7, 0.3, 2.0, 17.0, 400.0]], dtype=torch.float64).expand(K, 5) * D._ctx["tr_inv"].unsqueeze(-1)
    x = D._ctx["eigs0"].unsqueeze(-3) / gs.unsqueeze(-1).unsqueeze(-1)
    direct = 0.5 * (x - torch.log1p(x)).sum(-1).mean(-1)
    assert torch.allclose(tab(gs), direct, rtol=1e-4)


def test_exact_kl_beats_surrogate_designs_on_true_expected_kl():
    X, y = _data(3, 2, 400, 3, 3)
    eps = torch.tensor([[0.1], [0.3], [1.0], [4.0]], dtype=torch.float64)
    e = design_mechanism(X, y, 3, eps, 1e-5, variant="exact-kl")
    assert e.expected_kl.shape == (4, 2)
    for v in ("as-published", "global"):
        o = e.at(eps, variant=v)
        assert torch.all(e.expected_kl <= o.expected_kl + 1e-9)


def test_epsilon_sweep_matches_fresh_designs_and_broadcasts():
    X, y = _data(4, 3, 200, 3, 2)
    D = design_mechanism(X, y, 3, 1.0, 1e-5, variant="global")
    eps = torch.tensor([[0.5], [2.0]], dtype=torch.float64)
    Ds = D.at(eps)
    assert Ds.eps_k.shape == (2, 3, 3) and Ds.mean_noise_cov.shape == (2, 3, 3, 2, 2)
    fresh = design_mechanism(X, y, 3, 2.0, 1e-5, variant="global")
    assert torch.allclose(Ds.objective[1], fresh.objective)
    assert torch.allclose(Ds.mean_noise_cov[1], fresh.mean_noise_cov)
    # budget (9)/(20b) is spent exactly and the noise satisfies (10)
    for De in (Ds, fresh, D.at(1.3, variant="as-published")):
        spent = De.eps0 + (De.eps_k + 3 * De.gamma / (2 * De.counts)).amax(-1)
        assert torch.allclose(spent, De.epsilon)
        assert torch.all(De.eps0 > 0) and torch.all(De.eps_k > 0) and torch.all(De.gamma > 0)


def test_mean_noise_satisfies_condition_10():
    from torchdpgmm.design import label_flip_differences
    X, y = _data(5, 2, 150, 3, 2)
    D = design_mechanism(X, y, 3, 0.9, 1e-4, variant="as-published")
    V, vm, _, _ = label_flip_differences(X, y, 3)
    Gam = torch.linalg.inv(D.mean_noise_cov)
    q = torch.einsum("tkni,tkij,tknj->tkn", V, Gam, V).amax(-1)
    bound = D.eps_k ** 2 / (2 * math.log(2 / 1e-4))
    assert torch.all(q <= bound * (1 + 1e-9))


def test_ragged_mask_equals_unpadded():
    X, y = _data(6, 1, 120, 3, 2)
    Xp = torch.cat([X, torch.full((1, 30, 2), 1e6, dtype=torch.float64)], 1)
    yp = torch.cat([y, torch.zeros(1, 30, dtype=torch.long)], 1)
    mask = torch.arange(150) < 120
    a = design_mechanism(Xp, yp, 3, 1.0, 1e-5, mask=mask.expand(1, 150), variant="global")
    b = design_mechanism(X, y, 3, 1.0, 1e-5, variant="global")
    assert torch.allclose(a.mean_noise_cov, b.mean_noise_cov, rtol=1e-7)
    assert torch.allclose(a.objective, b.objective)


@pytest.mark.parametrize("kw,msg", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(delta=1.0), "delta"),
    (dict(variant="nope"), "variant"), (dict(solver="scs"), "solver"), (dict(lam=0.0), "lam"),
    (dict(num_classes=1), "num_classes"),
    # max_iter = 0 gave TypeError from torch.log(None), kl_draws = -1 a silent NaN expected_kl
    (dict(max_iter=0), "max_iter must be an int >= 1"), (dict(kl_draws=-1), "kl_draws must be an int >= 0"),
])
def test_validation(kw, msg):
    X, y = _data(7, 1, 60, 3, 2)
    args = dict(X=X, y=y, num_classes=3, epsilon=1.0, delta=1e-5)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        design_mechanism(**args)


def test_too_small_class_rejected():
    X, y = _data(8, 1, 60, 3, 2)
    y[0, :] = 0
    y[0, :2] = 1
    y[0, 2:5] = 2
    with pytest.raises(ValueError, match="d \\+ 1"):
        design_mechanism(X, y, 3, 1.0, 1e-5)


def test_at_refuses_an_epsilon_that_does_not_broadcast():
    """design_mechanism (after the SDP solve) and MechanismDesign.at with an epsilon of a shape that does not
    broadcast against the data batch gave torch's RuntimeError; valid sweeps still broadcast (E, 1) over (T,)."""
    X, y = _data(9, 2, 60, 3, 2)
    with pytest.raises(ValueError, match="must broadcast against the data's batch"):
        design_mechanism(X, y, 3, torch.ones(3), 1e-5)
    D = design_mechanism(X, y, 3, 1.0, 1e-5)
    with pytest.raises(ValueError, match="must broadcast against the data's batch"):
        D.at(torch.ones(3))
    assert D.at(torch.tensor([[0.5], [2.0]], dtype=torch.float64)).eps0.shape == (2, 2)
