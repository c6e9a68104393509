"""Bad public inputs found by probing the front doors at extreme values (2026-11-28): each was an internal error, or a
release of noise alone; each is now one line naming the input, and nothing is written."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchdpgmm.cli import main
from torchdpgmm.estimator import DPSyntheticClassifier
from torchdpgmm.release import release


def _xy(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 10, (n, 2)), np.array(["a", "b"])[np.arange(n) % 2]


@pytest.mark.parametrize("name, value", [("radius", 1e300), ("radius", 1e-300), ("mean_clip", 1e300),
                                         ("pca_clip", 1e300)])
def test_pipeline_bounds_outside_the_computable_range_are_one_line(name, value):
    """radius=1e300 gave OverflowError (34, 'Numerical result out of range'), radius=1e-300 a Cholesky error."""
    X, y = _xy()
    with pytest.raises(ValueError, match=f"{name}=.* is outside the range the release computes with") as e:
        DPSyntheticClassifier(1.0, 1e-5, classes=["a", "b"], bounds=(0, 10), **{name: value}).fit(X, y)
    assert "\n" not in str(e.value)
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

    with pytest.raises(ValueError, match="cell_clip=1e.200 is outside the range"):  # the pipeline's own setting
        PipelineConfig(cell_clip=1e200).check()


def test_release_clip_bound_outside_the_computable_range_is_one_line():
    X = torch.rand(50, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="outside the range the release computes with"):
        release(X, torch.arange(50) % 2, 2, 1.0, 1e-5, clip_bound=1e300)


@pytest.mark.parametrize("epsilon, delta, name", [("1", 1e-5, "epsilon"), (1.0, "x", "delta")])
def test_release_names_a_budget_that_is_not_a_number(epsilon, delta, name):
    """release(..., "1", ...) said "new(): invalid data type 'str'" (torch's)."""
    with pytest.raises(TypeError, match=f"^{name} must be a real number"):
        release(torch.rand(20, 2, dtype=torch.float64), torch.arange(20) % 2, 2, epsilon, delta, clip_bound=1.0)


def test_an_empty_class_name_is_refused_not_dropped(tmp_path, capsys):
    """--classes a,,b was read as the class set {a, b}."""
    X, y = _xy()
    data = tmp_path / "t.csv"
    data.write_text("h,w,lab\n" + "".join(f"{r[0]},{r[1]},{lab}\n" for r, lab in zip(X, y)))
    out = tmp_path / "m.json"
    for classes in ("a,,b", "a,b,"):
        assert main(["release", "--data", str(data), "--label-column", "lab", "--classes", classes, "--bounds", "0:10",
                     "--epsilon", "1", "--delta", "1e-5", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "must not hold an empty value" in err[0]
    assert not out.exists()


def test_an_npz_of_integer_labels_with_string_classes_is_refused(tmp_path, capsys):
    """An NPZ's dtype is public schema: integer labels can never match --classes a,b, and the release was noise
    alone (exit 0, a mostly-noise warning); the estimator already refused the same mismatch."""
    X, _ = _xy()
    path = tmp_path / "t.npz"
    np.savez(path, X=X, y=np.arange(len(X)) % 2)
    out = tmp_path / "m.json"
    assert main(["release", "--data", str(path), "--classes", "a,b", "--bounds", "0:10", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds integer labels but --classes names a, b" in err[0] and not out.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["release", "--data", str(path), "--classes", "0,1", "--bounds", "0:10", "--epsilon", "1",
                     "--delta", "1e-5", "--out", str(out)]) == 0
    assert out.exists()


@pytest.mark.parametrize("classes, line", [("--1,0", "holds integer labels but --classes names --1"),
                                            ("0.5,1", "holds integer labels but --classes names 0.5"),
                                            ("01,1", "--classes names a class twice: 01, 1")])
def test_class_names_no_integer_label_can_match_get_one_line(tmp_path, capsys, classes, line):
    """'--1' passed str.isdigit's test and then int() raised "invalid literal" (a review finding); 01 and 1 are
    one class since labels are matched by value."""
    X, _ = _xy()
    path = tmp_path / "t.npz"
    np.savez(path, X=X, y=np.arange(len(X)) % 2)
    assert main(["release", "--data", str(path), f"--classes={classes}", "--bounds", "0:10", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0]


@pytest.mark.parametrize("labels, classes", [(["0", "1"], ["0.0", "1.0"]), (["0.0", "1.0"], ["0", "1"]),
                                             (["1", "2.50"], ["1.0", "2.5"])])
def test_numeric_labels_match_the_class_list_by_value(tmp_path, labels, classes):
    """A CSV written from a float label column holds 1.0 where --classes says 1 (and the estimator, given
    numbers, matches them by value): every row used to be dropped as outside the classes, a noise-only
    release. Both are now read as numbers; other text is still matched as text."""
    from torchdpgmm.datafile import read_labeled_images, read_labeled_table

    rows = "".join(f"{i},{i + 1},{labels[i % 2]}\n" for i in range(6))
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n" + rows)
    for read in (lambda: read_labeled_table(path, "label", classes=classes, private=True),
                 lambda: read_labeled_images(path, classes, label_column="label")):
        t = read()
        assert t.y.tolist() == [0, 1, 0, 1, 0, 1] and t.class_names == classes
    t = read_labeled_table(path, "label", classes=classes + ["x"], private=False)  # the schema check agrees
    assert t.y.tolist() == [0, 1, 0, 1, 0, 1]
    path.write_text("a,b,label\n" + rows.replace(f",{labels[1]}\n", ",one\n"))
    assert read_labeled_table(path, "label", classes=classes, private=True).y.tolist() == [0, -1] * 3


def test_both_estimators_refuse_a_bad_sample_size_alike():
    """sample(2.0) was a TypeError in DPGaussianMixture and a ValueError in DPSyntheticClassifier."""
    from torchdpgmm.estimator import DPGaussianMixture

    X, y = _xy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = [cls(1.0, 1e-5, classes=["a", "b"], bounds=(0, 10), random_state=0).fit(X, y)
                  for cls in (DPGaussianMixture, DPSyntheticClassifier)]
    for est in fitted:
        with pytest.raises(TypeError, match="n_samples must be an integer, got float 2.0"):
            est.sample(2.0)
        with pytest.raises(ValueError, match="n_samples must be >= 1, got 0"):
            est.sample(0)


def test_a_too_narrow_bound_is_quoted_as_given():
    """(1, 1 + 1e-15) was quoted as "(1, 1)", as if equal bounds had been passed."""
    from torchdpgmm.bounds import Bounds

    with pytest.raises(ValueError, match=r"got \(1\.0, 1\.000000000000001\)"):
        Bounds([1.0], [1.0 + 1e-15])


@pytest.mark.parametrize("argv, words", [
    (["--N", "100", "--K", "2", "--d", "64"], "N = 100 is too small for K = 2 classes in d = 64 dimensions"),
    (["--epsilons", "nan"], "epsilons must be finite numbers > 0, got nan"),
])
def test_sweep_names_its_flags_not_internal_parameters(tmp_path, capsys, argv, words):
    """The sweep said "n=100 cannot give each of num_classes=2 classes min_class_size=65 points" (the sampler's
    internal names) and, for nan, "epsilons must be > 0"."""
    out = tmp_path / "o"
    assert main(["sweep", *argv, "--clip-bound", "1", "--trials", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and not out.exists()


def _pandas_text_dtype(dtype):
    """``dtype`` as pandas spells it, skipping ``str`` before pandas 3 (there it is ``object``, with no schema)."""
    pd = pytest.importorskip("pandas")
    if dtype == "str" and int(pd.__version__.split(".")[0]) < 3:
        pytest.skip("pandas < 3: dtype 'str' is object, which has no schema")
    if dtype == "arrow":
        pytest.importorskip("pyarrow")
        return pd.ArrowDtype(__import__("pyarrow").string())
    if dtype == "object-category":
        return pd.CategoricalDtype(pd.Index(["a", "b"], dtype=object))
    return dtype


@pytest.mark.parametrize("dtype", ["str", "string", "category", "arrow", "object-category"])
def test_pandas_text_labels_are_matched_by_value_whatever_the_classes_type(dtype):
    """A docs probe (2026-12-01) had pandas text or categorical label Series against numeric classes refused by their
    dtype; an API probe (2026-12-02) showed that pandas infers that dtype from the cells (one label that is not a
    number turns a CSV's numeric label column into text), so the refusal revealed such a label. Labels are matched
    by value now: text labels against numeric classes are matched by their decimal value, so words drop every row
    (the mostly-noise warning says so) and numbers written as text give the numbers' model; the same column with
    string classes is released as the numpy array is (same seed)."""
    from torchdpgmm.estimator import DPGaussianMixture
    from torchdpgmm.release.diagnostics import MostlyNoiseWarning

    pd = pytest.importorskip("pandas")
    dtype = _pandas_text_dtype(dtype)
    X, y = _xy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPGaussianMixture(1.0, 1e-5, classes=[0, 1], clip_bound=10, random_state=0).fit(X, pd.Series(y, dtype=dtype))
    assert [w for w in caught if issubclass(w.category, MostlyNoiseWarning)]
    digits = np.where(y == "a", "0", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = DPGaussianMixture(1.0, 1e-5, classes=["a", "b"], clip_bound=10, random_state=0).fit(X, y)
        b = DPGaussianMixture(1.0, 1e-5, classes=["a", "b"], clip_bound=10, random_state=0).fit(
            X, pd.Series(y, dtype=dtype))
        as_digits = pd.CategoricalDtype(pd.Index(["0", "1"], dtype=object)) if isinstance(
            dtype, pd.CategoricalDtype) else dtype  # the categories must hold the digits
        c = DPGaussianMixture(1.0, 1e-5, classes=[0, 1], clip_bound=10, random_state=0).fit(
            X, pd.Series(digits, dtype=as_digits))
    assert torch.equal(torch.as_tensor(a.model_.means), torch.as_tensor(b.model_.means))
    assert torch.equal(torch.as_tensor(a.model_.means), torch.as_tensor(c.model_.means))


@pytest.mark.parametrize("cls", ["DPGaussianMixture", "DPSyntheticClassifier"])
def test_a_dataframe_text_column_is_read_cell_by_cell_and_said_mostly_noise(cls):
    """A docs probe (2026-12-01) had a DataFrame column of text (pandas' str / string dtype) refused, naming it. But
    pandas infers that dtype from the cells (under pandas 3 one cell that is not a number makes a CSV's numeric column
    str; under pandas 2 object, which was read cell by cell), so the refusal revealed that such a cell exists
    (front-door leftovers, 2026-12-02). A text column is now read cell by cell as an object column is; a column of
    words drops every row, which the mostly-noise warning says."""
    import torchdpgmm.estimator as est
    from torchdpgmm.release.diagnostics import MostlyNoiseWarning

    pd = pytest.importorskip("pandas")
    X, y = _xy()
    dtypes = ["string"] + (["str"] if int(pd.__version__.split(".")[0]) >= 3 else [])
    for dtype in dtypes + ([_pandas_text_dtype("arrow")] if __import__("importlib").util.find_spec("pyarrow") else []):
        df = pd.DataFrame(X, columns=["u", "v"])
        df["colour"] = pd.Series(["red"] * len(df), dtype=dtype)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(est, cls)(1.0, 1e-5, classes=["a", "b"], bounds=(0, 10)).fit(df, y)
        assert [w for w in caught if issubclass(w.category, MostlyNoiseWarning)], dtype


def test_an_idx_folder_with_named_classes_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    """A docs probe (2026-12-01): IDX labels are integers (public schema), so `synthesize --classes a,b,c` on an
    IDX folder released noise alone (exit 0, a warning) where the same mistake with an NPZ was refused. Now one
    line, before the files are read; --classes 0.0,1,2 names integers and is read."""
    from torchdpgmm.data import idx
    from torchdpgmm.data.idx import write_idx
    from torchdpgmm.datafile import read_labeled_images

    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte.gz", torch.zeros(6, 28, 28, dtype=torch.uint8))
    write_idx(folder / "train-labels-idx1-ubyte.gz", (torch.arange(6) % 3).to(torch.uint8))
    assert read_labeled_images(folder, ["0.0", "1", "2"]).y.tolist() == [0, 1, 2, 0, 1, 2]
    out = tmp_path / "o"
    assert main(["synthesize", "--data", str(folder), "--classes", "a,b,c", "--epsilon", "1", "--delta", "1e-5",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds integer labels but --classes names a, b, c" in err[0] and not out.exists()
    monkeypatch.setattr(idx, "read_idx", lambda *a: (_ for _ in ()).throw(AssertionError("read before the check")))
    with pytest.raises(ValueError, match="holds integer labels"):
        read_labeled_images(folder, ["a", "b"])


def test_an_npz_of_object_labels_is_one_line_naming_the_file(tmp_path, capsys):
    """A docs probe (2026-12-01): y saved from a pandas column is an object array, and numpy's "Object arrays
    cannot be loaded when allow_pickle=False" came through without the file's name or a fix."""
    X, y = _xy()
    path = tmp_path / "t.npz"
    np.savez(path, X=X, y=y.astype(object))
    assert main(["release", "--data", str(path), "--classes", "a,b", "--bounds", "0:10", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.npz: NPZ arrays must be numbers or strings" in err[0]


def test_a_command_refused_after_a_warning_prints_its_error_line_alone(tmp_path, capsys):
    """A docs probe (2026-12-01): `release --epsilon 50` printed the weak-budget warning, then the refusal (the
    samplers' share of delta is void): two lines for one bad input. Warnings now wait until the command writes;
    a release that goes on still prints its warning before writing. An unknown study names itself."""
    X, y = _xy()
    data = tmp_path / "t.csv"
    data.write_text("u,v,label\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y)))
    base = ["release", "--data", str(data), "--label-column", "label", "--features", "u,v", "--classes", "a,b",
            "--bounds", "0:10", "--delta", "1e-5"]
    assert main(base + ["--epsilon", "60", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: epsilon = 60 is too large for the exact discrete noise" in err[0]
    assert main(base + ["--epsilon", "20", "--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["torchdpgmm release: warning: epsilon = 20 > 10 protects little"]
    assert main(["experiment", "fig9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown study 'fig9'" in err[0]


@pytest.mark.parametrize("cls", ["DPGaussianMixture", "DPSyntheticClassifier"])
def test_scoring_a_row_with_nan_is_one_line(cls):
    """A docs probe (2026-12-01): usage.md promises a one-line error for predict on a row with NaN; scikit-learn's
    message ran over several lines (HistGradientBoosting, imputers). Its first line is kept."""
    import torchdpgmm.estimator as est

    X, y = _xy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(est, cls)(1.0, 1e-5, classes=["a", "b"], bounds=(0, 10)).fit(X, y)
    bad = np.array([[np.nan, 1.0]])
    for method in ("predict", "predict_proba"):
        with pytest.raises(ValueError, match="Input X contains NaN") as e:
            getattr(model, method)(bad)
        assert "\n" not in str(e.value)


def test_csv_only_flags_on_an_npz_or_idx_input_are_refused_naming_them(tmp_path, capsys):
    """A docs probe (2026-12-01): --label-column was silently ignored for an NPZ and an IDX folder, and named
    --bounds on an NPZ were refused with a message about --features, which the user had not passed."""
    from torchdpgmm.data.idx import write_idx

    X, _ = _xy()
    npz = tmp_path / "t.npz"
    np.savez(npz, X=X, y=np.arange(len(X)) % 2)
    base = ["release", "--data", str(npz), "--classes", "0,1", "--epsilon", "1", "--delta", "1e-5",
            "--out", str(tmp_path / "m.json")]
    for extra, line in ((["--label-column", "foo", "--bounds", "0:10"], "--label-column names a column of a CSV"),
                        (["--bounds", "u=0:10,v=0:10"], "--features and --bounds COL=LOW:HIGH / --schema name")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and line in err[0] and not (tmp_path / "m.json").exists()
    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte.gz", torch.zeros(6, 28, 28, dtype=torch.uint8))
    write_idx(folder / "train-labels-idx1-ubyte.gz", (torch.arange(6) % 2).to(torch.uint8))
    assert main(["synthesize", "--data", str(folder), "--classes", "0,1", "--label-column", "foo", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an IDX folder's labels are its label file" in err[0] and not (tmp_path / "s").exists()


def test_check_settings_counts_every_warning_it_prints(tmp_path, capsys):
    """A docs probe (2026-12-01): with a weak budget --check-settings printed five warning lines (the budget's two
    and three on the data) and then 'settings checked: 3 warning(s)'."""
    X, y = _xy()
    data = tmp_path / "t.csv"
    data.write_text("u,v,label\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y)))
    assert main(["release", "--data", str(data), "--label-column", "label", "--features", "u,v", "--classes", "a,b",
                 "--epsilon", "20", "--delta", "0.1", "--clip-bound", "0.1", "--check-settings"]) == 0
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if "warning" in x]
    assert len(lines) == 5 and lines[0].startswith("torchdpgmm release: warning: epsilon = 20")
    assert f"settings checked: {len(lines)} warning(s) (2 on the budget alone, 3 on the data)" in out


def test_a_masked_label_column_is_matched_by_value_with_or_without_a_missing_value():
    """The day's review (2026-12-01): a pandas ``boolean`` column against string classes was refused, but the same
    column with one missing label (numpy then gives objects) was released with every row dropped, so the refusal
    told whether a label was missing. Labels are matched by value now (2026-12-02): ``True`` is the class "True"
    (and 1), a missing label drops its row only, and nothing is refused; Int64 alike."""
    from torchdpgmm.estimator import DPGaussianMixture

    pd = pytest.importorskip("pandas")
    X, _ = _xy()
    for values, dtype, classes in (([True, False], "boolean", ["True", "False"]), ([1, 0], "Int64", ["1", "0"])):
        y = pd.Series(values * (len(X) // 2), dtype=dtype)
        counts = []
        for yy in (y, y.mask(y.index == 0)):  # without and with one missing label
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = DPGaussianMixture(1.0, 1e-5, classes=classes, clip_bound=10, random_state=0).fit(X, yy)
            counts.append(m.model_.counts)
        assert float((counts[0] - counts[1]).sum()) == pytest.approx(1.0)  # the same noise, one row fewer


def test_numeric_class_names_match_by_exact_decimal_value():
    """The day's review: floats merged 9007199254740992 and ...993 (refused as one class named twice) and read
    12345678901234567 as ...568; float() also took '1_0' for 10. Numbers are now matched by their exact decimal
    value, other text as text; the estimator's int64 labels agree."""
    from torchdpgmm.datafile import check_class_list, class_key

    assert check_class_list(["9007199254740992", "9007199254740993"]) == ["9007199254740992", "9007199254740993"]
    assert class_key("12345678901234567") != class_key("12345678901234568")
    assert class_key("1") == class_key("1.0") == class_key("01") == class_key("1e0") == class_key("+1.")
    assert class_key("1_0") != class_key("10") and class_key("1e-400") != class_key("0")
    assert class_key("-0") == class_key("0")


def test_an_npz_with_object_names_is_one_line_naming_the_file(tmp_path, capsys):
    """The day's review: feature_names saved from a DataFrame's columns are an object array; numpy's message came
    through as the object-labels one had."""
    X, _ = _xy()
    path = tmp_path / "fn.npz"
    np.savez(path, X=X, y=np.arange(len(X)) % 2, feature_names=np.array(["u", "v"], dtype=object))
    assert main(["release", "--data", str(path), "--classes", "0,1", "--bounds", "0:10", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fn.npz: NPZ arrays must be numbers or strings" in err[0]


@pytest.mark.parametrize("resume", [False, True])
def test_a_sweeps_warnings_come_before_its_run_and_survive_an_interrupt(tmp_path, capsys, monkeypatch, resume):
    """The day's review: with warnings held until a command writes, `sweep --resume` printed its weak-budget
    warning only after the whole run, and never when interrupted."""
    import torchdpgmm.sweep as sweep

    seen = []

    def interrupted(*a, **k):
        seen.append(capsys.readouterr().err)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    out = tmp_path / "sw"
    if resume:
        out.mkdir()
    args = ["sweep", "--mechanisms", "kl", "--epsilons", "20", "--trials", "2", "--clip-bound", "3", "--out", str(out)]
    assert main(args + (["--resume"] if resume else [])) == 130
    assert "warning: epsilon = 20 > 10 protects little" in seen[0]  # printed before the run started


def test_pipeline_config_takes_numpy_scalars_as_their_python_values():
    """PipelineConfig(n_components=np.int64(5)).check() said "n_components must be an int >= 1, got
    np.int64(5)" (a grid from np.arange); the estimators already took NumPy scalars."""
    import json

    import numpy as np

    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

    cfg = PipelineConfig(n_components=np.int64(5), radius=np.float32(2.5), lloyd_steps=np.int32(1),
                         components_per_class=np.int64(2), stage_split=(np.float32(0.5), 0.06, np.float64(0.44)))
    cfg.check()
    assert cfg.n_components == 5 and type(cfg.n_components) is int and type(cfg.radius) is float
    assert all(type(f) is float for f in cfg.stage_split)
    assert json.loads(json.dumps(cfg.to_dict()))["components_per_class"] == 2
    with pytest.raises(ValueError, match="n_components must be an int >= 1"):
        PipelineConfig(n_components=np.float64(5.0)).check()  # a float is still not a count
    with pytest.raises(ValueError, match="lloyd_steps must be an int >= 0"):
        PipelineConfig(lloyd_steps=np.bool_(True)).check()


def test_tiny_class_takes_a_numpy_integer():
    """tiny_class(tiny=np.int64(3)) was refused as not an int."""
    import numpy as np

    from torchdpgmm.audit import pairs

    g = torch.Generator().manual_seed(0)
    a = pairs.tiny_class(num_per_class=5, tiny=np.int64(3), generator=g)
    b = pairs.tiny_class(num_per_class=5, tiny=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.X0, b.X0) and torch.equal(a.y1, b.y1) and a.description == b.description
    with pytest.raises(ValueError, match="tiny must be an int"):
        pairs.tiny_class(num_per_class=5, tiny=np.float64(3.0))
