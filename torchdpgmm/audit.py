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

    ``supp(D) = {n(D)} ∪ S'(D)`` (paper 000 eqs. 14-15). Under D the random mapping leaves ``supp(D)`` only
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


def _draw_features(mechanism, dataset, n, stats, generator, batch_size):
    chunks: list[list[torch.Tensor]] = [[] for _ in stats]
    done = 0
    while done < n:
        m = min(batch_size, n - done)
        out = mechanism(dataset, m, generator)
        for i, st in enumerate(stats):
            chunks[i].append(st.features(out).detach().to("cpu", torch.float64))
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


def _audit_features(f0, f1, stat: Statistic, delta, confidence, selection_fraction, bins) -> AuditResult:
    import numpy as np

    num_draws = f0.shape[0]
    ns = max(2, min(num_draws - 2, int(round(selection_fraction * num_draws))))
    scorer = stat.fit(f0[:ns], f1[:ns])
    s0 = torch.nan_to_num(scorer(f0), nan=0.0).numpy()
    s1 = torch.nan_to_num(scorer(f1), nan=0.0).numpy()
    s0_sel, s1_sel, s0_ev, s1_ev = s0[:ns], s1[:ns], s0[ns:], s1[ns:]
    # candidate thresholds: midpoints between distinct pooled selection scores (subsampled to <= 2000)
    pooled = np.unique(np.concatenate([s0_sel, s1_sel]))
    if pooled.size > 2000:
        pooled = np.unique(np.quantile(pooled, np.linspace(0, 1, 2000)))
    cand = np.concatenate([[pooled[0] - 1.0], 0.5 * (pooled[1:] + pooled[:-1]), [pooled[-1] + 1.0]])
    srt0, srt1 = np.sort(s0_sel), np.sort(s1_sel)
    # direction "greater": S = {score > t}
    fp_g = ns - np.searchsorted(srt0, cand, side="right")  # D0 in S
    fn_g = np.searchsorted(srt1, cand, side="right")  # D1 not in S
    eps_g, _, _ = epsilon_lower_bound(fp_g, fn_g, ns, ns, delta, confidence)
    # direction "less": S = {score < t}
    fp_l = np.searchsorted(srt0, cand, side="left")
    fn_l = ns - np.searchsorted(srt1, cand, side="left")
    eps_l, _, _ = epsilon_lower_bound(fp_l, fn_l, ns, ns, delta, confidence)
    ig, il = int(np.argmax(eps_g)), int(np.argmax(eps_l))
    if eps_g[ig] >= eps_l[il]:
        direction, t, sel_eps = "greater", float(cand[ig]), float(eps_g[ig])
        fp, fn = int((s0_ev > t).sum()), int((s1_ev <= t).sum())
    else:
        direction, t, sel_eps = "less", float(cand[il]), float(eps_l[il])
        fp, fn = int((s0_ev < t).sum()), int((s1_ev >= t).sum())
    ne = num_draws - ns
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
    bins: int = 40,
) -> AuditResult:
    """Lower-bound the epsilon of ``mechanism`` at ``delta`` from ``num_draws`` releases on each dataset.

    Draws ``num_draws`` releases on ``dataset0`` and on ``dataset1`` (in chunks of ``batch_size``),
    splits each into a selection part (fraction ``selection_fraction``) and an evaluation part, fits the
    statistic and picks the threshold and direction maximising the Clopper-Pearson bound on the selection
    part, then reports the bound on the evaluation part (module docstring). Default statistic: a quadratic
    Fisher discriminant of the flattened released GMM (:func:`release_features`).
    """
    _check_audit_args(num_draws, delta, confidence, selection_fraction)
    stat = _as_statistic(statistic)
    bs = batch_size or num_draws
    (f0,) = _draw_features(mechanism, dataset0, num_draws, [stat], generator, bs)
    (f1,) = _draw_features(mechanism, dataset1, num_draws, [stat], generator, bs)
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
    bs = batch_size or num_draws
    f0 = _draw_features(mechanism, dataset0, num_draws, stats, generator, bs)
    f1 = _draw_features(mechanism, dataset1, num_draws, stats, generator, bs)
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
    mechanism calibrated to that hull (Gamma_k of paper 000 eq. 10) adds almost no noise off the line in
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
