"""Issue 27 item 2 at the command line: under add/remove an empty table (N = 0) is a dataset like any other, so
the private readers of ``release`` and ``synthesize`` accept it and the release is noise alone (a refusal would
tell an empty table from a one-row one); the mostly-noise warning says so. The as-published mode, which is not
DP, still refuses it in one line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from torchdpgmm.cli import main

BOUNDS = "a=0:1,b=0:1,c=0:1"


@pytest.mark.parametrize("kind", ["csv", "npz"])
def test_release_of_an_empty_table_is_noise_alone(tmp_path, capsys, kind):
    if kind == "csv":
        data = tmp_path / "t.csv"
        data.write_text("a,b,c,label\n")
        flags = ["--label-column", "label", "--bounds", BOUNDS]
    else:
        data = tmp_path / "t.npz"
        np.savez(data, X=np.zeros((0, 3)), y=np.zeros(0, dtype=np.int64))
        flags = ["--clip-bound", "1"]
    out = tmp_path / "m.json"
    assert main(["release", "--data", str(data), "--classes", "u,v" if kind == "csv" else "0,1", "--epsilon", "1",
                 "--delta", "1e-5", *flags, "--out", str(out)]) == 0
    assert "mostly noise" in capsys.readouterr().err
    assert json.loads(out.read_text())["privacy"]["mode"] == "sound"


def test_synthesize_of_an_empty_table_and_as_published_refusal(tmp_path, capsys):
    data = tmp_path / "t.csv"
    data.write_text("a,b,c,label\n")
    out = tmp_path / "syn"
    assert main(["synthesize", "--data", str(data), "--label-column", "label", "--classes", "u,v", "--epsilon", "1",
                 "--delta", "1e-5", "--image-transform", "none", "--bounds", BOUNDS, "-n", "4", "--out", str(out)]) == 0
    assert (out / "release.json").exists() and "mostly noise" in capsys.readouterr().err
    assert main(["release", "--data", str(data), "--label-column", "label", "--classes", "u,v", "--epsilon", "1",
                 "--delta", "1e-5", "--mode", "as-published", "--out", str(tmp_path / "p.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "p.json").exists()
