"""The shape of the doc pages: docs/tables.md stays a task page a newcomer reads in one go, the validation
tables behind its defaults live on the reference page docs/tables-validation.md (rendered there, up to date),
and every relative link of README.md and docs/*.md points at a file that exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VALIDATION_BLOCKS = ("covariance-rule", "covariance-rule-gaussiannb", "clip-rule", "clip-rule-pipeline", "centre-rule",
                     "split-stability", "split-stability-large-epsilon")
TASK_BLOCKS = ("tabular-overview", "tabular-epsilon", "tabular-targets", "tabular-peer-wins")


def _blocks(text: str) -> set[str]:
    return set(re.findall(r"<!-- generated: ([\w-]+) -->", text))


def test_tables_task_page_is_short_and_holds_no_validation_tables():
    text = (ROOT / "docs" / "tables.md").read_text()
    assert len(text.splitlines()) <= 270, "docs/tables.md is a task page: move reference material out"
    assert _blocks(text) == set(TASK_BLOCKS)
    assert "tables-validation.md" in text  # the task page says where the validation is


def test_validation_page_holds_the_validation_blocks_up_to_date(load_script):
    text = (ROOT / "docs" / "tables-validation.md").read_text()
    assert _blocks(text) == set(VALIDATION_BLOCKS)
    mod = load_script("scripts/covariance_rule_tables.py")
    assert mod.PAGE == ROOT / "docs" / "tables-validation.md"
    assert mod.main(["--check"]) == 0, "run: python scripts/covariance_rule_tables.py"
    # every JSON a block is rendered from is cited on the page (tests/test_docs_numbers.py looks there)
    for json_path in (mod.JSON, mod.GNB, mod.CLIP, mod.PIPE, mod.CENTRE, mod.SPLITS):
        assert str(json_path.relative_to(ROOT)) in text


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", " ", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_result_json_cite_pages_that_exist():
    """A committed result JSON that names a page (``docs/privacy.md``, ``README.md``) names one that exists
    (the realdata results once cited a DESIGN.md long gone)."""
    cited = []
    for folder in ("docs/results", "docs/realdata_results", "benchmarks/results", "scripts/results"):
        for path in sorted((ROOT / folder).rglob("*.json")):
            for name in re.findall(r"[\w./-]+\.md\b", path.read_text()):
                cited.append(name)
                if not ((ROOT / name).exists() or (ROOT / "docs" / name).exists()):
                    raise AssertionError(f"{path.relative_to(ROOT)} cites {name}, which does not exist")
    assert "docs/privacy.md" in cited     # the label-level note of the realdata results points there


def test_large_epsilon_block_shows_only_tables_with_a_miss_and_bolds_the_best(load_script):
    """covariance_rule_tables.large_epsilon_table from hand-made JSONs: table A has auto more than the margin below
    the best fixed type at epsilon 100 (shown, tied in bold there), table B never (left out)."""
    mod = load_script("scripts/covariance_rule_tables.py")

    def cell(e, auto, full, tied, diag, gap):
        return {"epsilon": e, "auto_mean": auto, "mean_auto_minus_best_fixed": gap,
                "fixed_means_over_splits": {"full": full, "tied": tied, "diag": diag}}

    small = {"epsilons": [1.0], "margin": 0.01, "tables": {"A": {"cells": [cell(1.0, 0.8, 0.7, 0.6, 0.5, 0.1)]},
                                                           "B": {"cells": [cell(1.0, 0.9, 0.1, 0.1, 0.1, 0.8)]}}}
    large = {"epsilons": [100.0], "splits": 10, "draws": 10,
             "tables": {"A": {"cells": [cell(100.0, 0.7, 0.6, 0.75, 0.5, -0.05)]},
                        "B": {"cells": [cell(100.0, 0.9, 0.1, 0.1, 0.1, 0.8)]}}}
    rows = [r for r in mod.large_epsilon_table(small, large).splitlines() if r.startswith("| A") or r.startswith("| B")]
    assert rows == ["| A | auto | **0.800** | 0.700 |", "| A | full | 0.700 | 0.600 |",
                    "| A | tied | 0.600 | **0.750** |", "| A | diag | 0.500 | 0.500 |"]
