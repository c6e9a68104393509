"""The measured-numbers tables of docs/release.md and docs/design.md are generated from the benchmark JSON."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mod():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "benchmarks" / "docs_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_tables_are_up_to_date():
    assert _mod().main(["--check"]) == 0, "run: python benchmarks/docs_tables.py"


def test_rewrite_touches_only_its_block():
    mod = _mod()
    text = "a\n<!-- generated: x -->\nold\n<!-- /generated -->\nb\n<!-- generated: y -->\nkeep\n<!-- /generated -->\n"
    new = mod.rewrite(text, "x", "NEW")
    assert new == "a\n<!-- generated: x -->\nNEW\n<!-- /generated -->\nb\n<!-- generated: y -->\nkeep\n<!-- /generated -->\n"
    assert mod.rewrite(mod.rewrite(text, "y", "Z"), "x", "NEW").count("keep") == 0
