"""The one noise layer: clipping in float64, the Laplace / Gaussian / symmetric samplers.

"Results unchanged in distribution": the samplers that were replaced are re-implemented here from the
previous code (the references), and the new draws are compared with them by moments and two-sample tests.
"""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchdpgmm import mechanisms as M


def _old_mech_laplace(shape, scale, gen):  # previous mechanisms.laplace_noise (difference of exponentials)
    u = torch.rand(2, *shape, dtype=torch.float64, generator=gen)
    e = -torch.log1p(-u)
    return scale * (e[0] - e[1])


def _old_sound_symmetric_gaussian(n, d, sigma, gen):  # previous sound._sym_noise (packed upper triangle)
    iu = torch.triu_indices(d, d)
    v = torch.randn(n, iu.shape[1], generator=gen, dtype=torch.float64) * sigma
    v = torch.where(iu[0] != iu[1], v / math.sqrt(2.0), v)
    Mx = torch.zeros(n, d, d, dtype=torch.float64)
    Mx[:, iu[0], iu[1]] = v
    Mx[:, iu[1], iu[0]] = v
    return Mx


def test_clip_records_float64_against_numpy():
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(3, 50, 4)) * 3).astype(np.float32).astype(np.float64)  # exactly representable
    B = np.array([0.5, 1.0, 2.0])
    c = rng.normal(size=(3, 4))
    Z = X - c[:, None, :]
    n = np.linalg.norm(Z, axis=-1, keepdims=True)
    ref = Z * np.minimum(1.0, B[:, None, None] / n)
    out = M.clip_records(torch.tensor(X, dtype=torch.float32), torch.tensor(B), center=torch.tensor(c))
    assert out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13)  # computed in float64 after the cast
    assert (torch.linalg.vector_norm(out, dim=-1) <= torch.tensor(B)[:, None] * (1 + 1e-15)).all()
    np.testing.assert_array_equal(M.clip_records(torch.zeros(2, 3, dtype=torch.int64), 1.0).numpy(), 0.0)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="clip_bound"):
            M.clip_records(torch.ones(2, 3), bad)


def test_float32_sums_undercount_but_float64_clipping_does_not():
    # the reason clip_records casts: one record's change is lost in a float32 sum at large N
    n = 2 ** 24
    rec32 = torch.ones(1, 1, dtype=torch.float32)
    assert float(rec32.expand(n + 1, 1).sum() - rec32.expand(n, 1).sum()) == 0.0  # the extra record vanished
    z = M.clip_records(rec32, 1.0)
    assert z.dtype == torch.float64
    assert float(z.expand(n + 1, 1).sum() - z.expand(n, 1).sum()) == 1.0


def test_laplace_noise_matches_previous_sampler_in_distribution():
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    new = M.laplace_noise((200_000,), torch.tensor(1.5, dtype=torch.float64), g1).numpy()
    old = _old_mech_laplace((200_000,), 1.5, g2).numpy()
    assert stats.ks_2samp(new, old).pvalue > 1e-3
    assert stats.kstest(new, stats.laplace(scale=1.5).cdf).pvalue > 1e-3
    for f in (np.mean, np.var, lambda x: np.mean(np.abs(x))):
        assert abs(f(new) - f(old)) < 0.03 * max(1.0, abs(f(old)))
    assert abs(stats.kurtosis(new) - 3.0) < 0.2  # Laplace excess kurtosis is 3


def test_laplace_noise_float32_is_finite_even_at_the_edge(monkeypatch):
    # u = 0 makes the centred uniform exactly -1/2: the old float32 guard rounded away and gave -inf
    real_rand = torch.rand
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.zeros_like(real_rand(*a, **k)))
    out = M.laplace_noise((4,), torch.tensor(1.0, dtype=torch.float32))
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert float(out[0]) == pytest.approx(-math.log(2.0 ** 53), rel=1e-6)  # u = -1/2 + 2^-54


def test_laplace_same_distribution_for_float32_and_float64_inputs():
    x32, x64 = torch.zeros(100_000, dtype=torch.float32), torch.zeros(100_000, dtype=torch.float64)
    a = M.laplace(x32, 2.0, torch.Generator().manual_seed(0))
    b = M.laplace(x64, 2.0, torch.Generator().manual_seed(0))
    assert a.dtype == torch.float32 and b.dtype == torch.float64
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)  # same float64 draws, rounded


def test_symmetric_noise_isometric_matches_previous_sound_sampler():
    n, d, s = 40_000, 3, 2.0
    new = M.symmetric_noise((n,), d, s, kind="gaussian", isometric=True, generator=torch.Generator().manual_seed(0),
                            dtype=torch.float64)
    old = _old_sound_symmetric_gaussian(n, d, s, torch.Generator().manual_seed(1))
    assert torch.equal(new, new.transpose(-1, -2))
    for i, j in [(0, 0), (0, 1), (1, 2), (2, 2)]:
        assert stats.ks_2samp(new[:, i, j].numpy(), old[:, i, j].numpy()).pvalue > 1e-3
    # Frobenius-isometric: E ||M||_F^2 = d s^2 + d(d-1)/2 * 2 * (s^2/2) = d(d+1)/2 s^2
    assert float((new ** 2).sum((-1, -2)).mean()) == pytest.approx(d * (d + 1) / 2 * s * s, rel=0.02)


def test_symmetric_laplace_batched_scales():
    scale = torch.tensor([[0.5], [4.0]], dtype=torch.float64)  # batch (2, 1) broadcasting to (2, K=3)
    out = M.symmetric_noise((2, 3), 2, scale, kind="laplace", generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 3, 2, 2) and torch.equal(out, out.transpose(-1, -2))
    big = M.symmetric_noise((2, 20000), 2, scale, kind="laplace", generator=torch.Generator().manual_seed(1))
    np.testing.assert_allclose(big[..., 0, 1].abs().mean(-1).numpy(), [0.5, 4.0], rtol=0.05)
    with pytest.raises(ValueError, match="kind"):
        M.symmetric_noise((2,), 2, 1.0, kind="cauchy")


def test_normal_noise_seeded_and_scaled():
    a = M.normal_noise((3, 1000), torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64), torch.Generator().manual_seed(5))
    b = torch.randn(3, 1000, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    assert torch.equal(a, b)  # the stream of the samplers it replaced (sigma * randn) is kept


def _old_baselines_laplace_vec(shape, scale, gen):  # previous baselines._laplace_vec / sound._laplace_noise
    u = torch.rand(*shape, generator=gen, dtype=torch.float64) - 0.5
    e = -torch.sign(u) * torch.log1p(-2.0 * u.abs().clamp(max=0.5 - 1e-16))
    return e * scale


def _old_baselines_symmetric(shape, scale, gen, kind):  # previous baselines.symmetric_{laplace,gaussian}_noise
    if kind == "laplace":
        e = _old_baselines_laplace_vec(shape, 1.0, gen) * scale[..., None, None]
    else:
        e = torch.randn(*shape, generator=gen, dtype=torch.float64) * scale[..., None, None]
    return torch.triu(e) + torch.triu(e, 1).transpose(-1, -2)


def test_seeded_streams_of_the_baselines_and_sound_laplace_are_kept():
    scale = torch.tensor([[0.5], [2.0]], dtype=torch.float64)
    new = M.laplace_noise((2, 7), scale, torch.Generator().manual_seed(11))
    old = _old_baselines_laplace_vec((2, 7), scale, torch.Generator().manual_seed(11))
    assert torch.equal(new, old)
    for kind in ("laplace", "gaussian"):
        sc = torch.tensor([[0.3], [1.7]], dtype=torch.float64)  # (batch, 1) as baseline_release passes it
        new = M.symmetric_noise((2, 3), 4, sc, kind=kind, generator=torch.Generator().manual_seed(5))
        old = _old_baselines_symmetric((2, 3, 4, 4), sc, torch.Generator().manual_seed(5), kind)
        assert torch.equal(new, old)
