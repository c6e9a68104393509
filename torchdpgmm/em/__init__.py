"""EM family: batched GMM EM, DP-EM (Park et al. 2017), DPGMM (Wu et al. 2016), skew-normal mixtures,
DP-MSNM (the DP-MSNM paper, 2021) and SAGMM (sample and aggregate).

Public entry points (all batched over leading dims of ``X (..., N, d)``, masks for ragged data):

* :func:`fit_gmm` -- EM for full-covariance GMMs (many datasets and restarts in one call).
* :func:`fit_skew_normal_mixture` -- EM for skew-normal mixtures (the DP-MSNM paper 2021, eqs. 8-10).
* :func:`fit_dp_em` -- DP-EM, LLG / GGG perturbation, MAP M-step, moments accountant (Park et al. 2017).
* :func:`fit_dpgmm` -- DPGMM (Wu et al. 2016), Laplace noise with L1 sensitivities.
* :func:`fit_dp_msnm` -- DP-MSNM (2021), Laplace noise with Lemmas 1-4.
* :func:`fit_sagmm` -- SAGMM: disjoint blocks, batched EM, per-block alignment, noisy average.
"""
from __future__ import annotations

from torchdpgmm.em.gmm import (
    GMMFit,
    e_step,
    fit_gmm,
    gaussian_log_prob,
    kmeans_plusplus,
    m_step,
    mixture_log_likelihood,
)
from torchdpgmm.em.skew_normal import (
    SkewNormalMixtureFit,
    fit_skew_normal_mixture,
    msnm_e_step,
    msnm_m_step,
    sample_skew_normal_mixture,
    skew_normal_component_log_prob,
    skew_normal_mixture_log_prob,
    to_centred_params,
    to_lambda_eta,
)
from torchdpgmm.em.dp_em import MAPPrior, calibrate_dp_em, dp_em_epsilon, fit_dp_em, map_m_step
from torchdpgmm.em.dpgmm import fit_dpgmm, wu_sensitivities
from torchdpgmm.em.dp_msnm import fit_dp_msnm, msnm_sensitivities
from torchdpgmm.em.sagmm import align_components, fit_sagmm, sagmm_aggregate, sagmm_sensitivities

__all__ = [
    "GMMFit", "fit_gmm", "e_step", "m_step", "gaussian_log_prob", "kmeans_plusplus",
    "mixture_log_likelihood",
    "SkewNormalMixtureFit", "fit_skew_normal_mixture", "msnm_e_step", "msnm_m_step",
    "sample_skew_normal_mixture", "skew_normal_component_log_prob", "skew_normal_mixture_log_prob",
    "to_centred_params", "to_lambda_eta",
    "MAPPrior", "fit_dp_em", "map_m_step", "calibrate_dp_em", "dp_em_epsilon",
    "fit_dpgmm", "wu_sensitivities", "fit_dp_msnm", "msnm_sensitivities",
    "fit_sagmm", "sagmm_aggregate", "sagmm_sensitivities", "align_components",
]
