"""The estimators' input schema: what is public (dtypes, column names, shapes, devices, bounds) is checked before any
noise is drawn and refused in one line that names no row count; what is private (a row's label or value) is not.
Found by an independent review of the front doors (2026-11-27)."""
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import torch

import torchdpgmm.estimator as est_mod
import torchdpgmm.pipelines.synthetic_classifier as pipe_mod
import torchdpgmm.release as rel_mod
from torchdpgmm import DPGaussianMixture, DPSyntheticClassifier

N = 617  # a row count that must never appear in a message


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.normal(size=(n, 3)) + 3.0 * np.eye(3)[y], y


@pytest.fixture
def no_noise(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a release ran: the check came after the noise")
    monkeypatch.setattr(rel_mod, "release", boom)
    monkeypatch.setattr(est_mod, "release_in_unit_box", boom)
    monkeypatch.setattr(pipe_mod, "release_pipeline", boom)


def _gm(**kw):
    return DPGaussianMixture(**({"classes": [0, 1, 2], "clip_bound": 10.0} | kw))


def _sc(**kw):
    return DPSyntheticClassifier(**({"classes": [0, 1, 2], "image_transform": "none", "n_components": 2} | kw))


@pytest.mark.parametrize("make", [_gm, _sc])
@pytest.mark.parametrize("case, match", [
    ("duplicate_columns", "duplicate column names"),
    ("series", "1-D Series"),
    ("no_columns", "0 feature"),
])
def test_malformed_public_schema_is_one_line_before_noise_and_names_no_row_count(no_noise, make, case, match):
    X, y = _data()
    y_in = y
    if case == "duplicate_columns":
        X = pd.DataFrame(X, columns=["a", "a", "b"])
    elif case == "series":
        X = pd.Series(X[:, 0])
    elif case == "no_columns":
        X = pd.DataFrame(index=range(N))
    with pytest.raises((ValueError, TypeError), match=match) as info:
        make().fit(X, y_in)
    assert str(N) not in str(info.value) and "\n" not in str(info.value)


def test_a_list_of_labels_is_matched_label_by_label_never_by_an_inferred_dtype():
    # numpy would read [0, 1, "a", ...] as strings and every row would be dropped; a list has no dtype (its values
    # are private), so an odd label (a string, a nested list) drops its own row only, and nothing is refused
    X, y = _data(300)
    ref = _gm(random_state=0).fit(X, list(y)).model_.counts
    for odd in ("a", [1, 2]):
        labels = list(y)
        labels[0] = odd
        counts = _gm(random_state=0).fit(X, labels).model_.counts
        assert float((ref - counts).sum()) == pytest.approx(1.0)  # the same noise, one row fewer


@pytest.mark.parametrize("classes, labels", [
    (["0", "1", "2"], lambda y: y),  # numeric labels, classes named as text
    ([0, 1, 2], lambda y: y.astype(str)),  # numeric classes, labels as text (numpy)
    ([0, 1, 2], lambda y: pd.Series(y.astype(str), dtype="string")),  # ... a pandas text column
    ([0, 1, 2], lambda y: np.array([f" {v}.0" for v in y], dtype=object)),  # ... objects, written by a float column
    (["0.0", "1", "2e0"], lambda y: np.array([str(v) for v in y], dtype=object)),
])
def test_labels_and_classes_of_different_types_are_matched_by_value(classes, labels):
    """Where text is on either side, a label is matched to a class by its exact decimal value (as the command line
    matches --classes). Until 2026-12-02 text against numbers was refused by the labels' dtype; but pandas infers a
    label column's dtype from its cells (one cell that is not a number makes a CSV's numeric column text), so the
    refusal revealed that such a cell exists. Every variant gives the model of the plain integer labels (same seed)."""
    import warnings

    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _gm(random_state=0).fit(X, y)
        got = _gm(classes=classes, random_state=0).fit(X, labels(y))
    np.testing.assert_array_equal(got.means_, want.means_)
    np.testing.assert_array_equal(got.covariances_, want.covariances_)


def test_a_label_that_is_not_a_number_drops_its_row_only():
    """A text label column with one cell that is not a number, against numeric classes: that row is dropped (one
    count less, the same noise), nothing is refused."""
    import warnings

    X, y = _data(300)
    cells = pd.Series(y.astype(str), dtype="string")
    cells[0] = "oops"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _gm(random_state=0).fit(X, y).model_.counts
        counts = _gm(random_state=0).fit(X, cells).model_.counts
    assert float((ref - counts).sum()) == pytest.approx(1.0)


def test_two_names_of_one_class_are_refused(no_noise):
    X, y = _data()
    with pytest.raises(ValueError, match="classes name one class twice: '1' and '1.0'"):
        _gm(classes=["0", "1", "1.0"]).fit(X, y)


def test_a_class_list_mixing_strings_and_numbers_is_refused_not_stringified(no_noise):
    X, y = _data()
    with pytest.raises(TypeError, match="mutually comparable"):
        _gm(classes=[0, "a"]).fit(X, y)


def test_float32_labels_match_float64_classes():
    # 0.1 in float32 is not 0.1 in float64: before, every row was dropped as outside the classes
    X, y = _data()
    labels = np.array([0.1, 0.2, 0.3])
    ref = _gm(classes=[0.1, 0.2, 0.3], epsilon=2.0, random_state=0).fit(X, labels[y])
    for y32 in (labels.astype(np.float32)[y], torch.tensor(labels.astype(np.float32)[y])):
        m = _gm(classes=[0.1, 0.2, 0.3], epsilon=2.0, random_state=0).fit(X, y32)
        torch.testing.assert_close(m.model_.counts, ref.model_.counts)
    # the true counts, within the counts' noise: the rows were not dropped
    assert np.all(np.abs(ref.model_.counts.numpy() - np.bincount(y)) < 60)


def test_a_float_precision_that_merges_classes_is_refused(no_noise):
    X, y = _data()
    classes = [1.0, 1.0 + 1e-12, 2.0]
    with pytest.raises(ValueError, match="cannot tell the classes apart"):
        _gm(classes=classes).fit(X, np.asarray(classes, dtype=np.float32)[y])


@pytest.mark.parametrize("bounds", [(-1e200, 1e200), (0.0, 1e-300), (1e15, 1e15 + 1.0)])
def test_bounds_the_unit_box_cannot_resolve_are_refused_before_noise(no_noise, bounds):
    X, y = _data()
    with pytest.raises(ValueError, match="must span between"):
        DPGaussianMixture(classes=[0, 1, 2], bounds=bounds).fit(X, y)


@pytest.mark.parametrize("make", [_gm, _sc])
@pytest.mark.parametrize("device, match", [("tpu", "must name a torch device"), ("meta", "must be 'cpu' or 'cuda'")])
def test_an_unknown_device_is_one_line_before_noise(no_noise, make, device, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        make(device=device).fit(X, y)


@pytest.mark.parametrize("make", [_gm, _sc])
def test_tensors_that_require_grad_are_read_as_values(make):
    X, y = _data(200)
    Xg = torch.tensor(X, requires_grad=True)
    a = make(random_state=0).fit(Xg, torch.tensor(y))
    b = make(random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.predict(Xg), b.predict(X))


def test_a_refit_with_other_parameters_keeps_nothing_of_the_earlier_fit():
    X, y = _data(200)
    m = DPGaussianMixture(classes=[0, 1, 2], bounds=(-8.0, 8.0), random_state=0).fit(X, y)
    assert hasattr(m, "center_") and hasattr(m, "bounds_")
    m.set_params(bounds=None, clip_bound=10.0).fit(X, y)
    assert not hasattr(m, "center_") and not hasattr(m, "_clip_centre_unit")
    assert m.bounds_ is None and m.clip_radius_ == 10.0
    with pytest.warns(UserWarning):
        m.set_params(mode="as-published", clip_bound=None, classes=None).fit(X, y)
    for name in ("center_", "clip_radius_", "bounds_", "discrete_"):
        assert not hasattr(m, name), name


def test_as_published_names_labels_outside_the_classes_not_internal_indices():
    X, y = _data(200)
    y = y.copy()
    y[0] = 7
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="not among classes"):
        DPGaussianMixture(classes=[0, 1, 2], mode="as-published").fit(X, y)


def test_synthetic_classifier_transform_follows_set_output_and_predict_does_not_care():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data(300)
    pipe = make_pipeline(StandardScaler(), _sc(n_components=2, bounds=(-4.0, 4.0), random_state=0))
    plain = pipe.fit(X, y).predict(X)
    pipe.set_output(transform="pandas")
    out = pipe.transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["dpsyntheticclassifier0", "dpsyntheticclassifier1"]
    np.testing.assert_array_equal(pipe.predict(X), plain)


def test_inverse_transform_refuses_non_finite_features():
    X, y = _data(300)
    m = _sc(bounds=(-4.0, 4.0), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="finite"):
        m.inverse_transform(np.array([[np.nan, 0.0]]))


@pytest.mark.parametrize("classes, labels, want", [
    ([0, 1], np.array(["1e99999999999999999999999999999", "1"]), [-1, 1]),  # an exponent beyond Decimal's: no error
    (["a", "b"], np.array([10**5000, 1], dtype=object), [-1, -1]),  # an int beyond str()'s digit limit: no error
    (np.array([b"a", b"b"]), np.array([b"a", b"b", b"a"]), [0, 1, 0]),  # bytes, as the command line decodes them
    (np.array([.1, .2], np.float32), ["0.1", "0.2"], [0, 1]),  # a float32 class in its own precision
    (np.array([.1, .2], np.float32), np.array([np.float32(.1), np.float32(.2), 3], dtype=object), [0, 1, -1]),
    ([0.5, 1], np.array([Decimal("0.5"), Fraction(1, 2), 1, "1.0"], dtype=object), [0, 0, 1, 1]),
    (["nan", "a"], [float("nan"), "a"], [-1, 0]),  # a missing value is no class, as None and pandas' NA
])
def test_the_label_key_never_raises_and_matches_by_value(classes, labels, want):
    """A review of the matching by value (2026-12-02): labels that made it raise (an error on a private label) or
    that it no longer matched."""
    e = DPGaussianMixture(classes=classes, clip_bound=1.0)
    y = np.asarray(labels) if hasattr(labels, "dtype") else np.asarray(labels, dtype=object)
    assert e._encode_labels(y, e._public_classes())[1].tolist() == want
