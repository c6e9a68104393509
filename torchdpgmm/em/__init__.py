"""EM family: batched GMM EM, DP-EM (Park et al.), DPGMM (Wu et al.), skew-normal mixtures, DP-MSNM."""
from __future__ import annotations

from torchdpgmm.em.gmm import GMMFit, fit_gmm, e_step, m_step, gaussian_log_prob, kmeans_plusplus

__all__ = ["GMMFit", "fit_gmm", "e_step", "m_step", "gaussian_log_prob", "kmeans_plusplus"]
