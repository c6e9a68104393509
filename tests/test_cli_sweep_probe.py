"""The command line's sweep and study defects found by the probe of /tmp/probe_sweep (F1, F7, F11, F12 of its
report) and the audit's --delta / --draws checks: a failed new sweep deleted the chunks it had finished
although its message said they were kept; seeds past 2^63; --out ""; the sweep's --clip-bound help.

References: a sweep run straight through (its results file, byte for byte), and hand-written expectations."""
import pytest

import torchdpgmm.sweep as S
from torchdpgmm.cli import main

SWEEP = ["sweep", "--clip-bound", "10", "--mechanisms", "gaussian", "--epsilons", "1", "--N", "40", "--K", "2",
         "--d", "2", "--trials", "6", "--block-size", "2", "--chunk-size", "2", "--no-progress"]


def _one_line_exit_2(capsys, rc):
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    return err


def test_a_failed_new_sweep_keeps_its_finished_chunks_for_resume(tmp_path, capsys, monkeypatch):
    """F1: any error after the first chunk (out of memory, a full disk, a late mechanism error) removed the whole
    new --out folder, finished chunks included, while the message said 'finished chunks are kept'."""
    assert main([*SWEEP, "--out", str(tmp_path / "ref")]) == 0
    real, calls = S.default_trial_fn, []

    def second_fails(spec, chunk):
        calls.append(chunk.id)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(spec, chunk)

    monkeypatch.setattr(S, "default_trial_fn", second_fails)
    out = tmp_path / "new" / "sweep"            # two folders made by the command
    err = _one_line_exit_2(capsys, main([*SWEEP, "--out", str(out)]))
    assert "finished chunks are kept" in err
    assert [p.name for p in (out / "chunks").iterdir()] == ["N40_K2_d2_t00000000.csv"]
    monkeypatch.setattr(S, "default_trial_fn", real)
    assert main([*SWEEP, "--out", str(out), "--resume"]) == 0
    assert "1 already done" in capsys.readouterr().out
    assert (out / "results.csv").read_bytes() == (tmp_path / "ref" / "results.csv").read_bytes()


def test_a_new_sweep_that_fails_before_any_chunk_leaves_nothing(tmp_path, capsys, monkeypatch):
    def fails(spec, chunk):
        raise ValueError("the first chunk failed")

    monkeypatch.setattr(S, "default_trial_fn", fails)
    _one_line_exit_2(capsys, main([*SWEEP, "--out", str(tmp_path / "new" / "sweep")]))
    assert not (tmp_path / "new").exists()
    given = tmp_path / "given"
    given.mkdir()
    _one_line_exit_2(capsys, main([*SWEEP, "--out", str(given)]))
    assert list(given.iterdir()) == []         # a folder the user gave stays, empty


@pytest.mark.parametrize("argv,match", [
    ([*SWEEP, "--seed", str(2 ** 63)], "--seed must be < 2^63, got 9223372036854775808"),
    (["experiment", "fig2", "--quick", "--seed", str(2 ** 63)], "--seed must be < 2^63"),
    (["audit", "--quick", "--delta", "0"], "--delta must lie in (0, 1), got 0.0"),
    (["audit", "--quick", "--delta", "nan"], "--delta must lie in (0, 1), got nan"),
    (["experiment", "fig2", "--quick", "--delta", "1"], "--delta must lie in (0, 1), got 1.0"),
    (["audit", "--quick", "--draws", "1"], "--draws must be >= 4"),
    (["audit", "--quick", "--draws", "3"], "--draws must be >= 4"),
    (["audit", "--quick", "--published-draws", "2"], "--published-draws must be >= 4"),
])
def test_refused_in_one_line_before_anything_runs(tmp_path, capsys, monkeypatch, argv, match):
    """F7: a sweep seed of 2^63 ran the first block, then failed with 'Python int too large to convert to C
    long'. The audit splits each dataset's draws into selection and evaluation halves: fewer than 4 failed
    inside audit()."""
    monkeypatch.setattr(S, "default_trial_fn", lambda spec, chunk: pytest.fail("a chunk ran"))
    err = _one_line_exit_2(capsys, main([*argv, "--out", str(tmp_path / "o")]))
    assert match in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [SWEEP, ["experiment", "fig2", "--quick"]])
def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch, command):
    """F12: --out "" wrote the sweep into the current folder."""
    monkeypatch.chdir(tmp_path)
    err = _one_line_exit_2(capsys, main([*command, "--out", ""]))
    assert "--out must name a folder, got an empty path" in err and list(tmp_path.iterdir()) == []


def test_the_sweep_clip_bound_help_names_only_its_own_flags(capsys):
    """F11: the sweep's --clip-bound help (shared with release) named --bounds and --schema, which it lacks."""
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--bounds" not in text and "--schema" not in text
    assert "public per-record L2 bound B (required in sound mode; refused in as-published mode)" in text
