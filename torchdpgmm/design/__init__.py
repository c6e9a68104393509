"""Mechanism design for the KL-optimal release (Liu, Scaglione & Peisert 2025, Algorithm 1) and the covering SDP (23).

Public: :func:`design_mechanism` -> :class:`MechanismDesign` (``design.at(epsilon)`` for cheap epsilon sweeps),
:func:`solve_covering_sdp` (dual / cvxpylayers), :func:`solve_lmi_cvxpy` (literal LMI reference),
:func:`label_flip_differences`. See ``docs/design.md``.
"""
from .algorithm import VARIANTS, MechanismDesign, design_mechanism, mapping_pmf, neighbour_counts
from .sdp import (CoveringSDPResult, covering_violation, label_flip_differences, solve_covering_sdp,
                  solve_lmi_cvxpy)

__all__ = ["VARIANTS", "MechanismDesign", "design_mechanism", "mapping_pmf", "neighbour_counts",
           "CoveringSDPResult", "covering_violation", "label_flip_differences", "solve_covering_sdp",
           "solve_lmi_cvxpy"]
