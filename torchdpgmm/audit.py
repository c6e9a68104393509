"""Empirical privacy auditing: Monte Carlo on two neighbouring datasets, Clopper-Pearson lower bound on epsilon.

If a mechanism M is (epsilon, delta)-DP then for every event S and neighbours D0, D1

    P[M(D1) in S] <= e^eps P[M(D0) in S] + delta   and   P[M(D0) in S^c] <= e^eps P[M(D1) in S^c] + delta.

With S = {statistic > t} (or <), FPR = P[M(D0) in S] and FNR = P[M(D1) not in S], so
``eps >= ln((1 - delta - FNR) / FPR)`` and ``eps >= ln((1 - delta - FPR) / FNR)`` (Kairouz et al. 2015;
Jagielski et al. 2020). Replacing FPR and FNR by one-sided Clopper-Pearson upper bounds, each at level
``1 - alpha/2`` (Bonferroni), gives a lower confidence bound on the mechanism's true epsilon at level
``1 - alpha``.

Honesty of the threshold. The statistic (when it has parameters, e.g. a learnt discriminant direction),
the threshold and its direction are chosen on a *selection* half of the draws only; the bound is computed
once, on the other half (``selection_fraction``). No multiple-comparison correction is needed because
nothing is chosen on the evaluation half.

A mechanism is a callable ``mechanism(dataset, num_draws, generator) -> output`` whose output's leading
dimension indexes ``num_draws`` independent releases (a batched Monte Carlo call; the device is whatever
the mechanism uses). :func:`from_batched_release` adapts a release that maps over leading dims of X.
A statistic is a callable ``output -> (n,)`` tensor, or a :class:`Statistic` with features and a ``fit``.

The most powerful statistic. By the Neyman-Pearson lemma the log-likelihood ratio
``ln p1(o)/p0(o)`` of the output under the two datasets gives, at every false-positive rate, the
smallest false-negative rate of any test, so its threshold tests trace the pair's exact tradeoff
curve (Dong, Roth & Su 2019). When the output density is known (the Gaussian, Laplace and discrete
blocks of the sound mode) :class:`LikelihoodRatio` and :func:`sound_log_ratio` compute it exactly
(the auditing strategy of Nasr et al. 2021); otherwise the auditor keeps the threshold test on a
projection (a learnt discriminant, or an attack statistic such as a support escape).

Power. :func:`audit_ceiling` computes what the same test (same evaluation draws, same confidence)
certifies against a mechanism that sits *exactly* at a tradeoff curve: the mu-GDP curve
``G_mu(a) = Phi(Phi^{-1}(1 - a) - mu)`` (Dong, Roth & Su 2019) or the (eps, delta)-DP curve
(Kairouz, Oh & Viswanath 2015). An audit that certifies close to that ceiling cannot be improved by a
better statistic, only by more draws; :func:`power_report` puts the numbers side by side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

__all__ = [
    "AuditResult",
    "audit",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "Statistic",
    "LinearDiscriminant",
    "from_batched_release",
    "release_features",
    "NeighbourPair",
    "outlier_label_flip",
    "hull_moving_point",
    "tiny_class",
    "extreme_clipping",
    "support_escape_statistic",
    "psd_escape_statistic",
    "mean_distance_statistic",
    "audit_many",
    "r1smg_ball_delta",
    "LikelihoodRatio",
    "gaussian_log_ratio",
    "laplace_log_ratio",
    "symmetric_gaussian_log_ratio",
    "symmetric_laplace_log_ratio",
    "sound_blocks",
    "noiseless_sound_blocks",
    "sound_log_ratio",
    "sound_pair_mu",
    "gdp_tradeoff",
    "dp_tradeoff",
    "gdp_epsilon_exact",
    "gdp_mu_exact",
    "audit_ceiling",
    "power_report",
    "worst_case_add_remove",
    "worst_case_replace_one",
    "outlier_add_remove",
]


# ----------------------------------------------------------------------------------------------------
# Clopper-Pearson and the epsilon bound
# ----------------------------------------------------------------------------------------------------

def clopper_pearson_upper(k, n, alpha: float):
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial proportion (k successes of n)."""
    import numpy as np
    from scipy.special import betaincinv  # quantile of Beta(k+1, n-k); lighter than scipy.stats

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    out = betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - alpha)
    return np.where(k >= n, 1.0, out)


def epsilon_lower_bound(fp, fn, n0, n1, delta: float, confidence: float = 0.95):
    """``max(ln((1-delta-FNR_u)/FPR_u), ln((1-delta-FPR_u)/FNR_u), 0)`` with CP upper bounds at 1-alpha/2.

    ``fp``: draws on D0 inside the rejection region (of ``n0``); ``fn``: draws on D1 outside it (of ``n1``).
    Returns ``(eps_lb, fpr_upper, fnr_upper)`` (numpy arrays broadcast over the inputs).
    """
    import numpy as np

    alpha = 1 - confidence
    fpr_u = clopper_pearson_upper(fp, n0, alpha / 2)
    fnr_u = clopper_pearson_upper(fn, n1, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1 - delta - fnr_u, 0.0)) - np.log(fpr_u)
        b = np.log(np.maximum(1 - delta - fpr_u, 0.0)) - np.log(fnr_u)
    eps = np.maximum(np.maximum(np.nan_to_num(a, nan=0.0, neginf=0.0), np.nan_to_num(b, nan=0.0, neginf=0.0)), 0.0)
    return eps, fpr_u, fnr_u


# ----------------------------------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------------------------------

class Statistic:
    """A distinguishing statistic with a feature map and an optional fit on the selection draws.

    ``features(output) -> (n, p)``; ``fit(f0, f1)`` (selection features on D0, D1) returns a scorer
    ``(n, p) -> (n,)``. The default scorer is the single feature itself (p must be 1).
    """

    def features(self, output: Any) -> torch.Tensor:
        raise NotImplementedError

    def fit(self, f0: torch.Tensor, f1: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda f: f[..., 0]


class _Plain(Statistic):
    def __init__(self, fn):
        self.fn = fn

    def features(self, output):
        s = self.fn(output)
        return s.reshape(s.shape[0], -1)

    def fit(self, f0, f1):
        if f0.shape[-1] != 1:
            raise ValueError("a plain statistic must return one value per draw, shape (n,)")
        return lambda f: f[..., 0]


class LinearDiscriminant(Statistic):
    """Fisher discriminant ``w^T f`` with ``w = (S + ridge I)^{-1} (m1 - m0)`` learnt on the selection half.

    ``quadratic=True`` appends ``(f - m)^2`` (m the pooled selection mean), which catches differences in
    noise *scale* (e.g. local-sensitivity calibration), not only in location. Features are standardised
    with the pooled selection statistics before the fit.
    """

    def __init__(self, feature_fn: Callable[[Any], torch.Tensor], quadratic: bool = False, ridge: float = 1e-6):
        self.feature_fn = feature_fn
        self.quadratic = quadratic
        self.ridge = ridge

    def features(self, output):
        f = self.feature_fn(output)
        return f.reshape(f.shape[0], -1).to(torch.float64)

    def fit(self, f0, f1):
        pooled = torch.cat([f0, f1])
        m = pooled.mean(0)
        s = pooled.std(0).clamp_min(1e-12)

        def expand(f):
            z = (f - m) / s
            return torch.cat([z, z * z], -1) if self.quadratic else z

        g0, g1 = expand(f0), expand(f1)
        gm = torch.cat([g0, g1])
        gs = gm.std(0).clamp_min(1e-12)
        gmean = gm.mean(0)
        g0, g1 = (g0 - gmean) / gs, (g1 - gmean) / gs
        S = 0.5 * (torch.cov(g0.T).reshape(g0.shape[1], -1) + torch.cov(g1.T).reshape(g1.shape[1], -1))
        S = S + self.ridge * torch.eye(S.shape[0], dtype=S.dtype)
        w = torch.linalg.solve(S, g1.mean(0) - g0.mean(0))
        return lambda f: ((expand(f) - gmean) / gs) @ w


def _as_statistic(statistic) -> Statistic:
    if statistic is None:
        return LinearDiscriminant(release_features, quadratic=True)
    if isinstance(statistic, Statistic):
        return statistic
    if callable(statistic):
        return _Plain(statistic)
    raise TypeError("statistic must be a callable or a Statistic")


def release_features(output: Any) -> torch.Tensor:
    """Flatten a released labeled GMM (weights, means, upper-triangular covariances) to ``(n, p)``.

    Accepts a ``Release`` (``.model``), a mixture with ``weights/means/covariances`` attributes, or a dict.
    """
    w, m, c = _get(output, "weights"), _get(output, "means"), _get(output, "covariances")
    n = w.shape[0]
    d = m.shape[-1]
    iu = torch.triu_indices(d, d, device=c.device)
    return torch.cat(
        [w.reshape(n, -1), m.reshape(n, -1), c[..., iu[0], iu[1]].reshape(n, -1)], -1
    ).to(torch.float64)


def _get(output, key):
    model = getattr(output, "model", output)
    return model[key] if isinstance(model, dict) else getattr(model, key)


def support_escape_statistic(counts_d0: torch.Tensor, counts_d1: torch.Tensor, num_records: int
                             ) -> Callable[[Any], torch.Tensor]:
    """``1[out not in supp(D1)] - 1[out not in supp(D0)]`` for released weights read as counts ``round(N pi~)``.

    ``supp(D) = {n(D)} ∪ S'(D)`` (Liu, Scaglione & Peisert 2025, eqs. 14-15). Under D the random mapping leaves ``supp(D)`` only
    through the smoothing ``lambda/|S|``, while a label-flip neighbour puts mass ``~(1-lambda)/(1+K(K-1)e^eps0)``
    on outputs such as ``n(D0) + (e_a - e_b)`` outside ``supp(D1)``. Positive scores are evidence for D0.
    """
    def support(c):
        c = c.to(torch.float64).reshape(-1)
        K = c.shape[0]
        eye = torch.eye(K, dtype=torch.float64)
        return torch.stack([c] + [c - eye[i] + eye[j] for i in range(K) for j in range(K) if i != j])

    s0, s1 = support(counts_d0), support(counts_d1)
    K = s0.shape[-1]

    def stat(output):
        w = _get(output, "weights")
        cnt = torch.round(w.to(torch.float64) * num_records).reshape(w.shape[0], K)
        in0 = (cnt.unsqueeze(1) == s0.to(cnt.device)).all(-1).any(-1)
        in1 = (cnt.unsqueeze(1) == s1.to(cnt.device)).all(-1).any(-1)
        return (~in1).to(torch.float64) - (~in0).to(torch.float64)

    return stat


def mean_distance_statistic(means_d0: torch.Tensor, means_d1: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    """``sum_k [ln |mu~_k - mu_k(D1)| - ln |mu~_k - mu_k(D0)|]``: positive when the released means sit
    closer to D0's. Catches noise whose density is singular at the true value (R1SMG: ``sqrt(s) z u`` puts
    mass ~r within distance r of it, a neighbour only ~r^d)."""
    m0, m1 = means_d0.to(torch.float64), means_d1.to(torch.float64)

    def stat(output):
        m = _get(output, "means").to(torch.float64)
        d1 = torch.linalg.vector_norm(m - m1.to(m.device), dim=-1).clamp_min(1e-300).log()
        d0 = torch.linalg.vector_norm(m - m0.to(m.device), dim=-1).clamp_min(1e-300).log()
        return (d1 - d0).sum(-1).reshape(m.shape[0])

    return stat


def psd_escape_statistic(cov_d0: torch.Tensor, cov_d1: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    """``min_k lambda_min(S~_k - Sigma_k(D1)) - min_k lambda_min(S~_k - Sigma_k(D0))`` for released covariances.

    A mechanism that only ever *adds* a PSD matrix (the Wishart mechanism, eq. 6) has
    ``S~_k - Sigma_k(D) >= 0`` under D, so a negative first term is impossible under D1 and a negative
    second term impossible under D0 (the support attack behind Sheffet 2019). Negative scores are evidence
    for D0, positive ones for D1. ``cov_d0, cov_d1``: the noiseless class covariances ``(K, d, d)``.
    """
    c0, c1 = cov_d0.to(torch.float64), cov_d1.to(torch.float64)

    def stat(output):
        S = _get(output, "covariances").to(torch.float64)
        e1 = torch.linalg.eigvalsh(S - c1.to(S.device)).amin(-1).amin(-1)
        e0 = torch.linalg.eigvalsh(S - c0.to(S.device)).amin(-1).amin(-1)
        return (e1 - e0).reshape(S.shape[0])

    return stat


# ----------------------------------------------------------------------------------------------------
# the audit
# ----------------------------------------------------------------------------------------------------

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

    The criterion is the Clopper-Pearson bound at confidence ``1 - (1 - confidence)/m`` over the ``m``
    candidate thresholds (simultaneous over the candidates). Maximising the plain bound over thousands of
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
    part (counts rescaled to the evaluation size), then reports the bound on the evaluation part (module
    docstring; Jagielski, Ullman & Oprea 2020). Default statistic: a quadratic Fisher discriminant of the
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


# ----------------------------------------------------------------------------------------------------
# neighbour constructions
# ----------------------------------------------------------------------------------------------------

@dataclass
class NeighbourPair:
    """Two neighbouring labeled datasets and what separates them."""

    name: str
    X0: torch.Tensor
    y0: torch.Tensor
    X1: torch.Tensor
    y1: torch.Tensor
    relation: str  # "label-flip" (also replace-one) | "replace-one" | "add-remove"
    description: str
    index: int = -1
    class_from: int = -1
    class_to: int = -1
    mask0: torch.Tensor | None = None
    mask1: torch.Tensor | None = None

    @property
    def dataset0(self):
        return (self.X0, self.y0) if self.mask0 is None else (self.X0, self.y0, self.mask0)

    @property
    def dataset1(self):
        return (self.X1, self.y1) if self.mask1 is None else (self.X1, self.y1, self.mask1)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "relation": self.relation, "description": self.description,
                "N": int(self.X0.shape[-2]), "index": self.index, "class_from": self.class_from,
                "class_to": self.class_to}


def _base(num_per_class, num_classes, dim, generator, spread=1.0, sep=4.0):
    dtype = torch.float64
    centres = torch.zeros(num_classes, dim, dtype=dtype)
    for k in range(num_classes):
        centres[k, k % dim] = sep * (1 + k // dim) * (1 if k % 2 == 0 else -1)
    X = torch.cat([centres[k] + spread * torch.randn(num_per_class, dim, dtype=dtype, generator=generator)
                   for k in range(num_classes)])
    y = torch.cat([torch.full((num_per_class,), k, dtype=torch.long) for k in range(num_classes)])
    return X, y, centres


def outlier_label_flip(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, distance: float = 30.0,
                       generator: torch.Generator | None = None) -> NeighbourPair:
    """A far outlier in class 0 (D0) that flips to class 1 (D1): label-flip / replace-one neighbours.

    Stresses the class-0 and class-1 means and covariances at once (a flip changes two classes) and,
    for local-sensitivity calibration, the noise scale itself.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    x_out = c[0] + distance * torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, x_out[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1 = y0.clone()
    y1[-1] = 1
    return NeighbourPair("outlier-flip", X0, y0, X0.clone(), y1, "label-flip",
                         f"outlier at distance {distance:g} from class 0 flips to class 1", X0.shape[0] - 1, 0, 1)


def hull_moving_point(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, offset: float = 5.0,
                      generator: torch.Generator | None = None) -> NeighbourPair:
    """Class 0 lies on a line except one point ``offset`` off it; in D1 that point flips to class 1.

    Removing the point collapses class 0's convex hull of label-flip differences to the line, so a
    mechanism calibrated to that hull (Gamma_k of Liu, Scaglione & Peisert 2025, eq. 10) adds almost no noise off the line in
    D1: a noise-scale attack. Class 0 keeps a tiny isotropic jitter so its covariance stays invertible.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    t = torch.linspace(-3, 3, num_per_class, dtype=X.dtype)
    line = torch.zeros(num_per_class, dim, dtype=X.dtype)
    line[:, 0] = t
    jitter = 1e-3 * torch.randn(num_per_class, dim, dtype=X.dtype, generator=generator)
    X[:num_per_class] = c[0] + line + jitter
    x_off = c[0].clone()
    x_off[1 % dim] += offset
    X0 = torch.cat([X, x_off[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1 = y0.clone()
    y1[-1] = 1
    return NeighbourPair("hull-point", X0, y0, X0.clone(), y1, "label-flip",
                         f"class 0 on a line; the only off-line point (offset {offset:g}) flips to class 1",
                         X0.shape[0] - 1, 0, 1)


def tiny_class(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, tiny: int = 3,
               generator: torch.Generator | None = None) -> NeighbourPair:
    """The last class has only ``tiny`` points; in D1 one of them flips to class 0 (label flip)."""
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    keep = torch.cat([torch.arange((num_classes - 1) * num_per_class),
                      (num_classes - 1) * num_per_class + torch.arange(tiny)])
    X0, y0 = X[keep], y[keep]
    y1 = y0.clone()
    y1[-1] = 0
    return NeighbourPair("tiny-class", X0, y0, X0.clone(), y1, "label-flip",
                         f"class {num_classes - 1} has {tiny} points; one flips to class 0", X0.shape[0] - 1,
                         num_classes - 1, 0)


def extreme_clipping(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 10.0,
                     factor: float = 100.0, generator: torch.Generator | None = None) -> NeighbourPair:
    """Replace-one, record level: a class-0 record at ``+factor*B*u`` is replaced by one at ``-factor*B*u``.

    After clipping they sit at ``+-B u``: the class-0 sum moves by exactly ``2B`` (the replace-one
    sensitivity) while the second moments do not move at all. Not a label-flip neighbour.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    X1 = torch.cat([X, (-factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    return NeighbourPair("extreme-clip", X0, y0, X1, y0.clone(), "replace-one",
                         f"class-0 record at +{factor:g}B u replaced by -{factor:g}B u (B={clip_bound:g})",
                         X0.shape[0] - 1, 0, 0)


# ----------------------------------------------------------------------------------------------------
# an exact check of one mechanism (no Monte Carlo)
# ----------------------------------------------------------------------------------------------------

def r1smg_ball_delta(epsilon: float, delta: float, dim: int, sensitivity: float = 1.0, num_radii: int = 300
                     ) -> dict[str, float]:
    """Exact privacy loss of R1SMG (noise ``sqrt(sigma) z u``) on the events ``{||Y - f(D0)|| < r}``.

    For neighbours with ``||f(D0) - f(D1)|| = Delta`` and R1SMG calibrated for (epsilon, delta) (Ji & Li
    2024; ``sigma`` from :func:`torchdpgmm.mechanisms.r1smg_sigma`):
    ``P0(r) = 2 Phi(r / sqrt(sigma)) - 1`` and
    ``P1(r) = int phi(z) 2 F_u((r^2 - Delta^2 - sigma z^2) / (2 Delta sqrt(sigma) z)) dz`` over ``z > 0``,
    where ``(u_1 + 1)/2 ~ Beta((M-1)/2, (M-1)/2)`` is the law of one coordinate of a uniform unit vector.
    Any (epsilon, delta')-DP mechanism has ``P0(r) - e^epsilon P1(r) <= delta'`` for every r, so
    ``max_r [P0(r) - e^epsilon P1(r)]`` is a lower bound on the delta it actually achieves at epsilon.
    Returns that maximum, its radius and the two probabilities (scipy quadrature; independent of torch).
    """
    import numpy as np
    from scipy import integrate, stats

    from torchdpgmm.mechanisms import r1smg_sigma

    s = math.sqrt(float(r1smg_sigma(epsilon, delta, sensitivity, dim)))
    D = float(sensitivity)
    a = (dim - 1) / 2

    def cdf_u(v):
        return stats.beta.cdf((min(max(v, -1.0), 1.0) + 1) / 2, a, a)

    best = {"delta_lower": 0.0, "radius": float("nan"), "p0": 0.0, "p1": 0.0, "noise_scale": s}
    for r in np.geomspace(1e-4 * D, 10 * D, num_radii):
        p0 = 2 * stats.norm.cdf(r / s) - 1
        lo, hi = max(1e-300, (D - r) / s), (D + r) / s
        p1 = integrate.quad(lambda z: 2 * stats.norm.pdf(z) * cdf_u((r * r - D * D - s * s * z * z) / (2 * D * s * z)),
                            lo, hi, limit=200)[0]
        v = p0 - math.exp(epsilon) * p1
        if v > best["delta_lower"]:
            best.update(delta_lower=float(v), radius=float(r), p0=float(p0), p1=float(p1))
    return best


# ----------------------------------------------------------------------------------------------------
# the likelihood-ratio (Neyman-Pearson) statistic for outputs with a known density
# ----------------------------------------------------------------------------------------------------

class LikelihoodRatio(Statistic):
    """The Neyman-Pearson statistic ``ln p1(o) - ln p0(o)`` (Neyman & Pearson 1933; Nasr et al. 2021).

    ``log_ratio(output) -> (n,)``. Nothing is fitted, so the selection draws only choose the threshold.
    Its threshold tests are the most powerful tests of D0 against D1 at every false-positive rate, so
    they trace the pair's exact tradeoff curve (Dong, Roth & Su 2019). Large values are evidence for D1.
    """

    def __init__(self, log_ratio: Callable[[Any], torch.Tensor]):
        self.log_ratio = log_ratio

    def features(self, output):
        s = self.log_ratio(output)
        return s.reshape(s.shape[0], 1).to(torch.float64)

    def fit(self, f0, f1):
        return lambda f: f[..., 0]


def _f64(v, device):
    return torch.as_tensor(v, dtype=torch.float64, device=device)


def gaussian_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """``sum_i [(v_i - m0_i)^2 - (v_i - m1_i)^2] / (2 s_i^2)`` over independent Gaussian coordinates.

    ``value (n, *event)``; ``mean0``, ``mean1``, ``scale`` broadcast to ``event``. Also the exact log-ratio
    of the discrete Gaussian on the integers (Canonne, Kamath & Steinke 2020) when both means are
    integers: the two shifted PMFs have the same normalising constant, which cancels.
    """
    v = value.to(torch.float64)
    m0, m1, s = _f64(mean0, v.device), _f64(mean1, v.device), _f64(scale, v.device)
    return ((m1 - m0) * (v - 0.5 * (m0 + m1)) / (s * s)).reshape(v.shape[0], -1).sum(-1)


def laplace_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """``sum_i (|v_i - m0_i| - |v_i - m1_i|) / b_i`` over independent Laplace coordinates of scale ``b_i``.

    Also exact for the discrete Laplace on the integers with integer means (Canonne, Kamath & Steinke
    2020), whose PMF is proportional to ``exp(-|v - m| / b)``.
    """
    v = value.to(torch.float64)
    m0, m1, b = _f64(mean0, v.device), _f64(mean1, v.device), _f64(scale, v.device)
    return (((v - m0).abs() - (v - m1).abs()) / b).reshape(v.shape[0], -1).sum(-1)


def symmetric_gaussian_log_ratio(value: torch.Tensor, mean0, mean1, sigma) -> torch.Tensor:
    """Symmetric ``d x d`` Gaussian noise with std ``sigma`` on the diagonal and ``sigma/sqrt(2)`` off it
    (isotropic in Frobenius-isometric coordinates): ``<V - (M0 + M1)/2, M1 - M0>_F / sigma^2``."""
    v = value.to(torch.float64)
    m0, m1, s = _f64(mean0, v.device), _f64(mean1, v.device), _f64(sigma, v.device)
    return ((m1 - m0) * (v - 0.5 * (m0 + m1))).reshape(v.shape[0], -1).sum(-1) / (s * s)


def symmetric_laplace_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """Symmetric ``d x d`` noise, i.i.d. Laplace of scale ``b`` on the upper triangle (diagonal included)."""
    d = value.shape[-1]
    iu = torch.triu_indices(d, d, device=value.device)
    m0, m1 = _f64(mean0, value.device), _f64(mean1, value.device)
    return laplace_log_ratio(value[..., iu[0], iu[1]], m0[..., iu[0], iu[1]], m1[..., iu[0], iu[1]], scale)


def noiseless_sound_blocks(X: torch.Tensor, y: torch.Tensor, num_classes: int, clip_bound: float, *,
                           mask: torch.Tensor | None = None, center: torch.Tensor | None = None
                           ) -> dict[str, torch.Tensor]:
    """Per-class counts, sums and second moments of records clipped to ``||x - center||_2 <= B``.

    An independent implementation of the statistics the sound mode releases (clipping as in Abadi et
    al. 2016), used as the two means of the likelihood ratio. ``X (N, d)``, ``y (N,)``, ``mask (N,)``.
    """
    X = X.to(torch.float64)
    Z = X - (0.0 if center is None else _f64(center, X.device))
    norm = torch.linalg.vector_norm(Z, dim=-1, keepdim=True)
    Z = torch.where(norm > clip_bound, Z * (clip_bound / norm.clamp_min(1e-300)), Z)
    oh = torch.nn.functional.one_hot(y.long(), num_classes).to(torch.float64)
    if mask is not None:
        oh = oh * mask.to(torch.float64).unsqueeze(-1)
    return {"counts": oh.sum(0), "sums": oh.T @ Z, "second_moments": torch.einsum("nk,ni,nj->kij", oh, Z, Z)}


def sound_blocks(output: Any, center: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Read the noisy blocks back from a sound release: ``n = counts``, ``s = (means - center) n``,
    ``Q = C (n - 1) + s s^T / n``.

    Exact for the sums and second moments when the release was made with ``eig_floor=float("-inf")``
    (the PSD repair is then the identity up to rounding); the counts are exact wherever the noisy count
    lies above ``min_count`` (the clamp is the only step that loses information).
    """
    n = _get(output, "counts").to(torch.float64)
    m = _get(output, "means").to(torch.float64)
    C = _get(output, "covariances").to(torch.float64)
    if center is not None:
        m = m - _f64(center, m.device)
    s = m * n.unsqueeze(-1)
    Q = C * (n - 1)[..., None, None] + s.unsqueeze(-1) * s.unsqueeze(-2) / n[..., None, None]
    return {"counts": n, "sums": s, "second_moments": Q}


def _noise_scales(noise: Any) -> dict[str, tuple[str, float]]:
    """``{block: ("gaussian" | "laplace", scale in data units)}`` of a sound release.

    Accepts a ``Release`` (its ``extras["noise"]``), a noise dict (``sigma_counts``, ...,
    ``laplace_scale_counts``, ...: data units, as the release's extras and older records hold them), an
    object with such a ``noise`` dict, or a typed record with continuous ``blocks`` (``NoisedBlock``).
    Discrete blocks state their scale in grid units, so a record with discrete blocks is refused: pass the
    release's ``extras["noise"]``. For discrete noise the continuous forms are used with the data-unit
    scale; they are exact for means on the grid (Canonne, Kamath & Steinke 2020).
    """
    ex = getattr(noise, "extras", None) or getattr(noise, "extra", None)
    if isinstance(ex, dict) and "noise" in ex:
        noise = ex["noise"]
    noise = getattr(noise, "noise", noise) if not isinstance(noise, dict) else noise
    if isinstance(noise, dict):
        out = {}
        for kind, prefix in (("gaussian", "sigma_"), ("laplace", "laplace_scale_")):
            out.update({k[len(prefix):]: (kind, float(v)) for k, v in noise.items() if k.startswith(prefix)})
        if out:
            return out
    blocks = getattr(noise, "blocks", None)
    if blocks:
        if any(b.mechanism.startswith("discrete") for b in blocks):
            raise ValueError("discrete blocks state their noise scale in grid units; pass the release's "
                             "extras['noise'] (scales in data units) instead of its record")
        return {b.name: ("laplace" if b.mechanism == "laplace" else "gaussian", float(b.noise_scale))
                for b in blocks}
    raise ValueError(f"no noise scales found in {noise!r}")


def _dataset_blocks(dataset, num_classes, clip_bound, center):
    mask = dataset[2] if len(dataset) > 2 else None
    return noiseless_sound_blocks(dataset[0], dataset[1], num_classes, clip_bound, mask=mask, center=center)


def sound_log_ratio(dataset0, dataset1, num_classes: int, clip_bound: float, noise: Any, *,
                    center: torch.Tensor | None = None) -> LikelihoodRatio:
    """The exact Neyman-Pearson statistic of the sound mode's noisy blocks (counts, sums, second moments).

    ``noise``: the release's noise scales in data units (the ``Release``, its ``extras["noise"]``, or a
    record with continuous blocks; see :func:`_noise_scales`). Gaussian blocks
    use :func:`gaussian_log_ratio` / :func:`symmetric_gaussian_log_ratio`, Laplace blocks the Laplace
    forms; independent blocks add. Apply it to releases made with ``eig_floor=float("-inf")`` so that
    :func:`sound_blocks` reads the blocks back; with the eigenvalue floor on it is still a valid (weaker)
    statistic.
    """
    sc = _noise_scales(noise)
    b0 = _dataset_blocks(dataset0, num_classes, clip_bound, center)
    b1 = _dataset_blocks(dataset1, num_classes, clip_bound, center)
    forms = {"gaussian": (gaussian_log_ratio, symmetric_gaussian_log_ratio),
             "laplace": (laplace_log_ratio, symmetric_laplace_log_ratio)}

    def log_ratio(output):
        o = sound_blocks(output, center)
        total = 0.0
        for k in ("counts", "sums", "second_moments"):
            kind, scale = sc[k]
            fn = forms[kind][1 if k == "second_moments" else 0]
            total = total + fn(o[k], b0[k], b1[k], scale)
        return total

    return LikelihoodRatio(log_ratio)


def sound_pair_mu(dataset0, dataset1, num_classes: int, clip_bound: float, noise: Any, *,
                  center: torch.Tensor | None = None) -> float:
    """``mu = sqrt(sum_b ||f_b(D1) - f_b(D0)||^2 / sigma_b^2)`` (Frobenius for the second moments).

    Under Gaussian noise the log-likelihood ratio is ``N(-mu^2/2, mu^2)`` on D0 and ``N(mu^2/2, mu^2)``
    on D1, so the pair's exact tradeoff curve is ``G_mu`` (Dong, Roth & Su 2019): :func:`audit_ceiling`
    with :func:`gdp_tradeoff` then says what any audit of this pair can certify.
    """
    sc = _noise_scales(noise)
    if any(kind != "gaussian" for kind, _ in sc.values()):
        raise ValueError("sound_pair_mu needs Gaussian noise on every block")
    b0 = _dataset_blocks(dataset0, num_classes, clip_bound, center)
    b1 = _dataset_blocks(dataset1, num_classes, clip_bound, center)
    return math.sqrt(sum(float(((b1[k] - b0[k]) ** 2).sum()) / sc[k][1] ** 2 for k in b0))


# ----------------------------------------------------------------------------------------------------
# power: what the same test certifies against a mechanism exactly on a tradeoff curve
# ----------------------------------------------------------------------------------------------------

def gdp_tradeoff(alpha, mu: float):
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``: the smallest false-negative rate at false-positive
    rate ``alpha`` against a mu-GDP mechanism (Dong, Roth & Su 2019, eq. 2.2); scipy, numpy arrays."""
    import numpy as np
    from scipy.stats import norm

    return norm.cdf(norm.isf(np.asarray(alpha, dtype=float)) - mu)


def dp_tradeoff(alpha, epsilon: float, delta: float):
    """``max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))``: the (eps, delta)-DP tradeoff
    curve (Kairouz, Oh & Viswanath 2015), attained by randomised response."""
    import numpy as np

    a = np.asarray(alpha, dtype=float)
    return np.maximum(0.0, np.maximum(1 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1 - delta - a)))


def _gdp_delta_scipy(eps: float, mu: float) -> float:
    from scipy.stats import norm

    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_epsilon_exact(delta: float, mu: float) -> float:
    """The epsilon of a mu-GDP mechanism at ``delta``: the root of
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta`` (Dong, Roth & Su 2019, Cor. 2.13); scipy."""
    from scipy.optimize import brentq

    if _gdp_delta_scipy(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta_scipy(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: _gdp_delta_scipy(e, mu) - delta, 0.0, hi, xtol=1e-12))


def gdp_mu_exact(epsilon: float, delta: float) -> float:
    """The largest mu whose mu-GDP curve is (epsilon, delta)-DP (the analytic Gaussian calibration of
    Balle & Wang 2018 in GDP form); scipy root finding, independent of :mod:`torchdpgmm.release.sound`."""
    from scipy.optimize import brentq

    hi = 1.0
    while _gdp_delta_scipy(epsilon, hi) < delta:
        hi *= 2
    return float(brentq(lambda m: _gdp_delta_scipy(epsilon, m) - delta, 1e-9, hi, xtol=1e-14))


def audit_ceiling(tradeoff: Callable[[Any], Any], num_evaluation: int, delta: float, *,
                  confidence: float = 0.95, num_grid: int = 4000) -> dict[str, float]:
    """The bound the Clopper-Pearson test certifies with ``num_evaluation`` draws per dataset against a
    mechanism exactly on ``tradeoff``, at the best threshold and with counts equal to their expectations.

    This is the ceiling of the audit at that number of draws (Jagielski, Ullman & Oprea 2020; Nasr et
    al. 2021): no statistic does better on average, since the tradeoff curve is the most powerful test's.
    Returns ``{"epsilon", "fpr", "fnr"}``.
    """
    import numpy as np

    n = int(num_evaluation)
    a = np.unique(np.concatenate([np.geomspace(0.1 / n, 0.5, num_grid), np.linspace(0.0, 1.0, num_grid)]))
    b = np.asarray(tradeoff(a), dtype=float)
    eps, _, _ = epsilon_lower_bound(n * a, n * b, n, n, delta, confidence)
    i = int(np.argmax(eps))
    return {"epsilon": float(eps[i]), "fpr": float(a[i]), "fnr": float(b[i])}


def power_report(claimed_epsilon: float, delta: float, num_evaluation: int, *, confidence: float = 0.95,
                 gaussian: bool = True, pair_mu: float | None = None) -> dict[str, float]:
    """Side-by-side numbers that say how close an audit's bound can get to the truth.

    ``claim_ceiling_epsilon``: what the same test certifies against a mechanism exactly at the claim
    (the mu-GDP curve with ``mu = gdp_mu_exact(eps, delta)`` for Gaussian noise; the (eps, delta)-DP
    curve otherwise). With ``pair_mu`` (a Gaussian pair, :func:`sound_pair_mu`): the pair's exact epsilon
    at ``delta`` and the test's ceiling against it.
    """
    out: dict[str, float] = {"num_evaluation": int(num_evaluation), "confidence": float(confidence)}
    if gaussian:
        mu = gdp_mu_exact(claimed_epsilon, delta)
        out["claim_mu"] = mu
        out["claim_ceiling_epsilon"] = audit_ceiling(lambda a: gdp_tradeoff(a, mu), num_evaluation, delta,
                                                     confidence=confidence)["epsilon"]
    else:
        out["claim_ceiling_epsilon"] = audit_ceiling(lambda a: dp_tradeoff(a, claimed_epsilon, delta),
                                                     num_evaluation, delta, confidence=confidence)["epsilon"]
    if pair_mu is not None:
        out["pair_mu"] = float(pair_mu)
        out["pair_exact_epsilon"] = gdp_epsilon_exact(delta, pair_mu)
        out["pair_ceiling_epsilon"] = audit_ceiling(lambda a: gdp_tradeoff(a, pair_mu), num_evaluation, delta,
                                                    confidence=confidence)["epsilon"]
    return out


# ----------------------------------------------------------------------------------------------------
# worst-case pairs of the sound mode
# ----------------------------------------------------------------------------------------------------

def worst_case_add_remove(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 1.0,
                          factor: float = 10.0, generator: torch.Generator | None = None) -> NeighbourPair:
    """D1 = D0 plus one class-0 record at ``factor B u`` with ``u = (1, ..., 1)/sqrt(d)``.

    After clipping the record sits at ``B u``: the counts move by 1, the class-0 sum by ``B`` (L2) and
    ``sqrt(d) B`` (L1), the second moment by ``B^2`` (Frobenius) and ``(d + 1) B^2 / 2`` (L1 on the upper
    triangle). Every add/remove sensitivity of the sound mode is attained at once, so under Gaussian
    noise this pair is exactly as private as the release's total mu (:func:`sound_pair_mu`). Encoded
    with masks: ``X0 = X1`` have N + 1 rows and ``mask0`` drops the last one.
    """
    X, y, _ = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    mask1 = torch.ones(X0.shape[0], dtype=torch.bool)
    mask0 = mask1.clone()
    mask0[-1] = False
    return NeighbourPair("worst-add-remove", X0, y0, X0.clone(), y0.clone(), "add-remove",
                         f"one class-0 record at {factor:g}B (1,...,1)/sqrt(d) added (B={clip_bound:g})",
                         X0.shape[0] - 1, -1, 0, mask0=mask0, mask1=mask1)


def worst_case_replace_one(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 1.0,
                           kind: str = "label-flip", cosine: float = -0.25, factor: float = 10.0,
                           generator: torch.Generator | None = None) -> NeighbourPair:
    """Replace-one pairs that attain the sound mode's per-block sensitivities as far as one change can.

    ``kind="label-flip"``: a record at ``factor B u`` (clipped to ``B u``) moves from class 0 to class 1:
    counts ``sqrt(2)``, sums ``sqrt(2) B``, second moments ``sqrt(2) B^2`` (L2). ``kind="same-class"``:
    the record is replaced by one of norm B at cosine ``cosine`` to it (sums ``B sqrt(2 - 2c)``, second
    moments ``B^2 sqrt(2 - 2c^2)``); ``c = -1/4`` maximises the composed mu of an even sums/moments split.
    No single change attains all three replace-one sensitivities (counts ``sqrt 2``, sums ``2B``,
    moments ``sqrt(2) B^2``) at once.
    """
    if kind not in ("label-flip", "same-class"):
        raise ValueError(f"kind must be 'label-flip' or 'same-class', got {kind!r}")
    X, y, _ = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1, X1 = y0.clone(), X0.clone()
    if kind == "label-flip":
        y1[-1] = 1
        desc = f"record at {factor:g}B u (clipped to B u) flips from class 0 to class 1 (B={clip_bound:g})"
        return NeighbourPair("worst-label-flip", X0, y0, X1, y1, "label-flip", desc, X0.shape[0] - 1, 0, 1)
    v = torch.zeros(dim, dtype=X.dtype)
    v[0], v[1] = 1.0, -1.0
    v = v / torch.linalg.vector_norm(v)
    X1[-1] = factor * clip_bound * (cosine * u + math.sqrt(1 - cosine * cosine) * v)
    desc = f"class-0 record at {factor:g}B u replaced by one at cosine {cosine:g} to it (both clipped to norm B)"
    return NeighbourPair("worst-same-class", X0, y0, X1, y1, "replace-one", desc, X0.shape[0] - 1, 0, 0)
