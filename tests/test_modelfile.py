import json

import numpy as np
import pytest
import torch

import torchdpgmm as tdg
from torchdpgmm.privacy import PrivacyRecord
from torchdpgmm.cli import main
from torchdpgmm.mixture import histogram_counts
from torchdpgmm.datafile import read_labeled_table
from torchdpgmm.modelfile import load_model, model_from_dict, model_to_dict, save_model


def _model():
    w = torch.tensor([0.25, 0.75], dtype=torch.float64)
    mu = torch.tensor([[0.0, 1.0], [3.0, -1.0]], dtype=torch.float64)
    S = torch.tensor([[[1.0, 0.2], [0.2, 0.5]], [[2.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    return tdg.LabeledGMM(w, mu, S, torch.tensor([25, 75]))


def _record():
    return PrivacyRecord(1.0, 1e-5, "label-flip", "basic", "as-published", "kl", {"eps0": 0.3}, ["caveat"])


def test_roundtrip(tmp_path):
    m = _model()
    p = save_model(tmp_path / "m.json", m, _record(), ["cat", "dog"], ["height", "weight"])
    mf = load_model(p)
    torch.testing.assert_close(mf.model.means, m.means)
    torch.testing.assert_close(mf.model.covariances, m.covariances)
    torch.testing.assert_close(mf.model.weights, m.weights)
    assert mf.model.counts.tolist() == [25, 75]
    assert mf.class_names == ["cat", "dog"] and mf.feature_names == ["height", "weight"]
    assert mf.privacy.epsilon == 1.0 and mf.privacy.split == {"eps0": 0.3}


def test_refuses_batched_or_unprivate(tmp_path):
    m = _model()
    batched = tdg.LabeledGMM(m.weights.expand(3, 2), m.means, m.covariances)
    with pytest.raises(ValueError, match="batch_shape"):
        save_model(tmp_path / "x.json", batched, _record())
    with pytest.raises(TypeError, match="PrivacyRecord"):
        save_model(tmp_path / "x.json", m, None)
    bad = _record()
    bad.epsilon = float("inf")
    with pytest.raises(ValueError, match="epsilon"):
        save_model(tmp_path / "x.json", m, bad)
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("mutate, msg", [
    (lambda d: d.pop("privacy"), "privacy"),
    (lambda d: d.update(format="other"), "not a torchdpgmm"),
    (lambda d: d.update(weights=[0.5, 0.6]), "sum to 1"),
    (lambda d: d.update(covariances=[[[1, 0], [0, -1]], [[1, 0], [0, 1]]]), "positive definite"),
    (lambda d: d.update(means=[[0, 1]]), "shapes"),
    (lambda d: d.update(format_version=99), "format_version"),
    (lambda d: d.update(class_names=["cat", "cat"]), "repeat a class"),
    (lambda d: d.update(feature_names=["h", "h"]), "repeat a column"),
    (lambda d: d["privacy"].update(mode="bogus"), "privacy.mode"),
    (lambda d: d.update(means=[[1e308, 0.0], [0.0, 0.0]]), "within 1e300"),
    (lambda d: d.update(covariances=[[[1, 2], [2, 1]], [[1, 0], [0, 1]]]), "positive definite"),
    (lambda d: d.update(bounds={"lower": [0, 0, 0], "upper": [1, 1, 1]}), "bounds cover"),
])
def test_load_validates(mutate, msg):
    d = model_to_dict(_model(), _record())
    mutate(d)
    with pytest.raises(ValueError, match=msg):
        model_from_dict(json.loads(json.dumps(d)))


def test_histogram_counts_largest_remainder():
    c = histogram_counts(torch.tensor([1, 1, 1]), 10)
    assert c.sum().item() == 10 and sorted(c.tolist()) == [3, 3, 4]
    c = histogram_counts(torch.tensor([0.2, 0.8], dtype=torch.float64), 7)
    assert c.tolist() == [1, 6]


def test_cli_sample_preserves_histogram(tmp_path):
    save_model(tmp_path / "m.json", _model(), _record(), ["cat", "dog"], ["h", "w"])
    assert main(["sample", str(tmp_path / "m.json"), "-n", "400", "--seed", "1", "--out", str(tmp_path / "s.csv")]) == 0
    t = read_labeled_table(tmp_path / "s.csv", "label")
    assert t.class_names == ["cat", "dog"]
    assert np.bincount(t.y.numpy()).tolist() == [100, 300]
    # same seed, same file
    main(["sample", str(tmp_path / "m.json"), "-n", "400", "--seed", "1", "--out", str(tmp_path / "s2.csv")])
    assert (tmp_path / "s.csv").read_text() == (tmp_path / "s2.csv").read_text()


def test_cli_sample_bad_model_file(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["sample", str(tmp_path / "bad.json"), "-n", "5", "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("content, args, msg", [
    ("a,b,label\n1,2,x\n3,4,y\n", dict(label_column="nope"), "no column named 'nope'"),
    ("a,b,label\n1,,x\n3,4,y\n", dict(label_column="label"), "non-finite or missing"),
    ("a,b,label\n1,2,x\n3,4,x\n", dict(label_column="label"), "single class"),
    ("a,b,label\n1,zz,x\n3,4,y\n", dict(label_column="label"), "not numeric"),
    ("a,b,label\n1,2\n3,4,y\n", dict(label_column="label"), "fields"),
])
def test_read_table_errors(tmp_path, content, args, msg):
    with pytest.raises(ValueError, match=msg):
        read_labeled_table(_write(tmp_path / "d.csv", content), **args)


def test_read_table_private_mode_refuses_no_row(tmp_path):
    """Sound mode (private=True): a malformed row, a non-numeric cell, a missing label and an NPZ label
    outside class_names become rows the release drops (NaN features / index -1), never errors."""
    import numpy as np

    csv_text = "a,b,label\n1,2,x\n1,zz,y\n3,4,\n5,6\n7,8,y\n"
    t = read_labeled_table(_write(tmp_path / "d.csv", csv_text), "label", classes=["x", "y"], private=True)
    assert t.y.tolist() == [0, 1, -1, -1, 1]
    assert np.isnan(t.X[1, 1].item()) and np.isnan(t.X[3]).all() and t.X[4].tolist() == [7.0, 8.0]
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.array([0, 5, 1]), class_names=np.array(["x", "y"]))
    t = read_labeled_table(tmp_path / "d.npz", classes=["x", "y"], private=True)
    assert t.y.tolist() == [0, -1, 1]
    with pytest.raises(ValueError, match="not numeric"):  # outside sound mode the same table is refused
        read_labeled_table(_write(tmp_path / "e.csv", csv_text), "label")


def test_read_table_private_mode_one_line_is_one_record(tmp_path):
    """No record's content changes how many records there are: a blank line, a stray quote, bytes that are
    not UTF-8 and a huge field each stay one (dropped) record; the delimiter comes from the header alone."""
    import csv as _csv

    import numpy as np

    big = "9" * (_csv.field_size_limit() + 10)
    raw = (b"a,b,label\n1,2,x\n\n3,\"4,y\n5,6,y\n\xff\xfe,1,x\n" + f"{big},1,x\n".encode() + b"7,8,y\n")
    (tmp_path / "d.csv").write_bytes(raw)
    t = read_labeled_table(tmp_path / "d.csv", "label", classes=["x", "y"], private=True)
    assert t.X.shape[0] == 7 and t.y.tolist() == [0, -1, -1, 1, 0, -1, 1]
    assert t.X[3].tolist() == [5.0, 6.0] and t.X[6].tolist() == [7.0, 8.0] and np.isnan(t.X[4, 0].item())
    (tmp_path / "u.csv").write_text("\ufeffa,b,label\n1,2,x\u2028z\n3\f,4,y\n5,6,y\n", encoding="utf-8")
    t = read_labeled_table(tmp_path / "u.csv", "label", classes=["x", "y"], private=True)  # BOM; only \n ends a record
    assert t.X.shape[0] == 3 and t.y.tolist() == [-1, 1, 1]
    (tmp_path / "q.csv").write_text('a,b,label\n1,2,"x\ny"\n3,4,z\n')  # outside sound mode: csv's own records
    assert read_labeled_table(tmp_path / "q.csv", "label").class_names == ["x\ny", "z"]
    (tmp_path / "t.csv").write_text("a\tb\tlabel\n1\t\"2,5\"\tx\n3\t4\ty\n")
    t = read_labeled_table(tmp_path / "t.csv", "label", classes=["x", "y"], private=True)
    assert t.y.tolist() == [0, 1] and np.isnan(t.X[0, 1].item())



@pytest.mark.parametrize("X, y, msg", [
    (np.array([["1", "2"], ["x", "4"]]), np.array([1, 0]), "X must have a numeric dtype"),
    (np.array([[1 + 2j, 2.0], [3.0, 4.0]]), np.array([1, 0]), "X must have a numeric dtype"),
    (np.ones((2, 2)), np.array([1.0, 0.0]), "y must hold integer or string labels"),
])
def test_read_npz_refuses_public_dtypes(tmp_path, X, y, msg):
    """An NPZ array's dtype is public schema: strings in X or float labels are refused (issue 27 item 4;
    they used to become a release in which every row was dropped)."""
    np.savez(tmp_path / "s.npz", X=X, y=y)
    with pytest.raises(ValueError, match=msg):
        read_labeled_table(tmp_path / "s.npz", classes=["0", "1"], private=True)


def test_read_table_csv_and_npz(tmp_path):
    t = read_labeled_table(_write(tmp_path / "d.csv", "a,label,b\n1,10,2\n3,2,4\n5,10,6\n"), "label")
    assert t.feature_names == ["a", "b"] and t.class_names == ["2", "10"]
    assert t.y.tolist() == [1, 0, 1] and t.X.tolist() == [[1, 2], [3, 4], [5, 6]]
    np.savez(tmp_path / "d.npz", X=np.ones((4, 2)), y=np.array([0, 1, 0, 1]))
    t = read_labeled_table(tmp_path / "d.npz")
    assert t.X.shape == (4, 2) and t.num_classes == 2
