"""SAGMM: sample-and-aggregate release of a Gaussian mixture (the baseline of the DP-MSNM paper, 2021;
the framework of Nissim, Raskhodnikova & Smith 2007 and GUPT, Mohan et al. 2012).

Algorithm (batched over the leading dims of ``X (..., N, d)``):

1. **Blocks.** Every record draws its block ``b_i ~ Uniform{0, ..., l-1}`` independently (``l`` public),
   so the blocks are disjoint and adding, removing or replacing one record changes exactly one block
   (the others keep their records; under add/remove the output law is a mixture over the new record's
   block of laws that each differ from the old one in one block, and hockey-stick divergences are convex).
2. **Block fits.** All ``l`` blocks are fitted in one call of the batched EM (:func:`fit_gmm`, a fixed
   number of iterations, k-means++ start inside the block). A block with fewer than ``K`` records is
   fitted on its first ``K`` slots instead, its records and zero rows up to ``K`` (any function of the block
   alone is allowed: step 4 bounds it; all ``C`` slots would depend on ``C``, which is ``max(N, K)`` by default).
   The number of records is private and never checked: with fewer than ``K`` records, or none, every block is such
   a block and the release is a valid (mostly noise) model.
3. **Alignment, block by block.** Each block's components are ordered using that block's estimate and
   public quantities only: ``align="sort"`` sorts them by ``mu_k . v`` (``v`` a public direction,
   default ``(1, ..., 1)/sqrt(d)``); ``align="reference"`` picks the permutation (all ``K!`` are tried)
   closest in squared distance to public ``reference_means``. Matching to *another block's* estimate
   (e.g. Hungarian matching to block 0) would make every aligned block depend on block 0, so one record
   could move all ``l`` outputs and the sensitivity below would be ``l`` times too small.
4. **Clipping to public ranges.** Means into the box ``[lo, hi]^d``; covariance eigenvalues into
   ``[v_min, v_max]``; weights already lie on the simplex.
5. **Private average.** ``theta = (1/l) sum_b theta_b + noise``. One record changes one ``theta_b``, so
   the average moves by at most the diameter of the clipped set over ``l``:

   ============  =========================================  =============================================
   block         L2 (Gaussian; Frobenius for covariances)   L1 (Laplace; upper triangle of covariances)
   ============  =========================================  =============================================
   weights       ``sqrt(2) / l``                            ``2 / l``
   means         ``sqrt(K) ||hi - lo||_2 / l``              ``K ||hi - lo||_1 / l``
   covariances   ``sqrt(K d) (v_max - v_min) / l``          ``K d (d+1)/2 (v_max - v_min) / l``
   ============  =========================================  =============================================

   (two matrices with spectra in ``[v_min, v_max]`` differ by a symmetric matrix with spectral norm at most
   ``v_max - v_min``, hence Frobenius norm at most ``sqrt(d)`` times that and every entry at most that).
   Gaussian: the three blocks together are ``mu``-GDP with ``mu^2 = sum_b (Delta_b / sigma_b)^2``
   (Dong, Roth & Su 2019), ``mu`` from the analytic Gaussian calibration (Balle & Wang 2018), shares
   ``split`` of ``mu^2``; covariance noise is isotropic in Frobenius-isometric coordinates. Laplace: shares
   ``split`` of ``epsilon``, basic composition (pure epsilon-DP). The same bounds hold for add/remove
   and replace-one adjacency.
6. **Post-processing.** Weights clamped at ``1e-6`` and renormalised, means into the box, covariances
   symmetrised with eigenvalues clamped into ``[v_min, v_max]``.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from torchdpgmm.em._common import (check_em_budget, check_iterations, check_number, check_shares, laplace,
                                   laplace_symmetric, make_record, noised_block)
from torchdpgmm.em.gmm import GMMFit, fit_gmm, mixture_log_likelihood, private_data
from torchdpgmm.mechanisms import normal_noise, symmetric_noise

__all__ = ["fit_sagmm", "sagmm_blocks", "sagmm_aggregate", "sagmm_sensitivities", "align_components"]

DEFAULT_SPLIT = {"weights": 0.1, "means": 0.45, "covariances": 0.45}


def sagmm_sensitivities(num_components: int, d: int, num_blocks: int, lo, hi, v_min: float, v_max: float,
                        norm: str = "l2") -> dict[str, float]:
    """Sensitivities of the average of ``num_blocks`` clipped block estimates (module table, step 5)."""
    w = (torch.as_tensor(hi, dtype=torch.float64) - torch.as_tensor(lo, dtype=torch.float64)).expand(d)
    K, span = num_components, float(v_max - v_min)
    if norm == "l2":
        out = {"weights": math.sqrt(2.0), "means": math.sqrt(K) * float(torch.linalg.vector_norm(w)),
               "covariances": math.sqrt(K * d) * span}
    elif norm == "l1":
        out = {"weights": 2.0, "means": K * float(w.sum()), "covariances": K * d * (d + 1) / 2 * span}
    else:
        raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")
    return {k: v / num_blocks for k, v in out.items()}


def align_components(weights, means, covariances, *, align: str = "sort", direction=None, reference_means=None):
    """Reorder the components of every estimate (batch dims first) using only that estimate and public
    quantities (step 3): ``"sort"`` by ``means . direction``; ``"reference"`` by the permutation of
    minimal ``sum_k ||mu_perm(k) - ref_k||^2`` over all ``K!`` permutations."""
    K, d = means.shape[-2:]
    if align == "sort":
        v = (torch.ones(d, dtype=means.dtype, device=means.device) / math.sqrt(d) if direction is None
             else torch.as_tensor(direction, dtype=means.dtype, device=means.device))
        order = (means @ v).argsort(-1)
    elif align == "reference":
        ref = torch.as_tensor(reference_means, dtype=means.dtype, device=means.device)
        perms = torch.tensor(list(itertools.permutations(range(K))), device=means.device)  # (P, K)
        cost = ((means[..., perms, :] - ref) ** 2).sum((-1, -2))  # (..., P)
        order = perms[cost.argmin(-1)]
    else:
        raise ValueError(f"align must be 'sort' or 'reference', got {align!r}")
    w = torch.gather(weights, -1, order)
    m = torch.gather(means, -2, order.unsqueeze(-1).expand(means.shape))
    c = torch.gather(covariances, -3, order[..., None, None].expand(covariances.shape))
    return w, m, c


def _clip_spectrum(S: torch.Tensor, v_min: float, v_max: float) -> torch.Tensor:
    S = 0.5 * (S + S.transpose(-1, -2))
    evals, evecs = torch.linalg.eigh(S)
    out = (evecs * evals.clamp(v_min, v_max).unsqueeze(-2)) @ evecs.transpose(-1, -2)
    return 0.5 * (out + out.transpose(-1, -2))


#: the block fits see every record clipped, per coordinate, to the mean bounds widened by this many of the largest
#: public standard deviations, ``sqrt(v_max)``: a map of each record alone (SAGMM bounds every block's estimate
#: anyway), which keeps extreme finite records from breaking a block's fit; data that the public bounds describe
#: lie far inside
RECORD_REACH = 10.0

#: the largest magnitude a clipped record may have (public bounds beyond it are refused): the block fits' squares and
#: sums of records then stay finite in float64, so k-means++ draws and the EM cannot overflow on any record
MAX_REACH = 1e100


def sagmm_blocks(X: torch.Tensor, num_blocks: int, mask: torch.Tensor, generator,
                 max_block_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 1: ``(X_blocks (..., l, C, d), mask_blocks (..., l, C))``: record ``i`` goes to block ``b_i``,
    drawn uniformly and independently of everything else, at its rank among the block's records (in row
    order). ``C = max_block_size`` (public; ``None``: ``N``, nothing is ever dropped); records of a block
    beyond ``C`` are dropped, a function of that block alone. Packing keeps memory at ``O(l C d)``."""
    lead, N, d = X.shape[:-2], X.shape[-2], X.shape[-1]
    C = N if max_block_size is None else int(max_block_size)
    assign = torch.randint(num_blocks, mask.shape, generator=generator, device=X.device)
    assign = torch.where(mask, assign, torch.full_like(assign, num_blocks))  # padding -> a discarded bin
    order = torch.sort(assign, dim=-1, stable=True).indices
    sorted_assign = torch.gather(assign, -1, order)
    counts = torch.zeros(*lead, num_blocks + 1, dtype=torch.long, device=X.device)
    counts.scatter_add_(-1, assign, torch.ones_like(assign))
    starts = counts.cumsum(-1) - counts
    rank_sorted = torch.arange(N, device=X.device) - torch.gather(starts, -1, sorted_assign)
    rank = torch.empty_like(rank_sorted).scatter_(-1, order, rank_sorted)
    keep = (assign < num_blocks) & (rank < C)
    slot = torch.where(keep, assign * C + rank, torch.full_like(assign, num_blocks * C))  # last slot: discard
    Xb = torch.zeros(*lead, num_blocks * C + 1, d, dtype=X.dtype, device=X.device)
    Xb.scatter_(-2, slot.unsqueeze(-1).expand(*slot.shape, d), X)
    mb = torch.zeros(*lead, num_blocks * C + 1, dtype=torch.bool, device=X.device).scatter_(-1, slot, keep)
    return (Xb[..., :-1, :].reshape(*lead, num_blocks, C, d), mb[..., :-1].reshape(*lead, num_blocks, C))


def sagmm_aggregate(X, num_components: int, num_blocks: int, lo, hi, v_min: float, v_max: float, *, mask=None,
                    max_iter: int = 50, align: str = "sort", direction=None, reference_means=None,
                    generator=None, return_blocks: bool = False, max_block_size: int | None = None):
    """Steps 1-4 and the noise-free average of step 5: ``(weights, means, covariances)`` of shapes
    ``(..., K)``, ``(..., K, d)``, ``(..., K, d, d)`` (plus the clipped block estimates when asked)."""
    K = num_components
    mask = torch.ones(X.shape[:-1], dtype=torch.bool, device=X.device) if mask is None else mask
    lo_t = torch.as_tensor(lo, dtype=X.dtype, device=X.device)
    hi_t = torch.as_tensor(hi, dtype=X.dtype, device=X.device)
    # every record inside the public box the bounds allow for the data (a map of each record alone): a finite but
    # extreme record (1e12) made a block's Cholesky or k-means++ draw fail, an error on a private value
    reach = RECORD_REACH * math.sqrt(v_max)
    X = torch.minimum(torch.maximum(X, lo_t - reach), hi_t + reach)
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))
    # every block has at least K slots, so that one with fewer than K records is fitted on K (below); without a public
    # cap the slots are max(N, K): fewer rows than K used to fail inside every block's fit, an error on N
    C = max(X.shape[-2], K) if max_block_size is None else max_block_size
    Xb, mb = sagmm_blocks(X, num_blocks, mask, generator, C)
    # a block with fewer than K records is fitted on its first K slots: its records (packed first) and zero rows up
    # to K, a function of the block alone. It used to take all C slots, and C = N without max_block_size, so adding a
    # record to one block moved every such block's estimate (a weight by 0.25; an audit's finding)
    small = mb.sum(-1, keepdim=True) < K
    first = torch.arange(mb.shape[-1], device=mb.device) < K
    mb = torch.where(small, first, mb)
    # no read of a block's count, and no raise on any value: a covariance that loses positive definiteness to
    # cancellation (one far record alone in a component: S2/N_k - m m^T at |x|^2 1e-16 swamps reg_covar) is replaced by
    # the public v_max I for that E-step (fit_gmm's _private). Step 5's sensitivity covers any block output.
    fit = fit_gmm(Xb, K, mask=mb, max_iter=max_iter, generator=generator, _private=True, _fallback_var=v_max)
    w, m, c = (torch.nan_to_num(t, nan=0.0) for t in (fit.weights, fit.means, fit.covariances))
    w, m, c = align_components(w, m, c, align=align, direction=direction, reference_means=reference_means)
    w = w.clamp(0.0, 1.0)
    w = w / w.sum(-1, keepdim=True).clamp(min=torch.finfo(X.dtype).tiny)
    m = torch.minimum(torch.maximum(m, lo_t), hi_t)
    c = _clip_spectrum(c, v_min, v_max)
    avg = (w.mean(-2), m.mean(-3), c.mean(-4))
    return (avg, (w, m, c)) if return_blocks else avg


def _fmt(v) -> str:
    t = torch.as_tensor(v, dtype=torch.float64).flatten().tolist()
    return f"{t[0]:g}" if len(t) == 1 else "(" + ", ".join(f"{x:g}" for x in t) + ")"


def _bounds(mean_bounds, var_bounds):
    """``(lo, hi)`` of ``mean_bounds``, after one-line refusals of bounds that are not two numbers or tensors of them
    (a string read as a number: ``float('3')``, or failed inside torch)."""
    for name, pair in (("mean_bounds", mean_bounds), ("var_bounds", var_bounds)):
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise ValueError(f"{name} must be a pair (low, high), got {pair!r}")
    for v in var_bounds:
        check_number("var_bounds", v, above=-math.inf)
    for v in mean_bounds:
        if isinstance(v, (str, bytes, bool)):
            raise TypeError(f"mean_bounds must hold numbers or tensors of them, got {v!r}")
    return mean_bounds


def _check(num_blocks, lo, hi, v_min, v_max, mechanism, delta, split, adjacency) -> None:
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
        raise ValueError(f"num_blocks must be a positive int (public), got {num_blocks!r}")
    lo_t, hi_t = torch.as_tensor(lo, dtype=torch.float64), torch.as_tensor(hi, dtype=torch.float64)
    if not bool(torch.isfinite(lo_t).all() & torch.isfinite(hi_t).all()) or not bool((hi_t > lo_t).all()):
        raise ValueError("mean_bounds (lo, hi) must be finite with hi > lo")
    if not (0.0 < v_min < v_max < math.inf):
        raise ValueError(f"var_bounds must satisfy 0 < v_min < v_max < inf, got ({v_min!r}, {v_max!r})")
    if float(torch.maximum(lo_t.abs(), hi_t.abs()).max()) + RECORD_REACH * math.sqrt(v_max) > MAX_REACH:
        raise ValueError(f"mean_bounds widened by {RECORD_REACH:g} sqrt(v_max) must lie within +-{MAX_REACH:g} (the block "
                         "fits square and sum the records in float64), got mean_bounds "
                         f"({_fmt(lo)}, {_fmt(hi)}), v_max {v_max:g}")
    if mechanism not in ("gaussian", "laplace"):
        raise ValueError(f"mechanism must be 'gaussian' or 'laplace', got {mechanism!r}")
    if mechanism == "gaussian" and delta is None:  # (a given delta is checked with the budget: check_em_budget)
        raise ValueError("mechanism='gaussian' needs delta in (0, 1)")
    if set(split) != set(DEFAULT_SPLIT):
        raise ValueError(f"split must give positive shares for {sorted(DEFAULT_SPLIT)}, got {split!r}")
    check_shares("split", list(split.values()), 3)  # finite: an inf share divided by zero after the block fits
    if adjacency not in ("add-remove", "replace-one"):
        raise ValueError(f"adjacency must be 'add-remove' or 'replace-one', got {adjacency!r}")


def _check_settings(K: int, d: int, lo, hi, max_iter, align, direction, reference_means) -> None:
    """SAGMM's public settings that need ``K`` and ``d``, refused in one line before the block fits run (they failed
    after them, on the private data, with raw shape errors): ``mean_bounds`` scalars or ``(d,)``, ``max_iter`` an int
    >= 0, ``align`` known, ``direction`` finite of shape ``(d,)``, ``reference_means`` finite of shape ``(K, d)``."""
    for name, v in (("lo", lo), ("hi", hi)):
        shape = tuple(torch.as_tensor(v, dtype=torch.float64).shape)
        if shape not in ((), (1,), (d,)):
            raise ValueError(f"mean_bounds' {name} must be a number or have shape ({d},), got shape {shape}")
    check_iterations("max_iter", max_iter, 0)
    if align not in ("sort", "reference"):
        raise ValueError(f"align must be 'sort' or 'reference', got {align!r}")
    for name, v, shape in (("direction", direction, (d,)), ("reference_means", reference_means, (K, d))):
        if v is None:
            if name == "reference_means" and align == "reference":
                raise ValueError("align='reference' needs public reference_means (K, d)")
            continue
        t = torch.as_tensor(v, dtype=torch.float64)
        if tuple(t.shape) != shape or not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must be finite with shape {shape}, got shape {tuple(t.shape)}")


def fit_sagmm(
    X: torch.Tensor,
    num_components: int,
    epsilon: float,
    delta: float | None = None,
    *,
    num_blocks: int,
    mean_bounds: tuple[Any, Any],
    var_bounds: tuple[float, float],
    mechanism: str = "gaussian",
    adjacency: str = "add-remove",
    max_iter: int = 50,
    align: str = "sort",
    direction=None,
    reference_means=None,
    split: dict[str, float] | None = None,
    max_block_size: int | None = None,
    mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> GMMFit:
    """SAGMM (module docstring), record-level DP under ``adjacency``; returns a :class:`GMMFit` whose
    ``loglik`` is an evaluation on the given rows (not covered by the record) and whose ``privacy`` is a
    privacy record (:func:`torchdpgmm.em._common.make_record`). ``mean_bounds = (lo, hi)`` (scalars or ``(d,)``) and ``var_bounds = (v_min,
    v_max)`` are public; ``delta`` is required for ``mechanism="gaussian"``. ``max_block_size`` (public, or
    ``None`` for no cap) bounds each block's rows, so the batched block fits need ``O(l C d)`` memory instead
    of ``O(l N d)``; it must not be computed from the data (under add/remove not even from ``N``). Any number of
    unmasked rows, none included, gives a model (module docstring, step 2). ``extras`` hold the noise scales and
    sensitivities, and the number of records ``n`` only under replace-one adjacency (under add/remove it is private:
    it was returned exactly until 2026-12-02)."""
    check_em_budget(epsilon, delta)
    split = dict(DEFAULT_SPLIT if split is None else split)
    lo, hi = _bounds(mean_bounds, var_bounds)
    v_min, v_max = float(var_bounds[0]), float(var_bounds[1])
    _check(num_blocks, lo, hi, v_min, v_max, mechanism, delta, split, adjacency)
    X, mask = private_data(X, num_components, mask)  # public facts only; a non-finite record read as the origin
    K, d = num_components, X.shape[-1]
    _check_settings(K, d, lo, hi, max_iter, align, direction, reference_means)
    tot = sum(split.values())
    split = {k: v / tot for k, v in split.items()}
    if max_block_size is not None and (isinstance(max_block_size, bool) or not isinstance(max_block_size, int)
                                       or max_block_size < num_components):
        raise ValueError(f"max_block_size must be an int >= num_components = {num_components} (public) or None, "
                         f"got {max_block_size!r}")
    w, m, c = sagmm_aggregate(X, K, num_blocks, lo, hi, v_min, v_max, mask=mask, max_iter=max_iter, align=align,
                              direction=direction, reference_means=reference_means, generator=generator,
                              max_block_size=max_block_size)
    batch = w.shape[:-1]
    if mechanism == "gaussian":
        from torchdpgmm.privacy import gdp_mu

        sens = sagmm_sensitivities(K, d, num_blocks, lo, hi, v_min, v_max, "l2")
        mu = float(gdp_mu(float(epsilon), float(delta)))
        scale = {k: sens[k] / (mu * math.sqrt(split[k])) for k in sens}
        w = w + normal_noise(w.shape, scale["weights"], generator, dtype=w.dtype, device=w.device)
        m = m + normal_noise(m.shape, scale["means"], generator, dtype=m.dtype, device=m.device)
        # isotropic in Frobenius-isometric coordinates: diagonal std sigma, off-diagonal sigma / sqrt 2
        c = c + symmetric_noise(batch + (K,), d, scale["covariances"], kind="gaussian", isometric=True,
                                generator=generator, dtype=c.dtype, device=c.device)
        accountant = f"Gaussian DP over the three blocks (mu={mu:.6g}), analytic Gaussian calibration"
    else:
        sens = sagmm_sensitivities(K, d, num_blocks, lo, hi, v_min, v_max, "l1")
        scale = {k: sens[k] / (float(epsilon) * split[k]) for k in sens}
        w = laplace(w, scale["weights"], generator)
        m = laplace(m, scale["means"], generator)
        c = laplace_symmetric(c, scale["covariances"], generator)
        accountant = "basic composition of three Laplace mechanisms (pure epsilon-DP)"
    lo_t = torch.as_tensor(lo, dtype=X.dtype, device=X.device)
    hi_t = torch.as_tensor(hi, dtype=X.dtype, device=X.device)
    w = w.clamp(min=1e-6)
    w = w / w.sum(-1, keepdim=True)
    m = torch.minimum(torch.maximum(m, lo_t), hi_t)
    c = _clip_spectrum(c, v_min, v_max)
    ll = mixture_log_likelihood(torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X)), w, m, c, mask)
    kind, norms = (("gaussian", ("l2", "l2", "frobenius")) if mechanism == "gaussian" else ("laplace", ("l1",) * 3))
    blocks = tuple(noised_block(k, kind, sens[k], scale[k], nm) for k, nm in zip(("weights", "means", "covariances"),
                                                                                   norms))
    record = make_record(
        blocks=blocks, covered=True,
        epsilon=float(epsilon), delta=0.0 if mechanism == "laplace" else float(delta), adjacency=adjacency,
        accountant=accountant, mode="sound", mechanism=f"SAGMM (sample-and-aggregate, {mechanism})",
        split={**split, "num_blocks": num_blocks, "align": align, "sensitivities": sens, "noise_scales": scale},
        notes=[f"{num_blocks} disjoint blocks (independent uniform block per record); one record changes one "
               "block, so the average of clipped block estimates moves by at most the clipped set's diameter "
               f"/ {num_blocks}", f"public ranges: means in [{_fmt(lo)}, {_fmt(hi)}], covariance eigenvalues in "
               f"[{v_min:g}, {v_max:g}]; components aligned per block ({align}), never across blocks",
               "the returned .loglik is an evaluation on the raw data, not covered by this record"])
    extras = {"noise_scales": scale, "sensitivities": sens}
    if adjacency == "replace-one":  # the count is public there; under add/remove it is private and not released
        extras["n"] = mask.sum(-1).to(X.dtype)
    return GMMFit(w, m, c, ll, n_iter=max_iter, privacy=record, extras=extras)
