import math

import numpy as np
import pytest
import torch
from scipy import stats

import torchdpgmm as tdg


def _numpy_fit(X, y, K):
    w, m, c = [], [], []
    for k in range(K):
        Xk = X[y == k]
        w.append(len(Xk) / len(X))
        m.append(Xk.mean(0))
        c.append(np.cov(Xk.T, ddof=1))
    return np.array(w), np.array(m), np.array(c)


def test_fit_labeled_matches_numpy_on_batch(gen):
    T, N, d, K = 7, 60, 3, 4
    X = torch.randn(T, N, d, generator=gen, dtype=torch.float64) * 3 + 1
    y = torch.randint(0, K, (T, N), generator=gen)
    model = tdg.fit_labeled(X, y, K)
    assert model.batch_shape == (T,)
    for t in range(T):
        w, m, c = _numpy_fit(X[t].numpy(), y[t].numpy(), K)
        np.testing.assert_allclose(model.weights[t].numpy(), w, rtol=1e-12)
        np.testing.assert_allclose(model.means[t].numpy(), m, rtol=1e-10)
        np.testing.assert_allclose(model.covariances[t].numpy(), c, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(model.counts[t].numpy(), np.bincount(y[t].numpy(), minlength=K))


def test_fit_labeled_mask_equals_unpadded(gen):
    d, K = 2, 3
    X = torch.randn(2, 50, d, generator=gen, dtype=torch.float64)
    y = torch.randint(0, K, (2, 50), generator=gen)
    y[:, :6] = torch.tensor([0, 0, 1, 1, 2, 2])
    lengths = [50, 31]
    mask = torch.arange(50) < torch.tensor(lengths).unsqueeze(-1)
    Xp = X.clone()
    Xp[1, 31:] = float("nan")  # padding may hold anything
    yp = y.clone()
    yp[1, 31:] = 99
    batched = tdg.fit_labeled(Xp, yp, K, mask=mask)
    for t, n in enumerate(lengths):
        single = tdg.fit_labeled(X[t, :n], y[t, :n], K)
        torch.testing.assert_close(batched.means[t], single.means)
        torch.testing.assert_close(batched.covariances[t], single.covariances)
        torch.testing.assert_close(batched.weights[t], single.weights)


def test_multi_dim_batch(gen):
    X = torch.randn(2, 3, 40, 2, generator=gen, dtype=torch.float64)
    y = torch.arange(40).remainder(2).expand(2, 3, 40)
    m = tdg.fit_labeled(X, y, 2)
    assert m.batch_shape == (2, 3) and m.means.shape == (2, 3, 2, 2)
    assert m.log_prob(X).shape == (2, 3, 40)


@pytest.mark.parametrize(
    "X, y, K, msg",
    [
        (torch.tensor([[0.0, float("nan")], [1, 1], [2, 2], [3, 3]]), torch.tensor([0, 0, 1, 1]), 2, "non-finite"),
        (torch.zeros(4, 2), torch.tensor([0, 0, 1, 2]), 2, "labels must lie"),
        (torch.randn(4, 2), torch.tensor([0, 1, 1, 1]), 2, "at least 2"),
        (torch.randn(4, 2), torch.tensor([0, 0, 1]), 2, "shape"),
        (torch.randn(4, 2), torch.tensor([0.0, 0, 1, 1]), 2, "integer"),
    ],
)
def test_fit_labeled_rejects_bad_input(X, y, K, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        tdg.fit_labeled(X, y, K)


def test_log_prob_and_predict_match_scipy(gen):
    w = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    mu = torch.randn(3, 2, generator=gen, dtype=torch.float64) * 2
    A = torch.randn(3, 2, 2, generator=gen, dtype=torch.float64)
    S = A @ A.transpose(-1, -2) + 0.5 * torch.eye(2, dtype=torch.float64)
    model = tdg.LabeledGMM(w, mu, S)
    x = torch.randn(20, 2, generator=gen, dtype=torch.float64) * 2
    comp = np.stack([np.log(w[k].item()) + stats.multivariate_normal(mu[k].numpy(), S[k].numpy()).logpdf(x.numpy())
                     for k in range(3)], -1)
    np.testing.assert_allclose(model.class_log_prob(x).numpy(), comp, rtol=1e-10)
    np.testing.assert_allclose(model.log_prob(x).numpy(), np.logaddexp.reduce(comp, -1), rtol=1e-10)
    np.testing.assert_array_equal(model.predict(x).numpy(), comp.argmax(-1))


def test_sample_moments_and_reproducibility():
    w = torch.tensor([0.3, 0.7], dtype=torch.float64)
    mu = torch.tensor([[0.0, 0.0], [5.0, -1.0]], dtype=torch.float64)
    S = torch.stack([torch.eye(2), torch.tensor([[2.0, 0.5], [0.5, 1.0]])]).double()
    model = tdg.LabeledGMM(w, mu, S)
    g1 = torch.Generator().manual_seed(7)
    g2 = torch.Generator().manual_seed(7)
    x, y = model.sample(40000, g1)
    x2, y2 = model.sample(40000, g2)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    frac = (y == 1).double().mean()
    assert abs(frac - 0.7) < 4 * (0.21 / 40000) ** 0.5
    fit = tdg.fit_labeled(x, y, 2)
    torch.testing.assert_close(fit.means, mu, atol=0.05, rtol=0)
    torch.testing.assert_close(fit.covariances, S, atol=0.08, rtol=0)


def test_sample_counts_exact_histogram(gen):
    model = tdg.LabeledGMM(torch.tensor([[0.5, 0.5], [0.5, 0.5]]).double(), torch.zeros(2, 2, 3).double(),
                           torch.eye(3).double().expand(2, 2, 3, 3))
    counts = torch.tensor([[3, 5], [4, 2]])
    x, y, mask = model.sample_counts(counts, gen)
    assert x.shape == (2, 8, 3) and mask.sum(-1).tolist() == [8, 6]
    for t in range(2):
        np.testing.assert_array_equal(np.bincount(y[t][mask[t]].numpy(), minlength=2), counts[t].numpy())


def test_model_validation():
    with pytest.raises(ValueError, match="sum to 1"):
        tdg.LabeledGMM(torch.tensor([0.5, 0.6]), torch.zeros(2, 1), torch.ones(2, 1, 1))
    with pytest.raises(ValueError, match="positive definite"):
        tdg.LabeledGMM(torch.tensor([0.5, 0.5]), torch.zeros(2, 1), torch.tensor([[[1.0]], [[-1.0]]]))


@pytest.mark.parametrize("ct", ["full", "tied", "diag", "spherical"])
def test_fit_labeled_covariance_types_match_numpy(gen, ct):
    """eq. (2) through the sufficient statistics, every covariance type (scikit-learn's names) vs numpy."""
    N, d, K = 80, 3, 3
    X = torch.randn(N, d, generator=gen, dtype=torch.float64) * 2 + 5  # far from 0: no cancellation
    y = torch.arange(N) % K
    m = tdg.fit_labeled(X, y, K, covariance_type=ct)
    Xn, yn = X.numpy(), y.numpy()
    covs = [np.cov(Xn[yn == k].T, ddof=1) for k in range(K)]
    pooled = sum((np.sum(yn == k) - 1) * covs[k] for k in range(K)) / (N - K)
    for k in range(K):
        ref = {"full": covs[k], "tied": pooled, "diag": np.diag(np.diag(covs[k])),
               "spherical": np.trace(covs[k]) / d * np.eye(d)}[ct]
        np.testing.assert_allclose(m.covariances[k].numpy(), ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(m.means[k].numpy(), Xn[yn == k].mean(0), rtol=1e-12)


def test_class_moments_ignore_masked_and_out_of_range_rows(gen):
    from torchdpgmm.mixture import class_moments

    X = torch.randn(10, 2, generator=gen, dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 0, 2, 5, -1, 1, 0, 2])
    mask = torch.ones(10, dtype=torch.bool)
    mask[4] = False
    Xb = X.clone()
    Xb[4] = float("nan")  # masked rows may hold anything
    c, s, q = class_moments(Xb, y, 3, mask=mask)
    keep = mask & (y >= 0) & (y < 3)
    Xk, yk = X[keep].numpy(), y[keep].numpy()
    for k in range(3):
        np.testing.assert_allclose(c[k].item(), np.sum(yk == k))
        np.testing.assert_allclose(s[k].numpy(), Xk[yk == k].sum(0), atol=1e-12)
        np.testing.assert_allclose(q[k].numpy(), Xk[yk == k].T @ Xk[yk == k], atol=1e-12)


def test_class_moments_many_groups_and_chunks_match_numpy(gen):
    """Many groups and more rows than one scatter chunk (the CPU path) against numpy, plus the batched path."""
    from torchdpgmm.mixture import class_moments

    X = torch.randn(1300, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(-1, 81, (1300,), generator=gen)
    c, s, q = class_moments(X, y, 80)
    cb, sb, qb = class_moments(X.unsqueeze(0), y.unsqueeze(0), 80)  # batched: the einsum path
    Xn, yn = X.numpy(), y.numpy()
    for k in (0, 17, 79):
        np.testing.assert_allclose(q[k].numpy(), Xn[yn == k].T @ Xn[yn == k], atol=1e-12)
        np.testing.assert_allclose(c[k].item(), np.sum(yn == k))
    np.testing.assert_allclose(qb[0].numpy(), q.numpy(), atol=1e-12)


def test_fit_labeled_min_count_zero_tolerates_tiny_classes():
    X = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    m = tdg.fit_labeled(X, y, 3, min_count=0)
    assert torch.equal(m.covariances[1], torch.zeros(2, 2, dtype=torch.float64))  # one record
    assert torch.equal(m.means[2], torch.zeros(2, dtype=torch.float64)) and m.counts[2] == 0  # empty
    with pytest.raises(ValueError, match="at least 2"):
        tdg.fit_labeled(X, y, 3)


def _ops(load_script, fn):
    bench = load_script("benchmarks/bench_syncs.py")
    with bench.OpCounter() as c:
        fn()
    return c.ops, c.total_syncs


@pytest.mark.parametrize("batched", [False, True])
def test_class_moments_work_does_not_depend_on_rows_or_values(load_script, batched):
    """The Python steps of the statistics depend on d (one dataset on the CPU) or K (batches), not on N or values:
    the same dispatched ops for 50 and 5,000 rows and for other labels; no host read."""
    from torchdpgmm.mixture import class_moments

    g = torch.Generator().manual_seed(3)
    runs = []
    for n in (50, 5000):
        for hi in (2, 4):
            X = torch.randn(n, 3, generator=g, dtype=torch.float64)
            y = torch.randint(-1, hi, (n,), generator=g)
            if batched:
                X, y = X.expand(2, n, 3), y.expand(2, n)
            for ct in ("full", "diag", "spherical", "tied"):
                runs.append((ct, _ops(load_script, lambda: class_moments(X, y, 3, covariance_type=ct))))
    for ct in ("full", "diag", "spherical", "tied"):
        counts = {r for c, r in runs if c == ct}
        assert len(counts) == 1 and next(iter(counts))[1] == 0, (ct, counts)


@pytest.mark.parametrize("ct", ["full", "diag", "spherical", "tied"])
def test_class_moments_batched_types_match_numpy(gen, ct):
    from torchdpgmm.mixture import class_moments

    X = torch.randn(3, 40, 2, generator=gen, dtype=torch.float64)
    y = torch.randint(-1, 4, (3, 40), generator=gen)
    mask = torch.rand(3, 40, generator=gen) < 0.8
    c, s, q = class_moments(X, y, 3, mask=mask, covariance_type=ct)
    for t in range(3):
        keep = (mask[t] & (y[t] >= 0) & (y[t] < 3)).numpy()
        Xn, yn = X[t].numpy()[keep], y[t].numpy()[keep]
        ref = {"full": [Xn[yn == k].T @ Xn[yn == k] for k in range(3)], "tied": Xn.T @ Xn,
               "diag": [(Xn[yn == k] ** 2).sum(0) for k in range(3)],
               "spherical": [(Xn[yn == k] ** 2).sum() for k in range(3)]}[ct]
        np.testing.assert_allclose(q[t].numpy(), np.asarray(ref), atol=1e-12)
        np.testing.assert_allclose(c[t].numpy(), [np.sum(yn == k) for k in range(3)])
        np.testing.assert_allclose(s[t].numpy(), [Xn[yn == k].sum(0) for k in range(3)], atol=1e-12)


def test_histogram_counts_refuses_histograms_without_counts():
    """A zero or NaN histogram gave int64's minimum for every class (0/0 cast to int), a negative entry
    negative counts ([-2, 7, 5] from [-0.2, 0.7, 0.5])."""
    from torchdpgmm.mixture import histogram_counts

    for hist in ([0.0, 0.0, 0.0], [math.nan, 0.7, 0.5], [-0.2, 0.7, 0.5], [math.inf, 1.0, 1.0],
                 [[0.2, 0.8], [0.0, 0.0]]):
        with pytest.raises(ValueError, match="hist must be finite and non-negative"):
            histogram_counts(torch.tensor(hist), 10)
    with pytest.raises(ValueError, match="n must be >= 0"):
        histogram_counts(torch.tensor([0.5, 0.5]), -1)
    with pytest.raises(TypeError, match="hist must be a torch.Tensor"):
        histogram_counts([0.5, 0.5], 4)
    # valid histograms (a zero class included): numpy's largest remainders
    rng = np.random.default_rng(0)
    w = rng.random((20, 5))
    w[:, 2] = 0.0
    got = histogram_counts(torch.from_numpy(w), 37).numpy()
    for row, c in zip(w, got):
        t = 37 * row / row.sum()
        ref = np.floor(t)
        ref[np.argsort(-(t - ref))[: int(round(37 - ref.sum()))]] += 1
        assert c.tolist() == ref.astype(int).tolist()


def test_labeled_gmm_shape_errors_are_one_line():
    """A wrong d in class_log_prob, batch shapes that do not broadcast and counts of the wrong K gave torch's
    RuntimeErrors from deep inside; a numpy int n was refused by sample."""
    from torchdpgmm.mixture import LabeledGMM

    m = LabeledGMM(torch.tensor([0.5, 0.5]), torch.zeros(2, 3), torch.eye(3).expand(2, 3, 3))
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., n, 3\)"):
        m.class_log_prob(torch.zeros(4, 2))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        m.class_log_prob([[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="do not broadcast"):
        LabeledGMM(torch.full((3, 2), 0.5), torch.zeros(4, 2, 1), torch.ones(2, 1, 1))
    mb = LabeledGMM(torch.full((3, 2), 0.5), torch.zeros(3, 2, 1), torch.ones(2, 1, 1))
    with pytest.raises(ValueError, match="does not broadcast"):
        mb.class_log_prob(torch.zeros(4, 5, 1))
    with pytest.raises(ValueError, match=r"counts must have shape \(\.\.\., 2\)"):
        m.sample_counts(torch.tensor([2, 1, 1]))
    with pytest.raises(ValueError, match="does not expand"):
        mb.sample_counts(torch.ones(4, 2, dtype=torch.long))
    x, y = m.sample(np.int64(3), torch.Generator().manual_seed(0))
    assert x.shape == (3, 3) and y.shape == (3,)
    # valid input unchanged: scipy's density of N(0, I) at x, plus log 1/2
    ref = stats.multivariate_normal(np.zeros(3), np.eye(3)).logpdf(x.numpy()) + math.log(0.5)
    assert np.allclose(m.class_log_prob(x).numpy(), ref[:, None])
