"""README's timing text is rendered from benchmarks/results/readme-timings.json (scripts/readme_timings.py)."""
import json

import pytest


def test_readme_timing_block_is_up_to_date(load_script):
    mod = load_script("scripts/readme_timings.py")
    assert mod.main(["--check"]) == 0, "run: python scripts/readme_timings.py --render"


CONFIG = {"seed": 0, "device": "cpu", "backend": "local", "trials": 100, "epsilons": [0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0],
          "mechanisms": ["kl/as-published", "kl/global", "kl/exact-kl", "colored", "gaussian", "laplace", "r1smg"],
          "n": 1000, "k": 5, "d": 3, "delta": 1e-05}


def test_render_states_time_cores_load_and_what_ran(load_script, tmp_path):
    mod = load_script("scripts/readme_timings.py")
    rec = {"command": "torchdpgmm experiment fig2 --trials 100 --out results", "wall_seconds": 54.3,
           "child_cpu_seconds": 61.2, "load_average_before": [6.04, 3.0, 1.0], "load_average_after": [5.5, 3.1, 1.1],
           "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z", "study_config": CONFIG,
           "machine": "x86_64", "python": "3.11.7", "torch": "2.15.0", "commit": "abc1234"}
    text = mod.render(rec)
    for s in ("54.3 s wall", "61.2 s of CPU", "2 CPU cores", "6.04 before", "5.50 after", "2026-01-02 03:04 UTC",
              "--trials 100", "seed 0", "device cpu", "100 trials x 7 epsilons (0.1 to 8) x 7 mechanisms",
              "r1smg", "N=1000, K=5, d=3, delta=1e-05", "torch 2.15.0", "commit abc1234", "x86_64"):
        assert s in text, s
    assert "OMP_NUM_THREADS" not in text            # unset: torch's default threads, nothing to say
    assert "with OMP_NUM_THREADS=1, and took" in mod.render(dict(rec, omp_num_threads="1"))
    # a record that does not say what ran is refused, not rendered without it
    with pytest.raises(ValueError, match="seed"):
        mod.render({k: v for k, v in rec.items() if k != "study_config"})
    # --render rewrites only its block, from the JSON given
    (tmp_path / "t.json").write_text(json.dumps(rec))
    readme = tmp_path / "R.md"
    readme.write_text("a\n<!-- generated: readme-timings -->\nold\n<!-- /generated -->\n"
                      "<!-- generated: other -->\nkeep\n<!-- /generated -->\n")
    assert mod.main(["--render", "--json", str(tmp_path / "t.json"), "--readme", str(readme)]) == 0
    assert readme.read_text() == ("a\n<!-- generated: readme-timings -->\n" + text + "\n<!-- /generated -->\n"
                                  "<!-- generated: other -->\nkeep\n<!-- /generated -->\n")
    assert mod.main(["--check", "--json", str(tmp_path / "t.json"), "--readme", str(readme)]) == 0
    readme.write_text(readme.read_text().replace("54.3", "25.0"))
    assert mod.main(["--check", "--json", str(tmp_path / "t.json"), "--readme", str(readme)]) == 1


def test_missing_block_is_an_error(load_script, tmp_path):
    mod = load_script("scripts/readme_timings.py")
    with pytest.raises(ValueError, match="readme-timings"):
        mod.rewrite("no block here\n", "readme-timings", "x")


def test_suite_timing_renders_and_rewrites_only_its_block(load_script, tmp_path):
    mod = load_script("scripts/readme_timings.py")
    assert "--suite" in mod.render_suite(None)          # no record: how to make one, no number
    suite = {"command": "python -m pytest -q", "summary": "812 passed, 9 skipped in 401.00s", "wall_seconds": 402.4,
             "child_cpu_seconds": 690.0, "load_average_before": [1.5, 1.0, 1.0], "load_average_after": [2.25, 1, 1],
             "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z", "machine": "x86_64",
             "python": "3.11.7", "torch": "2.14.1", "commit": "def5678"}
    text = mod.render_suite(suite)
    # when (date and time), where (cores, machine, versions, commit), what load, and what it gave
    for s in ("402 s wall", "690 s of CPU", "812 passed, 9 skipped", "2 CPU cores", "1.50 before", "2.25 after",
              "2026-01-02 03:04 UTC", "--suite", "x86_64", "torch 2.14.1", "commit def5678", "other jobs"):
        assert s in text, s
    fig2 = {"command": "torchdpgmm experiment fig2 --trials 100 --out results", "wall_seconds": 54.3,
            "child_cpu_seconds": 61.2, "load_average_before": [6.0, 3.0, 1.0], "load_average_after": [5.5, 3.1, 1.1],
            "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z", "test_suite": suite,
            "study_config": CONFIG}
    (tmp_path / "t.json").write_text(json.dumps(fig2))
    readme = tmp_path / "R.md"
    readme.write_text("<!-- generated: readme-timings -->\nold\n<!-- /generated -->\nmid\n"
                      "<!-- generated: readme-timings-suite -->\nold\n<!-- /generated -->\n")
    assert mod.main(["--render", "--json", str(tmp_path / "t.json"), "--readme", str(readme)]) == 0
    assert readme.read_text() == ("<!-- generated: readme-timings -->\n" + mod.render(fig2) + "\n<!-- /generated -->\n"
                                  "mid\n<!-- generated: readme-timings-suite -->\n" + text + "\n<!-- /generated -->\n")


def test_suite_timing_refused_above_the_load_limit(load_script, tmp_path, monkeypatch):
    mod = load_script("scripts/readme_timings.py")
    monkeypatch.setattr(mod, "_load_average", lambda: [9.0, 9.0, 9.0])
    monkeypatch.setattr(mod, "time_suite", lambda *a, **k: pytest.fail("must not time under this load"))
    (tmp_path / "t.json").write_text("{}")
    assert mod.main(["--suite", "--max-load", "2", "--json", str(tmp_path / "t.json"),
                     "--readme", str(tmp_path / "R.md")]) == 3
    assert (tmp_path / "t.json").read_text() == "{}"


def test_time_fig2_records_what_the_study_ran(load_script, monkeypatch):
    """The record carries the timed study's own config (seed, device, grid) read from the fig2.json it wrote."""
    import subprocess
    from pathlib import Path

    mod = load_script("scripts/readme_timings.py")
    seen = {}

    def fake_run(cmd, cwd=None, **kw):
        if "fig2" not in cmd:                 # git, asked for the commit: not a repository here
            return subprocess.CompletedProcess(cmd, 128, "", "")
        seen["cmd"] = cmd
        (Path(cwd) / "fig2.json").write_text(json.dumps({"config": dict(CONFIG, trials=3, seed=0),
                                                         "runtime_seconds": 1.0}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(mod.subprocess, "run", fake_run)
    rec = mod.time_fig2(trials=3)
    assert seen["cmd"][-5:] == ["fig2", "--trials", "3", "--out", seen["cmd"][-1]]
    assert rec["study_config"]["seed"] == 0 and rec["study_config"]["device"] == "cpu"
    assert rec["study_config"]["trials"] == 3 and len(rec["study_config"]["epsilons"]) == 7
    assert "seed 0, device cpu: 3 trials x 7 epsilons" in mod.render(dict(rec, measured_at_utc="2026-01-02T03:04:05Z"))
