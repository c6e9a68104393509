"""Public bounds (torchdpgmm.bounds): the affine map into the unit box, its inverse, clipping, the
mapping of released Gaussians back to the user's units, and refusal of bad public bounds. References are
plain numpy arithmetic written here, independent of the module."""
import json
import math

import numpy as np
import pytest
import torch

from torchdpgmm.bounds import Bounds, parse_bounds_text


LO = np.array([140.0, 30.0, -1.0])
HI = np.array([210.0, 150.0, 1.0])


def test_round_trip_inside_bounds_numpy_and_torch():
    rng = np.random.default_rng(0)
    X = LO + (HI - LO) * rng.random((50, 3))
    b = Bounds(LO, HI)
    U = b.to_unit(X)
    np.testing.assert_allclose(U, (X - LO) / (HI - LO), rtol=0, atol=1e-15)
    np.testing.assert_allclose(b.from_unit(U), X, rtol=1e-13)
    Ut = b.to_unit(torch.as_tensor(X))
    assert torch.is_tensor(Ut) and Ut.dtype == torch.float64
    np.testing.assert_allclose(b.from_unit(Ut).numpy(), X, rtol=1e-13)


def test_clipping_outside_bounds_and_nan_kept():
    b = Bounds(LO, HI)
    X = np.array([[100.0, 200.0, 0.0], [np.nan, 40.0, 0.5], [np.inf, 40.0, 0.5]])
    U = b.to_unit(X)
    np.testing.assert_array_equal(U[0], [0.0, 1.0, 0.5])
    assert np.isnan(U[1, 0]) and np.isnan(U[2, 0])  # non-finite stays NaN: the sound release drops the row
    np.testing.assert_allclose(U[1, 1:], [(40 - 30) / 120, 0.75])
    back = b.from_unit(np.array([[-3.0, 2.0, 0.5]]))
    np.testing.assert_allclose(back, [[140.0, 150.0, 0.0]])
    assert np.all(back >= LO) and np.all(back <= HI)
    np.testing.assert_allclose(b.from_unit(np.array([[-1.0, 0, 0]]), clip=False)[0, 0], 140.0 - 70.0)


def test_unit_center_and_clip_bound():
    b = Bounds(LO, HI)
    assert b.unit_center.tolist() == [0.5, 0.5, 0.5]
    assert b.unit_clip_bound == pytest.approx(math.sqrt(3) / 2)
    corners = np.array(np.meshgrid(*[[0.0, 1.0]] * 3)).reshape(3, -1).T
    assert np.max(np.linalg.norm(corners - 0.5, axis=1)) == pytest.approx(b.unit_clip_bound)


def test_gaussian_maps_back_exactly():
    b = Bounds(LO, HI)
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3))
    cov_u = A @ A.T
    mu_u = rng.random(3)
    s = HI - LO
    np.testing.assert_allclose(b.means_from_unit(torch.as_tensor(mu_u)).numpy(), LO + s * mu_u, rtol=1e-14)
    ref = np.diag(s) @ cov_u @ np.diag(s)
    np.testing.assert_allclose(b.covariances_from_unit(torch.as_tensor(cov_u)).numpy(), ref, rtol=1e-13)


def test_parse_forms():
    one = Bounds.parse((0, 1), n_features=3)
    assert one.lower.tolist() == [0, 0, 0] and one.upper.tolist() == [1, 1, 1]
    pairs = Bounds.parse([(140, 210), (30, 150), (-1, 1)])
    np.testing.assert_array_equal(pairs.lower, LO)
    d = Bounds.parse({"Wt": (30, 150), "Ht": (140, 210)}, names=["Ht", "Wt"])
    assert d.names == ("Ht", "Wt") and d.lower.tolist() == [140, 30]
    t = parse_bounds_text("Ht=140:210,Wt=30:150", names=["Ht", "Wt"])
    assert t == d.__class__([140, 30], [210, 150], ["Ht", "Wt"])
    assert parse_bounds_text("0:1", n_features=2).upper.tolist() == [1, 1]
    assert Bounds.from_dict(d.to_dict()) == d


@pytest.mark.parametrize("bad, kw", [
    ((1, 1), {"n_features": 2}),
    ((2, 1), {"n_features": 2}),
    ((0, float("nan")), {"n_features": 2}),
    ((0, float("inf")), {"n_features": 2}),
    (("0", 1), {"n_features": 2}),
    ((True, 2), {"n_features": 2}),
    ((0, 1), {}),
    ([(0, 1)] * 3, {"n_features": 2}),
    ({"a": (0, 1)}, {"names": ["a", "b"]}),
    ({"a": (0, 1), "b": (0, 1), "c": (0, 1)}, {"names": ["a", "b"]}),
    ({"a": (0, 1)}, {}),
    ("0:1", {"n_features": 2}),
    ([(0, 1, 2)], {"n_features": 1}),
])
def test_bad_bounds_refused_in_one_line(bad, kw):
    with pytest.raises(ValueError) as e:
        Bounds.parse(bad, **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["1", "a:b", "x=1:2,x=1:3", "x=1:2,y"])
def test_bad_bounds_text_refused(text):
    with pytest.raises(ValueError):
        parse_bounds_text(text, names=["x", "y"], n_features=2)


def test_schema_file(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"columns": {"Ht": [140, 210], "Wt": [30, 150], "Other": [0, 1]}}))
    b = Bounds.from_schema(p, names=["Wt", "Ht"])
    assert b.names == ("Wt", "Ht") and b.lower.tolist() == [30, 140] and b.upper.tolist() == [150, 210]
    with pytest.raises(ValueError, match="no range"):
        Bounds.from_schema(p, names=["Ht", "BMI"])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Bounds.from_schema(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="cannot read"):
        Bounds.from_schema(tmp_path / "missing.json")
    (tmp_path / "rev.json").write_text(json.dumps({"columns": {"Ht": [210, 140]}}))
    with pytest.raises(ValueError, match="lower < upper"):
        Bounds.from_schema(tmp_path / "rev.json")


def test_span_beyond_float_range_refused():
    """upper - lower overflowing to inf would map every record to 0 (a silent, useless release)."""
    with pytest.raises(ValueError, match="largest float"):
        Bounds([-1e308], [1e308])
