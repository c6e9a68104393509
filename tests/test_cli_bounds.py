"""The command line with public bounds (``--bounds`` / ``--schema``), seed streams, the mostly-noise warning and
the output checks; references come from numpy on the CSV, never from the code under test."""
import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import torchdpgmm
from torchdpgmm.cli import main

AIS = Path(torchdpgmm.__file__).parent / "data" / "ais.csv"
BOUNDS = "Ht=140:210,Wt=30:150"  # plausible adult height (cm) and weight (kg): public knowledge


def _true_means():
    with open(AIS, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([[np.mean([float(r[c]) for r in rows if r["sex"] == s]) for c in ("Ht", "Wt")]
                     for s in ("female", "male")])


def _release(tmp_path, *extra, out="m.json"):
    argv = ["release", "--data", str(AIS), "--label-column", "sex", "--features", "Ht,Wt",
            "--classes", "female,male", "--epsilon", "1", "--delta", "1e-5", "--out", str(tmp_path / out), *extra]
    return main(argv)


def test_ais_release_with_bounds_gives_means_close_to_truth(tmp_path):
    truth = _true_means()
    errs = []
    for seed in range(5):
        assert _release(tmp_path, "--bounds", BOUNDS, "--seed", str(seed), out=f"m{seed}.json") == 0
        m = json.loads((tmp_path / f"m{seed}.json").read_text())
        assert m["bounds"] == {"lower": [140.0, 30.0], "upper": [210.0, 150.0], "names": ["Ht", "Wt"]}
        errs.append(np.abs(np.array(m["means"]) - truth))
    med = np.median(np.array(errs), axis=0)  # (class, feature): typical error over noise draws
    assert (med[:, 0] < 5.0).all(), med  # cm
    assert (med[:, 1] < 8.0).all(), med  # kg


def test_schema_equals_bounds_and_sample_in_user_units(tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"columns": {"Wt": [30, 150], "Ht": [140, 210]}}))
    assert _release(tmp_path, "--schema", str(schema), "--seed", "3", out="a.json") == 0
    assert _release(tmp_path, "--bounds", BOUNDS, "--seed", "3", out="b.json") == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["means"] == b["means"] and a["bounds"] == b["bounds"]
    assert main(["sample", str(tmp_path / "a.json"), "-n", "3000", "--out", str(tmp_path / "s.csv")]) == 0
    with open(tmp_path / "s.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["Ht", "Wt", "label"]
    X = np.array([[float(r["Ht"]), float(r["Wt"])] for r in rows])
    assert X[:, 0].min() >= 140 and X[:, 0].max() <= 210 and X[:, 1].min() >= 30 and X[:, 1].max() <= 150
    assert X[:, 0].mean() > 150  # in cm, not in the unit box


def test_bounds_make_clip_bound_optional_and_refuse_bad_bounds(tmp_path, capsys):
    assert _release(tmp_path, out="x.json") == 2
    assert "--clip-bound" in capsys.readouterr().err
    assert _release(tmp_path, "--bounds", "Ht=140:210", out="y.json") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Wt" in err
    assert _release(tmp_path, "--bounds", "210:140", out="y.json") == 2
    assert _release(tmp_path, "--bounds", BOUNDS, "--schema", str(tmp_path / "s.json"), out="y.json") == 2
    assert not (tmp_path / "y.json").exists()


def test_release_and_sample_seed_streams_differ(tmp_path):
    """``release --seed S`` and ``sample --seed S`` must not draw the same raw numbers: with the same seed the
    sample's generator must not equal a generator manually seeded with S (the release's old stream)."""
    assert _release(tmp_path, "--bounds", BOUNDS, "--seed", "7") == 0
    rec = json.loads((tmp_path / "m.json").read_text())["privacy"]
    assert any("seed" in n.lower() for n in rec["notes"]) and rec.get("seeded") is True
    assert main(["sample", str(tmp_path / "m.json"), "-n", "50", "--iid", "--seed", "7",
                 "--out", str(tmp_path / "s.csv")]) == 0
    from torchdpgmm.modelfile import load_model

    mf = load_model(tmp_path / "m.json")
    raw = mf.model.sample(50, torch.Generator().manual_seed(7))[0]
    lo, hi = torch.tensor(mf.bounds.lower), torch.tensor(mf.bounds.upper)
    raw = torch.minimum(torch.maximum(raw, lo), hi)
    with open(tmp_path / "s.csv", newline="") as fh:
        got = np.array([[float(r["Ht"]), float(r["Wt"])] for r in csv.DictReader(fh)])
    assert not np.allclose(got, raw.numpy())


def test_mostly_noise_warning(tmp_path, capsys):
    # labels are "female"/"male": classes in the wrong case drop every row
    assert main(["release", "--data", str(AIS), "--label-column", "sex", "--features", "Ht,Wt",
                 "--classes", "Female,Male", "--epsilon", "1", "--delta", "1e-5", "--bounds", BOUNDS,
                 "--out", str(tmp_path / "m.json")]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "mostly noise" in ln]
    assert len(err) == 1 and "--classes" in err[0]
    assert _release(tmp_path, "--bounds", BOUNDS, out="ok.json") == 0  # unseeded: OS entropy, not marked
    assert "mostly noise" not in capsys.readouterr().err
    assert not json.loads((tmp_path / "ok.json").read_text())["privacy"].get("seeded", False)


def test_check_settings_reports_labels_outside_classes(tmp_path, capsys):
    assert main(["release", "--data", str(AIS), "--label-column", "sex", "--features", "Ht,Wt",
                 "--classes", "female,Male", "--epsilon", "1", "--delta", "1e-5", "--bounds", BOUNDS,
                 "--check-settings", "--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert "not one of the 2 classes" in err and "None" not in err
    assert not (tmp_path / "m.json").exists()


def test_out_checked_before_data_and_force(tmp_path, capsys):
    missing = str(tmp_path / "no-such.csv")
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file" / "m.json",):
        rc = main(["release", "--data", missing, "--label-column", "sex", "--classes", "a,b", "--epsilon", "1",
                   "--delta", "1e-5", "--bounds", "0:1", "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and "not a folder" in err and "no-such" not in err
    (tmp_path / "target").write_text("keep")
    (tmp_path / "link.json").symlink_to(tmp_path / "target")
    assert _release(tmp_path, "--bounds", BOUNDS, out="link.json") == 2
    assert "symbolic link" in capsys.readouterr().err
    assert (tmp_path / "target").read_text() == "keep"
    (tmp_path / "old.json").write_text("keep")
    assert _release(tmp_path, "--bounds", BOUNDS, out="old.json") == 2
    assert "--force" in capsys.readouterr().err and (tmp_path / "old.json").read_text() == "keep"
    assert _release(tmp_path, "--bounds", BOUNDS, "--force", out="old.json") == 0


def test_sample_huge_n_one_line(tmp_path, capsys):
    assert _release(tmp_path, "--bounds", BOUNDS) == 0
    capsys.readouterr()
    assert main(["sample", str(tmp_path / "m.json"), "-n", str(10 ** 12), "--out", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "-n must be <=" in err and not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("argv, msg", [
    (["sweep", "--epsilons", "1,1"], "--epsilons must not repeat a value"),
    (["sweep", "--epsilons", "one"], "--epsilons must be comma-separated numbers"),
    (["sweep", "--memory-budget", "1"], "at least 16MiB"),
    (["experiment", "--out", "o"], "a study is needed"),
    (["audit", "--clip-bound", "-1"], "--clip-bound must be a positive finite number"),
    (["audit", "--epsilons", "1,1"], "--epsilons must not repeat a value"),
    (["audit", "--epsilons", "one"], "--epsilons must be comma-separated numbers"),
])
def test_flags_refused_in_one_line(tmp_path, capsys, argv, msg):
    out = tmp_path / "out"
    if argv[0] != "experiment":
        argv = argv + ["--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err and "invalid" not in err, err
    assert not out.exists()


def test_truncated_gz_one_line_and_no_folder(tmp_path, capsys):
    from torchdpgmm.data.idx import write_idx

    d = tmp_path / "idx"
    d.mkdir()
    for split, n in (("train", 60), ("t10k", 20)):
        write_idx(d / f"{split}-images-idx3-ubyte.gz", torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8))
        write_idx(d / f"{split}-labels-idx1-ubyte.gz", torch.zeros(n, dtype=torch.uint8))
    f = d / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:2000])  # cut short
    out = tmp_path / "out"
    assert main(["experiment", "synthetic-classifier", "--data-dir", str(d), "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "truncated" in err
    assert not out.exists()


def _ais_height_weight(tmp_path):
    """AIS's Ht, Wt and sex columns as a CSV in ``tmp_path`` (the table the synthesize tests release)."""
    with open(AIS, newline="") as fh:
        rows = list(csv.DictReader(fh))
    data = tmp_path / "hw.csv"
    with open(data, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Ht", "Wt", "sex"])
        w.writerows([r["Ht"], r["Wt"], r["sex"]] for r in rows)
    return data


def test_synthesize_with_bounds_writes_user_units(tmp_path, capsys):
    data = _ais_height_weight(tmp_path)
    out = tmp_path / "syn"
    assert main(["synthesize", "--data", str(data), "--label-column", "sex", "--classes", "female,male",
                 "--epsilon", "1", "--delta", "1e-5", "--image-transform", "none", "--bounds", BOUNDS,
                 "-n", "400", "--out", str(out)]) == 0
    with open(out / "synthetic.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert list(got[0]) == ["Ht", "Wt", "label"] and len(got) == 400
    X = np.array([[float(r["Ht"]), float(r["Wt"])] for r in got])
    assert X[:, 0].min() >= 140 and X[:, 0].max() <= 210 and X[:, 1].min() >= 30 and X[:, 1].max() <= 150
    rel = json.loads((out / "release.json").read_text())
    assert rel["bounds"]["names"] == ["Ht", "Wt"]
    # defaults in the centred unit box of d = 2: the mean's clip holds the box (sqrt(2)/2); the PCA clip and the
    # class stage's radius are half of it (CLIP_FRACTION, docs/results/clip-rule-pipeline.json)
    cfg = rel["config"]
    assert cfg["mean_clip"] == pytest.approx(0.5 * 2 ** 0.5)
    assert cfg["pca_clip"] == pytest.approx(0.25 * 2 ** 0.5) and cfg["radius"] == pytest.approx(0.25 * 2 ** 0.5)
    # a table takes the table default (no image transform) without the flag; the image transform is refused there
    assert main(["synthesize", "--data", str(data), "--label-column", "sex", "--classes", "female,male",
                 "--epsilon", "1", "--delta", "1e-5", "--bounds", BOUNDS, "--out", str(tmp_path / "y")]) == 0
    assert json.loads((tmp_path / "y" / "release.json").read_text())["config"]["transform"] == "none"
    capsys.readouterr()
    assert main(["synthesize", "--data", str(data), "--label-column", "sex", "--classes", "female,male",
                 "--epsilon", "1", "--delta", "1e-5", "--image-transform", "dct14", "--bounds", BOUNDS,
                 "--out", str(tmp_path / "x")]) == 2
    assert "--image-transform none" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_center_flag_chooses_the_centring_and_is_refused_without_bounds(tmp_path, capsys):
    """--center noisy-mean (the default with bounds) writes the centre stage's blocks into the record; --center box
    releases in one stage about the box's middle; without bounds the flag is refused and nothing is written."""
    assert _release(tmp_path, "--bounds", BOUNDS, "--seed", "1", out="c.json") == 0
    assert _release(tmp_path, "--bounds", BOUNDS, "--seed", "1", "--center", "box", out="b.json") == 0
    c, b = (json.loads((tmp_path / f).read_text()) for f in ("c.json", "b.json"))
    names = [blk["name"] for blk in c["privacy"]["blocks"]]
    assert names[:3] == ["centre_counts", "centre_sums", "centre_second_moments"]
    assert not any(blk["name"].startswith("centre_") for blk in b["privacy"]["blocks"])
    assert c["privacy"]["epsilon"] == b["privacy"]["epsilon"] == 1.0
    capsys.readouterr()
    assert _release(tmp_path, "--clip-bound", "100", "--center", "box", out="x.json") != 0
    assert "--center applies" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
    assert _release(tmp_path, "--bounds", BOUNDS, "--check-settings", out="y.json") == 0
    assert not (tmp_path / "y.json").exists()


def test_sample_draws_the_model_inside_the_bounds_not_clipped_onto_them(tmp_path):
    """``sample`` of a model file with bounds (issue 37 item 4): each class's rows are its Gaussian restricted to the
    bounds (KS against scipy's truncated normal, per coordinate of a diagonal class), no cell on a bound (clipping
    put ~31% of class 0's first column on its lower bound), class counts the released histogram's."""
    from scipy.stats import kstest, truncnorm

    from torchdpgmm.bounds import Bounds
    from torchdpgmm.mixture import LabeledGMM
    from torchdpgmm.modelfile import save_model
    from torchdpgmm.privacy.record import PrivacyRecord

    mu = np.array([[141.0, 90.0], [180.0, 148.0]])
    sd = np.array([[3.0, 20.0], [10.0, 5.0]])
    model = LabeledGMM(torch.tensor([0.5, 0.5], dtype=torch.float64), torch.as_tensor(mu),
                       torch.diag_embed(torch.as_tensor(sd) ** 2), counts=torch.tensor([60.0, 40.0], dtype=torch.float64))
    rec = PrivacyRecord(1.0, 1e-5, "replace-one", "zcdp", "sound", "gaussian", {}, [])
    save_model(tmp_path / "m.json", model, rec, ["a", "b"], ["Ht", "Wt"], bounds=Bounds([140, 30], [210, 150], ["Ht", "Wt"]))
    assert main(["sample", str(tmp_path / "m.json"), "-n", "20000", "--seed", "1", "--out", str(tmp_path / "s.csv")]) == 0
    with open(tmp_path / "s.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    X = np.array([[float(r["Ht"]), float(r["Wt"])] for r in rows])
    lab = np.array([r["label"] for r in rows])
    assert np.sum(lab == "a") == 12000 and np.sum(lab == "b") == 8000
    lo, hi = np.array([140.0, 30.0]), np.array([210.0, 150.0])
    assert np.all((X > lo) & (X < hi))  # strictly inside: no cell on a bound
    for k, name in enumerate("ab"):
        for j in range(2):
            a, b = (lo[j] - mu[k, j]) / sd[k, j], (hi[j] - mu[k, j]) / sd[k, j]
            assert kstest(X[lab == name, j], truncnorm(a, b, loc=mu[k, j], scale=sd[k, j]).cdf).pvalue > 1e-3


def test_synthesize_rows_are_drawn_inside_the_bounds_never_on_them(tmp_path):
    """``synthesize`` with bounds (issue 37 item 4): a lower bound of height inside the data (160 cm, above a third
    of AIS's women) piled clipped rows on 160; the rows now come from the released model restricted to the bounds:
    every cell strictly inside, and the share of rows in the band next to the bound stays small, as it is for a
    density (a pile on the bound put ~10% of the rows there)."""
    data = _ais_height_weight(tmp_path)
    out = tmp_path / "syn"
    assert main(["synthesize", "--data", str(data), "--label-column", "sex", "--classes", "female,male",
                 "--epsilon", "2", "--delta", "1e-5", "--image-transform", "none", "--bounds", "Ht=160:210,Wt=30:150",
                 "--seed", "0", "-n", "4000", "--out", str(out)]) == 0
    with open(out / "synthetic.csv", newline="") as fh:
        X = np.array([[float(r["Ht"]), float(r["Wt"])] for r in csv.DictReader(fh)])
    assert np.all((X > [160, 30]) & (X < [210, 150]))
    assert np.mean(X[:, 0] < 160.05) < 0.01  # 0.05 cm of the 50 cm range next to the bound
