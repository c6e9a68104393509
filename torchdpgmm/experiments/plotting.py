"""One plotting helper for the studies and the sweeps: metric-vs-parameter curves that stand alone.

:func:`plot_curves` draws one curve per variant (mean and 95% interval at every grid point), writes the
settings (N, K, d, delta, trials, mode, adjacency, ... whatever the caller passes) as a caption line, and
explains every variant in the legend (:data:`VARIANT_NOTES` for the mechanisms of
:mod:`torchdpgmm.release`). Files are written with mode 0644. matplotlib is imported lazily and only its
object-oriented Agg canvas is used, so importing this module or plotting never changes the pyplot backend.

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
           "series_from_rows"]

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
                     drawn: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Group summary rows (``mean``, ``ci_low``, ``ci_high``) by ``row[label]`` into series sorted by ``x``,
    in order of first appearance. ``drawn=(lo_key, hi_key)`` names row keys holding the interval to draw as
    it is (``lower``/``upper`` of the series, e.g. the stored ``ci_low_log``/``ci_high_log``), so the
    figure shows exactly the numbers of the JSON."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r[label]), []).append(r)
    out = []
    for lab, rs in groups.items():
        rs = sorted(rs, key=lambda r: r[x])
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
        a = m if a is None else a
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
) -> dict[str, Any]:
    """Draw ``series`` (dicts with ``label``, ``x``, ``mean``, ``ci_low``, ``ci_high``) as mean curves with
    95% intervals and write a PNG (mode 0644) to ``path``.

    The caption under the title states ``settings`` and the interval method (see the module docstring);
    each legend entry is ``label: note`` with the note from ``variant_notes`` (default
    :data:`VARIANT_NOTES`, looked up by the label, then by its part before the first space). Returns
    ``{"caption": str, "series": [{"label", "x", "mean", "lower", "upper"}], "dropped": int}``: exactly
    what was drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    notes = dict(VARIANT_NOTES if variant_notes is None else variant_notes)
    fig = Figure(figsize=(8.0, 5.6 + 0.22 * len(series)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    drawn, dropped = [], 0
    for s in series:
        xs, ms, lo, hi, nd = _intervals(s, logy)
        dropped += nd
        lab = str(s["label"])
        note = notes.get(lab, notes.get(lab.split(" ")[0]))
        ax.errorbar(xs, ms, yerr=[[m - a for m, a in zip(ms, lo)], [b - m for m, b in zip(ms, hi)]],
                    marker="o", ms=3, capsize=2, label=f"{lab}: {note}" if note else lab)
        drawn.append({"label": lab, "x": xs, "mean": ms, "lower": lo, "upper": hi})
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    method = ("mean and 95% CI (delta method on log mean: mean x exp(+-t se/mean))" if logy
              else "mean and 95% CI (Student t)")
    caption = "; ".join(p for p in (settings_caption(settings or {}), method) if p)
    if dropped:
        caption += f"; {dropped} point(s) with non-positive or non-finite mean not drawn"
    wrapped = textwrap.fill(caption, 110)
    ax.set_title(f"{title}\n{wrapped}" if title else wrapped, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    os.chmod(path, 0o644)
    return {"caption": caption, "series": drawn, "dropped": dropped}
