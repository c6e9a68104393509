"""SAGMM (sample and aggregate): the aggregator's sensitivity by brute force over neighbouring datasets,
the epsilon -> infinity limit against scikit-learn block fits, reproducibility and refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from torchdpgmm.release import allow_weak_privacy

from torchdpgmm.em.sagmm import fit_sagmm, sagmm_aggregate, sagmm_sensitivities

LO, HI, VMIN, VMAX = 0.0, 1.0, 1e-3, 0.25


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    c = torch.tensor([[0.25, 0.3], [0.7, 0.75]], dtype=torch.float64)
    lab = torch.randint(2, (n,), generator=g)
    return (c[lab] + 0.06 * torch.randn(n, 2, generator=g, dtype=torch.float64)).clamp(0, 1)


def _agg(X, mask, seed, K=2, l=3):
    g = torch.Generator().manual_seed(seed)
    return sagmm_aggregate(X, K, l, LO, HI, VMIN, VMAX, mask=mask, max_iter=15, generator=g)


def _dist(a, b, norm):
    out = {}
    for name, x, y in zip(("weights", "means", "covariances"), a, b):
        diff = x - y
        if name == "covariances" and norm == "l1":
            iu = torch.triu_indices(diff.shape[-1], diff.shape[-1])
            diff = diff[..., iu[0], iu[1]]
        out[name] = float(diff.abs().sum()) if norm == "l1" else float(torch.linalg.vector_norm(diff.flatten()))
    return out


def test_sensitivity_brute_force_replace_and_remove():
    n, l, K, d = 24, 3, 2, 2
    s2 = sagmm_sensitivities(K, d, l, LO, HI, VMIN, VMAX, "l2")
    s1 = sagmm_sensitivities(K, d, l, LO, HI, VMIN, VMAX, "l1")
    rng = np.random.default_rng(0)
    worst2 = dict.fromkeys(s2, 0.0)
    worst1 = dict.fromkeys(s1, 0.0)
    for trial in range(60):
        X = _data(n, trial)
        full = torch.ones(n, dtype=torch.bool)
        base = _agg(X, full, 100 + trial)
        j = int(rng.integers(n))
        # replace-one: record j moved anywhere (also far outside the public ranges)
        X2 = X.clone()
        X2[j] = torch.as_tensor(rng.uniform(-3, 4, size=d))
        # add/remove: record j removed (masked), all block draws unchanged
        removed = full.clone()
        removed[j] = False
        for other in (_agg(X2, full, 100 + trial), _agg(X, removed, 100 + trial)):
            for k, v in _dist(base, other, "l2").items():
                worst2[k] = max(worst2[k], v)
            for k, v in _dist(base, other, "l1").items():
                worst1[k] = max(worst1[k], v)
    for k in s2:
        assert worst2[k] <= s2[k] * (1 + 1e-9), (k, worst2[k], s2[k])
        assert worst1[k] <= s1[k] * (1 + 1e-9), (k, worst1[k], s1[k])
    # the search is not vacuous: record moves do change the released average
    assert worst2["means"] > 0.05 * s2["means"] and worst2["weights"] > 0


def test_cross_block_alignment_would_break_the_bound():
    """Why alignment is per block: if every block were matched to block 0's estimate, one record in
    block 0 could reorder all blocks. Simulated here by swapping the components of every block."""
    X = _data(30, 1)
    (avg, blocks) = sagmm_aggregate(X, 2, 3, LO, HI, VMIN, VMAX, max_iter=15,
                                    generator=torch.Generator().manual_seed(5), return_blocks=True)
    w, m, c = blocks
    swapped = (w.flip(-1).mean(-2), m.flip(-2).mean(-3), c.flip(-3).mean(-4))
    s2 = sagmm_sensitivities(2, 2, 3, LO, HI, VMIN, VMAX, "l2")
    assert _dist(avg, swapped, "l2")["means"] > s2["means"]


def test_epsilon_to_infinity_is_the_average_of_block_mles():
    from sklearn.mixture import GaussianMixture

    n, l, K, seed = 600, 4, 2, 11
    X = _data(n, 3)
    with allow_weak_privacy():  # epsilon 1e12 as the noise-free limit (past the budget rule's refusal)
        fit = fit_sagmm(X, K, 1e12, 1e-5, num_blocks=l, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX),
                        max_iter=200, generator=torch.Generator().manual_seed(seed))
    # independent reference: the block draw is the first use of the generator; scikit-learn fits each block
    assign = torch.randint(l, (n,), generator=torch.Generator().manual_seed(seed)).numpy()
    ws, ms, cs = [], [], []
    for b in range(l):
        gm = GaussianMixture(K, covariance_type="full", reg_covar=1e-6, tol=1e-12, max_iter=2000, n_init=3,
                             random_state=0).fit(X.numpy()[assign == b])
        order = np.argsort(gm.means_.sum(-1))  # sort by the public direction (1, 1)/sqrt(2)
        ws.append(gm.weights_[order])
        ms.append(gm.means_[order])
        cs.append(gm.covariances_[order])
    np.testing.assert_allclose(fit.weights.numpy(), np.mean(ws, 0), atol=1e-5)
    np.testing.assert_allclose(fit.means.numpy(), np.mean(ms, 0), atol=1e-5)
    np.testing.assert_allclose(fit.covariances.numpy(), np.mean(cs, 0), atol=1e-6)
    assert fit.privacy.mode == "sound" and fit.privacy.adjacency == "add-remove"


def test_noise_is_calibrated_and_reproducible():
    X = _data(200, 4).expand(3, 200, 2)
    kw = dict(num_blocks=5, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX), max_iter=20)
    a = fit_sagmm(X, 2, 1.0, 1e-5, generator=torch.Generator().manual_seed(7), **kw)
    b = fit_sagmm(X, 2, 1.0, 1e-5, generator=torch.Generator().manual_seed(7), **kw)
    c = fit_sagmm(X, 2, 1.0, 1e-5, generator=torch.Generator().manual_seed(8), **kw)
    for t in ("weights", "means", "covariances", "loglik"):
        assert torch.equal(getattr(a, t), getattr(b, t))
    assert not torch.equal(a.means, c.means)
    # sigma = Delta / (mu sqrt(share)) with mu the analytic-Gaussian GDP parameter (Balle & Wang 2018)
    from scipy.optimize import brentq
    from scipy.stats import norm

    mu = brentq(lambda m: norm.cdf(-1 / m + m / 2) - np.exp(1) * norm.cdf(-1 / m - m / 2) - 1e-5, 1e-3, 10)
    s = sagmm_sensitivities(2, 2, 5, LO, HI, VMIN, VMAX, "l2")
    assert a.extras["noise_scales"]["means"] == pytest.approx(s["means"] / (mu * np.sqrt(0.45)), rel=1e-6)
    lap = fit_sagmm(X, 2, 1.0, mechanism="laplace", generator=torch.Generator().manual_seed(7), **kw)
    assert lap.privacy.delta == 0.0 and bool(torch.isfinite(lap.loglik).all())
    assert s["means"] == pytest.approx(np.sqrt(2) * np.sqrt(2) / 5)


def test_refusals_are_one_line_value_errors():
    X = _data(50, 5)
    kw = dict(num_blocks=3, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX))
    for bad, match in ((dict(kw, num_blocks=0), "num_blocks"), (dict(kw, mean_bounds=(1.0, 0.0)), "mean_bounds"),
                       (dict(kw, var_bounds=(0.0, 1.0)), "var_bounds"), (dict(kw, mechanism="wishart"), "mechanism"),
                       (dict(kw, align="reference"), "reference_means")):
        with pytest.raises(ValueError, match=match):
            fit_sagmm(X, 2, 1.0, 1e-5, **bad)
    with pytest.raises(ValueError, match="delta"):
        fit_sagmm(X, 2, 1.0, None, **kw)


def test_alignment_uses_only_the_estimate_and_public_values():
    from torchdpgmm.em.sagmm import align_components

    ref = torch.tensor([[0.1, 0.1], [0.5, 0.9], [0.9, 0.2]], dtype=torch.float64)
    perm = torch.tensor([2, 0, 1])
    m = (ref + 0.01)[perm].expand(4, 3, 2)  # four blocks, components shuffled the same way
    w = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)[perm].expand(4, 3)
    c = torch.stack([torch.eye(2, dtype=torch.float64) * (k + 1) for k in range(3)])[perm].expand(4, 3, 2, 2)
    w2, m2, c2 = align_components(w, m, c, align="reference", reference_means=ref)
    torch.testing.assert_close(m2[0], ref + 0.01)
    torch.testing.assert_close(w2[0], torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64))
    torch.testing.assert_close(c2[0, 2], 3 * torch.eye(2, dtype=torch.float64))
    # sorting on the public direction (1, 1)/sqrt 2: projections 0.2, 1.4, 1.1 -> order 0, 2, 1
    _, m3, _ = align_components(w, m, c, align="sort")
    torch.testing.assert_close(m3[1], (ref + 0.01)[torch.tensor([0, 2, 1])])


def test_record_blocks_compose_to_the_claimed_guarantee():
    """The three noised blocks of the record, composed by dp-accounting's PLD engine (through the privacy
    package), give back the claimed epsilon at the claimed delta."""
    from torchdpgmm.privacy import PLDAccountant, events_from_blocks

    X = _data(100, 9)
    fit = fit_sagmm(X, 2, 2.0, 1e-5, num_blocks=4, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX), max_iter=5,
                    adjacency="replace-one", generator=torch.Generator().manual_seed(1))
    rec = fit.privacy
    assert rec.covered and len(rec.blocks) == 3 and {b.mechanism for b in rec.blocks} == {"gaussian"}
    acc = PLDAccountant(adjacency="replace-one")
    for ev, count in events_from_blocks(rec.blocks):
        acc.compose(ev, count)
    assert acc.get_epsilon(1e-5) == pytest.approx(2.0, rel=2e-3)


def test_blocks_are_packed_disjoint_and_capped_per_block():
    from torchdpgmm.em.sagmm import sagmm_blocks

    N, l = 50, 4
    X = torch.arange(2 * N * 2, dtype=torch.float64).reshape(2, N, 2)  # two datasets, rows identifiable
    mask = torch.ones(2, N, dtype=torch.bool)
    mask[1, 7] = False
    seed = 3
    assign = torch.randint(l, (2, N), generator=torch.Generator().manual_seed(seed))
    Xb, mb = sagmm_blocks(X, l, mask, torch.Generator().manual_seed(seed))
    assert Xb.shape == (2, l, N, 2)
    for t in range(2):
        for b in range(l):
            want = [i for i in range(N) if assign[t, i] == b and mask[t, i]]  # row order kept
            got = Xb[t, b][mb[t, b]]
            torch.testing.assert_close(got, X[t, want])
    cap = 6
    Xc, mc = sagmm_blocks(X, l, mask, torch.Generator().manual_seed(seed), max_block_size=cap)
    assert Xc.shape == (2, l, cap, 2)
    for b in range(l):
        want = [i for i in range(N) if assign[0, i] == b][:cap]  # the first cap rows of the block
        torch.testing.assert_close(Xc[0, b][mc[0, b]], X[0, want])


def test_a_block_with_fewer_than_k_records_is_fitted_on_its_own_rows_whatever_the_padding():
    """An audit's finding: a block with fewer than K records was fitted on all C slots of its zero padding, and
    C = N without max_block_size, so adding a record to one block moved every such block's weights (by 1/(C(C+1))
    for one record beside C - 1 zeros). Such a block is now fitted on its first K slots: its estimate is the same
    for any padding C (here 30 and 40; blocks with K or more records have no zeros in their fit either way)."""
    from torchdpgmm.em.sagmm import sagmm_aggregate, sagmm_blocks

    X = torch.rand(30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ones = torch.ones(30, dtype=torch.bool)
    sizes = sagmm_blocks(X, 12, ones, torch.Generator().manual_seed(1), 30)[1].sum(-1)
    small = sizes < 2
    assert small.any()  # the case under test exists here
    fits = [sagmm_aggregate(X, 2, 12, 0.0, 1.0, 1e-3, 1.0, max_iter=20, return_blocks=True, max_block_size=C,
                            generator=torch.Generator().manual_seed(1))[1] for C in (30, 40)]
    for a, b in zip(*fits):
        torch.testing.assert_close(a[small], b[small], rtol=0, atol=0)


def test_a_block_cap_below_k_is_refused_in_one_line():
    """A review (2026-12-01): max_block_size below K (public) failed inside the block fits with 'every dataset needs
    at least num_components unmasked points'; it is refused up front, naming the flag."""
    X = _data(60, 2)
    with pytest.raises(ValueError, match="max_block_size must be an int >= num_components = 3"):
        fit_sagmm(X, 3, 1.0, 1e-5, num_blocks=2, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX), max_block_size=2)


@pytest.mark.parametrize("seed", range(4))
def test_one_far_record_inside_the_bounds_never_makes_a_block_fit_raise(seed):
    """A probe (finding 1): D, 40 rows of N(0, 1) in 2-D, and D' = D with record 0 replaced by (1e6 + 0.123,
    -7e5 + 0.456), inside mean_bounds (-2e6, 2e6): D gave a model, D' raised linalg.cholesky's 'not positive-definite'
    for seeds 0, 1 and 2, from a noise-free block fit (the far record alone in a component: S2/N_k - m m^T loses
    reg_covar = 1e-6 to cancellation at |x|^2 1e-16), before any noise: whether the fit returns told one record.
    Both give a finite, covered model now; the failed factor is replaced by the public v_max I for that E-step."""
    D = torch.randn(40, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    D2 = D.clone()
    D2[0] = torch.tensor([1e6 + 0.123, -7e5 + 0.456], dtype=torch.float64)
    for X in (D, D2):
        fit = fit_sagmm(X, 2, 1.0, 1e-5, num_blocks=2, mean_bounds=(-2e6, 2e6), var_bounds=(1e-6, 10.0),
                        generator=torch.Generator().manual_seed(seed))
        assert fit.privacy.covered and fit.privacy.mode == "sound"
        for t in (fit.weights, fit.means, fit.covariances):
            assert bool(torch.isfinite(t).all())
        ev = torch.linalg.eigvalsh(fit.covariances)
        assert bool((ev >= 1e-6 * (1 - 1e-9)).all() & (ev <= 10.0 * (1 + 1e-9)).all())


def test_block_fits_take_any_record_in_the_public_box_and_refuse_a_box_whose_squares_overflow():
    """Clusters at +-1e6 or +-1e8 with sd 1e-3 (the probe's s9_sagmm_raise: always raised), identical records and
    records on a line at 1e6 give a finite model with no error; a public box beyond +-MAX_REACH (whose squares and
    sums overflow float64: k-means++ draws and the EM would fail on the records) is refused up front in one line."""
    g = torch.Generator().manual_seed(5)
    sign = torch.where(torch.arange(60) % 2 == 0, 1.0, -1.0).to(torch.float64)[:, None]
    cases = [(1e6 * sign + 1e-3 * torch.randn(60, 2, dtype=torch.float64, generator=g), 2e6),
             (1e8 * sign + 1e-3 * torch.randn(60, 2, dtype=torch.float64, generator=g), 2e8),
             (torch.full((60, 2), 3e5, dtype=torch.float64), 1e6),
             (1e6 + torch.arange(60, dtype=torch.float64)[:, None].expand(60, 2), 2e6)]
    for X, b in cases:
        for seed in range(3):
            fit = fit_sagmm(X, 2, 1.0, 1e-5, num_blocks=3, mean_bounds=(-b, b), var_bounds=(1e-6, 10.0),
                            generator=torch.Generator().manual_seed(seed))
            assert bool(torch.isfinite(fit.means).all() & torch.isfinite(fit.covariances).all())
    from torchdpgmm.em.sagmm import MAX_REACH

    with pytest.raises(ValueError, match="must lie within"):
        fit_sagmm(cases[0][0], 2, 1.0, 1e-5, num_blocks=3, mean_bounds=(-2 * MAX_REACH, 1.0), var_bounds=(1e-6, 10.0))


def test_bad_public_settings_are_refused_before_any_block_fit(monkeypatch):
    """A probe (finding 7): direction of the wrong length, reference_means of the wrong shape (raw RuntimeErrors),
    align='bogus', max_iter=-1 and a split with an inf share (ZeroDivisionError) all failed only after the block fits
    had run on the private data; mean_bounds of the wrong length failed first but as a raw RuntimeError. Each is a
    one-line ValueError (TypeError for a string) now, with no block fit run and nothing drawn."""
    import torchdpgmm.em.sagmm as S

    calls = []
    monkeypatch.setattr(S, "fit_gmm", lambda *a, **k: calls.append(1))
    X = _data(60, 0)
    base = dict(num_blocks=3, mean_bounds=(LO, HI), var_bounds=(VMIN, VMAX))
    inf = float("inf")
    cases = [(dict(base, mean_bounds=([0.0] * 3, [1.0] * 3)), ValueError, "mean_bounds' lo must"),
             (dict(base, direction=[1.0, 0.0, 0.0]), ValueError, "direction must be finite with shape \\(2,\\)"),
             (dict(base, align="bogus"), ValueError, "align"),
             (dict(base, align="reference", reference_means=torch.zeros(3, 2)), ValueError, "reference_means"),
             (dict(base, max_iter=-1), ValueError, "max_iter"), (dict(base, max_iter=True), ValueError, "max_iter"),
             (dict(base, split={"weights": inf, "means": 0.5, "covariances": 0.5}), ValueError, "split"),
             (dict(base, var_bounds=("0.001", 0.25)), TypeError, "var_bounds"),
             (dict(base, mean_bounds=("0", 1.0)), TypeError, "mean_bounds")]
    for kw, exc, match in cases:
        g = torch.Generator().manual_seed(0)
        state = g.get_state()
        with pytest.raises(exc, match=match) as info:
            S.fit_sagmm(X, 2, 1.0, 1e-5, generator=g, **kw)
        assert "\n" not in str(info.value) and torch.equal(g.get_state(), state) and not calls
