"""Smoke test of scripts/mostly_noise_frequency.py: one table, one epsilon, two draws."""
import json


def test_mostly_noise_frequency_quick(tmp_path, load_script):
    mod = load_script("scripts/mostly_noise_frequency.py")
    out = tmp_path / "f.json"
    assert mod.main(["--tables", "wine", "--epsilons", "1", "--draws", "2", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["table"], r["epsilon"], r["estimator"]) for r in rows] == [
        ("wine", 1.0, "DPGaussianMixture"), ("wine", 1.0, "DPSyntheticClassifier")]
    for r in rows:
        assert 0 <= r["warned"] <= r["draws"] == 2 and 0 <= r["mean_accuracy"] <= 1 and 0 < r["majority_share"] < 1
