"""scripts/tabular_device_compare.py: a GPU run of the tabular study against the CPU run, on hand-built rows whose
answers are known without the script (equal cells, a shifted cell, a pooled mean that flips a verdict)."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tabular_device_compare", ROOT / "scripts" / "tabular_device_compare.py")
tdc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tdc)


def _rows(table, eps, method, accs, downstream="bayes", default=False):
    return [{"table": table, "epsilon": eps, "draw": i, "method": method, "downstream": downstream,
             "privacy": "(eps, delta)-DP, sound", "accuracy": a, "default": default} for i, a in enumerate(accs)]


def _ours(auto, full):
    return [*_rows("t", 1.0, "DPGaussianMixture[default=auto]", auto, default=True),
            *_rows("t", 1.0, "DPGaussianMixture[full]", full)]


def _run(tmp_path, rows, timing="t exit 0 after 12 s"):
    run = tmp_path / "run"
    (run / "t").mkdir(parents=True)
    cfg = {"device": "cuda", "seed": 0, "draws": 4, "epsilons": [1.0], "tables": {"t": {}}}
    (run / "t" / "tabular.json").write_text(json.dumps({"config": cfg, "environment": {"torch": "x"}, "rows": [
        *rows, {"table": "t", "epsilon": 1.0, "method": "diffprivlib GaussianNB", "downstream": "direct",
                "privacy": "pure eps-DP (delta = 0)", "accuracy": None, "status": "not installed"}]}))
    (run / "timings.txt").write_text(timing + "\n")
    (run / "machine.txt").write_text("GPU 0: test\n")
    return run


def test_equal_runs_agree_and_a_shifted_cell_is_found(tmp_path):
    cpu = _ours([0.80, 0.82, 0.81, 0.83], [0.80, 0.81, 0.82, 0.80])
    gpu = _ours([0.80, 0.82, 0.81, 0.83], [0.90, 0.91, 0.92, 0.90])  # full moved up by exactly 0.1
    cells = {c["method"]: c for c in tdc.compare_cells(cpu, gpu)}
    assert cells["DPGaussianMixture[default=auto]"]["p_value"] == pytest.approx(1.0)
    assert cells["DPGaussianMixture[default=auto]"]["difference"] == 0.0
    assert cells["DPGaussianMixture[full]"]["difference"] == pytest.approx(0.1)
    assert cells["DPGaussianMixture[full]"]["p_value"] < 1e-4  # sd 0.0096 each, 4 draws: t about 15
    # a constant cell on both sides: equal -> p 1, different -> p 0
    const = lambda v: _rows("t", None, "non-private QDA", [v])  # noqa: E731
    assert tdc.compare_cells(const(0.9), const(0.9))[0]["p_value"] == 1.0
    assert tdc.compare_cells(const(0.9), const(0.8))[0]["p_value"] == 0.0


def test_pooled_targets_and_written_files(tmp_path):
    # auto vs full: CPU 0.80 vs 0.815 (auto 1.5 points behind: missed), GPU 0.81 vs 0.805 (met); pooled 0.805 vs 0.81
    # (0.5 behind: met). Computed by hand from the rows below.
    cpu = _ours([0.80] * 4, [0.815] * 4)
    gpu = _ours([0.81] * 4, [0.805] * 4)
    run = _run(tmp_path, gpu)
    cpu_json = tmp_path / "cpu.json"
    cpu_json.write_text(json.dumps({"environment": {"torch": "cpu"}, "rows": [
        *cpu, *_rows("u", 1.0, "DPGaussianMixture[full]", [0.5] * 2)]}))  # table u: in the CPU run only
    out = tmp_path / "out"
    assert tdc.main([str(run), "--out", str(out), "--tree", "abc1234", "--cpu", str(cpu_json)]) == 0
    res = json.loads((out / "comparison.json").read_text())
    auto = {k: res[k]["auto_within_1_point_of_best_fixed"] for k in
            ("targets_cpu_same_tables", "targets_gpu", "targets_pooled")}
    assert [auto[k]["met_on"] for k in auto] == [0, 1, 1] and auto["targets_cpu_same_tables"]["not_met"] == ["t eps=1"]
    assert res["tables"] == ["t"] and res["tables_in_cpu_run_only"] == ["u"] and res["cells"] == 2
    gpu_out = json.loads((out / "tabular-cuda.json").read_text())
    (run_info,) = gpu_out["runs"]
    assert run_info["tree"] == "abc1234" and run_info["timings"] == {"t": {"exit": 0, "wall_seconds": 12}}
    assert len(gpu_out["rows"]) == 8  # the row without an accuracy (a peer not installed there) is left out
    assert {r["tree"] for r in gpu_out["rows"]} == {"abc1234"}


def test_runs_merge_and_a_table_in_two_runs_is_refused(tmp_path, capsys):
    run1 = _run(tmp_path / "a", _ours([0.8] * 4, [0.8] * 4))
    run2 = tmp_path / "b" / "run"
    (run2 / "v").mkdir(parents=True)
    cfg = {"device": "cuda", "seed": 0, "draws": 2, "epsilons": [1.0], "tables": {"v": {}}}
    rows_v = [{**r, "table": "v"} for r in _ours([0.6, 0.7], [0.6, 0.7])]
    (run2 / "v" / "tabular.json").write_text(json.dumps({"config": cfg, "environment": {}, "rows": rows_v}))
    (run2 / "timings.txt").write_text("v exit 0 after 3 s\n")
    (run2 / "machine.txt").write_text("GPU 0: other\n")
    merged = tdc.merge_runs([run1, run2], ["t1", "t2"])
    assert sorted(merged["tables"]) == ["t", "v"] and [r["tree"] for r in merged["runs"]] == ["t1", "t2"]
    assert sum(r["tree"] == "t2" for r in merged["rows"]) == 4
    with pytest.raises(SystemExit) as e:
        tdc.main([str(run1), str(run1), "--out", str(tmp_path / "o"), "--tree", "x"])
    assert e.value.code == 2 and "rows of t drawn twice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        tdc.main([str(run1), str(run2), "--out", str(tmp_path / "o"), "--tree", "x", "--tree", "y", "--tree", "z"])
    assert e.value.code == 2 and "--tree given 3 times for 2 runs" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # a later lease adds its table to the committed runs (their folders gone): --previous
    assert tdc.main([str(run1), "--out", str(tmp_path / "p"), "--tree", "t1", "--cpu", str(_cpu(tmp_path))]) == 0
    assert tdc.main([str(run2), "--out", str(tmp_path / "q"), "--tree", "t2", "--cpu", str(_cpu(tmp_path)),
                     "--previous", str(tmp_path / "p" / "tabular-cuda.json")]) == 0
    q = json.loads((tmp_path / "q" / "tabular-cuda.json").read_text())
    assert [r["tree"] for r in q["runs"]] == ["t1", "t2"] and sorted(q["tables"]) == ["t", "v"]
    assert json.loads((tmp_path / "q" / "comparison.json").read_text())["tables"] == ["t", "v"]
    # the committed runs alone, against a re-run CPU study: same GPU rows, the comparison made with the new CPU rows
    cpu2 = tmp_path / "cpu2.json"
    cpu2.write_text(json.dumps({"environment": {}, "rows": [*_ours([0.7] * 4, [0.7] * 4),
                                                          *[{**r, "table": "v"} for r in _ours([0.6] * 3, [0.6] * 3)]]}))
    assert tdc.main(["--out", str(tmp_path / "r"), "--cpu", str(cpu2),
                     "--previous", str(tmp_path / "q" / "tabular-cuda.json")]) == 0
    assert json.loads((tmp_path / "r" / "tabular-cuda.json").read_text()) == q
    by_cell = {(c["table"], c["method"]): c for c in json.loads((tmp_path / "r" / "comparison.json").read_text())["per_cell"]}
    assert by_cell[("t", "DPGaussianMixture[default=auto]")]["mean_cpu"] == pytest.approx(0.7)
    for argv, msg in ((["--out", str(tmp_path / "s")], "or --previous alone"),
                      (["--out", str(tmp_path / "s"), "--tree", "x", "--previous", str(tmp_path / "q" / "tabular-cuda.json")],
                       "--tree names a run's commit")):
        with pytest.raises(SystemExit) as e:
            tdc.main(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_not_a_run_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        tdc.main([str(tmp_path), "--out", str(tmp_path / "o"), "--tree", "x"])
    assert e.value.code == 2 and "not a gpu_tabular.sh run" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _cpu(tmp_path):
    f = tmp_path / "cpu.json"
    f.write_text(json.dumps({"environment": {}, "rows": [*_ours([0.8] * 4, [0.8] * 4),
                                                         *[{**r, "table": "v"} for r in _ours([0.6] * 3, [0.6] * 3)]]}))
    return f


def test_cells_are_averaged_per_table_before_they_are_combined():
    # one table, two epsilons with p = 0.05 each (z = 1.959964, the normal's 97.5% point), both GPU higher: the
    # per-table mean is 1.96, so Z = 1.96 (not 2 x 1.96 / sqrt 2: the epsilons share one seed); a second table with
    # the same cell gives Z = 2 x 1.96 / sqrt 2 = 2.7718
    cell = lambda t, e: {"table": t, "epsilon": e, "method": "m", "downstream": "bayes", "p_value": 0.05,  # noqa: E731
                         "difference": 0.01}
    one = tdc.combined_by_group([cell("a", 0.5), cell("a", 1.0)])
    assert one[0]["tables"] == 1 and one[0]["stouffer_z"] == pytest.approx(1.959964, abs=1e-6)
    two = tdc.combined_by_group([cell("a", 0.5), cell("a", 1.0), cell("b", 1.0)])
    assert two[0]["stouffer_z"] == pytest.approx(2.771808, abs=1e-6) and two[0]["p_value"] == pytest.approx(0.005574,
                                                                                                            abs=1e-6)


def test_draw_correlation_across_epsilons():
    # draws 0..3 at eps 1 and 2: accuracies y = 2x (correlation 1) on table a, y = -x on table b: mean 0
    rows = [*_rows("a", 1.0, "m", [0.1, 0.2, 0.3, 0.5]), *_rows("a", 2.0, "m", [0.2, 0.4, 0.6, 1.0]),
            *_rows("b", 1.0, "m", [0.1, 0.2, 0.3, 0.5]), *_rows("b", 2.0, "m", [0.9, 0.8, 0.7, 0.5])]
    assert tdc.draw_correlation_across_epsilons(rows) == {"m bayes": pytest.approx(0.0, abs=1e-12)}
    assert tdc.draw_correlation_across_epsilons(rows[:8]) == {"m bayes": pytest.approx(1.0)}
