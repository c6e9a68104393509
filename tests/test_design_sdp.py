"""The covering SDP (23) at t/L = 1: dual and cvxpylayers solvers against the literal LMI in plain cvxpy."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm.design.sdp import (covering_violation, label_flip_differences, solve_covering_sdp,
                                   solve_lmi_cvxpy)


def _problem(seed, n, d, k=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64) @ torch.randn(d, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, k, (n,), generator=g)
    return X, y


def _class0(X, y, k=3):
    V, vm, counts, means = label_flip_differences(X, y, k)
    S = torch.cov(X[y == 0].T)
    return V[0], vm[0], torch.linalg.inv(S)


def test_label_flip_differences_brute_force():
    X, y = _problem(0, 30, 2)
    V, vm, counts, means = label_flip_differences(X, y, 3)
    Xn, yn = X.numpy(), y.numpy()
    for k in range(3):
        mu = Xn[yn == k].mean(0)
        for n in range(30):
            for kp in range(3):
                if kp == yn[n]:
                    continue
                y2 = yn.copy()
                y2[n] = kp
                if k not in (yn[n], kp):
                    continue
                delta = Xn[y2 == k].mean(0) - mu
                # same vector up to sign
                v = V[k, n].numpy()
                assert min(np.abs(v - delta).max(), np.abs(v + delta).max()) < 1e-12
    assert torch.equal(counts, torch.bincount(y, minlength=3).double())


@pytest.mark.parametrize("seed,n,d", [(1, 80, 2), (2, 120, 3), (3, 60, 4)])
def test_solvers_agree_with_literal_lmi(seed, n, d):
    X, y = _problem(seed, n, d)
    V, vm, A = _class0(X, y)
    ref, Xref, _ = solve_lmi_cvxpy(A.numpy(), V.numpy())
    dual = solve_covering_sdp(V, A, vm, solver="dual")
    lay = solve_covering_sdp(V, A, vm, solver="cvxpylayers")
    assert abs(dual.opt.item() / ref - 1) < 1e-5
    assert abs(lay.opt.item() / ref - 1) < 1e-5
    assert dual.gap.item() <= 1e-6
    # the certified lower bound really is below the reference optimum (up to the LMI's own accuracy)
    assert dual.lower.item() <= ref * (1 + 1e-6)
    for res in (dual, lay):
        assert covering_violation(V, res.X, vm).item() <= 1 + 1e-9
        assert torch.linalg.eigvalsh(res.X).min().item() > 0


def test_closed_form_two_orthogonal_vectors():
    # min tr X s.t. X >= a^2 e1 e1^T, X >= b^2 e2 e2^T  ->  X = diag(a^2, b^2), value a^2 + b^2
    a, b = 0.7, 2.3
    V = torch.tensor([[a, 0.0], [0.0, b], [-a, 0.0]], dtype=torch.float64)
    res = solve_covering_sdp(V, torch.eye(2, dtype=torch.float64))
    assert res.opt.item() == pytest.approx(a * a + b * b, rel=1e-9)
    assert torch.allclose(res.X, torch.diag(torch.tensor([a * a, b * b], dtype=torch.float64)), atol=1e-7)


def test_batched_ragged_equals_separate():
    probs = [_class0(*_problem(s, n, 3)) for s, n in [(4, 50), (5, 90), (6, 70)]]
    nmax = max(p[0].shape[0] for p in probs)
    Vb = torch.zeros(3, nmax, 3, dtype=torch.float64)
    mb = torch.zeros(3, nmax, dtype=torch.bool)
    Ab = torch.stack([p[2] for p in probs])
    for i, (V, vm, A) in enumerate(probs):
        Vb[i, : V.shape[0]] = V
        mb[i, : V.shape[0]] = vm
        Vb[i, V.shape[0]:] = 1e3  # garbage in the padding must be ignored
    rb = solve_covering_sdp(Vb, Ab, mb)
    for i, (V, vm, A) in enumerate(probs):
        r = solve_covering_sdp(V, A, vm)
        assert rb.opt[i].item() == pytest.approx(r.opt.item(), rel=2e-6)  # both certified to 1e-6
    rl = solve_covering_sdp(Vb, Ab, mb, solver="cvxpylayers")
    assert torch.allclose(rl.opt, rb.opt, rtol=1e-5)


def test_pruning_equals_no_pruning():
    # Newton polishing off, so the multiplicative iteration runs long enough for the active set to kick in
    X, y = _problem(7, 300, 3)
    V, vm, A = _class0(X, y)
    kw = dict(newton_steps=0, tol=1e-5, max_iter=4000, method="multiplicative")
    a = solve_covering_sdp(V, A, vm, prune=True, **kw)
    b = solve_covering_sdp(V, A, vm, prune=False, **kw)
    assert a.iterations > 40  # the pruning branch was reached
    assert a.opt.item() == pytest.approx(b.opt.item(), rel=2e-5)
    assert a.gap.item() <= 1e-5 and b.gap.item() <= 1e-5
    ref = solve_covering_sdp(V, A, vm)  # Newton-polished, gap 1e-6
    assert a.opt.item() == pytest.approx(ref.opt.item(), rel=2e-5)


def test_scaled_lmi_reduction():
    # reduction 1: with eps_k^2 a variable bounded by T, the literal (23) gives X*(T) = (L/T) X1*
    X, y = _problem(8, 60, 2)
    V, vm, A = _class0(X, y)
    L = 2 * math.log(2 / 1e-5)
    T = 0.37
    opt_t, X_t, e = solve_lmi_cvxpy(A.numpy(), V.numpy(), eps_sq_max=T, L=L)
    r1 = solve_covering_sdp(V, A, vm)
    assert e == pytest.approx(T, rel=1e-6)
    assert opt_t == pytest.approx(L / T * r1.opt.item(), rel=1e-5)


def test_bad_shapes():
    with pytest.raises(ValueError):
        solve_covering_sdp(torch.zeros(5, 3), torch.eye(2))
    with pytest.raises(ValueError):
        solve_covering_sdp(torch.zeros(5, 2), torch.eye(2), solver="scs")


def test_label_flip_differences_ignore_nan_padding():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(30, 2, generator=g, dtype=torch.float64)
    y = torch.arange(30) % 2
    mask = torch.arange(30) < 24
    Xp = X.clone()
    Xp[24:] = float("nan")
    V, vm, counts, means = label_flip_differences(Xp, y, 2, mask)
    V0, vm0, counts0, means0 = label_flip_differences(X[:24], y[:24], 2)
    assert torch.isfinite(V).all()
    torch.testing.assert_close(V[:, :24], V0)
    torch.testing.assert_close(means, means0)
    assert (V[:, 24:] == 0).all()


def test_prune_unprune_cycle_converges():
    """A problem (found by the scale benchmark) on which pruning to the active set and un-pruning used to
    alternate forever (20000 iterations, gap 2e-4); with geometric back-off it reaches the 1e-6 gap."""
    from torchdpgmm.mixture import fit_labeled
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.sweep import block_seed

    data = synthetic_data(40, 1000, 5, 3, generator=torch.Generator().manual_seed(block_seed(0, "data", 1000, 5, 3, 16)))
    X, y = data.X[35], data.y[35]
    V, vm, _, _ = label_flip_differences(X, y, 5)
    A = torch.linalg.inv(fit_labeled(X, y, 5).covariances)
    res = solve_covering_sdp(V[3], A[3], vm[3], max_iter=3000)
    assert float(res.gap) <= 1e-6 and float(covering_violation(V[3], res.X, vm[3])) <= 1 + 1e-9
    # an independent feasible point (Clarabel through cvxpylayers, post-scaled to feasibility) bounds the
    # optimum from above: the certified lower bound must lie below it, and our value within 1e-6 of it or better
    ref = solve_covering_sdp(V[3], A[3], vm[3], solver="cvxpylayers")
    assert float(res.lower) <= float(ref.opt) * (1 + 1e-9)
    assert float(res.opt) <= float(ref.opt) * (1 + 1e-6)


def _degenerate_cases():
    g = torch.Generator().manual_seed(11)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    base = r(40, 3)
    yield "random", r(200, 3), None
    yield "duplicates", torch.cat([base, base, -base, base[:5]]), None
    yield "subspace", r(60, 2) @ r(2, 3), None            # rank 2 in R^3: the optimum is singular
    yield "n_lt_d(d+1)/2", r(4, 3), None                   # N = 4 < 6
    m = torch.rand(80, generator=g) < 0.6
    V = r(80, 3)
    V[~m] = 1e3                                            # masked rows hold garbage
    yield "masked", V, m


@pytest.mark.parametrize("case", range(5))
def test_barrier_certificate_and_feasibility_on_degenerate_instances(case):
    name, V, m = list(_degenerate_cases())[case]
    g = torch.Generator().manual_seed(case)
    G = torch.randn(3, 3, generator=g, dtype=torch.float64)
    A = G @ G.T + 0.5 * torch.eye(3, dtype=torch.float64)
    res = solve_covering_sdp(V, A, m, method="barrier")
    assert res.gap.item() <= 1e-6, name
    assert covering_violation(V, res.X, m).item() <= 1 + 1e-9, name
    assert torch.linalg.eigvalsh(res.X).min().item() > 0, name
    Vr = V if m is None else V[m]
    ref, _, _ = solve_lmi_cvxpy(A.numpy(), Vr.numpy())     # independent reference (Clarabel)
    assert abs(res.opt.item() / ref - 1) < 1e-5, name
    assert res.lower.item() <= ref * (1 + 1e-6), name


def test_barrier_equals_multiplicative_on_a_batch():
    probs = [_class0(*_problem(s, 150, 3)) for s in range(20, 26)]
    V = torch.stack([p[0] for p in probs])
    A = torch.stack([p[2] for p in probs])
    a = solve_covering_sdp(V, A, method="barrier")
    b = solve_covering_sdp(V, A, method="multiplicative")
    assert (a.gap <= 1e-6).all() and (b.gap <= 1e-6).all()
    assert torch.allclose(a.opt, b.opt, rtol=2e-6)
    assert (covering_violation(V, a.X) <= 1 + 1e-9).all()


@pytest.mark.parametrize("d,method,solver", [(5, "barrier", "dual"), (3, "multiplicative", "dual"),
                                             (6, "multiplicative", "dual"), (3, "barrier", "cvxpylayers")])
def test_returned_x_is_strictly_feasible_on_every_path(d, method, solver):
    """_post_scale scaled by max(q, 1) without a margin: off the d <= 4 barrier path some returned X had
    q = max_m v^T X^-1 v = 1 + 2e-16 (docs/design.md says (10) always holds). Reference q: numpy's solve."""
    if solver == "cvxpylayers":
        pytest.importorskip("cvxpylayers")
    g = torch.Generator().manual_seed(1)
    T, n = (20, 60) if solver == "dual" else (3, 12)
    V = torch.randn(T, n, d, generator=g, dtype=torch.float64)
    r = solve_covering_sdp(V, torch.eye(d, dtype=torch.float64), method=method, solver=solver)
    for t in range(T):
        Vt, Xt = V[t].numpy(), r.X[t].numpy()
        q = np.einsum("md,md->m", Vt, np.linalg.solve(Xt, Vt.T).T).max()
        assert q < 1 - 1e-13  # the 1e-12 margin, far above the rounding of either evaluation of q


def test_bad_masks_and_vectors_are_one_line():
    """An int mask gave a where RuntimeError, a mask of the wrong length an expand RuntimeError, every vector
    masked (or NaN in V) a raw LinAlgError; NaN on masked rows broke the solve (NaN * 0 = NaN)."""
    g = torch.Generator().manual_seed(0)
    V = torch.randn(5, 2, generator=g, dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        solve_covering_sdp(V, eye, mask=torch.ones(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"mask must have shape \(\.\.\., 5\)"):
        solve_covering_sdp(V, eye, mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="do not broadcast"):
        solve_covering_sdp(V.expand(3, 5, 2), eye.expand(2, 2, 2))
    with pytest.raises(ValueError, match="at least one unmasked nonzero vector"):
        solve_covering_sdp(V, eye, mask=torch.zeros(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one unmasked nonzero vector"):
        solve_covering_sdp(torch.zeros(5, 2, dtype=torch.float64), eye)
    with pytest.raises(ValueError, match="must be finite"):
        solve_covering_sdp(torch.tensor([[math.nan, 0.0], [1.0, 1.0]], dtype=torch.float64), eye)
    with pytest.raises(ValueError, match="positive definite"):
        solve_covering_sdp(V, torch.diag(torch.tensor([1.0, -1.0], dtype=torch.float64)))
    mask = torch.tensor([True, True, True, False, False])
    Vp = V.clone()
    Vp[3:] = math.nan
    r = solve_covering_sdp(Vp, eye, mask=mask)
    X = r.X.numpy()  # feasible for the unmasked vectors (numpy), and the optimum of the 3 real vectors
    assert max(v @ np.linalg.solve(X, v) for v in V[:3].numpy()) < 1
    assert float(r.opt) == pytest.approx(float(solve_covering_sdp(V[:3], eye).opt), rel=1e-6)
