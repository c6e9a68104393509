"""docs/usage.md's "Errors" section is true word for word (issue 27, "Done when").

Every message the section quotes (a backticked span of three words or more) is produced, verbatim, by the
command it describes; every bad input it lists gives one line on stderr, exit status 2 and writes nothing;
and the weak-budget warning it promises is printed at release time."""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest
import torch

from torchdpgmm.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _errors_section() -> str:
    text = (ROOT / "docs" / "usage.md").read_text()
    start = text.index("**Errors.**")
    return text[start:text.index("\n\n", start)]


# each quoted message -> the command that must print it
QUOTED = {
    "--epsilons must be comma-separated numbers": ["sweep", "--epsilons", "one"],
    "a study is needed first": ["experiment", "--out", "o"],
    "choose a study": ["experiment"],
}


def test_every_quoted_message_is_listed_here():
    spans = re.findall(r"`([^`]+)`", _errors_section())
    messages = {s for s in spans if len(s.split()) >= 3}
    assert messages == set(QUOTED), "a message quoted in docs/usage.md's Errors section has no test here"


@pytest.mark.parametrize("message", sorted(QUOTED))
def test_quoted_message_is_what_the_user_gets(tmp_path, capsys, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = QUOTED[message]
    if argv[0] == "sweep":
        argv = argv + ["--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


def _table(path: Path, header=("a", "b", "label"), bad_cell=False, n=60) -> Path:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=g)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(n):
            w.writerow([("x" if bad_cell and i == 3 else f"{X[i, 0]:.4f}"), f"{X[i, 1]:.4f}", ["u", "v"][i % 2]])
    return path


def _release_argv(data, out, *extra):
    base = {"--data": str(data), "--label-column": "label", "--features": "a,b", "--classes": "u,v", "--epsilon": "1",
            "--delta": "1e-5", "--clip-bound": "2", "--out": str(out)}
    flags = list(extra)
    for k, v in base.items():
        if k not in flags:
            flags += [k, v]
    return ["release", *flags]


def _case(name, tmp):
    """(argv, paths that must not exist afterwards) for each bad input the Errors section lists."""
    data, out = _table(tmp / "t.csv"), tmp / "m.json"
    rel = lambda *e: _release_argv(data, out, *e)  # noqa: E731
    cases = {
        "missing file": rel("--data", str(tmp / "nope.csv")),
        "missing column": rel("--label-column", "nope"),
        "duplicated header": _release_argv(_table(tmp / "dup.csv", header=("a", "a", "label")), out),
        "epsilon <= 0": rel("--epsilon", "0"),
        "delta outside (0, 1)": rel("--delta", "1.5"),
        "delta zero": rel("--delta", "0"),
        "epsilon > 1e3 before reading": rel("--epsilon", "2000", "--data", str(tmp / "nope.csv")),
        "delta one half before reading": rel("--delta", "0.5", "--data", str(tmp / "nope.csv")),
        "synthesize epsilon > 1e3 before reading": ["synthesize", "--data", str(tmp / "nope.csv"), "--label-column",
                                                   "label", "--classes", "u,v", "--epsilon", "5000", "--delta", "1e-5",
                                                   "--out", str(tmp / "syn")],
        "clip bound outside the computable range": rel("--clip-bound", "1e200"),
        "--clip-bound with --mode as-published": rel("--mode", "as-published"),
        "bounds not naming every feature": rel("--bounds", "a=0:1"),
        "LOW >= HIGH": rel("--bounds", "a=1:0,b=0:1"),
        "unknown flag": rel("--bogus", "1"),
        "list flag not numbers": ["sweep", "--epsilons", "one", "--out", str(tmp / "sw")],
        "list flag repeats a value": ["sweep", "--epsilons", "1,1", "--out", str(tmp / "sw")],
        "memory budget below 16MiB": ["sweep", "--memory-budget", "1", "--out", str(tmp / "sw")],
        "study clip bound": ["audit", "--clip-bound", "-1", "--out", str(tmp / "au")],
        "as-published non-numeric value": ["release", "--data", str(_table(tmp / "bad.csv", bad_cell=True)),
                                           "--label-column", "label", "--classes", "u,v", "--epsilon", "1",
                                           "--delta", "1e-5", "--mode", "as-published", "--out", str(out)],
        "as-published label outside --classes": ["release", "--data", str(data), "--label-column", "label",
                                                 "--classes", "u,w", "--epsilon", "1", "--delta", "1e-5",
                                                 "--mode", "as-published", "--out", str(out)],
        "synthesize components above 2d": ["synthesize", "--data", str(_table(tmp / "s.csv")), "--label-column", "label",
                                           "--classes", "u,v", "--epsilon", "1", "--delta", "1e-5", "--image-transform",
                                           "none", "--bounds", "a=0:1,b=0:1", "--components-per-class", "5",
                                           "--out", str(tmp / "syn")],
        "synthesize components above 2d before reading": ["synthesize", "--data", str(tmp / "nope.csv"),
                                                          "--label-column", "label", "--classes", "u,v", "--epsilon",
                                                          "1", "--delta", "1e-5", "--n-components", "2",
                                                          "--components-per-class", "5", "--out", str(tmp / "syn")],
        "experiment budget before any trial": ["experiment", "iris", "--epsilons", "5000", "--out", str(tmp / "ex")],
        "--out is a folder": rel("--out", str(tmp)),
        "--out parent is a file": rel("--out", str(data / "m.json")),
    }
    if not torch.cuda.is_available():
        cases["--device cuda without a GPU"] = ["sweep", "--device", "cuda", "--clip-bound", "1",
                                                "--out", str(tmp / "sw")]
    return cases[name]


CASES = ["missing file", "missing column", "duplicated header", "epsilon <= 0", "delta outside (0, 1)", "delta zero",
         "epsilon > 1e3 before reading", "delta one half before reading", "synthesize epsilon > 1e3 before reading",
         "clip bound outside the computable range", "--clip-bound with --mode as-published",
         "bounds not naming every feature", "LOW >= HIGH", "unknown flag", "list flag not numbers",
         "list flag repeats a value", "memory budget below 16MiB", "study clip bound",
         "as-published non-numeric value", "as-published label outside --classes", "synthesize components above 2d",
         "synthesize components above 2d before reading", "experiment budget before any trial", "--out is a folder",
         "--out parent is a file", "--device cuda without a GPU"]


@pytest.mark.parametrize("name", CASES)
def test_each_listed_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, name):
    if name == "--device cuda without a GPU" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    monkeypatch.chdir(tmp_path)
    argv = _case(name, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if "before" in name:  # the public setting, not the missing file, is what is refused
        assert ("components-per-class" if "components" in name else "meaningful guarantee") in err


def test_existing_out_needs_force_and_symlink_is_refused(tmp_path, capsys):
    data, out = _table(tmp_path / "t.csv"), tmp_path / "m.json"
    out.write_text("keep")
    assert main(_release_argv(data, out)) == 2
    assert "--force" in capsys.readouterr().err and out.read_text() == "keep"
    link = tmp_path / "link.json"
    os.symlink(tmp_path / "elsewhere.json", link)
    assert main(_release_argv(data, link)) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "elsewhere.json").exists()
    assert main(_release_argv(data, out, "--force")) == 0 and out.read_text() != "keep"


def test_sample_above_1e8_rows_is_refused(tmp_path, capsys):
    data = _table(tmp_path / "t.csv")
    assert main(_release_argv(data, tmp_path / "m.json")) == 0
    capsys.readouterr()
    assert main(["sample", str(tmp_path / "m.json"), "-n", str(10 ** 8 + 1), "--out", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "write several files instead" in err and "drawn in memory" in err
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("flags, words", [(["--epsilon", "20"], "epsilon = 20 > 10"), (["--delta", "0.01"], "delta = 0.01 > 0.001")])
def test_weak_budget_warns_at_release_time(tmp_path, capsys, flags, words):
    data = _table(tmp_path / "t.csv")
    assert main(_release_argv(data, tmp_path / "m.json", *flags)) == 0
    assert words in capsys.readouterr().err


def test_readme_release_you_could_publish_is_unseeded():
    """Issue 27 item 3: README's publishable release draws its noise from fresh OS entropy, not the seeded
    generator of the Monte Carlo example above it (a seeded release's noise can be regenerated and removed)."""
    text = (ROOT / "README.md").read_text()
    start = text.index("# a release you could publish")
    block = text[start:text.index("print(safe.privacy)", start)]
    assert "manual_seed" not in block and "generator=g)" not in block and ".seed()" in block
