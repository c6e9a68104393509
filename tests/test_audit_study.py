"""Smoke tests of the `audit` and `sound-utility` studies (tiny runs through the CLI)."""
import json

import pytest
import torch

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
    """docs/privacy.md's and docs/audit.md's generated blocks equal a fresh rendering of docs/results/*.json (no
    stale numbers), and each block sits in exactly one of the two pages."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    mod = load_script("scripts/privacy_doc.py")
    res = root / "docs" / "results"
    docs = {p: p.read_text() for p in (root / "docs" / "privacy.md", root / "docs" / "audit.md")}
    assert all(len(pages) == 1 for pages in mod.placement(docs).values()), mod.placement(docs)
    for doc in docs.values():
        assert mod.render(doc, res / "audit.json", res / "sound-utility.json", res / "privacy_records.json",
                          res / "audit-discrete.json") == doc


def _figs(monkeypatch):
    from matplotlib.figure import Figure

    out, orig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **kw: (out.append(self), orig(self, *a, **kw))[1])
    return out


def test_sound_utility_figure_legend_title_and_intervals(tmp_path, monkeypatch):
    """Each legend entry describes its own mode only; the title names the sound adjacency and that it is not
    the command line's default; the error bars drawn are the rows' stored log-axis intervals, which equal
    the delta-method interval m exp(+-h/m) recomputed here from the linear t interval."""
    import math

    import numpy as np

    from torchdpgmm.experiments.audit import _plot_utility, _utility_row

    rows = []
    for mode, adj, B in (("sound", "replace-one", 25.0), ("as-published", "label-flip", None)):
        for e in (1.0, 4.0):
            kl = torch.tensor([3.0, 40.0, 7.0, 1.5], dtype=torch.float64) / e   # t interval goes below 0
            rows.append(_utility_row(mode, "kl", e, 1e-5, kl, 4, 300, B, adj))
    assert any(r["kl_ci_low"] < 0 for r in rows)
    figs = _figs(monkeypatch)
    _plot_utility(json.loads(json.dumps(rows)), tmp_path / "u.png")
    (fig,) = figs
    ax = fig.axes[0]
    title = ax.get_title().replace("\n", " ")
    assert "replace-one" in title and "default is add-remove" in title and "nats" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 2
    assert "sound mode" in legend[0] and "label-level" not in legend[0]
    assert "as-published" in legend[1] and "sound mode" not in legend[1] and "record-level" not in legend[1]
    drawn = []
    for cont in ax.containers:
        xs, ms = cont.lines[0].get_data()
        for x, m, seg in zip(xs, ms, cont.lines[2][0].get_segments()):
            drawn.append((float(x), float(m), float(seg[:, 1].min()), float(seg[:, 1].max())))
    ref = []
    for r in rows:
        h = (r["kl_ci_high"] - r["kl_ci_low"]) / 2
        m = r["kl_mean"]
        assert r["kl_ci_low_log"] == pytest.approx(m * math.exp(-h / m), rel=1e-12)
        ref.append((r["epsilon"], m, r["kl_ci_low_log"], r["kl_ci_high_log"]))
    assert np.allclose(sorted(drawn), sorted(ref), rtol=1e-12, atol=0)


def test_audit_figure_zero_bar_and_unaudited_rows(tmp_path, monkeypatch):
    """A bound of exactly 0 gets a visible marker at 0; a pair never audited is counted in the panel title,
    not drawn as an (empty) bar; every panel has a title and the figure a suptitle."""
    from torchdpgmm.experiments.audit import _plot_audit

    base = {"claimed_delta": 1e-5, "num_draws": 1000, "exceeds_claim": False, "mechanism": "gaussian"}
    rows = [dict(base, mode="sound", neighbours="outlier-flip", claimed_epsilon=1.0, audited_epsilon_lower=0.4),
            dict(base, mode="as-published", neighbours="outlier-flip", claimed_epsilon=1.0, audited_epsilon_lower=0.0),
            dict(base, mode="as-published", neighbours="hull-point", claimed_epsilon=1.0,
                 audited_epsilon_lower=0.7, exceeds_claim=False),
            dict(base, mode="as-published", neighbours="worst-add-remove", claimed_epsilon=1.0,
                 audited_epsilon_lower=None, status="n/a: not a neighbour")]
    figs = _figs(monkeypatch)
    _plot_audit(rows, tmp_path / "a.png")
    (fig,) = figs
    assert fig._suptitle is not None and "lower bound on epsilon" in fig._suptitle.get_text()
    sound_ax, pub_ax = fig.axes
    assert "1 pairs not audited" in pub_ax.get_title(loc="left").replace("\n", " ")
    labels = [t.get_text() for t in pub_ax.get_yticklabels()]
    assert len(labels) == 2 and not any("worst-add-remove" in t for t in labels)
    assert min(t.get_fontsize() for t in pub_ax.get_yticklabels()) >= 7.5
    zero_markers = [c for c in pub_ax.collections if len(c.get_offsets()) and c.get_offsets()[0][0] == 0.0]
    assert len(zero_markers) == 1 and len(zero_markers[0].get_offsets()) == 1
    assert "outlier-flip" in labels[int(zero_markers[0].get_offsets()[0][1])]    # at the zero row


@pytest.mark.parametrize("mechanism", ["gaussian", "kl", "laplace"])
def test_the_sound_audit_reads_the_noise_scales_of_its_pairs_dimension(mechanism):
    """An audit of the audit (2026-12-01): the study read its sound releases' noise scales from placeholder data in
    two dimensions while its pairs have three; the kl split and the Laplace scales depend on d, so its
    likelihood-ratio statistic was not the exact one for those mechanisms. The scales it uses now equal those of a
    sound release of the pair's own data (the scales are public: they do not depend on the values)."""
    from torchdpgmm.experiments.audit import _sound_mechanism, make_pairs
    from torchdpgmm.release.sound import release_sound

    P = make_pairs(torch.Generator().manual_seed(0), 10.0, quick=True)["worst-label-flip"]
    _, rec = _sound_mechanism(mechanism, 1.0, 1e-5, 10.0, 3, "replace-one", d=P.X0.shape[-1])
    real = release_sound(P.X0, P.y0, 3, 1.0, 1e-5, clip_bound=10.0, adjacency="replace-one", mechanism=mechanism,
                         generator=torch.Generator().manual_seed(1))
    assert rec.extras["noise"] == real.extras["noise"]


def test_the_as_published_kl_audit_reuses_its_design_over_the_draws():
    """A review (2026-12-01): the design check compared a digest of the records, and the audit's design, solved
    once on a dataset and broadcast over its draws, was refused for its own records ('design was computed on other
    data'), turning every as-published kl row into an error. The records are compared with broadcasting now."""
    from torchdpgmm.experiments.audit import _published_mechanism, make_pairs

    P = make_pairs(torch.Generator().manual_seed(0), 10.0, quick=True)["outlier-flip"]
    out = _published_mechanism("kl", 1.0, 1e-5, 3)((P.X0, P.y0), 4, torch.Generator().manual_seed(1))
    assert out is not None
