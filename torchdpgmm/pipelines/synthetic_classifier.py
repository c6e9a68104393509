"""One accounted pipeline: private images -> public transform -> DP PCA -> unit ball -> DP class mixture.

Steps (all noise Gaussian, one GDP accountant, one privacy record with one ``NoisedBlock`` per noised block):

1. optional fixed public transform (:func:`~torchdpgmm.pipelines.dp_pca.lowfreq_dct`, 14x14 low frequencies);
2. a noisy mean (count and sum of records clipped to ``mean_clip`` around 0): the public-by-post-processing
   centre of the next step;
3. DP PCA (:func:`~torchdpgmm.pipelines.dp_pca.dp_pca`) of records clipped to ``pca_clip`` around that centre;
4. projection to ``d`` components, scaling by the public radius ``radius`` and clipping into the unit ball;
5. the sound class-mixture release (:func:`~torchdpgmm.pipelines.class_mixture.release_class_mixture`).

The budget: ``mu = gdp_mu(epsilon, delta)`` (Balle & Wang 2018 calibration of Gaussian DP, Dong, Roth &
Su 2019), split in advance as fractions of ``mu^2`` (``mean_fraction``, ``pca_fraction``, the rest to the
mixture). The record's epsilon is recomputed from the composed blocks and is never above the target.
Every default in :class:`PipelineConfig` was chosen on a validation split carved from Fashion-MNIST's
training set (``docs/realdata.md``) and is kept fixed for every data set.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch

from torchdpgmm._validation import check_clip_bound

from ._privacy import composed_mu, gdp_mu, make_record, parse_adjacency
from .class_mixture import (COVARIANCE_TYPES, DEFAULT_CLASS_RULE, PIPELINE_CLASS_TO_POOLED, ClassMixture, check_class_rule, check_class_to_pooled,
                            check_stage_budgets, release_in_unit_ball)
from .dp_pca import DPPCA, check_pca_input, dp_pca, lowfreq_dct, project_to_ball, record_count, usable_records

__all__ = ["PipelineConfig", "PipelineRelease", "release_pipeline", "private_projection", "components_rule", "public_transform",
           "check_images"]


def _plain(v: Any) -> Any:
    """A NumPy scalar as its Python value (``np.int64(5)`` -> ``5``); anything else unchanged."""
    return v.item() if type(v).__module__ == "numpy" and getattr(v, "ndim", None) == 0 else v


@dataclass(frozen=True)
class PipelineConfig:
    """Public settings of the pipeline (``components_per_class=None``: :func:`components_rule`).

    ``shrink`` is the shrinkage strength of the one-Gaussian model; ``mixture_shrink`` the one used at the
    class and the cell level when several components per class are released (the cells need the class
    covariances pulled harder toward the pooled one, because they are shrunk toward them in turn). ``cell_clip``
    is the public radius around each cell's released centre to which the cells' records are clipped
    (:func:`~torchdpgmm.pipelines.class_mixture.release_class_mixture`, step 3). ``class_rule`` is how the class
    stage estimates the class covariances: ``"auto"`` releases the pooled second moment beside the class blocks
    (inside the same budget) and applies the tabular noise-aware rule (:mod:`torchdpgmm.release.covariance_rule`),
    ``"legacy"`` the older ``eta / (eta + tau)`` shrinkage toward the pooled class covariance; with ``"auto"``,
    ``shrink``, ``mixture_shrink`` and ``min_shrinkage`` act on the cells only, and ``class_to_pooled`` (default
    :data:`~torchdpgmm.pipelines.class_mixture.PIPELINE_CLASS_TO_POOLED`; None: the tables'
    :func:`~torchdpgmm.release.covariance_rule.class_to_pooled_ratio`) is the class blocks' precision over the pooled
    block's. ``"auto"`` with ratio 1 is the default: on Fashion-MNIST's validation split it scored 79.04 / 80.88 /
    82.79% at eps 0.5 / 1 / 2 against ``"legacy"``'s 77.91 / 80.54 / 82.81% (a tie at eps 2)
    (``docs/results/synth-validation-class-rule.json``)."""

    transform: str = "dct14"
    mean_clip: float = 14.0
    pca_clip: float = 10.0
    n_components: int = 40
    radius: float = 5.0
    mean_fraction: float = 0.02
    pca_fraction: float = 0.2
    components_per_class: int | None = None
    covariance_type: str = "full"
    shrink: float = 1.0
    mixture_shrink: float = 8.0
    min_shrinkage: float = 0.0
    cell_min_shrinkage: float = 0.0
    lloyd_steps: int = 2
    lloyd_rank: int = 5
    cell_floor: float = 0.3
    cell_clip: float = 0.6
    stage_split: tuple[float, float, float] = (0.5, 0.06, 0.44)
    class_rule: str = DEFAULT_CLASS_RULE
    class_to_pooled: float | None = PIPELINE_CLASS_TO_POOLED

    def __post_init__(self) -> None:
        # a NumPy scalar (a grid from np.arange, a value read from an array) stands for its Python value, as in
        # the estimators; the checks below then see plain ints and floats, and to_dict stays JSON
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, tuple):
                object.__setattr__(self, f.name, tuple(_plain(x) for x in v))
            else:
                object.__setattr__(self, f.name, _plain(v))

    def to_dict(self) -> dict:
        return asdict(self)

    def check(self) -> None:
        """Refuse a bad setting in one line (``ValueError``); public values only, called before any noise."""
        def pos(name):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")

        for name in ("mean_clip", "pca_clip", "radius", "cell_floor", "cell_clip"):
            pos(name)
        for name in ("mean_clip", "pca_clip", "radius", "cell_clip"):  # bounds whose 4th power the release computes
            try:
                check_clip_bound(getattr(self, name))
            except ValueError:
                raise ValueError(f"{name}={getattr(self, name)!r} is outside the range the release computes with "
                                 f"(about 1e-77 < {name} < 1e77); rescale the features and the bound") from None
        if self.transform not in ("dct14", "none"):
            raise ValueError(f"transform must be 'dct14' or 'none', got {self.transform!r}")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}")
        check_class_rule(self.class_rule)
        check_class_to_pooled(self.class_to_pooled)
        if not (0 < self.mean_fraction and 0 < self.pca_fraction and self.mean_fraction + self.pca_fraction < 1):
            raise ValueError("mean_fraction and pca_fraction must be > 0 with sum < 1")
        ints = {"n_components": 1, "lloyd_steps": 0, "lloyd_rank": 1}
        if self.components_per_class is not None:
            ints["components_per_class"] = 1
        for name, low in ints.items():
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= low):
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        if not all(0 <= getattr(self, n) < math.inf for n in ("shrink", "mixture_shrink")):
            raise ValueError(f"shrink and mixture_shrink must be finite and >= 0, got {self.shrink!r}, {self.mixture_shrink!r}")
        if not all(0 <= getattr(self, n) <= 1 for n in ("min_shrinkage", "cell_min_shrinkage")):
            raise ValueError("min_shrinkage and cell_min_shrinkage must be in [0, 1]")
        sp = tuple(self.stage_split)
        if not (len(sp) == 3 and all(0 <= f < math.inf for f in sp) and sp[0] > 0 and sp[2] > 0
                and (sp[1] > 0 or self.lloyd_steps == 0)):
            raise ValueError("stage_split must be three fractions (class, lloyd, cells) >= 0, class and cells > 0, "
                             f"lloyd > 0 when lloyd_steps > 0; got {self.stage_split!r}")


def components_rule(epsilon: float) -> int:
    """Public rule for the number of Gaussians per class, chosen on Fashion-MNIST's validation split.

    On that split (N = 50,000, d = 40; ``scripts/synth_validation.py``, cells centred and clipped to
    ``cell_clip``) one Gaussian per class tied with eight components at eps = 1, and eight components per class
    won at eps = 2 and 5; the switch sits between the validated budgets 1 and 2.
    """
    return 1 if epsilon < 1.5 else 8


def public_transform(images: torch.Tensor, transform: str) -> torch.Tensor:
    """``"dct14"``: 14x14 low-frequency 2-D DCT of 28x28 images; ``"none"``: flattened float64 images."""
    if transform == "dct14":
        return lowfreq_dct(images, size=28, keep=14)
    if transform == "none":
        # the width from the shape, not -1: reshape(0, -1) raises on an empty table (N = 0 is a dataset too)
        return images.reshape(images.shape[0], math.prod(images.shape[1:])).to(torch.float64)
    raise ValueError(f"transform must be 'dct14' or 'none', got {transform!r}")


def check_images(images, transform: str) -> None:
    """Refuse, in one line naming no size of the data, images that are not a tensor ``(N, ...)`` the transform
    reads: ``"dct14"`` needs ``(N, 784)`` or ``(N, 28, 28)`` (an ``(N, 2, 784)`` stack used to broadcast against the
    labels, in a message quoting N), ``"none"`` takes any ``(N, ...)`` and flattens it (public facts only)."""
    if not torch.is_tensor(images):
        raise TypeError(f"images must be a torch tensor (torch.as_tensor(images)), got {type(images).__name__}")
    if images.dim() < 1:
        raise ValueError("images must be a tensor of shape (N, ...): one image per row")
    if transform == "dct14" and tuple(images.shape[1:]) not in ((784,), (28, 28)):
        raise ValueError(f"transform 'dct14' needs images of shape (N, 784) or (N, 28, 28), got (N, "
                         f"{', '.join(map(str, images.shape[1:]))})")


@dataclass
class PipelineRelease:
    """The released model, the released projection, the whole pipeline's privacy record."""

    model: ClassMixture
    pca: DPPCA
    privacy: object
    config: PipelineConfig
    extras: dict = field(default_factory=dict)

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Public transform -> released projection -> unit ball (for test data, or public data)."""
        return project_to_ball(public_transform(images, self.config.transform), self.pca, self.config.radius)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.predict(self.features(images))


def _noisy_mean(X, clip, mu, adjacency, generator, mask=None):
    from torchdpgmm.mechanisms import clip_records, gaussian

    from ._privacy import NoisedBlock

    X, mask = usable_records(X, mask, 0.0)  # a masked or non-finite row is a zero record (no branch)
    Z = clip_records(X, clip)
    sc, ss = (1.0, clip) if adjacency == "add-remove" else (0.0, 2 * clip)
    sig_c = 1.0 / (mu * math.sqrt(0.2))
    sig_s = (clip if adjacency == "add-remove" else 2 * clip) / (mu * math.sqrt(0.8))
    n = gaussian(record_count(X.shape[0], mask, adjacency), sig_c ** 2, generator=generator, check_mean=False)[0]
    s = gaussian(Z.sum(0), sig_s ** 2, generator=generator, check_mean=False)
    blocks = (NoisedBlock("mean-count", "gaussian", sc, sig_c), NoisedBlock("mean-sum", "gaussian", ss, sig_s))
    return s / n.clamp_min(1.0), blocks


def private_projection(X: torch.Tensor, mu: float, cfg: PipelineConfig, *, adjacency: str = "add-remove",
                       mask: torch.Tensor | None = None, generator: torch.Generator | None = None):
    """Noisy mean then DP PCA of transformed records ``X (N, D)`` under ``mu``-GDP in total (split
    ``mean_fraction : pca_fraction``); returns ``(DPPCA, blocks)``. Also the feature step of DP-SGD.
    Rows where ``mask`` is False, or with a non-finite value, are zero records (no branch); under add/remove
    they are not counted either, so the result equals the one without them."""
    check_pca_input(X, mask)  # before the noisy mean's noise
    fm = cfg.mean_fraction / (cfg.mean_fraction + cfg.pca_fraction)
    centre, b_mean = _noisy_mean(X, cfg.mean_clip, mu * math.sqrt(fm), adjacency, generator, mask=mask)
    pca = dp_pca(X, cfg.n_components, clip_bound=cfg.pca_clip, mu=mu * math.sqrt(1 - fm), adjacency=adjacency,
                 center=centre, split={"count": 0.02, "sum": 0.08, "second_moment": 0.9}, mask=mask,
                 generator=generator)
    return pca, tuple(b_mean) + tuple(pca.blocks)


def release_pipeline(images: torch.Tensor, labels: torch.Tensor, *, num_classes: int, epsilon: float, delta: float,
                     adjacency: str = "add-remove", config: PipelineConfig | None = None,
                     generator: torch.Generator | None = None) -> PipelineRelease:
    """Run the whole pipeline (module docstring) on private ``images (N, ...)`` and integer ``labels (N,)``.

    Every check is on public inputs and comes before any noise. A row with a non-finite value or a label
    outside ``[0, num_classes)`` is dropped at every step without a branch (never refused: an error would
    reveal it); under add/remove the release then equals the release without that row."""
    from torchdpgmm._validation import check_delta, check_epsilon

    cfg = config or PipelineConfig()
    adjacency = parse_adjacency(adjacency)
    from torchdpgmm.release import check_privacy_strength

    check_epsilon(float(epsilon))
    check_delta(float(delta))
    check_privacy_strength(epsilon, delta)  # refuse a budget that protects nothing, warn on a weak one (public)
    if not (isinstance(num_classes, numbers.Integral) and not isinstance(num_classes, bool) and num_classes >= 1):
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    num_classes = int(num_classes)
    cfg.check()
    fr = cfg.mean_fraction + cfg.pca_fraction
    check_images(images, cfg.transform)
    if not torch.is_tensor(labels) or labels.shape != images.shape[:1]:
        raise ValueError("labels must be a tensor of shape (N,) matching images")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise TypeError(f"labels must hold integer class indices, got dtype {labels.dtype}")
    # the m initial centres of a class are its mean +- sqrt(lambda_j) v_j along its top floor(m/2) released
    # directions, so m <= 2 d: the public rule is capped there, an explicit larger m is refused (public values)
    m = cfg.components_per_class or min(components_rule(float(epsilon)), 2 * cfg.n_components)
    if m > 2 * cfg.n_components:
        raise ValueError(f"components_per_class must be <= 2 x n_components = {2 * cfg.n_components} (the initial "
                         f"centres lie along the top released directions), got {m}")
    mu = gdp_mu(float(epsilon), float(delta)) * (1 - 1e-9)  # insurance: gdp_mu is on the safe side already
    check_stage_budgets(mu * math.sqrt(1 - fr), float(delta), m,  # before any data is read (public values)
                        dict(zip(("class", "lloyd", "cells"), cfg.stage_split)))
    X = public_transform(images, cfg.transform)
    if not (1 <= cfg.n_components <= X.shape[-1]):
        raise ValueError(f"n_components must be in [1, {X.shape[-1]}], got {cfg.n_components}")
    # a row with a non-finite feature or a label outside [0, num_classes) is dropped at every step, without a
    # branch: it is masked out of the noisy mean and the DP PCA (a zero record, counted only under
    # replace-one, where the count is public), and the mixture ignores it (label -1; its features there are
    # zeroed too)
    labels = labels.to(device=X.device, dtype=torch.int64)
    # (a row is non-finite iff its sum is, except a finite row whose sum overflows float64: dropped too)
    keep = torch.isfinite(X.sum(-1)) & (labels >= 0) & (labels < num_classes)
    labels = torch.where(keep, labels, torch.full_like(labels, -1))
    pca, b_feat = private_projection(X, mu * math.sqrt(fr), cfg, adjacency=adjacency, mask=keep, generator=generator)
    U = project_to_ball(X, pca, cfg.radius)
    model, b_mix = release_in_unit_ball(U, labels, num_classes, mu=mu * math.sqrt(1 - fr), delta=delta,
                                         components_per_class=m, adjacency=adjacency, lloyd_steps=cfg.lloyd_steps,
                                         stage_split=dict(zip(("class", "lloyd", "cells"), cfg.stage_split)),
                                         shrink=cfg.shrink if m == 1 else cfg.mixture_shrink,
                                         min_shrinkage=cfg.min_shrinkage, cell_min_shrinkage=cfg.cell_min_shrinkage,
                                         lloyd_rank=cfg.lloyd_rank, cell_floor=cfg.cell_floor, cell_clip=cfg.cell_clip,
                                         covariance_type=cfg.covariance_type, class_rule=cfg.class_rule,
                                         class_to_pooled=cfg.class_to_pooled, generator=generator)
    blocks = tuple(b_feat) + tuple(b_mix)
    notes = [f"record-level DP, adjacency {adjacency}; every private-data step is a Gaussian block below",
             f"mu {mu:.6g} in total (Gaussian DP); split: the stages' fractions of mu^2",
             f"public transform {cfg.transform!r}; mean clip {cfg.mean_clip:g}, PCA clip {cfg.pca_clip:g}, "
             f"radius {cfg.radius:g}, d={cfg.n_components}, {m} component(s) per class"]
    if cfg.covariance_type != "full":
        notes.append(f"covariance_type {cfg.covariance_type!r} applied as post-processing of a full release")
    if cfg.class_rule == "auto":
        notes.append("class stage: class and pooled second moments released together (class-pooled-second-moment "
                     "block), class covariances by the noise-aware rule of torchdpgmm.release.covariance_rule")
    rec = make_record(blocks=blocks, delta=float(delta), adjacency=adjacency, mechanism="dp-pca+class-mixture",
                      covered=True, notes=notes,
                      split={"mean": cfg.mean_fraction, "pca": cfg.pca_fraction, "mixture": 1 - fr})
    if composed_mu(blocks) > mu * (1 + 1e-9):  # a defect of this code, never of the data
        raise RuntimeError("composed mu exceeds the target; refusing to return the release")
    extras = {"components_per_class": m, "mu": mu}  # no wall time: it is a side channel on private data
    return PipelineRelease(model=model, pca=pca, privacy=rec, config=replace(cfg, components_per_class=m), extras=extras)
