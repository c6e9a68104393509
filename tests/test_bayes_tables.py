"""The generated Xi et al. (2011) tables of docs/bayes.md and docs/results/xi/bayes_tables.json match the
committed study JSON under docs/results/xi/ (scripts/bayes_tables.py)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_xi_tables_are_up_to_date(load_script):
    assert load_script("scripts/bayes_tables.py").main(["--check"]) == 0, "run: python scripts/bayes_tables.py --write"


def test_table1_paper_values_match_the_transcription():
    """The study's printed paper cells (torchdpgmm.experiments.xi.PAPER_TABLE1) and the hand transcription in
    paper_values.json are two independent copies of the paper's Table 1; they must agree."""
    import json

    from torchdpgmm.experiments.xi import PAPER_TABLE1

    paper = json.loads((ROOT / "docs/results/xi/paper_values.json").read_text())["table1"]
    for d, row in paper["rows"].items():
        assert [PAPER_TABLE1[int(d)][s] for s in paper["sigma"]] == row
