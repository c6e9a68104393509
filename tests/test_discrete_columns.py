"""Discrete (integer-valued) columns of DPGaussianMixture: ``discrete=`` rounds and clips synthetic values
(issue 26 item 4); bad entries and categorical dtypes are refused in one line before a value is read."""
import csv
import re
import json

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
    x, ref = np.asarray(x), np.asarray(ref)  # fitted on a DataFrame: sample gives DataFrames
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


def test_categorical_column_message_names_it_and_says_how():
    df, y = _table(20)
    df["colour"] = pd.Categorical(["a", "b"] * 10)
    m = DPGaussianMixture(classes=[0, 1], bounds={**BOUNDS, "colour": (0, 1)})
    with pytest.raises(ValueError) as exc:
        m.fit(df, y)
    msg = str(exc.value)
    assert "'colour'" in msg and "\n" not in msg
    assert "pandas.get_dummies" in msg and "discrete=" in msg and "class label" in msg


def test_a_bool_column_is_its_0_1_values_as_text_booleans_are():
    """A bool column was refused like a categorical one (until 2026-12-02), but pandas' read_csv makes a column bool
    only when every cell is a boolean (with one other cell it is text), so the refusal revealed that no other cell
    exists; and pandas.get_dummies makes bool columns. It is read as 0 / 1 now, and the same cells as text ("True",
    "false") are read alike: one cell that is not a boolean drops its own row and moves no other."""
    import warnings

    df, y = _table(40)
    flags = np.array([True, False, False, True] * 10)
    kw = dict(classes=[0, 1], bounds={**BOUNDS, "flag": (0, 1)}, discrete=["flag"], random_state=0)
    fits = []
    for col in (flags, pd.Series(flags, dtype="boolean"), np.where(flags, "True", "false").astype(object),
                pd.Series(np.where(flags, "TRUE", "False"), dtype="string"), flags.astype(int)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(DPGaussianMixture(**kw).fit(df.assign(flag=col), y))
    for m in fits[1:]:
        np.testing.assert_array_equal(m.means_, fits[0].means_)


# ---------------------------------------------------------------- one home: Bounds.clip_rows (numpy references)
def _reference_clip_rows(raw, lo, hi, integer, groups):
    """Row by row, value by value: clip, round half away from zero at .5 never occurs here, argmax by a loop."""
    out = np.empty_like(raw)
    for i, row in enumerate(raw):
        for j, v in enumerate(row):
            out[i, j] = min(max(v, lo[j]), hi[j])
            if j in integer:
                out[i, j] = min(max(float(np.floor(out[i, j] + 0.5)), lo[j]), hi[j])
        for g in groups:
            best = g[0]
            for j in g[1:]:
                if row[j] > row[best]:
                    best = j
            for j in g:
                out[i, j] = 1.0 if j == best else 0.0
    return out


def _assert_rounded_from(x, ref, integer, groups):
    """``x`` equals the loop reference applied to ``ref``, rows clipped into the bounds already. Where ``ref``'s
    group values tie (both clipped to 1, say) the argmax of the unclipped values, which ``ref`` no longer holds,
    decides: there only "exactly one 1" is checked."""
    lo = np.array([BOUNDS[c][0] for c in BOUNDS])
    hi = np.array([BOUNDS[c][1] for c in BOUNDS])
    want = _reference_clip_rows(ref, lo, hi, integer, groups)
    tie = np.zeros(len(ref), dtype=bool)
    for g in groups:
        top = ref[:, g].max(1, keepdims=True)
        tie |= (ref[:, g] == top).sum(1) > 1
        np.testing.assert_array_equal(x[:, g].sum(1), np.ones(len(x)))
    assert tie.mean() < 0.2
    np.testing.assert_array_equal(x[~tie], want[~tie])
    others = [j for j in range(x.shape[1]) if not any(j in g for g in groups)]
    np.testing.assert_array_equal(x[:, others], want[:, others])


def test_clip_rows_against_a_loop_reference():
    from torchdpgmm.bounds import Bounds

    rng = np.random.default_rng(0)
    lo, hi = np.array([0.0, -3, 0, 0, 0, 10]), np.array([5.0, 3, 1, 1, 1, 20.5])
    b = Bounds(lo, hi, names=list("abcdef")).discrete_columns(["a", 1, ("c", "d", "e")])
    assert b.integer == (0, 1) and b.onehot == ((2, 3, 4),) and b.discrete_names() == ["a", "b", ["c", "d", "e"]]
    raw = rng.normal(2.0, 4.0, size=(400, 6))
    got = b.clip_rows(raw)
    np.testing.assert_array_equal(got, _reference_clip_rows(raw, lo, hi, {0, 1}, [[2, 3, 4]]))
    assert np.all(got[:, 2:5].sum(1) == 1.0)
    assert torch.equal(torch.as_tensor(b.clip_rows(torch.as_tensor(raw))), torch.as_tensor(got))  # tensors too


def test_discrete_survives_the_dict_round_trip_and_bad_dicts_are_refused():
    from torchdpgmm.bounds import Bounds

    b = Bounds([0, 0, 0], [4, 1, 1], names=["k", "r", "g"]).discrete_columns(["k", ["r", "g"]])
    d = b.to_dict()
    assert d["integer"] == [0] and d["onehot"] == [[1, 2]]
    assert Bounds.from_dict(json.loads(json.dumps(d))) == b
    assert "integer" not in Bounds([0], [1]).to_dict()  # files without discrete columns are unchanged
    for bad, needle in [({**d, "integer": 0}, "integer"), ({**d, "onehot": [1, 2]}, "onehot"),
                        ({**d, "integer": [5]}, "index 5"), ({**d, "onehot": [[0, 1]]}, "'k'")]:
        with pytest.raises(ValueError, match=needle):
            Bounds.from_dict(bad)


@pytest.mark.parametrize("discrete, needle", [
    ([("red",)], "at least two"),
    ([("age", "red")], "'age' needs bounds (0, 1)"),
    (["red", ("red", "blue")], "more than once"),
    ([("red", "nope")], "'nope'"),
])
def test_bad_onehot_groups_refused_in_one_line(discrete, needle):
    df, y = _table(20)
    with pytest.raises(ValueError) as exc:
        DPGaussianMixture(classes=[0, 1], bounds=BOUNDS, discrete=discrete).fit(df, y)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.filterwarnings("ignore")
def test_onehot_group_gives_exactly_one_one_at_the_argmax():
    x, _ = _fit(["kids", ("red", "blue")]).sample(1500)
    ref, _ = _fit(None).sample(1500)  # the same release, unrounded
    x, ref = np.asarray(x), np.asarray(ref)  # fitted on a DataFrame: sample gives DataFrames
    _assert_rounded_from(x, ref, {1}, [[3, 4]])


# ---------------------------------------------------------------- DPSyntheticClassifier(discrete=...)
def _pipe(discrete, df=None, y=None, **kw):
    from torchdpgmm.estimator import DPSyntheticClassifier

    if df is None:
        df, y = _table()
    return DPSyntheticClassifier(epsilon=2.0, classes=[0, 1], bounds=BOUNDS, image_transform="none",
                                 n_components=5, discrete=discrete, random_state=4, **kw).fit(df, y)


@pytest.mark.filterwarnings("ignore")
def test_pipeline_sample_rounds_discrete_columns_and_groups():
    x, lab = (np.asarray(v) for v in _pipe(["age", "kids", ("red", "blue")]).sample(1000))  # DataFrame in and out
    ref, lab_ref = (np.asarray(v) for v in _pipe(None).sample(1000))  # the same release and draw, unrounded
    np.testing.assert_array_equal(lab, lab_ref)
    _assert_rounded_from(x, ref, {0, 1}, [[3, 4]])
    assert np.any(x[:, 2] != np.round(x[:, 2]))  # height stays continuous


@pytest.mark.parametrize("kw, needle", [
    ({"discrete": ["age"], "bounds": None}, "bounds"),
    ({"discrete": ["weight"]}, "'weight'"),
    ({"discrete": ["height"]}, "'height' needs integer bounds"),
])
def test_pipeline_bad_discrete_refused_before_data(monkeypatch, kw, needle):
    from torchdpgmm.estimator import DPSyntheticClassifier

    def no_read(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(est_mod, "_dataframe_numbers_or_nan", no_read)
    df, y = _table(20)
    args = {"bounds": BOUNDS, **kw}
    with pytest.raises(ValueError) as exc:
        DPSyntheticClassifier(classes=[0, 1], image_transform="none", n_components=5, **args).fit(df, y)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_pipeline_refuses_category_columns_naming_them():
    from torchdpgmm.estimator import DPSyntheticClassifier

    for col in (pd.Categorical(["a", "b"] * 10),):  # a bool column is 0 / 1 (since 2026-12-02)
        df, y = _table(20)
        df["colour"] = col
        with pytest.raises(ValueError) as exc:
            DPSyntheticClassifier(classes=[0, 1], bounds={**BOUNDS, "colour": (0, 1)}, image_transform="none",
                                  n_components=6).fit(df, y)
        assert "'colour'" in str(exc.value) and "pandas.get_dummies" in str(exc.value)
        assert "\n" not in str(exc.value)


# ---------------------------------------------------------------- the command line: --discrete
CLI_BOUNDS = "age=18:90,kids=0:6,height=139.5:210.5,red=0:1,blue=0:1"


def _csv(tmp_path, n=300):
    df, y = _table(n)
    df["label"] = np.where(y == 1, "b", "a")
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    return path


def _read_rows(path):
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([[float(r[c]) for c in BOUNDS] for r in rows]), [r["label"] for r in rows]


def _written_as_whole_numbers(path, columns):
    """Every cell of ``columns`` in the CSV text is a whole number as written (``1``, not ``1.0``): a docs probe
    (2026-12-01) found the one-hot group's cells written as 0.0 / 1.0 beside the integer columns' 2."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return all(re.fullmatch(r"-?[0-9]+", r[c]) for r in rows for c in columns)


def test_cli_release_discrete_is_stored_and_sample_rounds(tmp_path):
    from torchdpgmm.cli import main

    data = _csv(tmp_path)
    base = ["release", "--data", str(data), "--label-column", "label", "--classes", "a,b", "--epsilon", "2",
            "--delta", "1e-5", "--bounds", CLI_BOUNDS, "--seed", "5"]
    assert main(base + ["--discrete", "age,kids,red+blue", "--out", str(tmp_path / "d.json")]) == 0
    assert main(base + ["--out", str(tmp_path / "c.json")]) == 0
    d, c = (json.loads((tmp_path / f).read_text()) for f in ("d.json", "c.json"))
    assert d["means"] == c["means"]  # discrete= is post-processing: the release is the same
    assert d["bounds"]["integer"] == [0, 1] and d["bounds"]["onehot"] == [[3, 4]]
    for f in ("d", "c"):
        assert main(["sample", str(tmp_path / f"{f}.json"), "-n", "800", "--seed", "1",
                     "--out", str(tmp_path / f"{f}.csv")]) == 0
    x, lab = _read_rows(tmp_path / "d.csv")
    ref, lab_ref = _read_rows(tmp_path / "c.csv")  # unrounded rows of the same draw, clipped into the bounds
    assert lab == lab_ref
    _assert_rounded_from(x, ref, {0, 1}, [[3, 4]])
    names = list(BOUNDS)
    assert _written_as_whole_numbers(tmp_path / "d.csv", [names[j] for j in (0, 1, 3, 4)])


def test_cli_synthesize_discrete_rounds_rows(tmp_path):
    from torchdpgmm.cli import main

    data = _csv(tmp_path)
    base = ["synthesize", "--data", str(data), "--label-column", "label", "--classes", "a,b", "--epsilon", "2",
            "--delta", "1e-5", "--image-transform", "none", "--bounds", CLI_BOUNDS, "-n", "600", "--seed", "2"]
    assert main(base + ["--discrete", "age,kids,red+blue", "--out", str(tmp_path / "d")]) == 0
    assert main(base + ["--out", str(tmp_path / "c")]) == 0
    x, lab = _read_rows(tmp_path / "d" / "synthetic.csv")
    ref, lab_ref = _read_rows(tmp_path / "c" / "synthetic.csv")
    assert lab == lab_ref
    _assert_rounded_from(x, ref, {0, 1}, [[3, 4]])
    assert _written_as_whole_numbers(tmp_path / "d" / "synthetic.csv", [list(BOUNDS)[j] for j in (0, 1, 3, 4)])
    rel = json.loads((tmp_path / "d" / "release.json").read_text())
    assert rel["bounds"]["integer"] == [0, 1] and rel["bounds"]["onehot"] == [[3, 4]]


@pytest.mark.parametrize("extra, needle", [
    (["--discrete", "age"], "--bounds or --schema"),
    (["--bounds", CLI_BOUNDS, "--discrete", "weight"], "'weight'"),
    (["--bounds", CLI_BOUNDS, "--discrete", "height"], "'height' needs integer bounds"),
    (["--bounds", CLI_BOUNDS, "--discrete", "age+red"], "'age' needs bounds (0, 1)"),
    (["--bounds", CLI_BOUNDS, "--discrete", "age,,kids"], "empty column name"),
])
@pytest.mark.parametrize("command", ["release", "synthesize"])
def test_cli_bad_discrete_one_line_exit_2_nothing_written(tmp_path, capsys, extra, needle, command):
    from torchdpgmm.cli import main

    data = _csv(tmp_path, 20)
    out = tmp_path / ("m.json" if command == "release" else "out")
    argv = [command, "--data", str(data), "--label-column", "label", "--classes", "a,b", "--epsilon", "1",
            "--delta", "1e-5", "--out", str(out), *extra]
    if command == "synthesize":
        argv += ["--image-transform", "none"]
    elif "--bounds" not in extra:
        argv += ["--clip-bound", "5"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_sampled_dataframe_keeps_discrete_columns_whole():
    """An API probe (2026-12-02): pandas in, pandas out gave every column as float64, the rounded discrete columns
    as 3.0. They come back as int64 (the command line writes them as whole numbers too), the others as float64."""
    import warnings

    from torchdpgmm.estimator import DPSyntheticClassifier

    df, y = _table(300)
    kw = dict(classes=[0, 1], bounds=BOUNDS, discrete=["age", "kids", ("red", "blue")], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for est in (DPGaussianMixture(1.0, 1e-5, **kw), DPSyntheticClassifier(1.0, 1e-5, **kw)):
            rows, labels = est.fit(df, y).sample(50)
            assert list(rows.columns) == list(df.columns)
            assert {c: str(t) for c, t in rows.dtypes.items()} == {"age": "int64", "kids": "int64",
                                                                   "height": "float64", "red": "int64",
                                                                   "blue": "int64"}
            assert ((rows["red"] + rows["blue"]) == 1).all()
