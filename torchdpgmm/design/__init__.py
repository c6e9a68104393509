"""Mechanism design for the KL-optimal release (paper 000, Algorithm 1) and the covering SDP (23)."""
from .sdp import CoveringSDPResult, label_flip_differences, solve_covering_sdp, solve_lmi_cvxpy

__all__ = ["CoveringSDPResult", "label_flip_differences", "solve_covering_sdp", "solve_lmi_cvxpy"]
