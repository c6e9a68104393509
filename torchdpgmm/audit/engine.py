"""The audit itself: draw releases on two neighbouring datasets, choose a test on one half, bound on the other.

A mechanism is a callable ``mechanism(dataset, num_draws, generator) -> output`` whose output's leading
dimension indexes ``num_draws`` independent releases (a batched Monte Carlo call; the device is whatever
the mechanism uses). :func:`from_batched_release` adapts a release that maps over leading dims of X.

Honesty of the threshold. The statistic (when it has parameters, e.g. a learnt discriminant direction),
the threshold and its direction are chosen on a *selection* half of the draws only; the bound of
:mod:`torchdpgmm.audit.bound` is computed once, on the other half (``selection_fraction``). No
multiple-comparison correction is needed because nothing is chosen on the evaluation half
(Jagielski, Ullman & Oprea 2020).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from torchdpgmm.audit.bound import epsilon_lower_bound
from torchdpgmm.audit.statistics import Statistic, _as_statistic

__all__ = ["AuditResult", "from_batched_release", "audit", "audit_many"]


@dataclass
class AuditResult:
    """Outcome of :func:`audit`. ``epsilon_lower`` holds with probability >= ``confidence``."""

    epsilon_lower: float
    delta: float
    confidence: float
    threshold: float
    direction: str  # "greater": S = {score > t} is the rejection region (evidence for D1); "less": {score < t}
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    num_selection: int
    num_evaluation: int
    selection_epsilon: float
    histogram: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def from_batched_release(release: Callable[..., Any]) -> Callable[[Any, int, torch.Generator | None], Any]:
    """Adapt ``release(X, y, generator=g)`` (mapping over leading dims) to ``mechanism(D, n, g)``.

    ``D = (X (N,d), y (N,))``; X and y are expanded (no copy) to a leading draw dimension of size n.
    """

    def mechanism(dataset, n, generator):
        X, y = dataset[0], dataset[1]
        return release(X.expand((n,) + tuple(X.shape)), y.expand((n,) + tuple(y.shape)), generator=generator)

    return mechanism


def _output_bytes(output: Any) -> int:
    """Bytes held by the tensors of one batched output (tensor, dict, or object with tensor attributes)."""
    if torch.is_tensor(output):
        return output.numel() * output.element_size()
    if isinstance(output, dict):
        return sum(_output_bytes(v) for v in output.values())
    if isinstance(output, (tuple, list)):
        return sum(_output_bytes(v) for v in output)
    inner = getattr(output, "model", None)
    if inner is not None:
        return _output_bytes(inner)
    return sum(_output_bytes(v) for v in getattr(output, "__dict__", {}).values())


def _draw_features(mechanism, dataset, n, stats, generator, batch_size, memory_bytes=256 * 2**20):
    """``n`` draws in chunks (one batched mechanism call per chunk, no Python loop per draw).

    Without ``batch_size`` the first chunk has 256 draws; its output size sets the later chunks so that
    one chunk's output (times 8, for the mechanism's intermediates) stays under ``memory_bytes``.
    """
    chunks: list[list[torch.Tensor]] = [[] for _ in stats]
    done, bs = 0, batch_size or min(n, 256)
    while done < n:
        m = min(bs, n - done)
        out = mechanism(dataset, m, generator)
        if batch_size is None and done == 0:
            per_draw = max(1, _output_bytes(out) // m)
            bs = max(1, int(memory_bytes // (8 * per_draw)))
        for i, st in enumerate(stats):
            chunks[i].append(st.features(out).detach().to("cpu", torch.float64))
        del out
        done += m
    return [torch.cat(c) for c in chunks]


def _check_audit_args(num_draws, delta, confidence, selection_fraction):
    if not (isinstance(num_draws, int) and num_draws >= 4):
        raise ValueError(f"num_draws must be an int >= 4, got {num_draws!r}")
    if not (0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if not (0 < confidence < 1):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if not (0 < selection_fraction < 1):
        raise ValueError(f"selection_fraction must lie in (0, 1), got {selection_fraction!r}")


def _threshold_candidates(pooled, max_candidates: int = 20000):
    """Midpoints between distinct pooled selection scores, thinned to ``max_candidates`` ranks that are
    dense in both tails (log-spaced from each end), where the tight bounds of a strong statistic live."""
    import numpy as np

    u = np.unique(pooled)
    if u.size > max_candidates:
        r = np.geomspace(1, u.size / 2, max_candidates // 4)
        ranks = np.concatenate([r, u.size - 1 - r, np.linspace(0, u.size - 1, max_candidates // 2)])
        u = u[np.unique(np.clip(np.round(ranks).astype(int), 0, u.size - 1))]
    return np.concatenate([[u[0] - 1.0], 0.5 * (u[1:] + u[:-1]), [u[-1] + 1.0]])


SELECTION_RULE = "simultaneous"


def _select_threshold(s0_sel, s1_sel, delta, confidence):
    """Threshold and direction that maximise the bound on the selection draws.

    The criterion is the Clopper-Pearson bound at confidence ``1 - (1 - confidence)/(2m)`` over the ``m``
    candidate thresholds (simultaneous over the candidates and both directions). Maximising the plain bound over thousands of
    candidates picks lucky extreme tails whose few counts do not repeat on the evaluation draws (a
    winner's curse); the simultaneous bound penalises small counts enough to avoid that, and still
    allows thresholds with no false positive at all (support-escape attacks). Returns
    ``(direction, threshold, selection_bound)``.
    """
    import numpy as np

    ns = s0_sel.shape[0]
    cand = _threshold_candidates(np.concatenate([s0_sel, s1_sel]))
    srt0, srt1 = np.sort(s0_sel), np.sort(s1_sel)
    conf = 1 - (1 - confidence) / (2 * cand.size) if SELECTION_RULE == "simultaneous" else confidence
    # direction "greater": S = {score > t}; "less": S = {score < t}
    fp_g, fn_g = ns - np.searchsorted(srt0, cand, side="right"), np.searchsorted(srt1, cand, side="right")
    fp_l, fn_l = np.searchsorted(srt0, cand, side="left"), ns - np.searchsorted(srt1, cand, side="left")
    eps_g = epsilon_lower_bound(fp_g, fn_g, ns, ns, delta, conf)[0]
    eps_l = epsilon_lower_bound(fp_l, fn_l, ns, ns, delta, conf)[0]
    ig, il = int(np.argmax(eps_g)), int(np.argmax(eps_l))
    if eps_g[ig] >= eps_l[il]:
        return "greater", float(cand[ig]), float(eps_g[ig])
    return "less", float(cand[il]), float(eps_l[il])


def _audit_features(f0, f1, stat: Statistic, delta, confidence, selection_fraction, bins) -> AuditResult:
    import numpy as np

    num_draws = f0.shape[0]
    ns = max(2, min(num_draws - 2, int(round(selection_fraction * num_draws))))
    scorer = stat.fit(f0[:ns], f1[:ns])
    s0 = torch.nan_to_num(scorer(f0), nan=0.0).numpy()
    s1 = torch.nan_to_num(scorer(f1), nan=0.0).numpy()
    s0_sel, s1_sel, s0_ev, s1_ev = s0[:ns], s1[:ns], s0[ns:], s1[ns:]
    ne = num_draws - ns
    direction, t, sel_eps = _select_threshold(s0_sel, s1_sel, delta, confidence)
    if direction == "greater":
        fp, fn = int((s0_ev > t).sum()), int((s1_ev <= t).sum())
    else:
        fp, fn = int((s0_ev < t).sum()), int((s1_ev >= t).sum())
    eps, fpr_u, fnr_u = epsilon_lower_bound(fp, fn, ne, ne, delta, confidence)
    lo, hi = float(min(s0.min(), s1.min())), float(max(s0.max(), s1.max()))
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    h0, _ = np.histogram(s0, edges)
    h1, _ = np.histogram(s1, edges)
    return AuditResult(
        epsilon_lower=float(eps), delta=float(delta), confidence=float(confidence), threshold=t,
        direction=direction, fpr=fp / ne, fnr=fn / ne, fpr_upper=float(fpr_u), fnr_upper=float(fnr_u),
        num_selection=ns, num_evaluation=ne, selection_epsilon=sel_eps,
        histogram={"edges": edges.tolist(), "counts0": h0.tolist(), "counts1": h1.tolist()},
    )


def audit(
    mechanism: Callable[[Any, int, torch.Generator | None], Any],
    dataset0: Any,
    dataset1: Any,
    statistic: Callable[[Any], torch.Tensor] | Statistic | None = None,
    *,
    num_draws: int,
    delta: float,
    generator: torch.Generator | None = None,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
    batch_size: int | None = None,
    memory_bytes: int = 256 * 2**20,
    bins: int = 40,
) -> AuditResult:
    """Lower-bound the epsilon of ``mechanism`` at ``delta`` from ``num_draws`` releases on each dataset.

    Draws ``num_draws`` releases on ``dataset0`` and on ``dataset1`` (in chunks of ``batch_size``),
    splits each into a selection part (fraction ``selection_fraction``) and an evaluation part, fits the
    statistic and picks the threshold and direction maximising the Clopper-Pearson bound on the selection
    part's own counts, made simultaneous over the ``m`` candidate thresholds of both directions (confidence
    ``1 - (1 - confidence)/(2m)``, :func:`_select_threshold`; docs/audit.md), then reports the bound on the
    evaluation part (module docstring; Jagielski, Ullman & Oprea 2020). Default statistic: a quadratic Fisher discriminant of the
    flattened released GMM (:func:`release_features`); pass a :class:`LikelihoodRatio` when the output
    density is known. Draws come in chunks of ``batch_size`` or, without it, in chunks sized so that one
    chunk's output stays under ``memory_bytes`` (divided by 8 for the mechanism's intermediates).
    """
    _check_audit_args(num_draws, delta, confidence, selection_fraction)
    stat = _as_statistic(statistic)
    (f0,) = _draw_features(mechanism, dataset0, num_draws, [stat], generator, batch_size, memory_bytes)
    (f1,) = _draw_features(mechanism, dataset1, num_draws, [stat], generator, batch_size, memory_bytes)
    return _audit_features(f0, f1, stat, delta, confidence, selection_fraction, bins)


def audit_many(
    mechanism: Callable[[Any, int, torch.Generator | None], Any],
    dataset0: Any,
    dataset1: Any,
    statistics: dict[str, Callable[[Any], torch.Tensor] | Statistic],
    *,
    num_draws: int,
    delta: float,
    generator: torch.Generator | None = None,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
    batch_size: int | None = None,
    memory_bytes: int = 256 * 2**20,
    bins: int = 40,
) -> tuple[str, AuditResult, dict[str, AuditResult]]:
    """Audit with several statistics on the same draws; Bonferroni-corrected, so the maximum is valid.

    Each statistic's bound is computed at confidence ``1 - (1 - confidence)/m`` (m statistics), hence the
    largest of them is a lower confidence bound at level ``confidence``. Returns
    ``(best_name, best_result, all_results)``.
    """
    _check_audit_args(num_draws, delta, confidence, selection_fraction)
    if not statistics:
        raise ValueError("statistics must not be empty")
    names = list(statistics)
    stats = [_as_statistic(statistics[k]) for k in names]
    conf = 1 - (1 - confidence) / len(stats)
    f0 = _draw_features(mechanism, dataset0, num_draws, stats, generator, batch_size, memory_bytes)
    f1 = _draw_features(mechanism, dataset1, num_draws, stats, generator, batch_size, memory_bytes)
    results = {k: _audit_features(a, b, st, delta, conf, selection_fraction, bins)
               for k, a, b, st in zip(names, f0, f1, stats)}
    best = max(names, key=lambda k: results[k].epsilon_lower)
    return best, results[best], results
