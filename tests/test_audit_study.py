"""Smoke tests of the `audit` and `sound-utility` studies (tiny runs through the CLI)."""
import json

from torchdpgmm.cli import main


def test_audit_study_quick(tmp_path):
    rc = main(["experiment", "audit", "--out", str(tmp_path), "--quick", "--draws", "1000",
               "--published-draws", "200", "--pairs", "outlier-flip,extreme-clip,worst-add-remove",
               "--mechanisms", "gaussian,r1smg", "--sound-mechanisms", "gaussian,r1smg"])
    assert rc == 0
    payload = json.loads((tmp_path / "audit.json").read_text())
    rows = payload["rows"]
    keys = {"mechanism", "mode", "claimed_epsilon", "audited_epsilon_lower", "neighbours"}
    assert all(keys <= set(r) for r in rows)
    sound_ok = [r for r in rows if r["mode"] == "sound" and r["status"] == "ok"]
    assert {r["neighbours"] for r in sound_ok} == {"outlier-flip", "extreme-clip", "worst-add-remove"}
    assert all(r["audited_epsilon_lower"] <= r["claimed_epsilon"] for r in sound_ok)
    # sound rows carry the likelihood-ratio bound and the power columns; the worst add/remove pair sits
    # exactly at the claim (its exact epsilon is the claimed one)
    for r in sound_ok:
        assert "likelihood-ratio" in r["per_statistic"] and 0 <= r["claim_ceiling_epsilon"] < r["claimed_epsilon"]
        assert r["pair_exact_epsilon"] <= r["claimed_epsilon"] * (1 + 1e-6)
    worst = [r for r in sound_ok if r["neighbours"] == "worst-add-remove"]
    assert worst[0]["adjacency"] == "add-remove"
    if worst[0]["noise"] == "continuous":  # GDP-exact calibration: the pair sits exactly at the claim
        assert abs(worst[0]["pair_exact_epsilon"] - 1.0) < 1e-6
    # add/remove is not a neighbour relation of the as-published (label-flip) mode
    assert any(r["mode"] == "as-published" and r["neighbours"] == "worst-add-remove" and r["status"].startswith("n/a")
               for r in rows)
    # r1smg is refused in sound mode, with the reason in the row
    assert any(r["mode"] == "sound" and r["mechanism"] == "r1smg" and "no sound mode" in r["status"] for r in rows)
    # the component audits are present and carry their exact numbers
    comp = [r for r in rows if r["mode"] == "as-published (component)"]
    assert any(r["mechanism"].startswith("random-mapping") and r["exact_max_log_ratio"] > 1 for r in comp)
    assert (tmp_path / "audit.csv").exists() and (tmp_path / "audit.png").exists()


def test_sound_utility_quick(tmp_path):
    rc = main(["experiment", "sound-utility", "--out", str(tmp_path), "--quick", "--trials", "3",
               "--epsilons", "1,4", "--published-mechanisms", "kl"])
    assert rc == 0
    rows = json.loads((tmp_path / "sound-utility.json").read_text())["rows"]
    sound = {(r["mechanism"], r["epsilon"]): r for r in rows if r["mode"] == "sound"}
    assert set(sound) == {(m, e) for m in ("gaussian", "kl", "laplace") for e in (1.0, 4.0)}
    for m in ("gaussian", "kl", "laplace"):
        # more budget, less KL (averaged over trials)
        assert sound[(m, 4.0)]["kl_mean"] < sound[(m, 1.0)]["kl_mean"]


def test_privacy_doc_tables_are_generated_from_the_committed_json(load_script):
    """docs/privacy.md's generated blocks equal a fresh rendering of docs/results/*.json (no stale numbers)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    mod = load_script("scripts/privacy_doc.py")
    res = root / "docs" / "results"
    doc = (root / "docs" / "privacy.md").read_text()
    assert mod.render(doc, res / "audit.json", res / "sound-utility.json", res / "privacy_records.json",
                      res / "audit-discrete.json") == doc
