import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchdpgmm import mechanisms as M
from torchdpgmm.mechanisms import psd


def test_laplace_distribution(gen):
    x = torch.zeros(200000, dtype=torch.float64)
    out = M.laplace(x, 2.0, gen)
    assert stats.kstest(out.numpy(), stats.laplace(scale=2.0).cdf).pvalue > 1e-3
    assert torch.isfinite(out).all()


def test_laplace_broadcasts_scale_and_is_seeded():
    x = torch.zeros(3, 1000, dtype=torch.float64)
    scale = torch.tensor([[0.1], [1.0], [10.0]], dtype=torch.float64)
    a = M.laplace(x, scale, torch.Generator().manual_seed(3))
    b = M.laplace(x, scale, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    mad = a.abs().mean(-1)  # E|Lap(b)| = b
    np.testing.assert_allclose(mad.numpy(), [0.1, 1.0, 10.0], rtol=0.15)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_laplace_rejects_bad_scale(bad):
    with pytest.raises(ValueError, match="scale"):
        M.laplace(torch.zeros(3), bad)


def test_colored_gaussian_covariance(gen):
    C = torch.tensor([[2.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 0.5]], dtype=torch.float64)
    mean = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    out = M.gaussian(mean.expand(100000, 3), C, gen)
    np.testing.assert_allclose(out.mean(0).numpy(), mean.numpy(), atol=0.02)
    np.testing.assert_allclose(np.cov(out.numpy().T), C.numpy(), atol=0.03)


def test_gaussian_rank_one_noise(gen):
    u = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = M.gaussian(torch.zeros(1000, 2, dtype=torch.float64), torch.outer(u, u), gen)
    # all noise lies on the line spanned by u
    assert torch.allclose(out[:, 1], 2 * out[:, 0], atol=1e-10)


def test_wishart_moments_match_scipy(gen):
    d = 3
    gammas = torch.tensor([0.5, 4.0], dtype=torch.float64)
    W = M.wishart(gammas.expand(40000, 2), d, gen)  # (40000, 2, 3, 3)
    for j, g in enumerate(gammas.tolist()):
        ref = stats.wishart(df=d + 1, scale=np.eye(d) / g)
        np.testing.assert_allclose(W[:, j].mean(0).numpy(), ref.mean(), atol=0.05 * (d + 1) / g)
        np.testing.assert_allclose(W[:, j].var(0).numpy(), ref.var(), rtol=0.08)


def test_wishart_validates():
    with pytest.raises(ValueError, match="gamma"):
        M.wishart(torch.tensor([1.0, 0.0]), 2)
    with pytest.raises(ValueError, match="d must"):
        M.wishart(1.0, 0)


def test_r1smg_noise_is_rank_one_with_right_variance(gen):
    d, eps, delta, sens = 5, 1.0, 1e-5, 0.3
    x = torch.zeros(200000, d, dtype=torch.float64)
    out = M.r1smg(x, sens, eps, delta, gen)
    sigma = M.r1smg_sigma(eps, delta, sens, d).item()
    # independent closed form of sigma
    psi = (delta * math.gamma((d - 1) / 2) / (math.sqrt(math.pi) * math.gamma(d / 2))) ** (2 / (d - 2))
    assert math.isclose(sigma, 2 * sens ** 2 / (eps * psi), rel_tol=1e-10)
    # E||noise||^2 = sigma (z^2 has mean 1, ||u|| = 1)
    sq = out.pow(2).sum(-1)
    assert abs(sq.mean().item() - sigma) < 4 * sq.std().item() / math.sqrt(len(sq))
    with pytest.raises(ValueError, match="M > 2"):
        M.r1smg(torch.zeros(2, 2), 1.0, 1.0, 1e-5)


def _rand_sym(gen, batch, d):
    A = torch.randn(*batch, d, d, generator=gen, dtype=torch.float64)
    return A + A.transpose(-1, -2)


def test_eigenvalue_floor(gen):
    S = _rand_sym(gen, (20,), 4)
    R = psd.eigenvalue_floor(S, 1e-3)
    assert torch.allclose(R, R.transpose(-1, -2))
    assert (torch.linalg.eigvalsh(R) >= 1e-3 - 1e-12).all()


def test_xi_repair_invariants(gen):
    S = _rand_sym(gen, (50,), 4)
    noisy = S.clone()
    noisy[..., 1, 0] += 5.0  # asymmetric noise: the upper triangle wins (step 3a)
    R = psd.xi_repair(noisy)
    assert torch.allclose(R, R.transpose(-1, -2))
    assert (torch.linalg.eigvalsh(R) > 0).all()
    assert (torch.linalg.cholesky_ex(R).info == 0).all()
    # independent check of step (b) for one matrix with numpy
    sym = np.triu(noisy[0].numpy()) + np.triu(noisy[0].numpy(), 1).T
    ev, V = np.linalg.eigh(sym)
    ev2 = np.where(ev > 0, ev, ev[ev > 0].min())
    np.testing.assert_allclose(R[0].numpy(), V @ np.diag(ev2) @ V.T, atol=1e-10)


def test_xi_repair_leaves_pd_unchanged(gen):
    A = torch.randn(10, 3, 3, generator=gen, dtype=torch.float64)
    S = A @ A.transpose(-1, -2) + torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(psd.xi_repair(S), S)


def test_shift_psd(gen):
    S = _rand_sym(gen, (30,), 3)
    R = psd.shift_psd(S)
    lam = torch.linalg.eigvalsh(R)[..., 0]
    lam0 = torch.linalg.eigvalsh(S)[..., 0]
    # rho = min{r >= 0 : S + rI >= 0}: lambda_min becomes exactly 0 where it was negative
    assert torch.allclose(lam, torch.where(lam0 < 0, torch.zeros_like(lam0), lam0), atol=1e-10)
    assert (torch.linalg.eigvalsh(psd.shift_psd(S, margin=1e-3))[..., 0] >= 1e-3 - 1e-10).all()


def test_clip_records_scales_before_the_norm():
    """A finite record with a coordinate of 1e154 or more has ||x||^2 = inf in float64; it must still be clipped
    onto the ball (it used to collapse to the centre). Reference: exact decimal arithmetic (no overflow)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60

    def ref_row(x, B, l1=False):
        n = sum(abs(Decimal(v)) for v in x) if l1 else sum(Decimal(v) ** 2 for v in x).sqrt()
        return [float(Decimal(v) * min(Decimal(1), Decimal(B) / n)) if n > 0 else 0.0 for v in x]

    rows = [[1e200, 0.0], [3e200, -4e200], [1e154, 1e154], [1.7e308, -1.7e308], [1.0, 2.0], [0.3, -0.4], [0.0, 0.0]]
    X = torch.tensor(rows, dtype=torch.float64)
    B = 1.5
    Z = M.clip_records(X, B)
    for x, z in zip(rows, Z.tolist()):
        np.testing.assert_allclose(z, ref_row(x, B), rtol=1e-15, atol=0)
    assert torch.equal(Z[5], X[5]) and torch.equal(Z[6], X[6])  # rows inside the ball come back bit for bit
    Z1 = M.clip_records(X, B, norm="l1")
    for x, z in zip(rows, Z1.tolist()):
        np.testing.assert_allclose(z, ref_row(x, B, l1=True), rtol=1e-15, atol=0)


def test_clip_records_centred_overflow_and_public_bound():
    X = torch.tensor([[1.0e308, 0.0], [-1.0e308, 2.0]], dtype=torch.float64)
    Z = M.clip_records(X, 1.0, center=torch.tensor([-1.0e308, 0.0], dtype=torch.float64))  # x - c overflows: not finite, dropped by callers
    assert not torch.isfinite(Z[0]).all() and Z[1].tolist() == [0.0, 1.0]
    for bad in (0.0, -1.0, float("inf"), float("nan"), "x", torch.tensor([1.0, -1.0])):
        with pytest.raises(ValueError, match="clip_bound must be finite and > 0"):
            M.clip_records(X, bad)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6, 7, 8])
def test_jacobi_eigh_matches_numpy(d):
    """Fixed-sweep Jacobi (the PSD repair's eigen-decomposition on accelerators) against numpy's eigvalsh, with
    repeated, zero, rank-one and extreme-scale matrices; the work is the same for every input."""
    rng = np.random.default_rng(d)
    M = rng.normal(size=(400, d, d))
    S = M + np.swapaxes(M, -1, -2)
    S[0], S[1], S[2] = np.eye(d), 0.0, np.ones((d, d))
    S[3] *= 1e300
    S[4] *= 1e-300
    S[5] = np.diag([1.0] * (d - 1) + [1.0 + 1e-12])
    # two clusters of eigenvalues (1 and 1e-8) in random bases: the round-robin order left its rotated pairs at
    # rounding once, and converged to 1e-12 only
    Q, _ = np.linalg.qr(rng.normal(size=(100, d, d)))
    lam2 = np.where(np.arange(d) < d // 2, 1.0, 1e-8)
    S[6:106] = (Q * lam2) @ np.swapaxes(Q, -1, -2)
    S[6:106] = (S[6:106] + np.swapaxes(S[6:106], -1, -2)) / 2
    lam, V = psd.jacobi_eigh(torch.as_tensor(S))
    lam, V = lam.numpy(), V.numpy()
    scale = np.maximum(np.abs(S).max((-1, -2)), 1e-300)
    np.testing.assert_array_less(np.abs(np.sort(lam, -1) - np.linalg.eigvalsh(S)).max(-1) / scale, 1e-13)
    rec = (V * lam[:, None, :]) @ np.swapaxes(V, -1, -2)
    np.testing.assert_array_less(np.abs(rec - S).max((-1, -2)) / scale, 1e-13)
    np.testing.assert_allclose(np.swapaxes(V, -1, -2) @ V, np.broadcast_to(np.eye(d), V.shape), atol=1e-13)


def test_jacobi_parallel_order_has_fixed_work_and_fewer_ops():
    """From d = 4 the rotations go in Brent & Luk's round-robin order: the same ops for every input (no value decides
    the work) and, at d = 8, under a third of the cyclic order's dispatched ops (a single release on a GPU is
    launch-bound). The cyclic order is the same function with the threshold raised."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    def ops(S):
        with Count() as c:
            psd.jacobi_eigh(S)
        return c.n

    rng = np.random.default_rng(0)
    M = torch.as_tensor(rng.normal(size=(3, 8, 8)))
    inputs = [M + M.mT, torch.zeros(3, 8, 8, dtype=torch.float64), torch.eye(8, dtype=torch.float64).expand(3, 8, 8)]
    counts = {ops(S) for S in inputs}
    assert len(counts) == 1
    saved = psd.JACOBI_PARALLEL_MIN_DIM
    try:
        psd.JACOBI_PARALLEL_MIN_DIM = 99
        cyclic = ops(inputs[0])
    finally:
        psd.JACOBI_PARALLEL_MIN_DIM = saved
    assert counts.pop() * 3 < cyclic


@pytest.mark.cuda
@pytest.mark.parametrize("d", [3, 5, 8])
def test_jacobi_eigh_on_cuda_matches_numpy_without_a_synchronisation(d):
    """On a GPU (both orders: cyclic at d = 3, round-robin from 4): numpy's eigenvalues to 1e-13 of max|S| on 1,000
    random symmetric matrices, and no synchronisation that torch reports (set_sync_debug_mode) in the call."""
    import warnings

    rng = np.random.default_rng(d)
    M = rng.normal(size=(1000, d, d))
    S = M + np.swapaxes(M, -1, -2)
    St = torch.as_tensor(S).cuda()
    psd.jacobi_eigh(St)  # first call: kernels load
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lam, V = psd.jacobi_eigh(St)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert not [q for q in w if "synchroniz" in str(q.message).lower()], [str(q.message) for q in w]
    lam, V = lam.cpu().numpy(), V.cpu().numpy()
    scale = np.abs(S).max((-1, -2))
    np.testing.assert_array_less(np.abs(np.sort(lam, -1) - np.linalg.eigvalsh(S)).max(-1) / scale, 1e-13)
    np.testing.assert_allclose(np.swapaxes(V, -1, -2) @ V, np.broadcast_to(np.eye(d), V.shape), atol=1e-13)
