"""End-to-end pipelines of Liu, Scaglione & Peisert (2025), Sec. V-D/V-E: PCA -> DP-GMM release -> classifier / synthetic data -> MLP.

Submodules: :mod:`.pca` (torch PCA), :mod:`.gmm` (classifier accuracy, class-conditional synthesis with the
released histogram), :mod:`.mlp` (many MLPs trained at once), :mod:`.dpsgd` (Opacus DP-SGD baseline,
optional), :mod:`.record` (record-level DP by clipping, eqs. 28-32), :mod:`.features` (image -> PCA features).

The accounted real-scale pipeline (issue #20): :mod:`.dp_pca` (public DCT transform, DP PCA),
:mod:`.class_mixture` (sound release of several Gaussians per class), :mod:`.synthetic_classifier` (the whole
pipeline and its single privacy record), :mod:`.trainer` (MLP on fresh synthetic samples), :mod:`.dpsgd_fast`
(DP-SGD with closed-form per-example clipping and PLD accounting of the feature step).
"""
from __future__ import annotations

from .class_mixture import ClassMixture, release_class_mixture
from .dp_pca import DPPCA, dp_pca, lowfreq_dct, project_to_ball
from .dpsgd_fast import calibrate_noise_multiplier, pipeline_epsilon, train_dpsgd_fast
from .gmm import gmm_accuracy, histogram_counts, synthesize
from .mlp import MLPTrainResult, init_mlp, mlp_accuracy, mlp_forward, train_mlps
from .pca import PCA, fit_pca
from .synthetic_classifier import PipelineConfig, PipelineRelease, components_rule, release_pipeline
from .trainer import train_on_sampler
from .record import (
    clip_records,
    paper_eq32_constant,
    record_level_release,
    record_mean_noise_variance,
    record_mean_sensitivity,
)

__all__ = [
    "ClassMixture",
    "release_class_mixture",
    "DPPCA",
    "dp_pca",
    "lowfreq_dct",
    "project_to_ball",
    "calibrate_noise_multiplier",
    "pipeline_epsilon",
    "train_dpsgd_fast",
    "PipelineConfig",
    "PipelineRelease",
    "components_rule",
    "release_pipeline",
    "train_on_sampler",
    "PCA",
    "fit_pca",
    "gmm_accuracy",
    "histogram_counts",
    "synthesize",
    "MLPTrainResult",
    "init_mlp",
    "mlp_accuracy",
    "mlp_forward",
    "train_mlps",
    "clip_records",
    "paper_eq32_constant",
    "record_level_release",
    "record_mean_noise_variance",
    "record_mean_sensitivity",
]
