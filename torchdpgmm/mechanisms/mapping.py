"""Random mapping of the mixture weights (Liu, Scaglione & Peisert 2025, eqs. 3, 14-15, 25-27; Proposition 2).

The weights ``pi = N_k / N`` live on the lattice ``S`` of compositions of ``N`` into ``K`` positive parts
(``|S| = C(N-1, K-1)``). The mechanism releases ``pi~ ~ f(. | pi)`` with (eq. 15)

    f(pi~ | pi) = (1 - lam) f'(pi~ | pi) + lam / |S|,

where ``f'`` is supported on ``pi`` and its ``K(K-1)`` label-flip neighbours ``S'(D)`` (eq. 14:
one point moves from class ``i`` to class ``j``).

**Our reading of Proposition 2.** As printed, (26)-(27) fix the *rows* of ``F'`` to sum to one
(``F' 1 = 1``) while the released PMF is read down the *column* ``j*`` of ``pi(D)``, which then does not
sum to one. We take the minimal valid reading: the column ``f'(. | pi)`` is a ``K(K-1)+1``-ary
randomized response with ratio ``e^{eps0}``,

    f'(pi | pi) = e^{eps0} / (e^{eps0} + K(K-1)),   f'(pi' | pi) = 1 / (e^{eps0} + K(K-1)) for pi' in S'(D),

i.e. the values of (26)-(27) with the favoured entry ``1/(1 + |S'| e^{-eps0})`` on ``pi(D)`` itself and
``e^{-eps0}`` times it on every neighbour. Each column sums to one and the ratio constraints (17) hold.

The smoothing part is sampled as a uniform composition of ``N`` into ``K`` positive parts (uniform
``K-1`` cut points among ``N-1`` by Floyd's algorithm: ``O(K^2)`` work, independent of ``N``); ``S`` is
never enumerated.

Caveat: the support of ``f'`` depends on the data, and ``lam/|S|`` is astronomically small, so the
likelihood ratio between label-flip neighbours is not bounded by ``e^{eps0}`` in general (an output in
``S'(D)`` but not in ``S'(D')``). The "as published" accounting does not capture this; see docs/privacy.md.
"""
from __future__ import annotations

import math

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import check_epsilon

__all__ = [
    "neighbour_counts",
    "mapping_support",
    "mapping_pmf",
    "log_pmf",
    "uniform_composition",
    "random_mapping",
    "log_num_compositions",
]


def _flip_pairs(K: int, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.arange(K, device=device).repeat_interleave(K)
    dst = torch.arange(K, device=device).repeat(K)
    keep = src != dst
    return src[keep], dst[keep]


def neighbour_counts(counts: torch.Tensor) -> torch.Tensor:
    """The ``K(K-1)`` label-flip neighbours of count vectors ``(..., K) -> (..., K(K-1), K)`` (eq. 14).

    Neighbour ``(i, j)`` (in row-major order over ``i != j``) moves one point from class ``i`` to ``j``.
    """
    K = counts.shape[-1]
    src, dst = _flip_pairs(K, counts.device)
    eye = torch.eye(K, dtype=counts.dtype, device=counts.device)
    delta = eye[dst] - eye[src]                                  # (K(K-1), K)
    return counts.unsqueeze(-2) + delta


def mapping_support(counts: torch.Tensor) -> torch.Tensor:
    """``{pi(D)} ∪ S'(D)`` as counts, ``(..., K(K-1)+1, K)``; index 0 is ``pi(D)`` itself."""
    return torch.cat([counts.unsqueeze(-2), neighbour_counts(counts)], dim=-2)


def mapping_pmf(counts: torch.Tensor, eps0: torch.Tensor | float) -> torch.Tensor:
    """``f'(. | pi)`` over :func:`mapping_support`: ``(..., K(K-1)+1)``, our reading of eqs. (26)-(27)."""
    K = counts.shape[-1]
    m = K * (K - 1)
    dtype = torch.float64 if not (torch.is_tensor(eps0) and eps0.dtype.is_floating_point) else eps0.dtype
    e = torch.as_tensor(eps0, dtype=dtype, device=counts.device)
    batch = broadcast_shapes(counts.shape[:-1], e.shape)
    # numerically safe: favoured = 1/(1 + m e^{-eps0}), others = e^{-eps0} * favoured
    fav = torch.sigmoid(e - math.log(m)) if m > 0 else torch.ones_like(e)
    other = (1 - fav) / max(m, 1)
    return torch.cat([fav.expand(batch).unsqueeze(-1), other.expand(batch).unsqueeze(-1).expand(*batch, m)], -1)


def log_num_compositions(n: torch.Tensor, K: int) -> torch.Tensor:
    """``ln |S| = ln C(n-1, K-1)``, the number of compositions of ``n`` into ``K`` positive parts."""
    n = n.to(torch.float64)
    return torch.lgamma(n) - math.lgamma(K) - torch.lgamma(n - K + 1)


def log_pmf(released: torch.Tensor, counts: torch.Tensor, eps0: torch.Tensor | float, lam: float = 1e-3) -> torch.Tensor:
    """Exact ``ln f(pi~ | pi)`` of eq. (15) for released count vectors ``(..., K)`` (any point of ``S``)."""
    K = counts.shape[-1]
    support = mapping_support(counts)                                       # (..., M, K)
    probs = mapping_pmf(counts, eps0)                                       # (..., M)
    hit = (support == released.unsqueeze(-2)).all(-1).to(probs.dtype)       # (..., M)
    fprime = (hit * probs).sum(-1)
    n = counts.sum(-1)
    in_S = (released >= 1).all(-1) & (released.sum(-1) == n)
    log_uniform = (math.log(lam) if lam > 0 else -math.inf) - log_num_compositions(n, K)
    val = torch.logaddexp(torch.log1p(torch.as_tensor(-lam, dtype=fprime.dtype)) + fprime.log(), log_uniform.to(fprime.dtype))
    return torch.where(in_S, val, torch.full_like(val, -math.inf))


def uniform_composition(n: torch.Tensor, K: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform draws from the compositions of ``n (...)`` into ``K`` positive parts -> ``(..., K)`` long.

    Chooses ``K-1`` distinct cut points uniformly from ``{1, ..., n-1}`` with Floyd's algorithm, batched
    over ``...`` (each trial may have its own ``n``); the parts are the gaps between sorted cuts.
    """
    n = n.long()
    batch = n.shape
    m = K - 1
    top = n - 1                                              # choose m of {1..top}
    chosen = torch.zeros(*batch, max(m, 1), dtype=torch.long, device=n.device)
    for step in range(m):
        j = top - m + 1 + step                               # (...,)
        u = torch.rand(batch, dtype=torch.float64, device=n.device, generator=generator)
        t = (u * j.to(torch.float64)).floor().long().clamp_max(j - 1) + 1   # uniform on {1..j}
        taken = (chosen[..., :step] == t.unsqueeze(-1)).any(-1) if step > 0 else torch.zeros_like(t, dtype=torch.bool)
        chosen[..., step] = torch.where(taken, j, t)
    cuts = chosen[..., :m].sort(-1).values if m > 0 else chosen[..., :0]
    zero = torch.zeros(*batch, 1, dtype=torch.long, device=n.device)
    edges = torch.cat([zero, cuts, n.unsqueeze(-1)], -1)
    return edges.diff(dim=-1)


def random_mapping(counts: torch.Tensor, eps0: torch.Tensor | float, lam: float = 1e-3,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Release class counts ``~ f(. | counts)`` (eq. 15 with our reading of Prop. 2); ``(..., K)`` long.

    Divide by ``counts.sum(-1)`` for the released weights ``pi~``. Requires every count ``>= 2`` so that
    every label-flip neighbour stays in ``S``.
    """
    if not torch.is_tensor(counts) or counts.dtype.is_floating_point:
        raise TypeError("counts must be an integer tensor")
    if counts.shape[-1] < 2:
        raise ValueError("the random mapping needs K >= 2 classes")
    if bool((counts < 2).any()):
        raise ValueError("every class count must be >= 2 (label-flip neighbours must stay in S)")
    check_epsilon(eps0, "eps0")
    if not (0.0 <= float(lam) < 1.0):
        raise ValueError(f"lam must lie in [0, 1), got {lam!r}")
    K = counts.shape[-1]
    probs = mapping_pmf(counts, eps0)                                       # (..., M)
    batch = probs.shape[:-1]
    counts = counts.expand(*batch, K)
    support = mapping_support(counts)                                       # (..., M, K)
    u = torch.rand(2, *batch, dtype=torch.float64, device=counts.device, generator=generator)
    cdf = probs.to(torch.float64).cumsum(-1)
    idx = (cdf < u[0].unsqueeze(-1)).sum(-1).clamp_max(probs.shape[-1] - 1)
    block = support.gather(-2, idx.view(*batch, 1, 1).expand(*batch, 1, K)).squeeze(-2)
    smooth = uniform_composition(counts.sum(-1), K, generator)
    return torch.where((u[1] < lam).unsqueeze(-1), smooth, block)
