"""README's timing text is rendered from benchmarks/results/readme-timings.json (scripts/readme_timings.py)."""
import json

import pytest


def test_readme_timing_block_is_up_to_date(load_script):
    mod = load_script("scripts/readme_timings.py")
    assert mod.main(["--check"]) == 0, "run: python scripts/readme_timings.py --render"


def test_render_states_time_cores_and_load(load_script, tmp_path):
    mod = load_script("scripts/readme_timings.py")
    rec = {"command": "torchdpgmm experiment fig2 --trials 100 --out results", "wall_seconds": 54.3,
           "child_cpu_seconds": 61.2, "load_average_before": [6.04, 3.0, 1.0], "load_average_after": [5.5, 3.1, 1.1],
           "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z"}
    text = mod.render(rec)
    for s in ("54.3 s wall", "61.2 s of CPU", "2 CPU cores", "6.04 before", "5.50 after", "2026-01-02",
              "--trials 100"):
        assert s in text
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
             "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z"}
    text = mod.render_suite(suite)
    for s in ("402 s wall", "690 s of CPU", "812 passed", "2 CPU cores", "1.50 before", "2.25 after",
              "2026-01-02", "--suite"):
        assert s in text, s
    fig2 = {"command": "torchdpgmm experiment fig2 --trials 100 --out results", "wall_seconds": 54.3,
            "child_cpu_seconds": 61.2, "load_average_before": [6.0, 3.0, 1.0], "load_average_after": [5.5, 3.1, 1.1],
            "cpu_count": 2, "usable_cores": 2, "measured_at_utc": "2026-01-02T03:04:05Z", "test_suite": suite}
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
