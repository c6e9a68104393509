"""Distinguishing statistics of an audit: what a threshold test looks at in each release.

A statistic is a callable ``output -> (n,)`` tensor, or a :class:`Statistic` with a feature map and a
``fit`` on the selection draws: the learnt Fisher discriminant of the flattened released GMM (the
default), and attack statistics that read a mechanism's support: the random mapping's support escape
(Liu, Scaglione & Peisert 2025, eqs. 14-15), the Wishart mechanism's PSD escape (Sheffet 2019) and the
mean distance that catches R1SMG's singular density (Ji & Li 2024). The exact likelihood-ratio statistic
for outputs with a known density is in :mod:`torchdpgmm.audit.likelihood`.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["Statistic", "LinearDiscriminant", "release_features", "support_escape_statistic", "mean_distance_statistic", "psd_escape_statistic"]


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
        S = S + self.ridge * torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
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
        eye = torch.eye(K, dtype=torch.float64, device=c.device)  # on the counts' device
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
