"""DP-SGD with vectorised per-example clipping (closed form) and PLD accounting of the whole pipeline.

For an MLP ``h_l = a_{l-1} W_l + b_l``, ``a_l = relu(h_l)`` the per-example gradient of layer ``l`` is the
outer product ``a_{l-1,i} delta_{l,i}^T`` (plus ``delta_{l,i}`` for the bias), so its squared norm is
``(||a_{l-1,i}||^2 + 1) ||delta_{l,i}||^2`` and the sum of clipped per-example gradients is
``a_{l-1}^T (c * delta_l)`` with ``c_i = min(1, C / ||g_i||)`` ("ghost clipping"; Goodfellow 2015,
Lee & Kifer 2021): no per-example gradient is materialised. Noise ``N(0, (sigma C)^2)`` is added to the
clipped sum, batches are Poisson samples with rate ``q`` (Abadi et al. 2016), updates use Adam
(post-processing of the noisy gradients).

Accounting (:func:`pipeline_epsilon`): dp-accounting's privacy-loss-distribution accountant (Koskela et al.
2020; Doroshenko et al. 2022) composes the feature step (a ``mu``-GDP Gaussian mechanism: the DP PCA) with
``T`` Poisson-subsampled Gaussian steps, under the same adjacency as the DP-GMM release (add/remove by
default; replace-one with dp-accounting's REPLACE_ONE relation, where a clipped sum moves by ``2C``).
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import torch

from torchdpgmm.mechanisms import normal_noise

from ._privacy import parse_adjacency
from .generators import check_generator_device

__all__ = ["pipeline_epsilon", "calibrate_noise_multiplier", "train_dpsgd_fast", "mlp_params", "mlp_logits"]


def _relation(adjacency: str):
    import dp_accounting

    NR = dp_accounting.NeighboringRelation
    return NR.ADD_OR_REMOVE_ONE if parse_adjacency(adjacency) == "add-remove" else NR.REPLACE_ONE


def pipeline_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                     adjacency: str = "add-remove", feature_mu: float = 0.0, discretization: float = 1e-4) -> float:
    """Epsilon (PLD) of a ``feature_mu``-GDP feature step followed by ``steps`` sampled Gaussian steps."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(_relation(adjacency), value_discretization_interval=discretization)
    if feature_mu > 0:
        # a mu-GDP Gaussian block = Gaussian of unit sensitivity and std 1/mu; REPLACE_ONE doubles the
        # distance of dp-accounting's unit Gaussian, so its multiplier is 2/mu there
        scale = 1.0 if parse_adjacency(adjacency) == "add-remove" else 2.0
        acc.compose(dp_accounting.GaussianDpEvent(scale / feature_mu))
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), int(steps)))
    return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def calibrate_noise_multiplier(epsilon: float, delta: float, sampling_rate: float, steps: int, *,
                               adjacency: str = "add-remove", feature_mu: float = 0.0, tol: float = 3e-3) -> float:
    """Smallest noise multiplier (to ``tol``, on the safe side) with :func:`pipeline_epsilon` ``<= epsilon``.

    The bisection runs on a coarse PLD grid (discretisation 1e-3, pessimistic); the result is then checked on
    the fine grid (1e-4) and raised by ``tol`` steps until the fine check passes. Cached: the value depends on
    public quantities only.
    """
    f = lambda s, h=1e-3: pipeline_epsilon(s, sampling_rate, steps, delta, adjacency=adjacency,  # noqa: E731
                                           feature_mu=feature_mu, discretization=h)
    lo, hi = 0.3, 2.0
    while f(hi) > epsilon:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise ValueError("epsilon too small for this feature budget / number of steps")
    while f(lo) <= epsilon and lo > 1e-3:
        lo /= 2
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) <= epsilon else (mid, hi)
    while f(hi, 1e-4) > epsilon:
        hi *= 1 + tol
    return hi


def mlp_params(sizes: Sequence[int], generator=None, dtype=torch.float32, device=None) -> list[torch.Tensor]:
    """``[W1 (in, out), b1, ...]`` drawn like ``torch.nn.Linear`` (uniform +-1/sqrt(fan_in))."""
    out = []
    dev = torch.device("cpu" if device is None else device)
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = 1 / math.sqrt(a)  # drawn where they live, with a generator of that device (the generator rule)
        out += [(torch.rand(a, b, generator=generator, dtype=dtype, device=dev) * 2 - 1).mul_(bound),
                (torch.rand(b, generator=generator, dtype=dtype, device=dev) * 2 - 1).mul_(bound)]
    return out


def mlp_logits(params, X):
    h = X
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = torch.relu(h)
    return h


def _clipped_grad_sum(params, X, y, clip):
    """Sum over the batch of per-example gradients clipped to ``clip`` (closed form, module docstring)."""
    acts, h = [X], X
    L = len(params) // 2
    for i in range(L):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < L - 1:
            h = torch.relu(h)
            acts.append(h)
    delta = torch.softmax(h, -1)
    delta[torch.arange(X.shape[0], device=X.device), y] -= 1.0
    deltas = [delta]
    for i in range(L - 1, 0, -1):
        delta = (delta @ params[2 * i].T) * (acts[i] > 0)
        deltas.insert(0, delta)
    sq = sum(((acts[i] ** 2).sum(-1) + 1) * (deltas[i] ** 2).sum(-1) for i in range(L))
    # a finite record can still overflow float32 (||a||^2 = inf, times a zero delta: NaN): its gradient's norm is
    # then not a number, and it contributes nothing (norm 0 <= clip) instead of a NaN that would reach every update
    ok = torch.isfinite(sq).unsqueeze(-1)
    c = torch.clamp(clip / sq.sqrt().clamp_min(1e-12), max=1.0).unsqueeze(-1)
    zero = torch.zeros((), dtype=X.dtype, device=X.device)
    grads = []
    for i in range(L):
        cd = torch.where(ok, deltas[i] * c, zero)
        grads += [torch.where(ok, acts[i], zero).T @ cd, cd.sum(0)]
    return grads


def dpsgd_schedule(n_public: float, batch: int, epochs: float) -> tuple[float, int]:
    """``(sampling_rate, steps)`` of Poisson-sampled DP-SGD from a PUBLIC (or already released, noisy) record
    count ``n_public``, never from the private N: ``q = min(1, batch / n)``, ``steps = max(1, floor(epochs n /
    batch))`` (Abadi et al. 2016). A non-finite or non-positive count (a noisy count can be) is read as 1."""
    n = float(n_public)
    n = n if math.isfinite(n) and n >= 1.0 else 1.0
    if batch < 1 or not (epochs > 0):
        raise ValueError("need batch >= 1 and epochs > 0")
    return min(1.0, batch / n), max(1, int(epochs * n / batch))


def train_dpsgd_fast(X, y, *, num_classes: int, noise_multiplier: float, sampling_rate: float, steps: int,
                     lr: float = 1e-3, clip: float = 1.0, hidden: Sequence[int] = (256, 128),
                     generator: torch.Generator | None = None, device="cpu", n_public: float | None = None) -> dict:
    """Train one MLP by DP-SGD (Poisson sampling, ghost clipping, Gaussian noise, Adam); returns params.

    ``n_public`` (required): the public (or released noisy) record count; the noisy gradient sum is divided
    by the expected batch ``sampling_rate * n_public``. It is never read from ``X``: the number of rows is
    private under add/remove adjacency (a caller under replace-one passes ``len(X)`` itself). Rows with a
    non-finite feature or a label outside ``[0, num_classes)`` are never sampled (a dropped row is a removed
    one, as in the DP-GMM pipeline); nothing raises on them. A comparison baseline, sampled as Opacus samples:
    each step reads its Poisson batch's rows back to the host (``nonzero``: one sync per step), so the batch's
    size, and the step's work and time, follow the draw and the usable rows. The trained weights are what the
    accounting covers; no timing is returned (a wall time of work on private data is not released). A fixed-shape
    step (every row weighted by the draw) was tried and not kept: it does ``1 / sampling_rate`` times the work.

    Everything runs on ``device`` with ``generator`` on that device (the generator rule,
    :mod:`torchdpgmm.pipelines.generators`): initialisation, Poisson sampling and noise are drawn there.
    """
    if not (0 < sampling_rate <= 1) or steps < 1:
        raise ValueError("need 0 < sampling_rate <= 1 and steps >= 1")
    # shapes are public; a message naming no size (N is private under add/remove): a short y used to give torch's
    # broadcasting error quoting N, and a 1-D X was broadcast by the usable mask into an (N, N) table, every row the
    # whole data vector, and trained on as N features
    if not torch.is_tensor(X) or X.dim() != 2:
        raise ValueError("X must be a tensor of shape (N, d): one row per record")
    if not torch.is_tensor(y) or y.shape != X.shape[:1]:
        raise ValueError("y must be a tensor of shape (N,): one label per row of X")
    if n_public is None:
        raise ValueError("n_public is required: the public (or released, noisy) record count that sets the "
                         "update normaliser, never the private number of rows")
    std = float(noise_multiplier) * float(clip)
    if not (math.isfinite(std) and std >= 0):
        raise ValueError(f"noise_multiplier * clip must be finite and >= 0, got {std!r}")
    dev = torch.device(device)
    check_generator_device(generator, dev)
    Xd, yd = X.to(dev, torch.float32), y.to(dev)
    usable = torch.isfinite(Xd.sum(-1)) & (yd >= 0) & (yd < num_classes)
    Xd = torch.where(usable.unsqueeze(-1), Xd, torch.zeros((), dtype=Xd.dtype, device=dev))
    yd = torch.where(usable, yd, torch.zeros_like(yd))
    N = Xd.shape[0]
    n_pub = float(n_public)
    n_pub = n_pub if math.isfinite(n_pub) and n_pub >= 1.0 else 1.0
    params = mlp_params([Xd.shape[1], *hidden, num_classes], generator=generator, device=dev)
    for p in params:
        p.requires_grad_(False)
    opt = torch.optim.Adam(params, lr=lr)
    expected = sampling_rate * n_pub
    for _ in range(int(steps)):
        take = (torch.rand(N, generator=generator, device=dev) < sampling_rate) & usable
        idx = take.nonzero().squeeze(-1)  # the Poisson batch: a host read per step (docstring)
        grads = _clipped_grad_sum(params, Xd[idx], yd[idx], clip)
        for p, g in zip(params, grads):
            # the noise layer's unvalidated sampler: the public scale was checked once above, and the clipped sum
            # (private) is never read on the host (gaussian() would check its finiteness: a sync per tensor)
            p.grad = (g + normal_noise(g.shape, std, generator, dtype=g.dtype, device=g.device)) / expected
        opt.step()
    return {"params": [p.detach() for p in params]}
