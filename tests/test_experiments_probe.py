"""The studies' defects found by the probe of /tmp/probe_sweep (F4-F7, F11, F12 of its report): repeated list
values, the sound-utility study's unchecked settings, r1smg at d = 2 in fig2, seeds past 2^63, the progress bar
off a terminal and messages that named internal parameters or printed a tensor.

Each refusal is checked through the command line: one line on stderr, exit status 2, nothing written. The
references of the runs that go on are runs of the same study without the refused part."""
import json

import pytest

from torchdpgmm.cli import main


def _refused(capsys, argv, out, match):
    rc = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert match in err, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("argv,match", [
    (["fig2", "--quick", "--mechanisms", "laplace,laplace"], "--mechanisms must not repeat a value (names laplace"),
    (["fig1", "--quick", "--mechanisms", "kl/global,kl/exact-kl,kl/global"], "names kl/global twice"),
    (["fig4", "--quick", "--grid", "3,3"], "--grid must not repeat a value (names 3 twice)"),
    (["fig3", "--quick", "--grid", "60,100,60"], "--grid must not repeat"),
    (["record-level", "--quick", "--clip-bounds", "2,2"], "--clip-bounds must not repeat a value (names 2 twice)"),
    (["audit", "--quick", "--pairs", "outlier-flip,outlier-flip"], "--pairs must not repeat"),
])
def test_a_repeated_list_value_is_refused(tmp_path, capsys, argv, match):
    """F4: fig2 --mechanisms laplace,laplace reported trials=6 for 3 trials (both labels fed one RunningStats,
    each chunk twice with other noise); fig4 --grid 3,3 wrote two different K = 3 rows."""
    _refused(capsys, ["experiment", *argv], tmp_path / "o", match)


@pytest.mark.parametrize("argv,match", [
    (["--num-records", "25"], "--num-records must be > 25"),
    (["--num-records", "0"], "--num-records must be > 25"),
    (["--trials", "10000000000"], "use fewer trials"),
    (["--published-mechanisms", "foo"], "'foo' is an unknown mechanism"),
    (["--sound-mechanisms", "r1smg"], "'r1smg' has no sound mode"),
    (["--sound-mechanisms", "kl,kl"], "--sound-mechanisms must not repeat a value (names kl twice)"),
    (["--published-mechanisms", "kl,,laplace"], "must not hold an empty value"),
    (["--sound-mechanisms=", "--published-mechanisms="], "both empty"),
    (["--seed", str(10 ** 23)], "--seed must be < 2^63"),
])
def test_sound_utility_settings_are_checked_up_front(tmp_path, capsys, argv, match):
    """F5, F7: two tracebacks (torch.multinomial at --num-records 25; the allocator at 10^7 trials) and three
    silent exit-0 runs (an 'unavailable' row for an unknown name, duplicate rows, 0 rows and an empty figure)."""
    _refused(capsys, ["experiment", "sound-utility", "--quick", *argv], tmp_path / "o", match)


def test_sound_utility_raises_a_release_error_instead_of_writing_an_unavailable_row(tmp_path, monkeypatch):
    """F5: `except Exception` turned any as-published failure into an 'unavailable' row; only a missing optional
    dependency is such a row now (and said as a NOT RUN note)."""
    import torchdpgmm.release as R
    from torchdpgmm.experiments import ExperimentConfig, run_study

    real = R.release

    def failing(*a, mechanism=None, **kw):
        if mechanism == "laplace":
            raise ValueError("laplace refused this setting")
        return real(*a, mechanism=mechanism, **kw)

    monkeypatch.setattr(R, "release", failing)
    cfg = dict(trials=4, quick=True, options={"sound_mechanisms": "gaussian", "published_mechanisms": "gaussian,laplace"})
    with pytest.raises(ValueError, match="laplace refused this setting"):
        run_study("sound-utility", ExperimentConfig(out=tmp_path / "a", **cfg))

    def missing(*a, mechanism=None, **kw):
        if mechanism == "laplace":
            raise ImportError("no module named 'optional_solver'")
        return real(*a, mechanism=mechanism, **kw)

    monkeypatch.setattr(R, "release", missing)
    with pytest.warns(UserWarning, match="as-published laplace NOT RUN"):
        payload = run_study("sound-utility", ExperimentConfig(out=tmp_path / "b", **cfg))
    assert {r["status"] for r in payload["rows"] if r["mechanism"] == "laplace"} == {
        "unavailable: ImportError: no module named 'optional_solver'"}


def test_fig2_at_d_2_skips_r1smg_with_a_note_as_fig3_to_fig5(tmp_path, capsys):
    """F6: fig2 --d 2 failed after every other mechanism had run ('r1smg needs dimension d > 2'). The other rows
    are those of the same study without r1smg (it is the last mechanism: it draws after the others)."""
    assert main(["experiment", "fig2", "--quick", "--d", "2", "--out", str(tmp_path / "all")]) == 0
    others = "kl/as-published,kl/global,kl/exact-kl,colored,gaussian,laplace"
    assert main(["experiment", "fig2", "--quick", "--d", "2", "--mechanisms", others,
                 "--out", str(tmp_path / "ref")]) == 0
    got = json.loads((tmp_path / "all" / "fig2.json").read_text())
    ref = json.loads((tmp_path / "ref" / "fig2.json").read_text())
    assert got["rows"] == ref["rows"] and not any(r["mechanism"] == "r1smg" for r in got["rows"])
    assert "r1smg skipped at d=2: R1SMG needs d > 2 (Ji & Li 2024)" in got["notes"]


def test_a_seed_past_2_63_is_refused_for_every_study(tmp_path, capsys):
    """F7: the sweep's seed column is int64 and a study's generators take seed + offset: 2^63 and more ran (or
    failed with 'Overflow when unpacking long long')."""
    _refused(capsys, ["experiment", "fig2", "--quick", "--seed", str(2 ** 63)], tmp_path / "o", "< 2^63")


@pytest.mark.parametrize("argv,match,absent", [
    (["record-level", "--quick", "--threads", "-1"], "--threads must be a whole number >= 0", None),
    (["fig3", "--quick", "--epsilon", "0"], "--epsilon must be a positive finite number, got 0", "tensor("),
    (["fig4", "--quick", "--grid", "1,3"], "--grid must hold values >= 2, got 1", "num_classes"),
    (["fig2", "--quick", "--k", "1"], "--k must be >= 2, got 1", "num_classes"),
    (["fig2", "--quick", "--n", "5"], "N = 5 (--n) is too small for K = 5 (--k)", "min_class_size"),
])
def test_study_messages_name_the_flags(tmp_path, capsys, argv, match, absent):
    """F12: --threads -1 was accepted silently; fig3 --epsilon 0 printed 'got tensor([[0.]], dtype=...)'; the
    sizes' messages named num_classes, dim, min_class_size."""
    err = _refused(capsys, ["experiment", *argv], tmp_path / "o", match)
    assert absent is None or absent not in err


def test_the_studies_draw_no_bar_off_a_terminal(capsys):
    """F11: a 200-trial fig2 filled a captured stderr with the bar's carriage-return updates; the sweep shows its
    bar on a terminal only, and so do the studies now (an explicit progress=True still draws it)."""
    from torchdpgmm.experiments.synthetic import kl_sweep

    mech = (("laplace", "laplace", None),)
    kl_sweep(50, 40, 2, 2, [1.0], 1e-5, 1e-3, mech, seed=0)
    assert capsys.readouterr().err == ""
    kl_sweep(50, 40, 2, 2, [1.0], 1e-5, 1e-3, mech, seed=0, progress=True)
    assert "N=40 K=2 d=2" in capsys.readouterr().err


def test_sound_utility_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    """F5: the study draws every trial in one batch; running out of memory there (CUDA fails at once, CPU's
    allocator may too) was a RuntimeError traceback."""
    import torchdpgmm.experiments.audit as A

    def oom(*a, **kw):
        raise RuntimeError("CUDA out of memory. Tried to allocate 96.00 GiB")

    monkeypatch.setattr(A, "synthetic_data", oom)
    err = _refused(capsys, ["experiment", "sound-utility", "--quick", "--trials", "400"], tmp_path / "o",
                   "out of memory on cpu with --trials 400 at --num-records 300")
    assert "use fewer trials" in err
