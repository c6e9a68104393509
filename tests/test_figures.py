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


def _errorbars(ax):
    """(x, mean, lower, upper) of every error bar drawn on ``ax``, read back from the matplotlib artists."""
    out = []
    for cont in ax.containers:                        # ErrorbarContainer: (line, caps, (LineCollection,))
        xs, ms = cont.lines[0].get_data()
        for x, m, seg in zip(xs, ms, cont.lines[2][0].get_segments()):
            out.append((float(x), float(m), float(seg[:, 1].min()), float(seg[:, 1].max())))
    return sorted(out)


def _medians_and_bands(fig):
    """{label: (x, median, q25, q75)} of every median curve and interquartile band drawn on ``fig``, read back
    from the matplotlib artists (plot_curves tags each line and band with its label as gid)."""
    import numpy as np

    out = {}
    for ax in fig.axes:
        lines = {ln.get_gid(): ln for ln in ax.lines if ln.get_gid()}
        bands = {c.get_gid(): c for c in ax.collections if c.get_gid()}
        for lab, ln in lines.items():
            xs, ms = (np.asarray(v, dtype=float) for v in ln.get_data())
            verts = bands[lab].get_paths()[0].vertices
            lo = [verts[np.isclose(verts[:, 0], x)][:, 1].min() for x in xs]
            hi = [verts[np.isclose(verts[:, 0], x)][:, 1].max() for x in xs]
            out[lab] = (xs, ms, np.asarray(lo), np.asarray(hi))
    return out


@pytest.mark.parametrize("study, x, extra", [
    ("fig1", "epsilon", ["--mechanisms", "kl/as-published"]),
    ("fig3", "n", ["--mechanisms", "laplace,gaussian"]),
    ("fig4", "k", ["--mechanisms", "laplace"]),
    ("fig5", "d", ["--mechanisms", "laplace"]),
])
def test_synthetic_figures_draw_exactly_the_json_medians_and_quartiles(tmp_path, figs, study, x, extra):
    """The realised KL is heavy-tailed: the figures draw the rows' median with the interquartile band (q25 to
    q75), read back here from the artists; the y label and the caption say so; the x axis is ticked at every
    grid value. The rows still carry the mean's delta-method interval ``m exp(+-h/m)`` for the tables."""
    import math

    import numpy as np

    assert main(["experiment", study, "--out", str(tmp_path), "--quick", "--seed", "3", *extra]) == 0
    rows = json.loads((tmp_path / f"{study}.json").read_text())["rows"]
    for r in rows:
        h = (r["ci_high"] - r["ci_low"]) / 2
        assert r["ci_low_log"] == pytest.approx(r["mean"] * math.exp(-h / r["mean"]), rel=1e-12)
        assert r["ci_high_log"] == pytest.approx(r["mean"] * math.exp(h / r["mean"]), rel=1e-12)
        assert 0 < r["q25"] <= r["median"] <= r["q75"]
    (fig,) = figs
    drawn = _medians_and_bands(fig)
    assert set(drawn) == {r["label"] for r in rows}
    for lab, (xs, ms, lo, hi) in drawn.items():
        stored = sorted((float(r[x]), r["median"], r["q25"], r["q75"]) for r in rows if r["label"] == lab)
        assert np.allclose(np.column_stack([xs, ms, lo, hi]), stored, rtol=1e-12, atol=0)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_ylabel().startswith("median")
    assert sorted(ax.get_xticks()) == pytest.approx(sorted({float(r[x]) for r in rows}))
    text = _all_text(fig)
    for s in ("delta=1e-05", "trials=", "adjacency=label-flip", "interquartile range", "nats"):
        assert s in text, s


def test_quartiles_of_the_rows_match_numpy(tmp_path):
    """q25/q75 of the study rows (RunningStats' log-grid histogram, 1.2% resolution) against numpy's quantiles of
    the same heavy-tailed values."""
    import numpy as np

    from torchdpgmm.experiments.synthetic import _rows
    from torchdpgmm.montecarlo import RunningStats

    v = np.exp(np.random.default_rng(0).normal(1.0, 2.5, size=4001))      # lognormal: mean >> median
    st = RunningStats()
    st.update(v[:1500]).update(v[1500:])
    (row,) = _rows({"gaussian": [st]}, [("gaussian", "gaussian", None)], "epsilon", [1.0], {"n": 10})
    for key, q in (("q25", 0.25), ("median", 0.5), ("q75", 0.75)):
        assert row[key] == pytest.approx(np.quantile(v, q), rel=0.013), key
    assert row["mean"] > 2 * row["median"]


@pytest.mark.parametrize("study", ["fig1", "fig2", "fig3", "fig4", "fig5"])
def test_committed_synthetic_json_holds_the_drawn_intervals(study):
    """The committed results of scripts/figures_synthetic.sh store, for every row, the interval their figure
    draws (recomputed here from the stored Student-t interval); fig2, re-run since, stores the quartiles too."""
    import math
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "results" / "synthetic" / f"{study}.json"
    rows = json.loads(path.read_text())["rows"]
    for r in rows:
        h = (r["ci_high"] - r["ci_low"]) / 2
        assert r["ci_low_log"] == pytest.approx(r["mean"] * math.exp(-h / r["mean"]), rel=1e-9)
        assert r["ci_high_log"] == pytest.approx(r["mean"] * math.exp(h / r["mean"]), rel=1e-9)
        if study == "fig2":
            assert 0 < r["q25"] <= r["median"] <= r["q75"]


def test_committed_fig2_reads_at_a_glance(tmp_path, figs, load_script):
    """Issue 38 item 9, on the committed fig2: a tick at every epsilon of the grid, a log y axis labelled
    'median', the interquartile band, and R1SMG (1e10 and up) on its own panel above a broken axis instead of
    squeezing the six other curves (1e-2 to 1e5) into a third of the height."""
    from pathlib import Path

    mod = load_script("scripts/replot_synthetic.py")
    mod.main(["--out", str(tmp_path), "--studies", "fig2"])
    rows = json.loads((Path(__file__).resolve().parents[1] / "scripts" / "results" / "synthetic" /
                       "fig2.json").read_text())["rows"]
    (fig,) = figs
    main_ax, upper = fig.axes
    grid = sorted({r["epsilon"] for r in rows})
    for ax in (main_ax, upper):
        assert ax.get_yscale() == "log" and list(ax.get_xticks()) == pytest.approx(grid)
    assert [t.get_text() for t in main_ax.get_xticklabels()] == [f"{e:g}" for e in grid]
    assert main_ax.get_ylabel().startswith("median")
    assert set(_medians_and_bands(fig)) == {r["label"] for r in rows}
    assert {ln.get_gid() for ln in upper.lines if ln.get_gid()} == {"r1smg"}
    lo, hi = main_ax.get_ylim()
    others = [r for r in rows if r["label"] != "r1smg"]
    assert lo <= min(r["q25"] for r in others) and hi >= max(r["q75"] for r in others)
    assert hi < min(r["q25"] for r in rows if r["label"] == "r1smg")
    text = _all_text(fig)
    assert "interquartile range" in text and "y axis broken" in text and "r1smg in the upper panel" in text


def test_mnist_figure_states_settings_and_draws_the_json_accuracy_intervals(tmp_path, figs):
    import numpy as np

    assert main(["experiment", "mnist", "--quick", "--dataset", "digits", "--out", str(tmp_path),
                 "--mechanisms", "kl,kl-sound"]) == 0
    rows = json.loads((tmp_path / "mnist.json").read_text())["rows"]
    (fig,) = figs
    text = _all_text(fig)
    for s in ("digits", "N=", "PCA d=", "delta=1e-05", "trials=", "kl label-level", "nats",
              "fraction correct", "95% t-interval"):
        assert s in text, s
    acc_ax = fig.axes[1]
    stored = sorted((r["epsilon"], r["gmm_accuracy"], r["gmm_accuracy_ci_low"], r["gmm_accuracy_ci_high"])
                    for r in rows if r["epsilon"] is not None)
    assert np.allclose(_errorbars(acc_ax), stored, rtol=1e-12, atol=1e-15)


def test_synthetic_classifier_figure_draws_the_json_intervals(tmp_path, figs):
    import numpy as np

    from torchdpgmm.experiments.synthetic_classifier import _plot

    rows = [{"kind": "summary", "method": m, "epsilon": e, "accuracy": a, "accuracy_ci_low": a - w,
             "accuracy_ci_high": a + 2 * w, "n_seeds": 3, "adjacency": "add-remove", "dataset": "fashion-mnist", "d": 40}
            for m, a0 in (("dpgmm-bayes", 0.7), ("dp-sgd", 0.75)) for e, a, w in ((0.5, a0, 0.01), (2.0, a0 + 0.1, 0.02))]
    rows.append({"kind": "summary", "method": "non-private-bayes", "epsilon": None, "accuracy": 0.8, "n_seeds": 1})
    _plot(rows, tmp_path / "s.png", {"delta": 1e-5, "n_train": 60000})
    (fig,) = figs
    text = _all_text(fig)
    for s in ("fashion-mnist", "N=60000", "d=40", "delta=1e-05", "add-remove", "95% Student-t", "fraction correct"):
        assert s in text, s
    stored = sorted((r["epsilon"], r["accuracy"], r["accuracy_ci_low"], r["accuracy_ci_high"])
                    for r in rows if r["epsilon"] is not None)
    assert np.allclose(_errorbars(fig.axes[0]), stored, rtol=1e-12, atol=1e-15)


def test_mnist_mlp_figure_states_settings():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from torchdpgmm.experiments.realdata import _plot_mlp

    got = []
    orig = Figure.savefig
    Figure.savefig = lambda self, *a, **kw: got.append(self)
    try:
        rows = [{"kind": "mlp", "variant": v, "mechanism": "kl-sound", "epsilon": 1.0, "iteration": i, "epoch": i / 2,
                 "lr": 0.01, "accuracy": 0.5 + 0.1 * i, "adjacency": "replace-one", "trials": 5}
                for v in ("paper", "long") for i in range(3)]
        _plot_mlp(rows, "unused.png", {"dataset": "fashion-mnist", "n_train": 5000, "pca_dim": 5, "pca_fit": "private",
                                       "delta": 1e-5})
    finally:
        Figure.savefig = orig
    text = _all_text(got[0])
    for s in ("fashion-mnist", "N=5000", "PCA d=5", "delta=1e-05", "trials=5", "kl-sound replace-one",
              "fraction correct", "no interval drawn"):
        assert s in text, s


def test_xi_figures_state_settings_and_draw_the_json_bands(tmp_path, figs):
    """xi-fig1: the band drawn is the rows' dp_error_ci_low/high, the title gives prior, epsilon, delta,
    adjacency, trials and test points; xi-compare labels each mechanism's guarantee."""
    import numpy as np

    assert main(["experiment", "xi-fig1", "--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "xi-fig1.json").read_text())["rows"]
    (fig,) = figs
    text = _all_text(fig)
    for s in ("prior=0.7", "epsilon=0.1", "delta=0", "replace-one", "trials=", "2,000 test points",
              "fraction misclassified"):
        assert s in text, s
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    for r in rows:
        assert np.isclose(band, r["dp_error_ci_low"], rtol=1e-12).any()
        assert np.isclose(band, r["dp_error_ci_high"], rtol=1e-12).any()
    from torchdpgmm.experiments.xi import _plot_compare

    crow = [{"setting": "fig1", "mechanism": m, "n": n, "epsilon": 0.1, "delta": dl, "trials": 4,
             "bayes_error_mean": 0.3, "bayes_error_ci_low": 0.2, "bayes_error_ci_high": 0.4}
            for m, dl in (("xi-upper", 0.0), ("kl", 1e-5), ("nonprivate", 0.0)) for n in (500, 1000)]
    _plot_compare(crow, tmp_path / "c.png")
    legend = [t.get_text() for t in figs[-1].axes[0].get_legend().get_texts()]
    assert legend == ["xi-upper (pure eps-DP, replace-one)", "kl (delta=1e-05, label-level (as published))",
                      "nonprivate (no noise)"]


def test_replot_docs_figures_from_committed_json(tmp_path, load_script):
    """Every committed real-data / Xi figure can be redrawn from its committed JSON (no re-run)."""
    written = load_script("scripts/replot_docs_figures.py").main(["--out", str(tmp_path)])
    assert len(written) == 11
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_tabular_figure_one_panel_per_table_few_legend_entries(tmp_path, figs):
    """Issue 38 item 9: the tabular figure has one panel per table and no empty ones, a legend of six entries
    outside every panel, a tick at every epsilon, and curves equal to means over draws computed here."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from torchdpgmm.experiments.tabular import _PLOT_CURVES, _plot

    rng = np.random.default_rng(0)
    rows = []
    methods = [("DPGaussianMixture[default=auto]", "bayes"), ("DPGaussianMixture[tied]", "synthetic->logreg"),
               ("DPSyntheticClassifier[pipeline]", "synthetic->hgb"), ("diffprivlib GaussianNB", "direct"),
               ("smartnoise MST", "synthetic->logreg")]
    for t in ("t1", "t2"):
        for e in (0.5, 1.0):
            for m, d in methods:
                for draw in range(3):
                    rows.append({"table": t, "epsilon": e, "draw": draw, "method": m, "downstream": d,
                                 "privacy": "(eps, delta)-DP", "accuracy": float(rng.uniform(0.3, 0.9))})
        for m in ("non-private QDA", "non-private HGB"):
            rows.append({"table": t, "epsilon": None, "draw": 0, "method": m, "downstream": "direct",
                         "privacy": "none", "accuracy": 0.95})
    _plot(rows, tmp_path / "tabular.png")
    (fig,) = figs
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["t1", "t2"]
    (leg,) = fig.legends
    texts = [x.get_text() for x in leg.get_texts()]
    assert texts == [c[0] for c in _PLOT_CURVES] + ["non-private QDA (no privacy)", "non-private HGB (no privacy)"]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    for ax in fig.axes:
        assert not leg.get_window_extent(r).overlaps(ax.get_window_extent(r))
        assert list(ax.get_xticks()) == [0.5, 1.0]

    def mean(t, e, m, d):
        return float(np.mean([x["accuracy"] for x in rows if (x["table"], x["epsilon"], x["method"],
                                                               x["downstream"]) == (t, e, m, d)]))

    for ax, t in zip(fig.axes, ("t1", "t2")):
        lines = {ln.get_gid(): ln.get_ydata() for ln in ax.lines if ln.get_gid()}
        ref = {0: [mean(t, e, *methods[0]) for e in (0.5, 1.0)],
               1: [max(mean(t, e, *methods[1]), mean(t, e, *methods[2])) for e in (0.5, 1.0)],
               2: [mean(t, e, *methods[3]) for e in (0.5, 1.0)],
               3: [max(mean(t, e, *methods[3]), mean(t, e, *methods[4])) for e in (0.5, 1.0)]}
        for j, (label, _, _) in enumerate(_PLOT_CURVES):
            assert np.allclose(lines[label], ref[j], rtol=1e-12), label
