"""The plotting helper (figures that stand alone) and the sweep's file modes and empty public classes."""
import math
import os
import stat

import numpy as np
import pytest
import torch
from scipy import stats

from torchdpgmm.experiments.plotting import VARIANT_NOTES, plot_curves, series_from_rows
from torchdpgmm.sweep import SweepSpec, run_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def strict_umask():
    old = os.umask(0o077)    # without an explicit chmod, files would come out 0600
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def captured(monkeypatch):
    """The Figure objects the helper saves, to inspect what was actually drawn."""
    from matplotlib.figure import Figure

    figs, orig = [], Figure.savefig

    def spy(self, *a, **kw):
        figs.append(self)
        return orig(self, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figs


def _t_summary(values):
    """Mean and Student-t 95% CI computed with scipy (independent of the code under test)."""
    v = np.asarray(values, dtype=float)
    m, se = v.mean(), v.std(ddof=1) / math.sqrt(len(v))
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=m, scale=se)
    return m, lo, hi, stats.t.ppf(0.975, len(v) - 1) * se


def _heavy_tailed_rows():
    rng = np.random.default_rng(0)
    rows = []
    for label in ("kl/as-published", "kl/global", "gaussian"):
        for e in (0.5, 1.0, 2.0):
            vals = np.exp(rng.normal(0.0, 2.5, size=8)) / e    # lognormal: the t interval goes below 0
            m, lo, hi, _ = _t_summary(vals)
            rows.append({"label": label, "epsilon": e, "mean": m, "ci_low": lo, "ci_high": hi})
    return rows


def test_png_written_0644(tmp_path, strict_umask):
    path = tmp_path / "fig.png"
    plot_curves(series_from_rows(_heavy_tailed_rows(), "epsilon"), path, x_label="epsilon", y_label="KL")
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_caption_states_settings_and_legend_explains_variants(tmp_path, captured):
    settings = {"n": 1000, "k": 5, "d": 3, "delta": 1e-5, "trials": 20, "mode": "as-published",
                "adjacency": "label-flip"}
    out = plot_curves(series_from_rows(_heavy_tailed_rows(), "epsilon"), tmp_path / "f.png", x_label="epsilon",
                      y_label="KL", title="Fig. 2", settings=settings, logx=True)
    for s in ("N=1000", "K=5", "d=3", "delta=1e-05", "trials=20", "mode=as-published", "adjacency=label-flip"):
        assert s in out["caption"]
    (fig,) = captured
    ax = fig.axes[0]
    title = ax.get_title().replace("\n", " ")
    for s in ("Fig. 2", "N=1000", "delta=1e-05", "trials=20", "adjacency=label-flip"):
        assert s in title
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"{lab}: {VARIANT_NOTES[lab]}" for lab in ("kl/as-published", "kl/global", "gaussian")]
    assert "Liu, Scaglione & Peisert (2025)" in legend[0]


def test_log_axis_lower_ends_positive(tmp_path, captured):
    rows = _heavy_tailed_rows()
    assert any(r["ci_low"] <= 0 for r in rows)      # the case the log-space interval exists for
    out = plot_curves(series_from_rows(rows, "epsilon"), tmp_path / "f.png", x_label="epsilon", y_label="KL")
    (fig,) = captured
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    drawn_lows = []
    for cont in ax.containers:                        # ErrorbarContainer: (line, caps, (LineCollection,))
        for seg in cont.lines[2][0].get_segments():
            drawn_lows.append(min(seg[:, 1]))
    assert len(drawn_lows) == len(rows) and min(drawn_lows) > 0
    # the drawn interval is mean * exp(+-h / mean), h the t half-width (delta method on log mean)
    for s in out["series"]:
        for m, lo, hi in zip(s["mean"], s["lower"], s["upper"]):
            r = next(r for r in rows if r["mean"] == m)
            h = (r["ci_high"] - r["ci_low"]) / 2
            assert lo == pytest.approx(m * math.exp(-h / m), rel=1e-12)
            assert hi == pytest.approx(m * math.exp(h / m), rel=1e-12)


def test_nonpositive_mean_not_drawn_and_said(tmp_path):
    series = [{"label": "gaussian", "x": [1, 2], "mean": [0.0, 3.0], "ci_low": [-1, 1], "ci_high": [1, 5]}]
    out = plot_curves(series, tmp_path / "f.png", x_label="epsilon", y_label="KL")
    assert out["series"][0]["x"] == [2] and out["dropped"] == 1
    assert "1 point(s)" in out["caption"]


def _fake_trials(spec, chunk):
    return [{"mechanism": m, "epsilon": e, "N": chunk.N, "K": chunk.K, "d": chunk.d, "seed": spec.seed,
             "trial": t, "kl": (1.0 + t) / e}
            for m in spec.mechanisms for e in spec.epsilons
            for t in range(chunk.first_trial, chunk.first_trial + chunk.num_trials)]


def test_sweep_files_0644(tmp_path, strict_umask):
    spec = SweepSpec(mechanisms=["kl", "gaussian"], epsilons=[0.5, 1.0], Ns=[50], Ks=[2], ds=[2], trials=4,
                     chunk_size=2, block_size=2)
    run_sweep(spec, tmp_path / "s", trial_fn=_fake_trials, progress=False)
    files = list((tmp_path / "s" / "chunks").glob("*.csv")) + [tmp_path / "s" / n for n in ("results.csv", "sweep.png")]
    assert len(files) == 4
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


def test_sweep_kl_with_empty_public_class():
    """classes > K: the KL conditions the release on the data's K classes; a release equal to the fit on
    those classes (any weight on the empty class) has KL exactly 0 (closed form)."""
    from types import SimpleNamespace

    from torchdpgmm.mixture import LabeledGMM, fit_labeled
    from torchdpgmm.sweep import _kl_of

    g = torch.Generator().manual_seed(0)
    X = torch.randn(2, 40, 3, generator=g, dtype=torch.float64)
    y = (torch.arange(40) % 2).expand(2, 40)
    fit = fit_labeled(X, y, 2)
    w = torch.cat([0.7 * fit.weights, torch.full((2, 1), 0.3, dtype=torch.float64)], -1)
    mu = torch.cat([fit.means, torch.zeros(2, 1, 3, dtype=torch.float64)], -2)
    cov = torch.cat([fit.covariances, torch.eye(3, dtype=torch.float64).expand(2, 1, 3, 3)], -3)
    rel = SimpleNamespace(kl=None, model=LabeledGMM(w, mu, cov))
    kl = _kl_of(rel, X, y, 3, 2)
    assert kl.shape == (2,)
    assert torch.allclose(kl, torch.zeros(2, dtype=torch.float64), atol=1e-10)
    # a shifted mean gives the Gaussian closed form pi_k * |dmu|^2_{Sigma^-1} / 2 for that class
    mu2 = mu.clone()
    mu2[:, 0, 0] += 1.0
    kl2 = _kl_of(SimpleNamespace(kl=None, model=LabeledGMM(w, mu2, cov)), X, y, 3, 2)
    prec = np.linalg.inv(fit.covariances[:, 0].numpy())
    ref = fit.weights[:, 0].numpy() * 0.5 * prec[:, 0, 0]
    assert np.allclose(kl2.numpy(), ref, rtol=1e-10)


def test_sweep_refuses_empty_classes_as_published(tmp_path):
    spec = SweepSpec(mechanisms=["kl"], epsilons=[1.0], Ns=[50], Ks=[2], ds=[3], trials=2, classes=3)
    with pytest.raises(ValueError, match="empty classes"):
        run_sweep(spec, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_replot_script_from_committed_json(tmp_path, load_script):
    mod = load_script("scripts/replot_synthetic.py")
    (png,) = mod.main(["--out", str(tmp_path), "--studies", "fig2"])
    assert png.read_bytes()[:8] == PNG_MAGIC and stat.S_IMODE(png.stat().st_mode) == 0o644


def test_sweep_sound_more_public_classes_than_k(tmp_path):
    """The reported failure: `sweep --K 2 --classes 3 --clip-bound 5` (sound) now runs to finite KLs."""
    spec = SweepSpec(mechanisms=["gaussian", "kl"], epsilons=[1.0], Ns=[40], Ks=[2], ds=[2], trials=2,
                     chunk_size=2, block_size=2, mode="sound", clip_bound=5.0, classes=3)
    res = run_sweep(spec, tmp_path / "s", progress=False)
    assert len(res["summary"]) == 2
    assert all(math.isfinite(p["mean"]) and p["nonfinite"] == 0 for p in res["summary"])


def test_stored_interval_drawn_as_is_and_missing_one_recomputed(tmp_path, captured):
    """``lower``/``upper`` (a stored interval) are drawn exactly; a row without them (older JSON) still gets
    the delta-method interval rather than no interval at all."""
    m, lo, hi = 2.0, -1.0, 5.0
    series = [{"label": "gaussian", "x": [1, 2], "mean": [m, m], "ci_low": [lo, lo], "ci_high": [hi, hi],
               "lower": [1.5, None], "upper": [2.5, None]}]
    out = plot_curves(series, tmp_path / "f.png", x_label="epsilon", y_label="KL")
    h = (hi - lo) / 2
    assert out["series"][0]["lower"] == [1.5, pytest.approx(m * math.exp(-h / m))]
    assert out["series"][0]["upper"] == [2.5, pytest.approx(m * math.exp(h / m))]
    (fig,) = captured
    segs = fig.axes[0].containers[0].lines[2][0].get_segments()
    assert [(float(s[:, 1].min()), float(s[:, 1].max())) for s in segs] == [
        (1.5, 2.5), (pytest.approx(m * math.exp(-h / m)), pytest.approx(m * math.exp(h / m)))]


def _lognormal_series(labels_scales):
    rng = np.random.default_rng(3)
    out = []
    for lab, scale in labels_scales:
        xs = [0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0]
        med = [scale * float(np.exp(rng.normal())) / x for x in xs]
        out.append({"label": lab, "x": xs, "mean": med, "ci_low": [m / 3 for m in med],
                    "ci_high": [m * 3 for m in med], "lower": [m / 3 for m in med], "upper": [m * 3 for m in med]})
    return out


def test_x_ticks_at_every_grid_value_on_a_log_axis(tmp_path, captured):
    plot_curves(_lognormal_series([("gaussian", 1.0)]), tmp_path / "f.png", x_label="epsilon", y_label="KL",
                logx=True)
    (fig,) = captured
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == pytest.approx([0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.2", "0.5", "1", "2", "4", "8"]
    assert len(ax.xaxis.get_minorticklocs()) == 0


def test_axis_broken_only_across_a_wide_gap(tmp_path, captured):
    # curves within 3 decades of each other: one panel
    out = plot_curves(_lognormal_series([("gaussian", 1.0), ("laplace", 100.0)]), tmp_path / "a.png",
                      x_label="epsilon", y_label="KL", logx=True)
    assert out["upper_panel"] == [] and len(captured[-1].axes) == 1 and "broken" not in out["caption"]
    # one curve 1e10 above the others: its own panel above, said in the caption and the legend
    out = plot_curves(_lognormal_series([("gaussian", 1.0), ("laplace", 100.0), ("r1smg", 1e12)]),
                      tmp_path / "b.png", x_label="epsilon", y_label="KL", logx=True)
    fig = captured[-1]
    main, upper = fig.axes
    assert out["upper_panel"] == ["r1smg"] and "y axis broken" in out["caption"]
    assert len(upper.containers) == 1 and len(main.containers) == 2
    assert main.get_ylim()[1] < 1e9 < upper.get_ylim()[0]
    legend = [t.get_text() for t in main.get_legend().get_texts()]
    assert legend[2].startswith("r1smg") and "upper panel" in legend[2] and "upper panel" not in legend[0]
    # break_decades=None: never broken
    out = plot_curves(_lognormal_series([("gaussian", 1.0), ("r1smg", 1e12)]), tmp_path / "c.png",
                      x_label="epsilon", y_label="KL", logx=True, break_decades=None)
    assert out["upper_panel"] == [] and len(captured[-1].axes) == 1


def test_median_statistic_named_on_the_figure(tmp_path, captured):
    rows = [{"label": "gaussian", "epsilon": e, "mean": 50.0 / e, "median": 4.0 / e, "q25": 2.0 / e, "q75": 9.0 / e}
            for e in (0.5, 1.0, 2.0)]
    series = series_from_rows(rows, "epsilon", statistic="median")
    out = plot_curves(series, tmp_path / "f.png", x_label="epsilon", y_label="KL in nats", statistic="median")
    assert out["series"][0]["mean"] == [8.0, 4.0, 2.0]                  # the medians, not the means
    assert out["series"][0]["lower"] == [4.0, 2.0, 1.0] and out["series"][0]["upper"] == [18.0, 9.0, 4.5]
    (fig,) = captured
    assert fig.axes[0].get_ylabel() == "median KL in nats" and "interquartile range" in out["caption"]
    with pytest.raises(ValueError, match="statistic"):
        plot_curves(series, tmp_path / "g.png", x_label="e", y_label="KL", statistic="mode")
    with pytest.raises(ValueError, match="statistic"):
        series_from_rows(rows, "epsilon", statistic="mode")
