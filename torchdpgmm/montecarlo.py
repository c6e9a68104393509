"""Batched Monte Carlo engine: the synthetic data of Liu, Scaglione & Peisert (2025), Sec. V-A, and chunked trial runs.

A Monte Carlo study is one call with a trial dimension. :func:`synthetic_gmm` draws a batch of ground
truth models, :func:`synthetic_data` a batch of labeled datasets from them (Sec. V-A: Dirichlet(1)
weights, means ``U[-10, 10]^d``, covariances ``Wishart_d(d+1, I)``, ``N`` i.i.d. points), and
:func:`run_chunked` splits a large number of trials into chunks that fit a memory budget, with one
generator per chunk derived from one seed.

Reproducibility. Every draw goes through the explicit ``generator`` (``torch.rand`` / ``randn`` /
``multinomial``), so the same generator state gives the same batch. ``run_chunked`` derives chunk
``c``'s seed from ``(seed, c)`` with :class:`numpy.random.SeedSequence`; the chunk size is computed
from the problem size and the memory budget only (never from the device), so a seed and a budget fix
the whole run. Changing the budget changes the chunking, hence the random streams (not their law).
CPU and CUDA generators produce different streams; ``synthetic_data(..., draw_device="cpu")`` draws on
the CPU and moves the result, which makes the data identical on every device. (The sweep engine,
:mod:`torchdpgmm.sweep`, goes further: fixed-size trial blocks with their own seeds, so its rows do not
depend on the chunking at all.)

Aggregates. :class:`RunningStats` summarises a stream of per-trial values in memory that does not grow with the
trials (exact running mean and variance, quantiles from a sparse log-grid histogram); the studies of Figures 1-5 and the sweeps use it,
so the number of trials is bounded by time, not memory.

Small classes. The empirical covariance (eq. 2c) needs ``N_k >= 2`` and is singular unless
``N_k >= d + 1``; the KL divergence and the mechanism design need it nonsingular. Trials in which some
class receives fewer than ``min_class_size`` points (default ``d + 1``) are *redrawn as a whole*
(model and data), i.e. the studied population is the Sec. V-A model conditioned on every class having
at least ``min_class_size`` points. The number of redrawn trials is returned so that it can be reported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import numpy.random  # noqa: F401  (numpy loads it lazily: a Ctrl-C inside that first import was lost)
import torch

__all__ = [
    "SyntheticBatch",
    "synthetic_gmm_params",
    "synthetic_data",
    "default_min_class_size",
    "chunk_size_for_budget",
    "synthetic_data_bytes_per_trial",
    "chunk_seeds",
    "chunk_seed",
    "run_chunked",
    "DEFAULT_MEMORY_BUDGET",
    "RunningStats",
]

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes: 1 GiB of working memory per chunk


@dataclass
class SyntheticBatch:
    """A batch of synthetic datasets.

    ``X (T, N, d)``, ``y (T, N)`` int64; ``weights (T, K)``, ``means (T, K, d)``, ``covariances
    (T, K, d, d)`` are the ground-truth model; ``redrawn`` counts the trials that were redrawn because a
    class had fewer than ``min_class_size`` points.
    """

    X: torch.Tensor
    y: torch.Tensor
    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    redrawn: int = 0


def _dirichlet_ones(shape: Sequence[int], k: int, generator, dtype, device) -> torch.Tensor:
    # Dirichlet(1,...,1) = normalised i.i.d. Exp(1); Exp(1) = -log(U), U in (0, 1].
    u = torch.rand(*shape, k, generator=generator, dtype=dtype, device=device)
    e = -torch.log1p(-u)  # U in [0,1) -> 1-U in (0,1]: finite
    return e / e.sum(-1, keepdim=True)


def synthetic_gmm_params(
    trials: int,
    num_classes: int,
    dim: int,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    mean_range: float = 10.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ground-truth models of Liu, Scaglione & Peisert (2025), Sec. V-A: ``(weights (T,K), means (T,K,d), covs (T,K,d,d))``.

    Weights ~ Dirichlet(1), means ~ U[-mean_range, mean_range]^d, covariances ~ Wishart_d(d+1, I)
    drawn exactly as ``G G^T`` with ``G`` a ``d x (d+1)`` standard normal matrix.
    """
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    T, K, d = int(trials), int(num_classes), int(dim)
    w = _dirichlet_ones((T,), K, generator, dtype, device)
    mu = (2 * torch.rand(T, K, d, generator=generator, dtype=dtype, device=device) - 1) * mean_range
    G = torch.randn(T, K, d, d + 1, generator=generator, dtype=dtype, device=device)
    cov = G @ G.transpose(-1, -2)
    return w, mu, cov


def _draw(T, N, K, d, generator, dtype, device, mean_range):
    w, mu, cov = synthetic_gmm_params(T, K, d, generator, dtype, device, mean_range)
    y = torch.multinomial(w, N, replacement=True, generator=generator)  # (T, N)
    z = torch.randn(T, N, d, generator=generator, dtype=dtype, device=device)
    L = torch.linalg.cholesky(cov)  # (T,K,d,d); Wishart with d+1 dof is a.s. PD
    # x = mu_y + L_y z, one (public) class at a time: (T, N, d) temporaries only. Gathering L_y per point
    # held a (T, N, d, d) array, 177 KB per trial at N = 1000, d = 3: more than a sweep block's release.
    x = torch.zeros(T, N, d, dtype=dtype, device=device)
    xk = torch.empty_like(x)
    for k in range(K):
        torch.matmul(z, L[:, k].transpose(-1, -2), out=xk).add_(mu[:, k, None, :])
        x.addcmul_((y == k).to(dtype)[..., None], xk)   # exactly xk where y == k (each point has one class)
    return x, y, w, mu, cov


def default_min_class_size(dim: int) -> int:
    """The records each class gets by default in :func:`synthetic_data`: ``dim + 1``, so that eq. 2c is nonsingular."""
    return dim + 1


def synthetic_data(
    trials: int,
    n: int,
    num_classes: int = 5,
    dim: int = 3,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    min_class_size: int | None = None,
    mean_range: float = 10.0,
    draw_device: torch.device | str | None = None,
    max_redraws: int = 1000,
) -> SyntheticBatch:
    """A batch of ``trials`` labeled datasets of Liu, Scaglione & Peisert (2025), Sec. V-A (``N = n`` i.i.d. points each).

    ``min_class_size`` (default ``dim + 1``, so that eq. 2c is nonsingular) is enforced by redrawing
    the failing trials as a whole from the same generator (see the module docstring). Draws happen on
    ``draw_device`` (default: the generator's device) and the result is moved to ``device``.
    """
    for name, v in (("trials", trials), ("n", n), ("num_classes", num_classes), ("dim", dim)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if min_class_size is None:
        min_class_size = default_min_class_size(dim)
    if min_class_size < 0:
        raise ValueError(f"min_class_size must be >= 0, got {min_class_size}")
    if n < num_classes * min_class_size:
        raise ValueError(
            f"n={n} cannot give each of num_classes={num_classes} classes min_class_size={min_class_size} points"
        )
    if draw_device is None:
        draw_device = generator.device if generator is not None else torch.device("cpu")
    if device is None:
        device = draw_device
    T, N, K, d = trials, n, num_classes, dim
    x, y, w, mu, cov = _draw(T, N, K, d, generator, dtype, draw_device, mean_range)
    redrawn = 0
    for _ in range(max_redraws):
        counts = torch.zeros(T, K, dtype=torch.long, device=y.device).scatter_add_(1, y, torch.ones_like(y))
        bad = (counts < min_class_size).any(-1)
        nbad = int(bad.sum())  # host sync: data generation, not a hot path
        if nbad == 0:
            break
        redrawn += nbad
        x2, y2, w2, mu2, cov2 = _draw(nbad, N, K, d, generator, dtype, draw_device, mean_range)
        x[bad], y[bad], w[bad], mu[bad], cov[bad] = x2, y2, w2, mu2, cov2
    else:  # pragma: no cover - needs an absurd configuration
        raise RuntimeError(f"could not meet min_class_size={min_class_size} after {max_redraws} redraws")
    dev = torch.device(device)
    return SyntheticBatch(x.to(dev), y.to(dev), w.to(dev), mu.to(dev), cov.to(dev), redrawn)


def synthetic_data_bytes_per_trial(n: int, num_classes: int, dim: int, dtype: torch.dtype = torch.float64) -> int:
    """Peak bytes one trial of :func:`synthetic_data` holds (an analytic estimate for sizing blocks): the
    normal draws, the points and one class's points (three ``(n, d)`` arrays), one class's mask in ``dtype``,
    the labels (int64), a boolean mask, and the model's parameters with their factors (``K (3 d^2 + 2 d + 1)``
    values). At n = 1000, K = 5, d = 3 in float64: 90,360 bytes."""
    size = torch.finfo(dtype).bits // 8
    return size * n * (3 * dim + 1) + 8 * n + n + size * num_classes * (3 * dim * dim + 2 * dim + 1)


def chunk_size_for_budget(trials: int, bytes_per_trial: float, memory_budget: float = DEFAULT_MEMORY_BUDGET) -> int:
    """Largest chunk (>= 1, <= trials) whose estimated working memory fits ``memory_budget`` bytes."""
    if bytes_per_trial <= 0:
        return max(1, int(trials))
    return int(max(1, min(int(trials), math.floor(memory_budget / bytes_per_trial))))


def chunk_seed(seed: int, c: int) -> int:
    """The 63-bit seed of chunk ``c``: child ``c`` of ``SeedSequence(seed)`` (what ``spawn`` would give it),
    built directly, so no list of all children is needed."""
    child = np.random.SeedSequence(int(seed), spawn_key=(int(c),))
    return int(child.generate_state(1, dtype=np.uint64)[0]) & ((1 << 63) - 1)


def chunk_seeds(seed: int, num_chunks: int) -> list[int]:
    """Independent 63-bit seeds for chunks ``0..num_chunks-1`` derived from one ``seed``."""
    return [chunk_seed(seed, c) for c in range(num_chunks)]


def run_chunked(
    fn: Callable[[int, torch.Generator], Any],
    trials: int,
    seed: int = 0,
    bytes_per_trial: float = 0.0,
    memory_budget: float = DEFAULT_MEMORY_BUDGET,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    desc: str | None = None,
    combine: Callable[[list[Any]], Any] | None = None,
    block_size: int | None = None,
) -> Any:
    """Run ``fn(chunk_trials, generator)`` over chunks of ``trials`` and combine the results.

    Each call gets a fresh ``torch.Generator`` on ``device`` seeded from ``chunk_seeds(seed, C)[c]``.
    With ``block_size`` the chunks are fixed blocks of that many trials (the last one shorter), whatever the
    memory budget, so a trial's draws depend only on ``(seed, trials, its index)``: child ``c`` of a
    ``SeedSequence`` does not depend on how many children are spawned.
    The default ``combine`` concatenates tensors (or dicts / tuples of tensors) along dim 0, so a
    chunked run returns the same shapes as one big call; results that are ``None`` are not kept (a ``fn``
    that streams into its own aggregate returns None, and then memory does not grow with ``trials``). ``progress`` shows a tqdm bar (default: only
    when there is more than one chunk).
    """
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if block_size is not None and not (isinstance(block_size, int) and block_size >= 1):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    cs = block_size or chunk_size_for_budget(trials, bytes_per_trial, memory_budget)
    n_chunks = -(-trials // cs)   # sizes and seeds are computed per chunk: no per-chunk list up front
    if progress is None:
        progress = n_chunks > 1
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=trials, desc=desc or "trials", unit="trial", leave=False)
    outs = []
    for c in range(n_chunks):
        size = min(cs, trials - c * cs)
        g = torch.Generator(device=device)
        g.manual_seed(chunk_seed(seed, c))
        out = fn(size, g)
        if out is not None:   # a streaming ``fn`` (it returns None) keeps memory independent of ``trials``
            outs.append(out)
        if bar is not None:
            bar.update(size)
    if bar is not None:
        bar.close()
    return (combine or _concat)(outs)


def _concat(parts: list[Any]) -> Any:
    if not parts:
        return None
    first = parts[0]
    if torch.is_tensor(first):
        return torch.cat(parts, 0)
    if isinstance(first, dict):
        return {k: _concat([p[k] for p in parts]) for k in first}
    if isinstance(first, (list, tuple)):
        return type(first)(_concat([p[i] for p in parts]) for i in range(len(first)))
    return parts


class RunningStats:
    """Streaming summary of a scalar per trial: exact count, mean, variance, minimum and maximum, and quantiles.

    Mean and variance are merged exactly batch by batch (Chan, Golub & LeVeque's pairwise update of
    ``(n, mean, M2)``), so chunked and one-shot runs agree to rounding. Quantiles come from a sparse histogram of
    ``|x|`` on a log grid with ``bins_per_decade`` bins per decade over the whole range of positive floats (no
    clamping: a value of 1e15 lands in its own bin), the sign kept by a second histogram for negative values and
    zeros counted apart: a relative resolution of ``10^(1/bins_per_decade) - 1`` (1.2% by default) for every
    nonzero value. :meth:`quantile` is numpy's default (``"linear"``) rule on the order statistics, each order
    statistic read as its bin's geometric centre clamped into the exact ``[min, max]`` (so ``quantile(0)`` and
    ``quantile(1)`` are exact). Memory grows with the number of occupied bins only (at most 200 per decade the
    values span), never with the number of trials. Non-finite values are counted and excluded.
    """

    def __init__(self, bins_per_decade: int = 200):
        if isinstance(bins_per_decade, bool) or not isinstance(bins_per_decade, int) or bins_per_decade < 1:
            raise ValueError(f"bins_per_decade must be an integer >= 1, got {bins_per_decade!r}")
        self.bpd = bins_per_decade
        self.pos: dict[int, int] = {}   # bin k holds |x| in [10^(k/bpd), 10^((k+1)/bpd))
        self.neg: dict[int, int] = {}
        self.zeros = 0
        self.min, self.max = math.inf, -math.inf
        self.n, self.mean, self.m2, self.nonfinite = 0, 0.0, 0.0, 0

    def _add(self, hist: dict[int, int], a: np.ndarray) -> None:
        if a.size:
            k, c = np.unique(np.floor(np.log10(a) * self.bpd).astype(np.int64), return_counts=True)
            for ki, ci in zip(k.tolist(), c.tolist()):
                hist[ki] = hist.get(ki, 0) + ci

    def update(self, values: Any) -> "RunningStats":
        a = np.asarray(values.detach().cpu() if torch.is_tensor(values) else values, dtype=np.float64).ravel()
        fin = np.isfinite(a)
        self.nonfinite += int((~fin).sum())
        a = a[fin]
        if a.size == 0:
            return self
        nb, mb = a.size, float(a.mean())
        m2b = float(((a - mb) ** 2).sum())
        n = self.n + nb
        delta = mb - self.mean
        self.mean += delta * nb / n
        self.m2 += m2b + delta * delta * self.n * nb / n
        self.n = n
        self.min, self.max = min(self.min, float(a.min())), max(self.max, float(a.max()))
        self.zeros += int((a == 0).sum())
        self._add(self.pos, a[a > 0])
        self._add(self.neg, -a[a < 0])
        return self

    def _order_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cumulative counts, values)`` of the histogram's cells in increasing order of value."""
        kn = sorted(self.neg, reverse=True)             # the most negative value first
        kp = sorted(self.pos)
        counts = [self.neg[k] for k in kn] + [self.zeros] + [self.pos[k] for k in kp]
        centre = lambda k: 10.0 ** ((k + 0.5) / self.bpd)  # noqa: E731 - the geometric centre of bin k
        values = [-centre(k) for k in kn] + [0.0] + [centre(k) for k in kp]
        return np.cumsum(counts), np.clip(np.asarray(values, dtype=np.float64), self.min, self.max)

    def quantile(self, q: float) -> float:
        """The ``q``-quantile, numpy's ``"linear"`` rule: order statistics ``r = floor(q (n - 1))`` and ``r + 1``
        interpolated (each to the histogram's resolution, the extremes exact)."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must lie in [0, 1], got {q!r}")
        if self.n == 0:
            return float("nan")
        cum, values = self._order_statistics()
        h = q * (self.n - 1)
        r0 = int(math.floor(h))
        r1 = min(r0 + 1, self.n - 1)

        def stat(r: int) -> float:
            if r == 0:
                return self.min
            if r == self.n - 1:
                return self.max
            return float(values[int(np.searchsorted(cum, r, side="right"))])

        v0, v1 = stat(r0), stat(r1)
        return v0 + (h - r0) * (v1 - v0)

    def summary(self, level: float = 0.95) -> dict[str, float]:
        from scipy.special import stdtrit  # Student's t quantile (scipy.stats.t.ppf's kernel; 0.2 s to import, not 1 s)

        var = self.m2 / (self.n - 1) if self.n > 1 else float("nan")
        half = float(stdtrit(self.n - 1, 0.5 + level / 2) * math.sqrt(var / self.n)) if self.n > 1 else float("nan")
        return {"n": self.n, "mean": self.mean if self.n else float("nan"), "std": math.sqrt(var) if self.n > 1
                else float("nan"), "ci_low": self.mean - half, "ci_high": self.mean + half,
                "median": self.quantile(0.5), "q05": self.quantile(0.05), "q95": self.quantile(0.95),
                "nonfinite": self.nonfinite}
