"""Front-door leftovers (2026-12-02): boolean labels against --classes, text columns of a DataFrame, and the classical
Gaussian calibration outside its domain (eps_part <= 1)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchdpgmm.cli import main


class _Touched(Exception):
    pass


def _boom(*args, **kwargs):
    raise _Touched()


# ---------------------------------------------------------------- item 1: boolean labels
def _bool_table(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 10, (n, 2)), rng.integers(0, 2, n).astype(bool)


@pytest.mark.parametrize("private", [True, False])
def test_an_npz_of_boolean_labels_matches_classes_0_1_as_the_estimator_does(tmp_path, private):
    """An NPZ with a bool y and --classes 0,1 dropped every row (the labels read as the text True / False, matched by
    value against the numbers 0 and 1). The estimator matches a bool y to classes=[0, 1] (numpy's bool is a 0/1
    integer type): the file reader now gives the same class indices, and --classes False,True names the same classes."""
    from torchdpgmm import DPGaussianMixture
    from torchdpgmm.datafile import read_labeled_table

    X, y = _bool_table()
    path = tmp_path / "t.npz"
    np.savez(path, X=X, y=y)
    est = DPGaussianMixture(classes=[0, 1], clip_bound=1.0)
    _, want = est._encode_labels(y, est._public_classes())
    assert (want >= 0).all()
    for names in (["0", "1"], ["False", "True"], ["0.0", "1"]):
        t = read_labeled_table(path, classes=names, private=private)
        np.testing.assert_array_equal(t.y.numpy(), want)
        assert t.class_names == names
    t = read_labeled_table(path, classes=["True", "False"], private=private)  # the classes in the order given
    np.testing.assert_array_equal(t.y.numpy(), 1 - want)


@pytest.mark.parametrize("spelling", [("True", "False"), ("true", "false"), ("TRUE", "FALSE")])
@pytest.mark.parametrize("private", [True, False])
def test_a_csv_column_of_booleans_matches_classes_0_1_and_true_false(tmp_path, spelling, private):
    """A CSV label column written from booleans (pandas writes True / False, R TRUE / FALSE; pandas.read_csv reads
    all three spellings as booleans, which the estimator matches to 0 / 1): --classes 0,1 dropped every row."""
    from torchdpgmm.datafile import read_labeled_table

    X, y = _bool_table()
    path = tmp_path / "t.csv"
    path.write_text("a,b,label\n" + "".join(f"{r[0]},{r[1]},{spelling[0] if v else spelling[1]}\n"
                                            for r, v in zip(X, y)))
    for names, want in ((["0", "1"], y.astype(int)), (["True", "False"], 1 - y.astype(int)),
                        (["false", "TRUE"], y.astype(int))):
        t = read_labeled_table(path, "label", ["a", "b"], classes=names, private=private)
        np.testing.assert_array_equal(t.y.numpy(), want)


def test_a_boolean_and_its_number_are_one_class():
    from torchdpgmm.datafile import check_class_list, class_key

    assert class_key("True") == class_key("1") == class_key("1.0") and class_key("false") == class_key("0")
    assert class_key("Yes") == ("text", "Yes") and class_key("tRuE") == ("text", "tRuE")  # only pandas' spellings
    with pytest.raises(ValueError, match="names a class twice: 0, False"):
        check_class_list(["0", "False"])


def test_release_of_an_npz_of_booleans_with_classes_0_1_is_not_noise_alone(tmp_path, capsys):
    """End to end: before, every row was dropped and the command said the release is mostly noise."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (400, 3))
    path = tmp_path / "t.npz"
    np.savez(path, X=X, y=rng.integers(0, 2, 400).astype(bool))
    assert main(["release", "--data", str(path), "--classes", "0,1", "--bounds", "0:1", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "m.json")]) == 0
    assert "mostly noise" not in capsys.readouterr().err


# ---------------------------------------------------------------- item 2: a DataFrame's text columns
def test_a_text_column_is_read_cell_by_cell_as_an_object_column_is():
    """A DataFrame column of numeric text was refused when its dtype was str / string and parsed cell by cell when
    object; pandas infers the dtype from the cells (under pandas 3 one cell that is not a number makes a CSV's
    numeric column str), so a refusal revealed that such a cell exists. Both are read alike now."""
    pd = pytest.importorskip("pandas")
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(2)
    X, y = rng.uniform(0, 10, (200, 2)), rng.integers(0, 2, 200)
    cells = np.array([repr(float(v)) for v in X[:, 1]] + ["oops"], dtype=object)
    yo = np.concatenate([y, y[:1]])
    kw = dict(epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0, 10), random_state=3)
    fits = []
    for dtype in ["object", "string"] + (["str"] if int(pd.__version__.split(".")[0]) >= 3 else []):
        df = pd.DataFrame({"a": np.concatenate([X[:, 0], X[:1, 0]]), "b": pd.Series(cells, dtype=dtype)})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(DPGaussianMixture(**kw).fit(df, yo))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = DPGaussianMixture(**kw).fit(pd.DataFrame({"a": X[:, 0], "b": X[:, 1]}), y)  # the "oops" row dropped
    for m in fits:
        np.testing.assert_array_equal(m.means_, plain.means_)
        np.testing.assert_array_equal(m.covariances_, plain.covariances_)


# ---------------------------------------------------------------- item 4: the classical calibration's domain
@pytest.mark.parametrize("mechanism", ["gaussian", "colored", "r1smg"])
def test_classical_calibration_is_refused_above_its_domain_before_any_noise(monkeypatch, mechanism):
    """calibration='classical' (Dwork & Roth 2014 Thm A.1) holds for eps_part <= 1 only, as the record's accountant
    says, and was applied at any epsilon: a part above 1 is refused in one line naming calibration='analytic', before
    any noise is drawn; eps 3 (three parts of exactly 1) and 'analytic' at eps 8 release; 'laplace' has no Gaussian
    part and is unaffected."""
    import torchdpgmm.mechanisms as mechanisms
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    b = synthetic_data(1, 60, num_classes=3, dim=3, generator=torch.Generator().manual_seed(3))

    def go(eps, calibration, m=mechanism):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return release(b.X, b.y, 3, eps, 1e-5, mode="as-published", mechanism=m, calibration=calibration,
                           generator=torch.Generator().manual_seed(1))

    assert go(3.0, "classical").privacy.covered is False  # as-published: never covered
    go(8.0, "analytic")
    go(8.0, "classical", "laplace")
    for name in ("normal_noise", "symmetric_noise", "gaussian", "r1smg", "laplace_noise"):
        monkeypatch.setattr(mechanisms, name, _boom)
    for eps in (3.3, torch.tensor([0.5, 4.0], dtype=torch.float64)):
        with pytest.raises(ValueError, match=r"calibration='classical' holds for a per-part epsilon <= 1 only.*"
                                             r"calibration='analytic'") as e:
            go(eps, "classical")
        assert "\n" not in str(e.value)


# ---------------------------------------------------------------- an API probe's findings (2026-12-02)
def test_a_value_beyond_float64_prints_nothing():
    """A longdouble cell beyond float64 made fit print numpy's 'overflow encountered in cast' (stderr by default):
    output that depends on a private value. The cast is silent now (the cell becomes inf and its row is dropped)."""
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 2)).astype(np.longdouble), rng.integers(0, 2, 200)
    X[3, 0] = np.longdouble("1e400")
    if X.dtype.itemsize <= 8:
        pytest.skip("this platform's longdouble is float64")
    for cells in (X, X.astype(object)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            DPGaussianMixture(1.0, 1e-5, classes=[0, 1], clip_bound=5.0).fit(cells, y)
        assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]


def test_accuracy_of_a_column_of_labels_is_not_broadcast():
    """accuracy(X, y[:, None]) compared an (n,) prediction with an (n, 1) column, an n x n table of matches."""
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    X = rng.normal(size=(300, 2)) + 4.0 * y[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DPGaussianMixture(5.0, 1e-5, classes=[0, 1], clip_bound=10.0, random_state=0).fit(X, y)
        assert m.accuracy(X, y[:, None]) == m.accuracy(X, y) == m.score(X, y)


def test_the_classical_rule_holds_at_epsilon_1():
    """The classical calibration is refused above a per-part epsilon of 1 and allowed at 1 (Dwork & Roth state eps < 1):
    at eps = 1 its sigma keeps the Gaussian mechanism's exact delta (Balle & Wang 2018, Thm 8, with scipy's normal
    law) below the delta it was calibrated for."""
    from scipy.stats import norm

    from torchdpgmm.privacy import gaussian_sigma

    for delta in (1e-2, 1e-3, 1e-5, 1e-8, 1e-12):
        s = float(gaussian_sigma(1.0, delta, 1.0, rule="classical"))
        assert s == pytest.approx(np.sqrt(2 * np.log(1.25 / delta)))
        exact = norm.cdf(1 / (2 * s) - s) - np.e * norm.cdf(-1 / (2 * s) - s)
        assert exact <= delta


# ---------------------------------------------------------------- an audit of the readers (2026-12-02)
def test_synthesize_an_idx_folder_with_no_records_releases_noise(tmp_path, capsys):
    """An IDX folder with no records ended in a traceback (a reshape with -1 of zero elements); under add/remove the
    number of records is private, and the same table as NPZ or CSV releases from noise alone. It does now too."""
    from torchdpgmm.data.idx import write_idx

    (tmp_path / "idx").mkdir()
    write_idx(tmp_path / "idx" / "train-images-idx3-ubyte.gz", torch.zeros(0, 28, 28, dtype=torch.uint8))
    write_idx(tmp_path / "idx" / "train-labels-idx1-ubyte.gz", torch.zeros(0, dtype=torch.uint8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["synthesize", "--data", str(tmp_path / "idx"), "--classes", "0,1,2", "--epsilon", "4",
                     "--delta", "1e-5", "--n-components", "4", "--out", str(tmp_path / "rel")])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "rel" / "release.json").exists()


def test_a_list_is_read_at_the_public_width_of_its_bounds_or_refused_by_its_type():
    """A Python list X with one row of another length (or None, or a string) made fit refuse 'Expected 2D array', an
    error on one record; reading its width from its first row (a first fix) let that record decide how the others are
    read and the model's shape (a review). A list has no public width of its own: with bounds for every column it is
    read at their width (another row is a dropped row: the same release as without it; an empty list is a table
    without rows), without them it is refused by its type, whatever its rows."""
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 10, (90, 2)).tolist(), rng.integers(0, 2, 90).tolist()
    kw = dict(epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=[(0, 10), (0, 10)], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = DPGaussianMixture(**kw).fit(np.asarray(X), y)
        assert torch.equal(DPGaussianMixture(**kw).fit(X, y).model_.means, ref.model_.means)
        for odd in ([1.0], [1.0, 2.0, 3.0], None, "abc", {1.0, 2.0}, np.array([[1.0, 2.0]])):
            for where in (0, 45):
                rows, labels = X[:where] + [odd] + X[where:], y[:where] + [1] + y[where:]
                got = DPGaussianMixture(**kw).fit(rows, labels).model_
                assert torch.equal(got.counts, ref.model_.counts), (odd, where)
        DPGaussianMixture(**kw).fit([], [])  # no rows: released from noise alone, not refused
    for rows in (X, [[1.0, 2.0, 3.0]] + X[1:], []):
        with pytest.raises(ValueError, match="X is a Python list, whose width would be read from a record"):
            DPGaussianMixture(1.0, 1e-5, classes=[0, 1], clip_bound=10.0).fit(rows, y[:len(rows)])


def test_a_complex_cell_drops_its_row_only():
    """One complex cell makes numpy's array and pandas' column complex; that dtype was refused (an error on one
    cell). A cell with a nonzero imaginary part is now a dropped row, the others their real values."""
    pd = pytest.importorskip("pandas")
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 10, (90, 2)), rng.integers(0, 2, 90)
    kw = dict(epsilon=1.0, delta=1e-5, classes=[0, 1], clip_bound=10.0, random_state=0)
    Xc = np.concatenate([X, [[1 + 2j, 3.0]]]).astype(complex)
    yc = np.concatenate([y, [1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = DPGaussianMixture(**kw).fit(X, y).means_
        for cells in (Xc, pd.DataFrame({"a": Xc[:, 0], "b": Xc[:, 1].real})):
            np.testing.assert_array_equal(DPGaussianMixture(**kw).fit(cells, yc).means_, ref)


def test_a_boolean_feature_cell_is_read_alike_by_both_front_doors(tmp_path):
    """The command line's CSV reader dropped a row whose feature cell is 'True' while the estimator read it as 1 (as a
    bool column): both read boolean texts as 1 / 0 now."""
    from torchdpgmm.datafile import read_labeled_table

    path = tmp_path / "t.csv"
    path.write_text("u,v,label\nTrue,2.0,a\nfalse,1.5,b\n3.0,TRUE,a\n")
    t = read_labeled_table(path, "label", ["u", "v"], classes=["a", "b"], private=True)
    np.testing.assert_array_equal(np.asarray(t.X), [[1.0, 2.0], [0.0, 1.5], [3.0, 1.0]])


def test_an_npz_failing_its_crc_check_is_one_line(tmp_path, capsys):
    """An NPZ whose member fails its CRC check ended in a zipfile.BadZipFile traceback; a corrupt input is one line
    with exit status 2, as usage.md promises."""
    path = tmp_path / "t.npz"
    rng = np.random.default_rng(0)
    np.savez(path, X=rng.uniform(0, 10, (40, 2)), y=rng.integers(0, 2, 40))
    raw = bytearray(path.read_bytes())
    at = raw.index(b"\x93NUMPY") + 200  # inside X's stored bytes (np.savez does not compress)
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    code = main(["release", "--data", str(path), "--classes", "0,1", "--clip-bound", "5", "--epsilon", "1",
                 "--delta", "1e-5", "--out", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert not (tmp_path / "m.json").exists()


def test_odd_object_cells_and_labels_neither_raise_nor_warn():
    """A review (2026-12-02): a numpy complex scalar in an object cell printed numpy's ComplexWarning and was read as its
    real part, a size-1 array in a cell warns or is read by numpy's version, and a timedelta64 label (numpy counts it
    as an Integral) raised in the label key. Each is now a dropped row, silently (a real complex cell, imaginary part
    0, is its real value, as a complex array's is)."""
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 10, (90, 2)), rng.integers(0, 2, 90)
    kw = dict(epsilon=1.0, delta=1e-5, classes=[0, 1], clip_bound=10.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = DPGaussianMixture(**kw).fit(X, y).model_
    Xo = np.concatenate([X, [[1.0, 2.0]]]).astype(object)
    for cell, label, dropped in ((np.complex128(5 + 2j), 1, True), (np.array([7.0]), 1, True),
                                 (1.0, np.timedelta64(1, "D"), True), (np.complex128(5 + 0j), 1, False)):
        Xc, yc = Xo.copy(), np.concatenate([y, [0]]).astype(object)
        Xc[-1, 0], yc[-1] = cell, label
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = DPGaussianMixture(**kw).fit(Xc, yc).model_
        assert not [w for w in caught if not issubclass(w.category, UserWarning)], [str(w.message) for w in caught]
        assert torch.equal(got.counts, ref.counts) == dropped, cell
