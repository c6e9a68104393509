"""Discrete (integer-valued) columns of DPGaussianMixture: ``discrete=`` rounds and clips synthetic values
(issue 26 item 4); bad entries and categorical dtypes are refused in one line before a value is read."""
import numpy as np
import pandas as pd
import pytest
import torch

import torchdpgmm.estimator as est_mod
from torchdpgmm.estimator import DPGaussianMixture

BOUNDS = {"age": (18, 90), "kids": (0, 6), "height": (139.5, 210.5), "red": (0, 1), "blue": (0, 1)}


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    red = rng.integers(0, 2, n)
    df = pd.DataFrame({"age": rng.integers(18, 91, n), "kids": rng.integers(0, 7, n),
                       "height": rng.uniform(140, 210, n), "red": red, "blue": 1 - red})
    return df, rng.integers(0, 2, n)


def _fit(discrete, **kw):
    df, y = _table()
    return DPGaussianMixture(epsilon=2.0, classes=[0, 1], bounds=BOUNDS, discrete=discrete,
                             random_state=3, **kw).fit(df, y)


@pytest.mark.filterwarnings("ignore")
def test_sample_rounds_and_clips_discrete_columns():
    cols = ["age", "kids", "red", "blue"]
    x, _ = _fit(cols).sample(2000)
    ref, _ = _fit(None).sample(2000)  # the same release (same seed; discrete= does not touch it), not rounded
    lo = np.array([BOUNDS[c][0] for c in BOUNDS])
    hi = np.array([BOUNDS[c][1] for c in BOUNDS])
    j = [list(BOUNDS).index(c) for c in cols]
    # reference computed with numpy from the unrounded rows
    np.testing.assert_array_equal(x[:, j], np.clip(np.floor(ref[:, j] + 0.5), lo[j], hi[j]))
    assert np.all(x[:, j] == np.round(x[:, j]))
    assert np.all((x >= lo) & (x <= hi))
    h = list(BOUNDS).index("height")  # the continuous column is left as it was
    np.testing.assert_array_equal(x[:, h], ref[:, h])
    assert np.any(x[:, h] != np.round(x[:, h]))
    assert set(np.unique(x[:, list(BOUNDS).index("red")])) <= {0.0, 1.0}


@pytest.mark.filterwarnings("ignore")
def test_discrete_by_index_on_an_array():
    df, y = _table()
    m = DPGaussianMixture(epsilon=2.0, classes=[0, 1], bounds=list(BOUNDS.values()), discrete=[0, -1],
                          random_state=1).fit(df.to_numpy(dtype=float), y)
    x, _ = m.sample(500)
    assert np.all(x[:, [0, 4]] == np.round(x[:, [0, 4]]))
    assert x[:, 0].min() >= 18 and x[:, 0].max() <= 90


@pytest.mark.parametrize("discrete, bounds, as_array, needle", [
    (["weight"], BOUNDS, False, "'weight'"),
    ([7], BOUNDS, False, "index 7"),
    ([5], list(BOUNDS.values()), True, "index 5"),
    (["age"], list(BOUNDS.values()), True, "'age'"),
    (["height"], BOUNDS, False, "'height'"),
    (["age"], {**BOUNDS, "age": (17.5, 90)}, False, "'age'"),
    (["age"], None, False, "bounds"),
    ("age", BOUNDS, False, "list"),
    ([True], BOUNDS, False, "True"),
    ([1.0], BOUNDS, False, "1.0"),
    (["age", "age"], BOUNDS, False, "more than once"),
])
def test_bad_discrete_refused_in_one_line_before_data(monkeypatch, discrete, bounds, as_array, needle):
    def no_read(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(est_mod, "_dataframe_numbers_or_nan", no_read)
    monkeypatch.setattr(est_mod, "validate_data", no_read)
    df, y = _table(20)
    X = df.to_numpy(dtype=float) if as_array else df
    state = torch.get_rng_state()
    m = DPGaussianMixture(classes=[0, 1], bounds=bounds, discrete=discrete,
                          clip_bound=None if bounds is not None else 5.0)
    with pytest.raises(ValueError) as exc:
        m.fit(X, y)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg
    assert not [k for k in vars(m) if k.endswith("_")]  # nothing fitted
    assert torch.equal(torch.get_rng_state(), state)


def test_as_published_refuses_discrete():
    with pytest.raises(ValueError, match="discrete"):
        DPGaussianMixture(mode="as-published", discrete=[0]).fit(np.zeros((4, 2)), [0, 1, 0, 1])


@pytest.mark.parametrize("col", [pd.Categorical(["a", "b"] * 10), np.array([True, False] * 10)])
def test_categorical_column_message_names_it_and_says_how(col):
    df, y = _table(20)
    df["colour"] = col
    m = DPGaussianMixture(classes=[0, 1], bounds={**BOUNDS, "colour": (0, 1)})
    with pytest.raises(ValueError) as exc:
        m.fit(df, y)
    msg = str(exc.value)
    assert "'colour'" in msg and "\n" not in msg
    assert "pandas.get_dummies" in msg and "discrete=" in msg and "class label" in msg
