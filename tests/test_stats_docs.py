"""The generated blocks of docs/bayes.md and docs/em.md match the committed JSON results."""

def test_generated_doc_blocks_are_up_to_date(load_script):
    mod = load_script("scripts/stats_docs.py")
    assert mod.main(["--check"]) == 0, "run: python scripts/stats_docs.py --write"
