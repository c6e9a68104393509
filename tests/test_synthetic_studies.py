"""Studies fig1..fig5 (Liu, Scaglione & Peisert 2025, Sec. V-A): smoke runs through the CLI and row contents."""
import json

import pytest

from torchdpgmm.cli import main


# fig2 runs every mechanism; the others run a cheap subset (plus the proposed mechanism for fig1) to keep
# the suite fast -- the mechanisms themselves are covered by tests/test_release.py
SUBSET = {"fig1": None, "fig2": None, "fig3": "laplace,r1smg", "fig4": "gaussian", "fig5": "laplace,r1smg"}


@pytest.mark.parametrize("study", ["fig1", "fig2", "fig3", "fig4", "fig5"])
def test_study_quick_writes_rows(tmp_path, study):
    args = ["experiment", study, "--out", str(tmp_path), "--quick", "--seed", "3"]
    if SUBSET[study]:
        args += ["--mechanisms", SUBSET[study]]
    assert main(args) == 0
    payload = json.loads((tmp_path / f"{study}.json").read_text())
    assert payload["study"] == study
    rows = payload["rows"]
    assert rows
    for r in rows:
        for key in ("mechanism", "variant", "mean", "ci_low", "ci_high", "trials"):
            assert key in r
        assert r["ci_low"] <= r["mean"] <= r["ci_high"]
        assert r["trials"] >= 2
    labels = {r["label"] for r in rows}
    if study == "fig1":
        assert labels == {"kl/as-published", "kl/global", "kl/exact-kl"}
    elif study == "fig2":
        assert labels == {"kl/as-published", "kl/global", "kl/exact-kl", "colored", "gaussian", "laplace", "r1smg"}
    else:
        assert labels == set(SUBSET[study].split(","))
        assert len(rows) == 2 * len(labels)  # two grid points each
    assert (tmp_path / f"{study}.csv").exists() and (tmp_path / f"{study}.png").exists()


def test_study_is_reproducible(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["experiment", "fig4", "--quick", "--seed", "5", "--mechanisms", "laplace"]
    assert main(args + ["--out", str(a)]) == 0
    assert main(args + ["--out", str(b)]) == 0
    ra = json.loads((a / "fig4.json").read_text())["rows"]
    rb = json.loads((b / "fig4.json").read_text())["rows"]
    assert [r["mean"] for r in ra] == [r["mean"] for r in rb]
    assert {r["label"] for r in ra} == {"laplace"}


def test_unknown_mechanism_flag_is_an_error(tmp_path):
    assert main(["experiment", "fig2", "--quick", "--out", str(tmp_path), "--mechanisms", "nope"]) == 2


def test_fig2_draws_exactly_the_json_medians_and_quartiles(tmp_path, monkeypatch):
    """Every plotted number is in the JSON: the median curves and interquartile bands read back from the
    matplotlib artists equal the rows' ``median``/``q25``/``q75``; the rows keep the mean's delta-method
    interval ``m exp(+-h/m)`` (recomputed here from the linear Student-t interval) for the tables."""
    import math

    import numpy as np
    from matplotlib.figure import Figure

    figs, orig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **kw: (figs.append(self), orig(self, *a, **kw))[1])
    args = ["experiment", "fig2", "--out", str(tmp_path), "--quick", "--seed", "3", "--mechanisms", "laplace,gaussian"]
    assert main(args) == 0
    rows = json.loads((tmp_path / "fig2.json").read_text())["rows"]
    for r in rows:
        h = (r["ci_high"] - r["ci_low"]) / 2
        assert r["ci_low_log"] == pytest.approx(r["mean"] * math.exp(-h / r["mean"]), rel=1e-12)
        assert r["ci_high_log"] == pytest.approx(r["mean"] * math.exp(h / r["mean"]), rel=1e-12)
    (fig,) = figs
    ax = fig.axes[0]
    assert "nats" in ax.get_ylabel() and ax.get_ylabel().startswith("median")
    drawn = []
    for ln in ax.lines:
        if not ln.get_gid():
            continue
        band = next(c for c in ax.collections if c.get_gid() == ln.get_gid()).get_paths()[0].vertices
        for x, m in zip(*ln.get_data()):
            ys = band[np.isclose(band[:, 0], x)][:, 1]
            drawn.append((float(x), float(m), float(ys.min()), float(ys.max())))
    stored = [(r["epsilon"], r["median"], r["q25"], r["q75"]) for r in rows]
    assert len(drawn) == len(stored) == 4
    assert np.allclose(sorted(drawn), sorted(stored), rtol=1e-12, atol=0)
