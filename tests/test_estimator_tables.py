"""Tables at the estimators: public per-feature bounds (issue 26 items 1, 2, 4), bad cells as dropped rows
and the empty table (issue 27 items 1, 2). References are the true means of a simulated table and fits on
the same data with the bad row removed (add/remove: a dropped row is a removal)."""
import warnings

import numpy as np
import pytest
import torch

from torchdpgmm.estimator import DPGaussianMixture

MU = np.array([[170.0, 70.0, 5.0, 100.0], [180.0, 90.0, -5.0, 300.0]])
SD = np.array([5.0, 8.0, 2.0, 30.0])
BOUNDS = [(140, 210), (30, 150), (-20, 20), (0, 500)]


def _table(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return MU[y] + rng.normal(size=(n, 4)) * SD, y


def _fit(est, X, y, *, beyond_dp=False):
    """``est.fit`` with its warnings silenced; ``beyond_dp``: inside :class:`allow_weak_privacy` (a test that needs
    negligible noise, at an epsilon whose discrete release claims nothing)."""
    from contextlib import nullcontext

    from torchdpgmm.release import allow_weak_privacy

    with warnings.catch_warnings(), (allow_weak_privacy() if beyond_dp else nullcontext()):
        warnings.simplefilter("ignore")
        return est.fit(X, y)


def test_bounds_release_means_in_user_units_and_sample_inside():
    X, y = _table()
    est = _fit(DPGaussianMixture(5.0, 1e-5, classes=[0, 1], bounds=BOUNDS, random_state=0), X, y)
    # 1.5 units: far below the gap between the classes (10 to 200), above the noise at N=5000, eps=5
    np.testing.assert_allclose(est.means_, MU, atol=1.5)
    np.testing.assert_allclose(np.sqrt(np.diagonal(est.covariances_, axis1=1, axis2=2)), np.tile(SD, (2, 1)),
                               rtol=0.25)
    assert est.score(X, y) > 0.99          # predict on raw X in the user's units
    xs, ys = est.sample(2000)
    lo, hi = np.array(BOUNDS).T
    assert np.all(xs >= lo) and np.all(xs <= hi)
    assert abs(xs[ys == 1, 3].mean() - 300.0) < 10


def test_bounds_given_clip_bound_is_unit_box_units_and_as_published_refuses():
    X, y = _table(200)
    _fit(DPGaussianMixture(1.0, 1e-5, classes=[0, 1], bounds=(-1000, 1000), clip_bound=0.5, random_state=0), X, y)
    with pytest.raises(ValueError, match="sound"):
        DPGaussianMixture(mode="as-published", bounds=BOUNDS).fit(X, y)


class _Exploding:
    """Data whose reading raises: the public checks must refuse before touching it."""
    shape = (3, 4)

    def __array__(self, *a, **k):
        raise AssertionError("data read before the public bounds were checked")


@pytest.mark.parametrize("bad", [(1, 1), [(0, 1), (2, 1)], {"a": (0, float("nan"))}, "0:1"])
def test_bad_bounds_refused_before_data(bad):
    with pytest.raises(ValueError) as e:
        DPGaussianMixture(classes=[0, 1], bounds=bad).fit(_Exploding(), [0, 1, 0])
    assert "\n" not in str(e.value)


def test_bounds_of_wrong_width_refused():
    X, y = _table(50)
    with pytest.raises(ValueError, match="cover 3 features"):
        DPGaussianMixture(classes=[0, 1], bounds=BOUNDS[:3]).fit(X, y)


def test_dataframe_dict_bounds_and_feature_names():
    pd = pytest.importorskip("pandas")
    X, y = _table(3000)
    df = pd.DataFrame(X, columns=["Ht", "Wt", "T", "Z"])
    b = dict(zip(["Z", "T", "Wt", "Ht"], BOUNDS[::-1]))
    est = _fit(DPGaussianMixture(5.0, 1e-5, classes=[0, 1], bounds=b, random_state=1), df, y)
    assert list(est.feature_names_in_) == ["Ht", "Wt", "T", "Z"]
    assert est.bounds_.names == ("Ht", "Wt", "T", "Z")
    np.testing.assert_allclose(est.means_, MU, atol=6.0)
    with pytest.raises(ValueError, match="column names"):
        DPGaussianMixture(classes=[0, 1], bounds=b).fit(X, y)


# ---------------------------------------------------------------- issue 27 item 1: bad cells are dropped rows
def _same_release(a, b):
    np.testing.assert_array_equal(a.means_, b.means_)
    np.testing.assert_array_equal(a.covariances_, b.covariances_)
    np.testing.assert_array_equal(a.weights_, b.weights_)


@pytest.mark.parametrize("cell", ["abc", 10**400, None, object()])
def test_object_array_bad_cell_is_a_dropped_row(cell):
    X, y = _table(300, seed=3)
    Xo = np.concatenate([X, X[:1]]).astype(object)
    Xo[-1, 2] = cell
    yo = np.concatenate([y, y[:1]])
    kw = dict(classes=[0, 1], clip_bound=500.0, random_state=7)
    _same_release(_fit(DPGaussianMixture(**kw), Xo, yo), _fit(DPGaussianMixture(**kw), X, y))


def test_dataframe_string_cell_is_a_dropped_row_and_categorical_refused():
    pd = pytest.importorskip("pandas")
    X, y = _table(300, seed=4)
    cols = ["a", "b", "c", "d"]
    df = pd.DataFrame(np.concatenate([X, X[:1]]), columns=cols)
    df["b"] = df["b"].astype(object)
    df.loc[len(df) - 1, "b"] = "oops"
    yo = np.concatenate([y, y[:1]])
    kw = dict(classes=[0, 1], bounds=BOUNDS, random_state=7)
    _same_release(_fit(DPGaussianMixture(**kw), df, yo), _fit(DPGaussianMixture(**kw), pd.DataFrame(X, columns=cols), y))
    df2 = pd.DataFrame(X, columns=cols)
    df2["d"] = pd.Categorical(np.where(X[:, 3] > 200, "hi", "lo"))
    with pytest.raises(ValueError, match="'d'.*categor"):
        DPGaussianMixture(**kw).fit(df2, y)


# ---------------------------------------------------------------- issue 27 item 2: the empty table
@pytest.mark.parametrize("bounds", [None, BOUNDS])
def test_empty_table_released_from_noise(bounds):
    kw = dict(classes=[0, 1], random_state=0, bounds=bounds, clip_bound=None if bounds else 300.0)
    est = _fit(DPGaussianMixture(1.0, 1e-5, **kw), np.zeros((0, 4)), np.zeros(0, dtype=int))
    assert est.means_.shape == (2, 4) and np.all(np.isfinite(est.means_))
    xs, _ = est.sample(5)
    assert xs.shape == (5, 4)


# ---------------------------------------------------------------- the pipeline on small numeric tables
from torchdpgmm.estimator import DPSyntheticClassifier  # noqa: E402


@pytest.mark.parametrize("d", [4, 8, 16])
def test_synthetic_classifier_on_small_tables_with_bounds(d):
    rng = np.random.default_rng(d)
    n = 4000
    y = rng.integers(0, 2, n)
    mu = np.stack([np.full(d, 20.0), np.full(d, 60.0)])
    X = mu[y] + rng.normal(size=(n, d)) * 8.0
    est = _fit(DPSyntheticClassifier(5.0, classes=[0, 1], image_transform="none", n_components=min(d, 4),
                                     components_per_class=1, bounds=(0, 100), random_state=0), X, y)
    # reference: the classes are 40*sqrt(d) apart with sd 8, so the Bayes rule is ~100% right
    assert est.score(X, y) > 0.97
    xs, ys = est.sample(4000)
    # with bounds: rows in the user's units, inside the bounds; class means near the truth (n_components=d)
    assert xs.shape == (4000, d) and set(ys) <= {0, 1}
    assert xs.min() >= 0 and xs.max() <= 100
    if d == 4:
        np.testing.assert_allclose([xs[ys == k].mean(0) for k in (0, 1)], mu, atol=3.0)
    F = est.transform(X[:200])
    inside = (np.linalg.norm(F, axis=1) < 1 - 1e-9) & np.all((X[:200] > 0) & (X[:200] < 100), axis=1)
    if d == 4:  # full rank: the inverse is exact where neither the ball nor the bounds clipped
        assert inside.sum() > 100
        np.testing.assert_allclose(est.inverse_transform(F[inside]), X[:200][inside], atol=1e-8)


@pytest.mark.parametrize("bounds", [None, (0, 100)])
def test_synthetic_classifier_empty_table(bounds):
    est = _fit(DPSyntheticClassifier(1.0, classes=[0, 1], image_transform="none", n_components=2,
                                     components_per_class=1, bounds=bounds, mean_clip=None if bounds else 20.0,
                                     random_state=0), np.zeros((0, 4)), np.zeros(0, dtype=int))
    assert est.predict(np.full((3, 4), 50.0)).shape == (3,)


def test_synthetic_classifier_bad_cell_is_a_dropped_row():
    X, y = _table(400, seed=5)
    Xo = np.concatenate([X, X[:1]]).astype(object)
    Xo[-1, 0] = 10**400
    kw = dict(classes=[0, 1], image_transform="none", n_components=2, components_per_class=1, bounds=BOUNDS,
              random_state=2)
    a = _fit(DPSyntheticClassifier(**kw), Xo, np.concatenate([y, y[:1]]))
    b = _fit(DPSyntheticClassifier(**kw), X, y)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with pytest.raises(ValueError, match="image_transform='none'"):
        DPSyntheticClassifier(classes=[0, 1], bounds=BOUNDS, image_transform="dct14").fit(X, y)


# ---------------------------------------------------------------- issue 27 item 3: seeded releases marked
def test_seeded_release_is_marked_and_refused_by_the_odometer():
    from torchdpgmm.privacy.odometer import BudgetOdometer
    from torchdpgmm.privacy.record import PrivacyRecord

    X, y = _table(200, seed=6)
    kw = dict(classes=[0, 1], clip_bound=500.0)
    seeded = _fit(DPGaussianMixture(random_state=1, **kw), X, y).privacy_
    fresh = _fit(DPGaussianMixture(**kw), X, y).privacy_
    assert seeded.seeded and not fresh.seeded and fresh.covered
    with pytest.raises(ValueError, match="seeded") as e:
        BudgetOdometer(10.0, 1e-5).spend(seeded)
    assert "\n" not in str(e.value)
    BudgetOdometer(10.0, 1e-5).spend(fresh)
    assert BudgetOdometer(10.0, 1e-5, allow_seeded=True).spend(seeded) > 0
    # the mark survives a model file's round trip; an unseeded record's dict has no new key
    assert PrivacyRecord.from_dict(seeded.to_dict()).seeded
    assert "seeded" not in fresh.to_dict()
    pipe = _fit(DPSyntheticClassifier(classes=[0, 1], image_transform="none", n_components=2, bounds=BOUNDS,
                                      components_per_class=1, random_state=3), X, y).privacy_
    assert pipe.seeded


def test_dataframe_datetime_column_refused_and_nullable_na_is_a_dropped_row():
    pd = pytest.importorskip("pandas")
    X, y = _table(200, seed=8)
    cols = ["a", "b", "c", "d"]
    kw = dict(classes=[0, 1], bounds=BOUNDS, random_state=7)
    df = pd.DataFrame(X, columns=cols)  # (a bool column is 0 / 1 since 2026-12-02: tests/test_discrete_columns.py)
    df["c"] = pd.to_datetime(np.arange(200), unit="D")
    with pytest.raises(ValueError, match="'c'.*datetime"):
        DPGaussianMixture(**kw).fit(df, y)
    Xi = np.round(X)
    dfn = pd.DataFrame(np.concatenate([Xi, Xi[:1]]), columns=cols).astype("Int64")
    dfn.loc[len(dfn) - 1, "a"] = pd.NA
    a = _fit(DPGaussianMixture(**kw), dfn, np.concatenate([y, y[:1]]))
    b = _fit(DPGaussianMixture(**kw), pd.DataFrame(Xi, columns=cols), y)
    _same_release(a, b)


def test_default_clip_bound_is_the_rules_fraction_of_the_half_diagonal():
    """With bounds and center="box", the clip bound is CLIP_FRACTION * sqrt(d)/2 in the unit box (docs/results/clip-rule.json);
    at negligible noise the released means are numpy's class means of the records pulled radially onto that
    sphere about the box's middle, and clip_bound=sqrt(d)/2 clips nothing inside the bounds."""
    from torchdpgmm.bounds import CLIP_FRACTION, Bounds

    b = Bounds([lo for lo, _ in BOUNDS], [hi for _, hi in BOUNDS])
    rng = np.random.default_rng(1)  # two classes toward opposite corners of the box: many records beyond r
    y = rng.integers(0, 2, 4000)
    X = b.lower + (b.upper - b.lower) * np.clip(np.where(y[:, None] == 0, 0.2, 0.7) + 0.08 * rng.normal(size=(4000, 4)), 0, 1)
    assert b.release_clip_bound == pytest.approx(CLIP_FRACTION * np.sqrt(4) / 2)
    U = (np.clip(X, b.lower, b.upper) - b.lower) / (b.upper - b.lower) - 0.5
    r = b.release_clip_bound
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    assert 0.01 < np.mean(norms > r) < 0.9  # the default clips some of these records, not all
    Z = U * np.minimum(1.0, r / norms)      # radial clipping, computed here with numpy
    est = _fit(DPGaussianMixture(500.0, 1e-5, classes=[0, 1], bounds=BOUNDS, center="box", random_state=0), X, y,
               beyond_dp=True)
    ref = np.stack([b.lower + (b.upper - b.lower) * (Z[y == k].mean(0) + 0.5) for k in (0, 1)])
    raw = np.stack([X[y == k].mean(0) for k in (0, 1)])
    tol = 1e-3 * (b.upper - b.lower)  # the noise at eps = 500, N = 4000, far below the clipping's pull
    assert np.max(np.abs(raw - ref) / (b.upper - b.lower)) > 0.02  # the pull is 20 x the tolerance
    np.testing.assert_allclose(est.means_, ref, rtol=0, atol=tol.min())
    full = _fit(DPGaussianMixture(500.0, 1e-5, classes=[0, 1], bounds=BOUNDS, clip_bound=b.unit_clip_bound,
                                  center="box", random_state=0), X, y, beyond_dp=True)
    np.testing.assert_allclose(full.means_, raw, rtol=0, atol=tol.min())


def test_pipeline_table_defaults_match_the_cli_and_explicit_values_win():
    """DPSyntheticClassifier(bounds=...) takes its clip bounds from torchdpgmm.bounds.table_pipeline_clips, the
    function `synthesize --bounds` uses: sqrt(d)/2 for the mean, half of it for the PCA and the class stage."""
    from torchdpgmm.estimator import DPSyntheticClassifier

    cfg = DPSyntheticClassifier(classes=[0, 1], bounds=BOUNDS, image_transform="none", n_components=4)._check_params(4)
    assert (cfg.mean_clip, cfg.pca_clip, cfg.radius) == pytest.approx((1.0, 0.5, 0.5))  # d = 4: sqrt(4)/2 = 1
    cfg = DPSyntheticClassifier(classes=[0, 1], bounds=BOUNDS, image_transform="none", n_components=4,
                                radius=0.9)._check_params(4)
    assert cfg.radius == 0.9 and cfg.pca_clip == pytest.approx(0.5)
    cfg = DPSyntheticClassifier(classes=[0, 1], image_transform="none", n_components=4)._check_params(4)
    assert (cfg.mean_clip, cfg.pca_clip, cfg.radius) == (14.0, 10.0, 5.0)  # no bounds: the image defaults
    from torchdpgmm.bounds import table_pipeline_clips

    for bad in (0, -3, 2.5, True, "4"):
        with pytest.raises(ValueError, match="number of columns"):
            table_pipeline_clips(bad)


# ------------------------------------------------------------------ issue 37: a classifier consistent with the release
def _far_table(n, seed, d=12):
    """Three classes in the unit box whose rows lie far outside the ball of radius 1/2 about their mean (~97%)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    mu = np.full((3, d), 0.5)
    mu[0, :4], mu[1, 4:8], mu[2, 8:] = 0.25, 0.25, 0.25
    return mu[y] + rng.normal(size=(n, d)) * 0.2, y


def _pulled_reference(est, X):
    """numpy: X into the unit box of the bounds, pulled onto the ball of radius clip_radius_ about the released centre
    (center_ in the unit box), back to the user's units; then the Bayes rule of the released Gaussians by scipy."""
    from scipy.stats import multivariate_normal

    lo, hi = np.asarray(est.bounds_.lower), np.asarray(est.bounds_.upper)
    U = np.clip((X - lo) / (hi - lo), 0, 1)
    c = (est.center_ - lo) / (hi - lo)
    Z = U - c
    nz = np.linalg.norm(Z, axis=1, keepdims=True)
    Xp = lo + (hi - lo) * (c + Z * np.minimum(1.0, est.clip_radius_ / nz))
    lj = np.stack([np.log(w) + multivariate_normal(m, C).logpdf(Xp)
                   for w, m, C in zip(est.weights_, est.means_, est.covariances_)], axis=1)
    return Xp, est.classes_[lj.argmax(1)], np.exp(lj - lj.max(1, keepdims=True)) / np.exp(
        lj - lj.max(1, keepdims=True)).sum(1, keepdims=True)


@pytest.mark.parametrize("center", [None, "box"])
def test_predict_maps_rows_as_the_release_mapped_records(center):
    X, y = _far_table(2000, 0)
    est = _fit(DPGaussianMixture(2.0, 1e-5, classes=[0, 1, 2], bounds=(0.0, 1.0), center=center, random_state=0), X, y)
    Xte, _ = _far_table(500, 1)
    Xp, pred, proba = _pulled_reference(est, Xte)
    assert np.mean(np.linalg.norm(Xp - Xte, axis=1) > 1e-9) > 0.2  # many test rows are moved
    np.testing.assert_array_equal(est.predict(Xte), pred)
    np.testing.assert_allclose(est.predict_proba(Xte), proba, atol=1e-8)
    np.testing.assert_allclose(np.exp(est.predict_log_proba(Xte)), proba, atol=1e-8)
    np.testing.assert_array_equal(est.predict(Xp), pred)  # a row already on the ball is not moved again
    assert est.score(Xte, pred) == 1.0


def test_predict_without_bounds_pulls_onto_the_clip_ball_about_the_origin():
    X, y = _far_table(1000, 0)
    est = _fit(DPGaussianMixture(2.0, 1e-5, classes=[0, 1, 2], clip_bound=1.0, random_state=0), X - 0.5, y)
    Xte = 5.0 * (_far_table(200, 1)[0] - 0.5)
    Xp = Xte * np.minimum(1.0, 1.0 / np.linalg.norm(Xte, axis=1, keepdims=True))
    assert est.clip_radius_ == 1.0
    np.testing.assert_array_equal(est.predict(Xte), est.predict(Xp))
    np.testing.assert_allclose(est.predict_proba(Xte), est.predict_proba(Xp), atol=1e-12)


def test_accuracy_non_decreasing_in_epsilon_on_rows_outside_the_radius():
    """Rows ~97% beyond the default radius: the Bayes accuracy of the default release (mean over 5 draws) does not
    fall as epsilon grows (tolerance one standard error of the difference)."""
    Xte, yte = _far_table(3000, 99)
    means, ses = [], []
    for eps in (0.5, 1.0, 2.0, 5.0):
        acc = [_fit(DPGaussianMixture(eps, 1e-5, classes=[0, 1, 2], bounds=(0.0, 1.0), random_state=s),
                    *_far_table(3000, s)).score(Xte, yte) for s in range(5)]
        means.append(np.mean(acc))
        ses.append(np.std(acc, ddof=1) / np.sqrt(len(acc)))
    for i in range(3):
        assert means[i + 1] >= means[i] - np.hypot(ses[i], ses[i + 1]), (means, ses)
    assert means[-1] > means[0] + 0.01  # and it does rise


# ------------------------------------------------------------------ issue 37: synthetic rows from the model inside the bounds
def test_truncated_sample_is_the_gaussian_restricted_to_the_box():
    """One class, d = 2, independent coordinates: each coordinate of the rows is scipy's truncated normal (KS test),
    none lies on a bound; a class whose Gaussian sits far outside the box falls back to Gibbs sweeps, still inside."""
    from scipy.stats import kstest, truncnorm

    from torchdpgmm.bounds import truncated_sample
    from torchdpgmm.mixture import LabeledGMM

    mu = torch.tensor([[[0.05, 0.6]], [[3.0, 0.5]]], dtype=torch.float64).squeeze(1)
    sd = np.array([[0.1, 0.3], [0.2, 0.2]])
    cov = torch.diag_embed(torch.as_tensor(sd) ** 2)
    model = LabeledGMM(torch.tensor([0.5, 0.5], dtype=torch.float64), mu, cov)
    g = torch.Generator().manual_seed(0)
    x, y, fb = truncated_sample(model, [0.0, 0.0], [1.0, 1.0], g, counts=torch.tensor([20000, 0]))
    assert fb == 0 and torch.all(y == 0)
    x = x.numpy()
    assert np.all((x > 0) & (x < 1))  # strictly inside: no row on a bound
    for j in range(2):
        a, b = (0 - mu[0, j].item()) / sd[0, j], (1 - mu[0, j].item()) / sd[0, j]
        assert kstest(x[:, j], truncnorm(a, b, loc=mu[0, j].item(), scale=sd[0, j]).cdf).pvalue > 1e-3
    x2, y2, fb2 = truncated_sample(model, [0.0, 0.0], [1.0, 1.0], g, counts=torch.tensor([0, 300]), rounds=5)
    assert fb2 == 300 and np.all((x2.numpy() >= 0) & (x2.numpy() <= 1))
    assert np.mean(x2.numpy()[:, 0] > 0.9) > 0.9  # the fallback's rows pile near the side the Gaussian sits on
    # the mixture restricted to the box: class 1 has ~no mass inside, so (almost) every row is of class 0
    x3, y3, _ = truncated_sample(model, [0.0, 0.0], [1.0, 1.0], g, n=2000)
    assert float((y3 == 0).double().mean()) > 0.999


def test_gibbs_fallback_is_the_textbook_chain():
    """The Gibbs fallback keeps ``P (x - mu)`` per row and brings it up to date once per block of coordinates: the
    same chain as drawing each coordinate from ``N(mu_j - sum_{k != j} P_jk (x_k - mu_k) / P_jj, 1 / P_jj)``
    truncated to the box, computed directly from ``P = inv(cov_y)`` per row (numpy) with the same uniforms in the
    same order. Three classes, d = 37 (three blocks, the last partial), rows of each class interleaved."""
    from torchdpgmm import bounds as B

    rng = np.random.default_rng(3)
    K, d, n = 3, 37, 50
    A = rng.normal(size=(K, d, d))
    cov = A @ np.swapaxes(A, 1, 2) / d + 0.1 * np.eye(d)
    labels = rng.integers(0, K, n)
    mu = rng.normal(scale=0.7, size=(K, d))[labels]
    x0 = mu + rng.normal(size=(n, d))
    lo, hi = np.zeros(d), np.ones(d)
    t = lambda a: torch.as_tensor(a)  # noqa: E731
    got = B._gibbs_inside(t(x0), t(mu), t(cov), t(lo), t(hi), torch.Generator().manual_seed(5), 3,
                          labels=t(labels)).numpy()
    P = np.linalg.inv(cov)[labels]
    x = np.clip(x0, lo, hi)
    g = torch.Generator().manual_seed(5)
    for _ in range(3):
        for j in range(d):
            r = np.einsum("nk,nk->n", P[:, j, :], x - mu) - P[:, j, j] * (x[:, j] - mu[:, j])
            m = mu[:, j] - r / P[:, j, j]
            x[:, j] = B._truncated_normal(t(m), t(1 / np.sqrt(P[:, j, j])), t(np.zeros(n)), t(np.ones(n)), g).numpy()
    np.testing.assert_allclose(got, x, rtol=0, atol=1e-9)
    assert np.all((got > 0) & (got < 1))


def test_rejection_gives_up_early_only_where_the_box_holds_almost_no_mass():
    """A class with ~no mass in the box goes to the Gibbs fallback after few redraws (not all ``rounds``); one with
    2% of its mass inside is sampled exactly by rejection (no fallback), every row inside."""
    from torchdpgmm.bounds import truncated_sample
    from torchdpgmm.mixture import LabeledGMM

    mu = torch.tensor([[3.0, 0.5], [0.5, 0.5]], dtype=torch.float64)
    cov = torch.diag_embed(torch.tensor([[0.2, 0.2], [1.0, 1.0]], dtype=torch.float64) ** 2)
    model = LabeledGMM(torch.tensor([0.5, 0.5], dtype=torch.float64), mu, cov)
    calls = []
    orig = model.sample_counts
    model.sample_counts = lambda c, g: (calls.append(int(c.sum())), orig(c, g))[1]  # noqa: E731
    g = torch.Generator().manual_seed(0)
    x, y, fb = truncated_sample(model, [0.0, 0.0], [1.0, 1.0], g, counts=torch.tensor([400, 0]), rounds=200)
    assert fb == 400 and len(calls) <= 3 and np.all((x.numpy() > 0) & (x.numpy() < 1))
    calls.clear()
    # class 1: N(0.5, 2.8^2) per coordinate, P(inside) = (2 Phi(0.5 / 2.8) - 1)^2 = 0.020
    model2 = LabeledGMM(torch.tensor([0.5, 0.5], dtype=torch.float64), mu,
                        torch.diag_embed(torch.tensor([[0.2, 0.2], [2.8, 2.8]], dtype=torch.float64) ** 2))
    x, y, fb = truncated_sample(model2, [0.0, 0.0], [1.0, 1.0], g, counts=torch.tensor([0, 300]), rounds=2000)
    assert fb == 0 and np.all((x.numpy() >= 0) & (x.numpy() <= 1))


def test_estimator_sample_puts_no_mass_on_the_bounds():
    """A class whose released mean sits near a bound: the old clipped rows put a large share of that column's cells
    exactly on the bound, the truncated sampler none, while the share of cells NEAR the bound stays that of the
    released model restricted to the box (numpy rejection reference)."""
    rng = np.random.default_rng(0)
    n = 4000
    y = rng.integers(0, 2, n)
    X = np.column_stack([np.clip(np.where(y == 0, 0.03, 0.5) + 0.08 * rng.normal(size=n), 0, 1), rng.uniform(0, 1, n)])
    est = _fit(DPGaussianMixture(5.0, 1e-5, classes=[0, 1], bounds=(0.0, 1.0), random_state=0), X, y)
    xs, ys = est.sample(6000)
    assert np.all((xs >= 0) & (xs <= 1))
    assert np.mean(xs == 0.0) == 0.0 and np.mean(xs == 1.0) == 0.0
    # reference: rejection by numpy from the released class-0 Gaussian
    ref = rng.multivariate_normal(est.means_[0], est.covariances_[0], size=200_000)
    ref = ref[np.all((ref >= 0) & (ref <= 1), axis=1)]
    assert np.mean(np.clip(rng.multivariate_normal(est.means_[0], est.covariances_[0], size=5000), 0, 1)[:, 0] == 0) > 0.1
    near = np.mean(xs[ys == 0, 0] < 0.02)
    assert near == pytest.approx(np.mean(ref[:, 0] < 0.02), abs=0.03) and near > 0.05


def test_synthetic_classifier_table_defaults_with_bounds():
    """Issue 37 item 5: with bounds= and nothing else the pipeline takes a table (raw columns, n_components = d) and
    is the same release as the explicit table settings; without bounds the image defaults stay (784 columns)."""
    from torchdpgmm.estimator import DPSyntheticClassifier

    X, y = _table(3000)
    kw = dict(classes=[0, 1], bounds=BOUNDS, random_state=0)
    est = _fit(DPSyntheticClassifier(2.0, **kw), X, y)
    ref = _fit(DPSyntheticClassifier(2.0, image_transform="none", n_components=4, **kw), X, y)
    assert est.release_.config.transform == "none" and est.release_.config.n_components == 4
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    assert est.score(X, y) > 0.9
    with pytest.raises(ValueError, match="bounds need image_transform='none'"):
        DPSyntheticClassifier(image_transform="dct14", **kw).fit(X, y)
    with pytest.raises(ValueError, match="784 columns"):  # no bounds: the image defaults
        DPSyntheticClassifier(classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match=r"n_components must be an int in \[1, 4\]"):
        DPSyntheticClassifier(n_components=5, **kw).fit(X, y)


def test_fixed_covariance_types_classify_rows_as_given():
    """PULLED_COVARIANCE_TYPES: only "auto" pulls; "full" is the released model's Bayes rule at the raw rows."""
    from torchdpgmm.estimator import PULLED_COVARIANCE_TYPES

    assert PULLED_COVARIANCE_TYPES == ("auto",)
    X, y = _far_table(2000, 0)
    est = _fit(DPGaussianMixture(2.0, 1e-5, classes=[0, 1, 2], bounds=(0.0, 1.0), covariance_type="full",
                                 random_state=0), X, y)
    Xte, _ = _far_table(300, 1)
    ref = est.model_.predict(torch.as_tensor(Xte, dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(est.predict(Xte), est.classes_[ref])


def test_synthetic_classifier_samples_the_model_inside_the_bounds_as_a_dataframe():
    """DPSyntheticClassifier(bounds=...).sample (issue 37 item 4): rows drawn from the released class mixtures
    restricted to the bounds, never clipped onto one (clipping put a large share of a column near its bound ON it),
    a DataFrame with the fit's columns when fitted on one. Reference: numpy rejection from the released model mapped
    to rows by hand (u = 1/2 + m + R f V, x = lower + (upper - lower) u)."""
    pd = pytest.importorskip("pandas")
    from torchdpgmm.estimator import DPSyntheticClassifier

    rng = np.random.default_rng(5)
    n = 6000
    y = rng.integers(0, 2, n)
    X = np.column_stack([np.where(y == 0, 142.0, 175.0) + 6.0 * rng.normal(size=n), 90 + 15 * rng.normal(size=n),
                         4 * rng.normal(size=n) + 5 * y, 250 + 60 * rng.normal(size=n)])
    cols = ["ht", "wt", "z", "v"]
    est = _fit(DPSyntheticClassifier(5.0, 1e-5, classes=[0, 1], bounds=BOUNDS, random_state=0),
               pd.DataFrame(X, columns=cols), y)
    xs, ys = est.sample(8000)
    assert isinstance(xs, pd.DataFrame) and list(xs.columns) == cols and isinstance(ys, pd.Series)
    xs, ys = xs.to_numpy(), ys.to_numpy()
    lo, hi = np.array(BOUNDS, dtype=float).T
    assert np.all((xs > lo) & (xs < hi))  # strictly inside: no cell on a bound
    # reference: the released mixture in rows, by numpy; rejection; and what clipping would have done
    m, pca, R = est.model_, est.release_.pca, float(est.release_.config.radius)
    w = (m.weights[:, None] * m.comp_weights).reshape(-1).numpy()
    mu = m.means.reshape(len(w), -1).numpy()
    cov = m.covariances.reshape(len(w), mu.shape[1], mu.shape[1]).numpy()
    V, c = pca.components.numpy(), pca.mean.numpy()
    cell = rng.choice(len(w), size=400_000, p=w / w.sum())
    F = mu[cell] + np.einsum("nij,nj->ni", np.linalg.cholesky(cov)[cell], rng.normal(size=(len(cell), mu.shape[1])))
    ref = lo + (hi - lo) * (0.5 + c + R * F @ V)
    clipped = np.clip(ref[:8000], lo, hi)
    assert np.mean(clipped[:, 0] == lo[0]) > 0.01  # the old rows: a visible pile on the bound
    inside = np.all((ref > lo) & (ref < hi), axis=1)
    ref = ref[inside]
    near = lambda a: np.mean(a[:, 0] < lo[0] + 3.0)  # noqa: E731  (a band of 3 cm above the bound)
    se = np.sqrt(near(ref) * (1 - near(ref)) / 8000)
    assert abs(near(xs) - near(ref)) < 5 * se + 1e-3
    assert abs(np.mean(ys == 0) - np.mean(cell[inside] // m.comp_weights.shape[1] == 0)) < 0.03
    # fewer components than columns: the rows' Gaussians are of lower rank, rejection in the projection
    low = _fit(DPSyntheticClassifier(5.0, 1e-5, classes=[0, 1], bounds=BOUNDS, n_components=2, random_state=0), X, y)
    xl, _ = low.sample(3000)
    assert isinstance(xl, np.ndarray) and np.all((xl > lo) & (xl < hi))


@pytest.mark.cuda
def test_synthetic_classifier_samples_inside_the_bounds_on_cuda():
    """The truncated sampler of the pipeline's rows (bounds.pipeline_rows_in_box) with the model on a GPU: every
    row strictly inside the bounds, both component ranks (every column kept; fewer components than columns)."""
    from torchdpgmm.estimator import DPSyntheticClassifier

    X, y = _table(3000, seed=11)
    lo, hi = np.array(BOUNDS, dtype=float).T
    for n_components in (None, 2):
        est = _fit(DPSyntheticClassifier(5.0, 1e-5, classes=[0, 1], bounds=BOUNDS, n_components=n_components,
                                         device="cuda", random_state=0), X, y)
        xs, ys = est.sample(2000)
        assert est.model_.means.device.type == "cuda"
        assert np.all((xs > lo) & (xs < hi)) and set(np.unique(ys)) <= {0, 1}


@pytest.mark.parametrize("a, b", [(-1.0, 1.0), (3.0, 4.0), (-4.0, -3.0), (0.5, np.inf), (-6.0, -5.9), (8.0, 8.5),
                                  (-45.0, -40.0), (40.0, 60.0)])
def test_truncated_normal_one_coordinate_against_scipy(a, b):
    """The Gibbs fallback's 1-D draw, ``N(m, s^2)`` restricted to ``[lo, hi]``, against scipy's truncnorm (KS test) on
    intervals inside, beside and far in either tail (past ~37 standard deviations the CDF underflows and the draw
    takes the exponential limit of the tail, whose relative error is below 1/a^2 there)."""
    from scipy.stats import kstest, truncnorm

    from torchdpgmm import bounds as B

    n, m, s = 20_000, 2.0, 0.5
    t = lambda v: torch.full((n,), float(v), dtype=torch.float64)  # noqa: E731
    x = B._truncated_normal(t(m), t(s), t(m + a * s), t(m + b * s), torch.Generator().manual_seed(11)).numpy()
    assert np.all((x >= m + a * s) & (x <= m + b * s))
    if abs(a) < 30:
        assert kstest(x, truncnorm(a, b, loc=m, scale=s).cdf).pvalue > 1e-3
    else:  # scipy's truncnorm is itself inexact this far out: the standardised excess beyond the near end is
        # Exponential(|near end|) to within 1/a^2 (Mills ratio), checked on its mean
        near = a if a > 0 else b
        excess = np.abs((x - m) / s - near) * abs(near)
        assert abs(excess.mean() - 1.0) < 0.03
