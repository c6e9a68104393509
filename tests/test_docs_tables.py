"""The measured-numbers tables of docs/release.md and docs/design.md are generated from the benchmark JSON."""


def test_docs_tables_are_up_to_date(load_script):
    assert load_script("benchmarks/docs_tables.py").main(["--check"]) == 0, "run: python benchmarks/docs_tables.py"


def test_rewrite_touches_only_its_block(load_script):
    mod = load_script("benchmarks/docs_tables.py")
    text = "a\n<!-- generated: x -->\nold\n<!-- /generated -->\nb\n<!-- generated: y -->\nkeep\n<!-- /generated -->\n"
    new = mod.rewrite(text, "x", "NEW")
    assert new == "a\n<!-- generated: x -->\nNEW\n<!-- /generated -->\nb\n<!-- generated: y -->\nkeep\n<!-- /generated -->\n"
    assert mod.rewrite(mod.rewrite(text, "y", "Z"), "x", "NEW").count("keep") == 0
