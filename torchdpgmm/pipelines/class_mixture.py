"""A sound DP release of several Gaussian components per class, and its classifier / sampler.

Input: records ``U (N, d)`` in the unit ball (after :func:`~torchdpgmm.pipelines.dp_pca.project_to_ball`)
with public-range labels ``y``. All noise is Gaussian, so the stages compose exactly in GDP
(Dong, Roth & Su 2019); their ``mu`` budgets are fixed in advance from public quantities.

1. **Class stage** (always): :func:`torchdpgmm.release.sound.sound_statistics` (the project's sound release,
   Gaussian mechanism on per-class counts, sums and second moments of clipped records) gives one Gaussian
   per class: the one-component model, and the starting point and shrinkage target of the cells.
2. **Cells** (``components_per_class = m > 1``): ``m`` centres per class start at the released class mean
   plus/minus the released top eigen-directions (``+-sqrt(lambda_j) v_j``); ``lloyd_steps`` noisy Lloyd
   steps follow (assign each record to the nearest centre of its class in the class metric restricted to the
   class's top ``lloyd_rank`` released eigen-directions, ``sum_{j<=r} (v_j^T (x - c))^2 / lambda_j``; release
   noisy counts and sums per cell: DP k-means in the style of Su et al. 2016). The restriction matters: the
   full metric ``Sigma_k^{-1}`` magnifies the centres' noise along the small-variance directions. Every record
   lies in exactly one cell, so each step is one Gaussian mechanism on the whole partition (parallel
   composition inside a block); sensitivities add-remove (1, 1), replace-one (sqrt 2, 2).
3. **Cell stage**: the sound release again, on labels ``k*m + cell`` (``K*m`` groups), of the records
   centred at their cell's released centre ``c`` and clipped to ``||x - c|| <= cell_clip`` (a public radius
   below the unit ball's: the second-moment sensitivity is ``cell_clip^2``, so the noise scale on a cell's
   covariance is ``cell_clip^2`` times the unclipped one, while a record's distance to its own centre is mostly
   under it); the centres are added back to the released means (covariances are shift-free), without the sound
   release's PSD repair at the noise level (that floor, ``~ sqrt(d) sigma_Q / n``, sits above most of a small
   cell's true eigenvalues and would make every cell nearly isotropic in its minor directions).

Post-processing (released values and public noise levels only): cell covariances are shrunk toward their
class's covariance, class covariances toward the pooled covariance, with weight
``lambda = eta / (eta + tau)``: ``eta = shrink * 2 sqrt(d) sigma_Q / n~`` is the spectral size of the
second-moment noise in that covariance (``2 sqrt(d) sigma`` for a d x d symmetric Gaussian matrix) and
``tau = tr(target)/d`` the typical signal eigenvalue; class eigenvalues are floored at the noise level by the
sound release, cell covariances are repaired in their class's whitened coordinates (eigenvalues of
``L_k^{-1} Sigma_kj L_k^{-T}`` floored at ``cell_floor``, ``Sigma_k = L_k L_k^T``). ``covariance_type``
(scikit-learn's names) then maps the covariances to full / tied / diag / spherical (as post-processing of
the full release).

``class_rule`` (:data:`CLASS_RULES`) chooses the class stage's estimate. ``"auto"`` (the default) is the tabular
default of the sound release (``covariance_type="auto"``, :mod:`torchdpgmm.release.covariance_rule`): the pooled
second moment ``sum_n z z^T`` is released beside the class blocks inside the same stage budget (split
:func:`~torchdpgmm.release.covariance_rule.auto_split` of the moment split, one more ``NoisedBlock``), the class
moments are combined with it by generalised least squares, the pooled covariance is shrunk toward its diagonal
(Ledoit & Wolf 2004) and each class toward the pooled one with the rule's per-direction weight; the cells are
shrunk toward these class covariances as above. ``"legacy"`` is the older rule above. ``class_to_pooled`` (None:
the tables' :func:`~torchdpgmm.release.covariance_rule.class_to_pooled_ratio`) sets the class blocks' precision over the
pooled block's; the pipeline passes :data:`PIPELINE_CLASS_TO_POOLED`. On Fashion-MNIST's validation split
(``docs/results/synth-validation-class-rule.json``, ``scripts/synth_validation.py``, 4 release seeds,
re-run 2026-11-28) ``"auto"`` with ratio 1 scores 79.04 / 80.88 / 82.79% at eps 0.5 / 1 / 2 against ``"legacy"``'s
77.91 / 80.54 / 82.81%, and with the tables' old ratio 0.3 it scores 78.41 / 80.29 / 82.99% (below ``"legacy"`` at
eps 1: the class blocks then get too little of the budget). The rule's class weights against a grid of fixed
weights on the same releases: ``docs/results/class-rule-diagnosis.json`` (``scripts/class_rule_diagnosis.py``, as
of commit 8c5eeef, before the counts floor was merged). Ratio 1 loses on the tables
(``docs/results/covariance-rule-weight-ratio1.json``: ``scripts/covariance_rule_validation.py --class-to-pooled 1`` at
commit 3757094, reproduced only there; the rule's later ratio sweep, ``docs/results/class-to-pooled.json``, says the
same at this code), so it is the pipeline's constant, not the tables'.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import torch

from torchdpgmm.mechanisms import clip_records, gaussian
from torchdpgmm.release.covariance_rule import auto_split
from torchdpgmm.release.sound import gdp_epsilon, sound_statistics

from ._privacy import NoisedBlock, parse_adjacency
from .dp_pca import usable_records

__all__ = ["ClassMixture", "release_class_mixture", "COVARIANCE_TYPES", "CLASS_RULES", "DEFAULT_CLASS_RULE",
           "PIPELINE_CLASS_TO_POOLED",
           "check_class_rule", "check_class_to_pooled", "check_records", "stage_mus", "check_stage_budgets"]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
#: how the class stage estimates the class covariances (:func:`_class_stage`)
CLASS_RULES = ("auto", "legacy")
DEFAULT_CLASS_RULE = "auto"
#: the pipeline's class blocks' precision over the pooled block's (``PipelineConfig.class_to_pooled``): 1 on
#: Fashion-MNIST's validation split (docs/results/synth-validation-class-rule.json), where the tables' 0.3 lost
#: 0.25 points at eps 1; a public constant of the pipeline, like its other defaults
PIPELINE_CLASS_TO_POOLED = 1.0


def check_class_rule(class_rule) -> str:
    """Refuse a class rule outside :data:`CLASS_RULES` in one line (``ValueError``); a public setting."""
    if not isinstance(class_rule, str) or class_rule not in CLASS_RULES:
        raise ValueError(f"class_rule must be one of {CLASS_RULES}, got {class_rule!r}")
    return class_rule


def check_class_to_pooled(class_to_pooled) -> None:
    """Refuse a ``class_to_pooled`` that is not None or a finite number > 0 (``ValueError``, one line)."""
    v = class_to_pooled
    if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf):
        raise ValueError(f"class_to_pooled must be None or a finite number > 0, got {v!r}")


def _stage_split(components_per_class: int, stage_split: dict | None) -> dict[str, float]:
    """The mixture's stages' shares of ``mu^2`` before normalising (one class stage when ``m == 1``)."""
    return {"class": 1.0, "lloyd": 0.0, "cells": 0.0} if int(components_per_class) == 1 else \
        dict(stage_split or {"class": 0.5, "lloyd": 0.06, "cells": 0.44})


def stage_mus(mu: float, components_per_class: int, stage_split: dict | None = None) -> dict[str, float]:
    """The Gaussian-DP ``mu`` of each stage that :func:`release_class_mixture` calibrates as an (epsilon, delta)
    release: ``class`` always, ``cells`` with several components per class (public values only)."""
    split = _stage_split(components_per_class, stage_split)
    tot = sum(split.values())
    out = {"class": float(mu) * math.sqrt(split["class"] / tot)}
    if int(components_per_class) > 1:
        out["cells"] = float(mu) * math.sqrt(split["cells"] / tot)
    return out


def check_stage_budgets(mu: float, delta: float, components_per_class: int,
                        stage_split: dict | None = None) -> dict[str, float]:
    """Refuse, in one line and before any data is read, a budget whose smallest stage ``delta`` alone already covers:
    a Gaussian mechanism with so small a ``mu`` is (0, delta)-DP, so the stage's epsilon is 0 and it has nothing to
    calibrate (``ValueError``; public values only). Returns :func:`stage_mus` (the release spends them)."""
    mus = stage_mus(mu, components_per_class, stage_split)
    for name, mu_s in mus.items():
        if not float(gdp_epsilon(float(delta), mu_s)) > 0:
            raise ValueError(f"the budget is too small for the class mixture: its {name} stage gets mu = {mu_s:.3g} "
                             f"(Gaussian DP), which delta = {float(delta):g} alone already covers (epsilon 0), so it "
                             f"has nothing to calibrate; use a larger epsilon or a smaller delta")
    return mus


@dataclass
class ClassMixture:
    """``weights (K,)``, per-class component weights ``comp_weights (K, m)``, ``means (K, m, d)``,
    ``covariances (K, m, d, d)``. The class-conditional density is a mixture of ``m`` Gaussians."""

    weights: torch.Tensor
    comp_weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    extras: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return self.means.shape[0]

    @property
    def components_per_class(self) -> int:
        return self.means.shape[1]

    def log_joint(self, X: torch.Tensor) -> torch.Tensor:
        """``log p(x, k) = log pi_k + log sum_j w_kj N(x | mu_kj, Sigma_kj)``: ``(n, K)``."""
        K, m, d = self.means.shape
        L = torch.linalg.cholesky(self.covariances.reshape(K * m, d, d))
        diff = X.to(L.dtype).unsqueeze(0) - self.means.reshape(K * m, 1, d)  # (Km, n, d)
        sol = torch.linalg.solve_triangular(L, diff.transpose(-1, -2), upper=False)  # (Km, d, n)
        maha = (sol * sol).sum(-2)  # (Km, n)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        logn = -0.5 * (maha + logdet.unsqueeze(-1) + d * math.log(2 * math.pi))
        logn = logn + torch.log(self.comp_weights.reshape(K * m, 1).clamp_min(1e-300))
        per_class = torch.logsumexp(logn.reshape(K, m, -1), dim=1)  # (K, n)
        return (per_class + torch.log(self.weights.clamp_min(1e-300)).unsqueeze(-1)).T

    @torch.no_grad()
    def predict(self, X: torch.Tensor, *, chunk: int = 4096) -> torch.Tensor:
        """Bayes rule ``argmax_k log p(x, k)`` of the released model; ``X (n, d)`` at the model's width ``d``."""
        d = self.means.shape[-1]
        if not torch.is_tensor(X) or X.dim() != 2 or X.shape[-1] != d:
            raise ValueError(f"X must be a tensor of shape (n, {d}) (the model's width), got "
                             + (f"{X.dim()}-D with {X.shape[-1] if X.dim() else 0} column(s)" if torch.is_tensor(X)
                                else type(X).__name__))
        return torch.cat([self.log_joint(X[s:s + chunk]).argmax(-1) for s in range(0, X.shape[0], chunk)])

    def sample(self, n: int, *, generator: torch.Generator | None = None):
        """``n`` synthetic ``(X, y)``: cell counts by largest remainders of ``n pi_k w_kj``, Gaussian draws."""
        from torchdpgmm.mixture import histogram_counts
        from torchdpgmm.modelfile import MAX_SAMPLE_ROWS

        if not isinstance(n, numbers.Integral) or isinstance(n, bool):  # 2.7 used to draw 2 rows
            raise TypeError(f"n must be an integer, got {type(n).__name__} {n!r}")
        if not 0 <= n <= MAX_SAMPLE_ROWS:
            raise ValueError(f"n must be in [0, {MAX_SAMPLE_ROWS:.0e}] (the rows are drawn in memory), got {n}")
        K, m, d = self.means.shape
        flat = (self.weights.unsqueeze(-1) * self.comp_weights).reshape(K * m)
        counts = histogram_counts(flat, int(n))
        cell = torch.repeat_interleave(torch.arange(K * m, device=flat.device), counts, output_size=int(n))
        L = torch.linalg.cholesky(self.covariances.reshape(K * m, d, d))
        z = torch.randn(int(n), d, generator=generator, dtype=L.dtype, device=L.device)
        parts = [zc @ L[g].T for g, zc in enumerate(torch.split(z, counts.tolist()))]  # cells are contiguous
        X = self.means.reshape(K * m, d)[cell] + torch.cat(parts)
        return X, cell // m


def _shrink(cov, target, n_hat, sigma_q, d, shrink, min_shrinkage=0.0):
    eta = shrink * 2 * math.sqrt(d) * sigma_q / (n_hat - 1).clamp_min(1.0)
    tau = torch.diagonal(target, dim1=-2, dim2=-1).sum(-1) / d
    lam = (eta / (eta + tau)).clamp(min_shrinkage, 1.0)[..., None, None]
    return (1 - lam) * cov + lam * target, lam


def _relative_floor(covs, target, floor):
    """PSD repair of ``covs (K, m, d, d)`` in the coordinates whitened by ``target (K, d, d) = L L^T``: the
    eigenvalues of ``L^{-1} Sigma L^{-T}`` are floored at ``floor`` (a fraction of the class's own variance)."""
    L = torch.linalg.cholesky(target).unsqueeze(1)
    A = torch.linalg.solve_triangular(L, covs, upper=False)
    A = torch.linalg.solve_triangular(L, A.transpose(-1, -2), upper=False)
    e, V = torch.linalg.eigh(0.5 * (A + A.transpose(-1, -2)))
    A = (V * e.clamp_min(floor).unsqueeze(-2)) @ V.transpose(-1, -2)
    return L @ A @ L.transpose(-1, -2)


def _metric(covs, rank):
    """``W (K, d, r)``, ``r = min(rank, d)``, with ``||W_k^T x||^2 = sum_{j<=r} (v_j^T x)^2 / lambda_j`` over the
    top ``r`` eigenpairs of the class covariance (``rank >= d``: the full class metric ``Sigma_k^{-1}``)."""
    r = min(int(rank), covs.shape[-1])
    evals, evecs = torch.linalg.eigh(covs)  # ascending
    return evecs[..., -r:] / evals[..., -r:].clamp_min(torch.finfo(covs.dtype).tiny).sqrt().unsqueeze(-2)


def _covariance_type(cov, weights, kind):
    K, m, d, _ = cov.shape
    if kind == "full":
        return cov
    if kind == "tied":
        w = weights.reshape(K * m, 1, 1)
        return ((w * cov.reshape(K * m, d, d)).sum(0) / w.sum()).expand(K, m, d, d).clone()
    dg = torch.diagonal(cov, dim1=-2, dim2=-1)
    if kind == "diag":
        return torch.diag_embed(dg)
    return torch.diag_embed((dg.mean(-1, keepdim=True)).expand(K, m, d))


def _initial_centres(means, covs, m):
    """``m`` centres per class: the mean and +-sqrt(lambda_j) v_j along the top released directions."""
    evals, evecs = torch.linalg.eigh(covs)  # ascending
    steps = []
    for j in range(m):
        axis = j // 2
        sign = 1.0 if j % 2 == 0 else -1.0
        v = evecs[:, :, -1 - axis] * evals[:, -1 - axis].clamp_min(0).sqrt().unsqueeze(-1)
        steps.append(sign * v)
    return means.unsqueeze(1) + torch.stack(steps, 1)  # (K, m, d)


def _assign(U, y, centres, metric):
    """Nearest centre of the record's own class in the metric ``||W_k^T (x - c)||`` (:func:`_metric`,
    ``W (K, d, r)``): cell in ``[0, m)``."""
    K, m, d = centres.shape
    r = metric.shape[-1]
    Uw = (U @ metric.transpose(0, 1).reshape(d, K * r)).reshape(-1, K, r)  # every record in every class's metric
    Uw = torch.gather(Uw, 1, y.reshape(-1, 1, 1).expand(-1, 1, r)).squeeze(1)  # (N, r): its own class
    Cw = torch.einsum("kmi,kij->kmj", centres, metric)  # (K, m, r)
    score = (Cw * Cw).sum(-1)[y] - 2 * torch.einsum("nr,nmr->nm", Uw, Cw[y])  # ||Uw - Cw||^2 - ||Uw||^2
    return score.argmin(-1)


def _lloyd_step(U, g, K, m, sigma_c, sigma_s, old, generator):
    """One noisy Lloyd step on cell labels ``g`` in ``[0, K m]`` (``K m``: a dropped row)."""
    counts = torch.zeros(K * m + 1, dtype=U.dtype, device=U.device).index_add_(0, g, torch.ones_like(g, dtype=U.dtype))
    sums = torch.zeros(K * m + 1, U.shape[1], dtype=U.dtype, device=U.device).index_add_(0, g, U)
    n = gaussian(counts[:-1], sigma_c ** 2, generator=generator, check_mean=False).reshape(K, m)
    s = gaussian(sums[:-1], sigma_s ** 2, generator=generator, check_mean=False).reshape(K, m, -1)
    ok = (n > 5 * sigma_s).unsqueeze(-1)  # a cell too small for its noise keeps its centre (post-processing)
    return torch.where(ok, s / n.clamp_min(1.0).unsqueeze(-1), old)


def _sound_stage(data, labels, groups, mu_stage, name, blocks, *, delta, adjacency, split, generator, clip=1.0,
                 **kw):
    """One sound release (:func:`torchdpgmm.release.sound.sound_statistics`, continuous Gaussian noise) under
    ``mu_stage``-GDP; appends its typed blocks to ``blocks``, renamed by stage; returns ``(stats, sigma_Q)``."""
    import dataclasses

    eps_s = gdp_epsilon(delta, mu_stage)
    stats, rec = sound_statistics(data, labels, groups, eps_s, delta, clip_bound=clip, generator=generator,
                                  adjacency=adjacency, mechanism="gaussian", split=split, noise="continuous",
                                  class_weight="mean", signal=True, **kw)  # the class weight it was validated with
    sq = None
    for b in rec.blocks:  # the sound release's own typed blocks, renamed by stage
        blocks.append(dataclasses.replace(b, name=f"{name}-{b.name.replace('_', '-')}"))
        if b.name == "second_moments":
            sq = b.noise_scale
    return stats, sq


def _signal(stats) -> dict:
    """The sound stage's noisy second moments as z-scores against an empty table (``signal_*`` of
    :func:`~torchdpgmm.release.sound.sound_statistics`), for :func:`torchdpgmm.release.diagnostics.pipeline_mostly_noise`."""
    return {k[len("signal_"):]: v for k, v in stats.items() if k.startswith("signal_")}


def _class_stage(U, y, K, d, mu_class, blocks, *, class_rule, mom, shrink, min_shrinkage, class_to_pooled=None, **kw):
    """The class stage (module docstring, step 1) under ``mu_class``-GDP: ``(stats, Sigma_k (K, d, d), extras)``.

    ``"legacy"``: the class blocks alone, each class shrunk toward the count-weighted pooled covariance with
    ``lambda = eta / (eta + tau)`` (:func:`_shrink`). ``"auto"``: the class blocks and the pooled block
    ``sum_n z z^T`` in one release (``covariance_type="auto"`` of the sound release, split
    :func:`~torchdpgmm.release.covariance_rule.auto_split` of ``mom``), combined and shrunk by
    :func:`~torchdpgmm.release.covariance_rule.shrunk_covariances` (GLS, Ledoit-Wolf pooled -> diagonal, classes
    toward pooled with the rule's per-direction weight); ``class_to_pooled`` (None: the rule's
    :func:`~torchdpgmm.release.covariance_rule.class_to_pooled_ratio`) is the class blocks' precision over the pooled
    block's."""
    if class_rule == "auto":
        eps = None if class_to_pooled is not None else float(gdp_epsilon(kw["delta"], mu_class))  # the stage's
        split = auto_split(mom, class_to_pooled, num_classes=K, dim=d, epsilon=eps)
        cls, _ = _sound_stage(U, y, K, mu_class, "class", blocks, split=split,
                              covariance_type="auto", **kw)
        return cls, cls["covariances"], {"class_counts": cls["counts"], "class_signal": _signal(cls)}  # released
    cls, sq_cls = _sound_stage(U, y, K, mu_class, "class", blocks, split=mom, **kw)
    cov_k = cls["covariances"]
    pooled = (cls["counts"][:, None, None] * cov_k).sum(0) / cls["counts"].sum()
    cov_k, lam_k = _shrink(cov_k, pooled.expand_as(cov_k), cls["counts"], sq_cls, d, shrink, min_shrinkage)
    return cls, cov_k, {"class_shrinkage": lam_k.flatten(), "class_counts": cls["counts"], "class_signal": _signal(cls)}


def _is_int(v, low: int) -> bool:
    """``v`` is an integer (Python's or numpy's, not a bool) of at least ``low``."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= low


def check_records(U, y) -> None:
    """Refuse, in one line that names no size of the data (N is private under add/remove), anything but a tensor
    ``U (N, d)`` with integer labels ``y (N,)`` (``ValueError`` / ``TypeError``; public facts: shapes, dtypes).
    A 1-D ``U`` used to be read as ONE record of width N, broadcast into every row of an (N, N) table."""
    if not torch.is_tensor(U) or U.dim() != 2:
        raise ValueError("U must be a tensor of shape (N, d): one row per record")
    if not torch.is_tensor(y) or y.shape != U.shape[:1]:
        raise ValueError("y must be a tensor of shape (N,): one label per row of U")
    if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        raise TypeError(f"y must hold integer class indices, got dtype {y.dtype}")


def release_class_mixture(U, y, num_classes: int, **options):
    """:func:`release_in_unit_ball` of ``U`` clipped onto the unit ball first: every stage's sensitivity assumes
    the ball. The pipeline's rows lie there already (``project_to_ball``) and it calls
    :func:`release_in_unit_ball` itself (clipping twice moves a row at the ball's edge by an ulp); a direct caller's
    rows of norm 50 used to enter the Lloyd sums as given. ``options``: those of :func:`release_in_unit_ball`."""
    U, y = torch.as_tensor(U), torch.as_tensor(y)
    check_records(U, y)  # before the clip: a 1-D U would be one record of width N
    return release_in_unit_ball(clip_records(U, 1.0), y, num_classes, **options)


def release_in_unit_ball(U, y, num_classes: int, *, mu: float, delta: float, components_per_class: int = 1,
                          adjacency: str = "add-remove", stage_split: dict[str, float] | None = None,
                          moment_split: dict[str, float] | None = None, lloyd_steps: int = 2, lloyd_rank: int = 5,
                          shrink: float = 1.0, min_shrinkage: float = 0.0, cell_min_shrinkage: float = 0.0,
                          cell_floor: float = 0.3, cell_clip: float = 0.6, covariance_type: str = "full",
                          class_rule: str = DEFAULT_CLASS_RULE, class_to_pooled: float | None = None,
                          generator: torch.Generator | None = None):
    """Release a :class:`ClassMixture` of ``U (N, d)`` (rows in the unit ball: the caller's duty), ``y (N,)`` under
    ``mu``-GDP.

    Returns ``(model, blocks)``; ``blocks`` lists every Gaussian block (their composed mu equals ``mu`` up
    to the safe-side rounding of the calibration). ``stage_split``: fractions of ``mu^2`` for
    ``{"class", "lloyd", "cells"}`` (ignored when ``m = 1``: everything goes to the class stage).
    ``class_rule`` (:data:`CLASS_RULES`): how the class stage estimates the class covariances
    (:func:`_class_stage`); with ``"auto"``, ``shrink`` and ``min_shrinkage`` act on the cells only, and
    ``class_to_pooled`` (a finite number > 0, or None for the rule's ratio of K and d) splits the class stage's moment
    budget between the class blocks and the pooled block (:func:`~torchdpgmm.release.covariance_rule.auto_split`).
    """
    adjacency = parse_adjacency(adjacency)
    check_records(U, y)  # every check here is on public facts and comes before any noise
    if covariance_type not in COVARIANCE_TYPES:
        raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")
    check_class_rule(class_rule)
    check_class_to_pooled(class_to_pooled)
    if not _is_int(num_classes, 1):
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    if not _is_int(components_per_class, 1):
        raise ValueError(f"components_per_class must be an int >= 1, got {components_per_class!r}")
    if not _is_int(lloyd_steps, 0):  # -1 used to leave the Lloyd share of mu^2 unspent, silently
        raise ValueError(f"lloyd_steps must be an int >= 0, got {lloyd_steps!r}")
    if not (_is_int(lloyd_rank, 1) and cell_floor > 0 and 0 < cell_clip < math.inf):
        raise ValueError(f"lloyd_rank must be an int >= 1, cell_floor > 0 and cell_clip finite > 0, got "
                         f"{lloyd_rank!r}, {cell_floor!r}, {cell_clip!r}")
    m, K, d = int(components_per_class), int(num_classes), U.shape[-1]
    if m > 2 * d:  # the m initial centres lie along the top floor(m/2) released directions (_initial_centres)
        raise ValueError(f"components_per_class must be <= 2 x d = {2 * d} (the initial centres lie along the top "
                         f"released directions), got {m}")
    mus = check_stage_budgets(mu, delta, m, stage_split)
    split = _stage_split(m, stage_split)  # the Lloyd steps' share
    tot = sum(split.values())
    mom = moment_split or {"counts": 0.02, "sums": 0.18, "second_moments": 0.8}  # fractions of mu^2
    blocks: list = []
    common = {"delta": delta, "adjacency": adjacency, "generator": generator}

    # rows with a label outside [0, K) or a non-finite feature are dropped, branch-free: zero features, and a
    # label that every stage ignores (the sound release drops it; the Lloyd steps send it to a dropped cell)
    U, valid = usable_records(U, (y >= 0) & (y < K), 0.0)  # U is in the unit ball: its sum cannot overflow
    ys = torch.where(valid, y, torch.zeros_like(y))  # a safe index for the per-class metric
    y = torch.where(valid, y, torch.full_like(y, -1))
    mu_class = mus["class"]
    cls, cov_k, extras = _class_stage(U, y, K, d, mu_class, blocks, class_rule=class_rule, mom=mom, shrink=shrink,
                                      min_shrinkage=min_shrinkage, class_to_pooled=class_to_pooled, **common)
    if m == 1:
        means, covs, comp_w = cls["means"].unsqueeze(1), cov_k.unsqueeze(1), torch.ones(K, 1, dtype=U.dtype,
                                                                                    device=U.device)
    else:
        metric = _metric(cov_k, lloyd_rank)
        centres = _initial_centres(cls["means"], cov_k, m)
        if lloyd_steps > 0:
            mu_step = float(mu) * math.sqrt(split["lloyd"] / tot / lloyd_steps)
            sc, ss = ({"add-remove": (1.0, 1.0), "replace-one": (math.sqrt(2), 2.0)})[adjacency]
            sig_c, sig_s = math.sqrt(2) * sc / mu_step, math.sqrt(2) * ss / mu_step  # half of mu_step^2 each
            for t in range(lloyd_steps):
                cell = _assign(U, ys, centres, metric)
                g = torch.where(valid, ys * m + cell, torch.full_like(cell, K * m))
                centres = _lloyd_step(U, g, K, m, sig_c, sig_s, centres, generator)
                blocks += [NoisedBlock(name=f"lloyd{t}-counts", mechanism="gaussian", sensitivity=sc, noise_scale=sig_c),
                           NoisedBlock(name=f"lloyd{t}-sums", mechanism="gaussian", sensitivity=ss, noise_scale=sig_s)]
        cell = _assign(U, ys, centres, metric)
        mu_cells = mus["cells"]
        g = torch.where(valid, ys * m + cell, torch.full_like(cell, -1))
        Z = U - centres.reshape(K * m, d)[ys * m + cell]  # centred at the cell's released centre (public)
        st, sq_c = _sound_stage(Z, g, K * m, mu_cells, "cells", blocks, split=mom, clip=float(cell_clip),
                                eig_floor=float("-inf"), **common)
        means = st["means"].reshape(K, m, d) + centres
        n_c = st["counts"].reshape(K, m)
        comp_w = n_c / n_c.sum(-1, keepdim=True)
        covs, lam = _shrink(st["covariances"].reshape(K, m, d, d), cov_k.unsqueeze(1).expand(K, m, d, d), n_c, sq_c,
                            d, shrink, max(min_shrinkage, cell_min_shrinkage))
        covs = _relative_floor(covs, cov_k, float(cell_floor))
        extras["cell_shrinkage"] = lam.flatten()
    covs = _covariance_type(covs, cls["weights"].unsqueeze(-1) * comp_w, covariance_type)
    model = ClassMixture(weights=cls["weights"], comp_weights=comp_w, means=means, covariances=covs, extras=extras)
    return model, blocks
