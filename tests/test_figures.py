"""Figures that stand alone (issue 28): settings and units on every figure, class names, legends beside the
axes, and the record-level study's sound release really uses the adjacency its label names."""
import json

import pytest
from matplotlib.figure import Figure

from torchdpgmm.cli import main


@pytest.fixture
def figs(monkeypatch):
    out, orig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **kw: (out.append(self), orig(self, *a, **kw))[1])
    return out


def _all_text(fig):
    texts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return " ".join(t.replace("\n", " ") for t in texts)


def test_record_level_sound_rows_are_replace_one_and_title_has_settings(tmp_path, figs):
    assert main(["experiment", "record-level", "--quick", "--out", str(tmp_path), "--seed", "1"]) == 0
    rows = json.loads((tmp_path / "record-level.json").read_text())["rows"]
    sound = [r for r in rows if r["mechanism"].startswith("kl-sound")]
    assert sound and all(r["adjacency"] == "replace-one" for r in sound)   # the sound default is add-remove
    (fig,) = figs
    text = _all_text(fig)
    for s in ("N=300", "K=5", "d=3", "epsilon=1", "delta=1e-05", "trials=4", "replace-one", "nats"):
        assert s in text, s


def test_iris_title_settings_class_names_legend_outside(tmp_path, figs):
    assert main(["experiment", "iris", "--quick", "--out", str(tmp_path), "--mechanisms", "kl,laplace"]) == 0
    (fig,) = figs
    text = _all_text(fig)
    for s in ("delta=1e-05", "epsilon in {1, 2}", "3 trials", "setosa", "versicolor", "virginica", "nats"):
        assert s in text, s
    assert "class 0" not in text
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)      # pyplot detached the closed figure's canvas
    canvas.draw()
    r = canvas.get_renderer()
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:     # a legend never overlaps the plotting area of its axes
            assert not leg.get_window_extent(r).overlaps(ax.get_window_extent(r))


def test_xi_table1_title_states_settings(tmp_path, figs):
    from torchdpgmm.experiments.xi import _plot_table1

    rows = [{"d": 5, "sigma": s, "prior": 0.5, "n_train": 500, "trials": 7, "bayes_error": 0.2, "ci_low": 0.19,
             "ci_high": 0.21, "paper_bayes_error": 0.2} for s in (1, 2)]
    _plot_table1(rows, tmp_path / "t.png", num_test=2000)
    (fig,) = figs
    text = _all_text(fig)
    for s in ("prior=0.5", "n=500", "trials=7", "2,000 test points", "Xi, Kantarcioglu & Inan (2011)",
              "fraction misclassified"):
        assert s in text, s
