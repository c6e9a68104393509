"""End-to-end pipelines of paper 000, Sec. V-D/V-E: PCA -> DP-GMM release -> classifier / synthetic data -> MLP.

Submodules: :mod:`.pca` (torch PCA), :mod:`.gmm` (classifier accuracy, class-conditional synthesis with the
released histogram), :mod:`.mlp` (many MLPs trained at once), :mod:`.dpsgd` (Opacus DP-SGD baseline,
optional), :mod:`.record` (record-level DP by clipping, eqs. 28-32), :mod:`.features` (image -> PCA features).
"""
from __future__ import annotations

from .gmm import gmm_accuracy, histogram_counts, synthesize
from .mlp import MLPTrainResult, init_mlp, mlp_accuracy, mlp_forward, train_mlps
from .pca import PCA, fit_pca
from .record import (
    clip_records,
    paper_eq32_constant,
    record_level_release,
    record_mean_noise_variance,
    record_mean_sensitivity,
)

__all__ = [
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
