"""The generated blocks of docs/bayes.md and docs/em.md match the committed JSON results."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_doc_blocks_are_up_to_date():
    spec = importlib.util.spec_from_file_location("stats_docs", ROOT / "scripts" / "stats_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0, "run: python scripts/stats_docs.py --write"
