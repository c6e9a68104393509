"""One plotting helper for the studies and the sweeps: metric-vs-parameter curves that stand alone.

:func:`plot_curves` draws one curve per variant at every grid point, writes the settings (N, K, d, delta,
trials, mode, adjacency, ... whatever the caller passes) as a caption line, and explains every variant in the
legend (:data:`VARIANT_NOTES` for the mechanisms of :mod:`torchdpgmm.release`). Files are written with mode
0644. matplotlib is imported lazily and only its object-oriented Agg canvas is used, so importing this module or
plotting never changes the pyplot backend.

What a curve is, said on the figure. ``statistic="mean"`` draws the mean with its 95% interval (below);
``statistic="median"`` draws the median over trials with its interquartile band (25th to 75th percentile), the
honest summary of a heavy-tailed metric such as the realised KL, where a few trials carry most of a mean. The
y label and the caption name the statistic either way.

Readable axes. The x axis is ticked at every grid value (up to :data:`MAX_GRID_TICKS` of them), not at the
decades of a log scale. On a log y axis, when the curves fall into two groups with more than ``break_decades``
decades between them (an R1SMG baseline at 1e12 above others at 1e0 to 1e5), the axis is broken: the upper
group gets its own short panel above, the break is marked on both panels, and the caption and the legend
say which curves are up there, so neither group is squeezed into a sliver of the height.

Intervals on a log y-axis. A Student-t interval ``mean +- h`` of a heavy-tailed positive metric (the
realised KL) often has ``mean - h <= 0``, which a log axis cannot show. On a log axis we therefore draw the
delta-method interval of ``log(mean)``: ``Var(log m) ~= se^2 / m^2`` gives
``[m exp(-h/m), m exp(+h/m)]`` with the same half-width ``h = t_{0.975, n-1} se`` (recovered from the
caller's ``ci_low``/``ci_high`` as ``(ci_high - ci_low) / 2``). It is symmetric in log space, always
positive, and has the same asymptotic 95% coverage as the t interval. A point whose mean is not positive
and finite cannot be drawn on a log axis; it is left out and the caption says how many were. On a linear
axis the caller's interval is drawn as it is.
"""
from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["VARIANT_NOTES", "plot_curves", "log_interval", "log_interval_columns", "settings_caption",
           "series_from_rows", "MAX_GRID_TICKS", "STATISTIC_TEXT"]

#: the x axis is ticked at every grid value when there are at most this many
MAX_GRID_TICKS = 12
#: what a curve and its band are, for the y label and the caption
STATISTIC_TEXT = {
    "mean": "mean",
    "median": "median",
}

_ALG1 = "Algorithm 1 of Liu, Scaglione & Peisert (2025)"
VARIANT_NOTES: dict[str, str] = {
    "kl/as-published": f"{_ALG1} as printed (split from eps/3, iterations (22)-(25))",
    "kl/global": "same noise as Algorithm 1, budget split optimised jointly for objective (12)",
    "kl/exact-kl": "same noise as Algorithm 1, split optimised for the exact expected KL (no Wishart surrogate in (12))",
    "kl": f"KL-optimal release, {_ALG1} (in sound mode: clipped records, record-level accounting)",
    "colored": "baseline: Gaussian noise on the means colored by a covering SDP (Ravi et al.)",
    "gaussian": "baseline: i.i.d. Gaussian noise on weights, means and covariances",
    "laplace": "baseline: i.i.d. Laplace noise on weights, means and covariances (pure eps-DP)",
    "r1smg": "baseline: rank-1 singular multivariate Gaussian noise on the means (Ji & Li 2024)",
}

_SETTING_NAMES = {"n": "N", "k": "K", "lam": "lambda", "num_classes": "classes"}


def log_interval(mean: float, ci_low: float | None, ci_high: float | None) -> tuple[float, float]:
    """Delta-method 95% interval of ``log(mean)`` mapped back: ``(m exp(-h/m), m exp(h/m))``, ``h`` the
    half-width of the caller's (symmetric) interval; ``(m, m)`` when no interval is known. Needs ``m > 0``."""
    if not (mean > 0 and math.isfinite(mean)):
        raise ValueError(f"a log-axis interval needs a positive finite mean, got {mean}")
    if ci_low is None or ci_high is None or not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return mean, mean
    h = max(ci_high - ci_low, 0.0) / 2.0
    r = math.exp(min(h / mean, 700.0))
    return mean / r, mean * r


def settings_caption(settings: Mapping[str, Any]) -> str:
    """``"N=1000, K=5, d=3, delta=1e-05, trials=100, mode=as-published, adjacency=label-flip"``."""
    parts = []
    for k, v in settings.items():
        if v is None:
            continue
        name = _SETTING_NAMES.get(k, k)
        parts.append(f"{name}={v:g}" if isinstance(v, float) else f"{name}={v}")
    return ", ".join(parts)


def series_from_rows(rows: Iterable[Mapping[str, Any]], x: str, label: str = "label",
                     drawn: tuple[str, str] | None = None, statistic: str = "mean") -> list[dict[str, Any]]:
    """Group summary rows (``mean``, ``ci_low``, ``ci_high``) by ``row[label]`` into series sorted by ``x``,
    in order of first appearance. ``drawn=(lo_key, hi_key)`` names row keys holding the interval to draw as
    it is (``lower``/``upper`` of the series, e.g. the stored ``ci_low_log``/``ci_high_log``), so the
    figure shows exactly the numbers of the JSON. ``statistic="median"`` reads ``median``, ``q25`` and ``q75``
    instead (the curve and its interquartile band, for :func:`plot_curves`'s ``statistic="median"``)."""
    if statistic not in STATISTIC_TEXT:
        raise ValueError(f"statistic must be one of {list(STATISTIC_TEXT)}, got {statistic!r}")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r[label]), []).append(r)
    out = []
    for lab, rs in groups.items():
        rs = sorted(rs, key=lambda r: r[x])
        if statistic == "median":
            out.append({"label": lab, "x": [r[x] for r in rs], "mean": [r["median"] for r in rs],
                        "ci_low": [r.get("q25") for r in rs], "ci_high": [r.get("q75") for r in rs],
                        "lower": [r.get("q25") for r in rs], "upper": [r.get("q75") for r in rs]})
            continue
        out.append({"label": lab, "x": [r[x] for r in rs], "mean": [r["mean"] for r in rs],
                    "ci_low": [r.get("ci_low") for r in rs], "ci_high": [r.get("ci_high") for r in rs]})
        if drawn is not None:
            out[-1].update(lower=[r.get(drawn[0]) for r in rs], upper=[r.get(drawn[1]) for r in rs])
    return out


def log_interval_columns(mean: float, ci_low: float | None, ci_high: float | None) -> dict[str, float | None]:
    """``{"ci_low_log", "ci_high_log"}``: the interval a log-axis figure draws (:func:`log_interval`), or
    ``None`` twice when the mean cannot be drawn on a log axis. Studies store it in their rows."""
    if mean is None or not (math.isfinite(mean) and mean > 0):
        return {"ci_low_log": None, "ci_high_log": None}
    lo, hi = log_interval(mean, ci_low, ci_high)
    return {"ci_low_log": lo, "ci_high_log": hi}


def _break(drawn: list[dict[str, Any]], decades: float | None) -> tuple[set[str], tuple[float, float]] | None:
    """The labels above the widest gap of more than ``decades`` decades between the curves' log ranges (their
    bands included), with the gap ``(top of the lower group, bottom of the upper group)``; None without one."""
    if not decades:
        return None
    spans = []
    for s in drawn:
        vals = [v for v in (*s["lower"], *s["upper"], *s["mean"]) if v is not None and v > 0 and math.isfinite(v)]
        if vals:
            spans.append((math.log10(min(vals)), math.log10(max(vals)), s["label"]))
    spans.sort()
    best, top = None, -math.inf
    for i, (lo, hi, _) in enumerate(spans):
        if i and lo - top > decades and (best is None or lo - top > best[0]):
            best = (lo - top, i, top, lo)
        top = max(top, hi)
    if best is None:
        return None
    _, i, a, b = best
    return {lab for _, _, lab in spans[i:]}, (10 ** a, 10 ** b)


def _mark_break(ax_hi, ax) -> None:
    """The broken-axis look: no spines between the two panels, diagonal marks at the break on both."""
    ax_hi.spines["bottom"].set_visible(False)
    ax.spines["top"].set_visible(False)
    ax_hi.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    mark = dict(marker=[(-1, -0.5), (1, 0.5)], markersize=10, linestyle="none", color="k", mec="k", mew=1,
                clip_on=False)
    ax_hi.plot([0, 1], [0, 0], transform=ax_hi.transAxes, **mark)
    ax.plot([0, 1], [1, 1], transform=ax.transAxes, **mark)


def _grid_ticks(axes, xs_all: list, logx: bool) -> None:
    """Tick the x axis at every grid value (few of them), labelled as the numbers they are."""
    grid = sorted({float(x) for x in xs_all if x is not None and math.isfinite(float(x))})
    if not grid or len(grid) > MAX_GRID_TICKS or (logx and grid[0] <= 0):
        return
    from matplotlib.ticker import NullLocator

    for ax in axes:
        ax.set_xticks(grid, [f"{x:g}" for x in grid])
        ax.xaxis.set_minor_locator(NullLocator())


def _intervals(s: Mapping[str, Any], logy: bool) -> tuple[list, list, list, list, int]:
    xs, ms, lo, hi, dropped = [], [], [], [], 0
    given = "lower" in s and "upper" in s      # an interval computed (and stored) by the caller: drawn as is
    a_s, b_s = (s["lower"], s["upper"]) if given else (s["ci_low"], s["ci_high"])
    for x, m, a, b, a0, b0 in zip(s["x"], s["mean"], a_s, b_s, s["ci_low"], s["ci_high"]):
        if m is None or not math.isfinite(m) or (logy and not m > 0):
            dropped += 1
            continue
        if given and (a is None or b is None):
            # rows written before the drawn interval was stored: recompute it rather than draw no interval
            a, b = log_interval(m, a0, b0) if logy else (a0, b0)
        elif logy and not given:
            a, b = log_interval(m, a, b)
        a = m if a is None or (logy and not a > 0) else a
        b = m if b is None else b
        xs.append(x), ms.append(m), lo.append(a), hi.append(b)
    return xs, ms, lo, hi, dropped


def plot_curves(
    series: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    x_label: str,
    y_label: str,
    title: str | None = None,
    settings: Mapping[str, Any] | None = None,
    variant_notes: Mapping[str, str] | None = None,
    logx: bool = False,
    logy: bool = True,
    statistic: str = "mean",
    break_decades: float | None = 3.0,
) -> dict[str, Any]:
    """Draw ``series`` (dicts with ``label``, ``x``, ``mean``, ``ci_low``, ``ci_high``) as curves with their
    intervals and write a PNG (mode 0644) to ``path``.

    ``statistic="mean"``: the mean with its 95% interval as error bars (module docstring). ``statistic="median"``:
    the series come from :func:`series_from_rows` with ``statistic="median"`` (``mean`` holds the median,
    ``lower``/``upper`` the quartiles) and are drawn as a line with a shaded interquartile band. The y label
    gets the statistic's name in front unless it already names it. The caption under the title states
    ``settings`` and what is drawn; each legend entry is ``label: note`` with the note from ``variant_notes``
    (default :data:`VARIANT_NOTES`, looked up by the label, then by its part before the first space). On a log y
    axis with a gap of more than ``break_decades`` decades between groups of curves (None: never) the axis is
    broken into two panels (module docstring). Returns ``{"caption": str, "series": [{"label", "x", "mean",
    "lower", "upper"}], "dropped": int, "statistic": str, "upper_panel": [labels]}``: exactly what was drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if statistic not in STATISTIC_TEXT:
        raise ValueError(f"statistic must be one of {list(STATISTIC_TEXT)}, got {statistic!r}")
    notes = dict(VARIANT_NOTES if variant_notes is None else variant_notes)
    drawn, dropped = [], 0
    for s in series:
        xs, ms, lo, hi, nd = _intervals(s, logy)
        dropped += nd
        drawn.append({"label": str(s["label"]), "x": xs, "mean": ms, "lower": lo, "upper": hi})
    split = _break(drawn, break_decades) if logy else None
    upper_labels = split[0] if split else set()

    fig = Figure(figsize=(8.0, 5.6 + 0.22 * len(series)))
    FigureCanvasAgg(fig)
    if split:  # the main panel first (fig.axes[0]), the short panel of the off-scale curves above it
        gs = fig.add_gridspec(2, 1, height_ratios=(1, 3))
        ax = fig.add_subplot(gs[1])
        ax_hi = fig.add_subplot(gs[0], sharex=ax)
        axes = [ax_hi, ax]
    else:
        ax = ax_hi = fig.add_subplot(1, 1, 1)
        axes = [ax]
    handles, labels = [], []
    for i, d in enumerate(drawn):
        lab = d["label"]
        target = ax_hi if lab in upper_labels else ax
        note = notes.get(lab, notes.get(lab.split(" ")[0]))
        text = f"{lab}: {note}" if note else lab
        if lab in upper_labels:
            text += " (upper panel, above the axis break)"
        xs, ms, lo, hi = d["x"], d["mean"], d["lower"], d["upper"]
        colour = f"C{i % 10}"
        if statistic == "median":
            (h,) = target.plot(xs, ms, marker="o", ms=3, color=colour, gid=lab)
            target.fill_between(xs, lo, hi, color=colour, alpha=0.18, lw=0).set_gid(lab)
        else:
            h = target.errorbar(xs, ms, yerr=[[m - a for m, a in zip(ms, lo)], [b - m for m, b in zip(ms, hi)]],
                                marker="o", ms=3, capsize=2, color=colour)
        handles.append(h)
        labels.append(text)
    for a in axes:
        if logy:
            a.set_yscale("log")
        if logx:
            a.set_xscale("log")
        a.grid(True, which="both", alpha=0.3)
    _grid_ticks(axes, [x for d in drawn for x in d["x"]], logx)
    ax.set_xlabel(x_label)
    name = STATISTIC_TEXT[statistic]
    ax.set_ylabel(y_label if y_label.lower().startswith(name) else f"{name} {y_label}")
    if statistic == "median":
        method = "median over trials, band: interquartile range (25th to 75th percentile)"
    else:
        method = ("mean and 95% CI (delta method on log mean: mean x exp(+-t se/mean))" if logy
                  else "mean and 95% CI (Student t)")
    caption = "; ".join(p for p in (settings_caption(settings or {}), method) if p)
    if dropped:
        caption += f"; {dropped} point(s) with non-positive or non-finite {name} not drawn"
    if split:
        lo_gap, hi_gap = split[1]
        caption += (f"; y axis broken between {lo_gap:.2g} and {hi_gap:.2g}: "
                    f"{', '.join(d['label'] for d in drawn if d['label'] in upper_labels)} in the upper panel")
        _mark_break(ax_hi, ax)
    wrapped = textwrap.fill(caption, 110)
    ax_hi.set_title(f"{title}\n{wrapped}" if title else wrapped, fontsize=8)
    ax.legend(handles, labels, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1,
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    os.chmod(path, 0o644)
    return {"caption": caption, "series": drawn, "dropped": dropped, "statistic": statistic,
            "upper_panel": [d["label"] for d in drawn if d["label"] in upper_labels]}
