"""Privacy vocabulary of the pipelines: ``NoisedBlock``, ``PrivacyRecord``, ``Adjacency``, GDP calibration.

The types come from the accounting package :mod:`torchdpgmm.privacy`. Gaussian-only pipelines compose in Gaussian
differential privacy (Dong, Roth & Su 2019): a Gaussian mechanism of L2 sensitivity ``Delta`` and noise ``sigma`` is ``(Delta/sigma)``-GDP and
``mu^2`` adds over blocks (also under adaptive composition); ``(eps, delta)`` follows from Balle & Wang
(2018, Thm. 8) via :func:`torchdpgmm.release.sound.gdp_epsilon`. Each block is charged at its own worst case, so
under replace-one (where one record's change moves every block at once, not each at its worst) the composed
``mu`` is an upper bound, not an exact value. The noise is continuous float64 Gaussian noise: every record
says it is not protected against floating-point attacks (Mironov 2012).
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from torchdpgmm.privacy import NoisedBlock, PrivacyRecord
from torchdpgmm.release.sound import gdp_delta, gdp_epsilon, gdp_mu

__all__ = ["ADJACENCIES", "NoisedBlock", "parse_adjacency", "gdp_mu", "gdp_epsilon", "gdp_delta",
           "block_mu", "composed_mu", "make_record"]

ADJACENCIES = ("add-remove", "replace-one")
# the caveat the sound release carries for continuous noise (torchdpgmm.release.sound), word for word
FLOAT_NOTE = "continuous float64 noise (not protected against floating-point attacks, Mironov 2012)"


def parse_adjacency(adjacency: Any) -> str:
    """``"add-remove"`` or ``"replace-one"`` (an ``Adjacency`` enum value is accepted); else ValueError."""
    v = getattr(adjacency, "value", adjacency)
    if v not in ADJACENCIES:
        raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
    return v


def block_mu(block: NoisedBlock) -> float:
    """GDP parameter of one Gaussian block: ``sqrt(count) * sensitivity / noise_scale``."""
    if block.mechanism != "gaussian":
        raise ValueError(f"block {block.name!r}: only Gaussian blocks compose in GDP, got {block.mechanism!r}")
    if block.sensitivity == 0:
        return 0.0
    return math.sqrt(block.count) * block.sensitivity / block.noise_scale


def composed_mu(blocks) -> float:
    """``mu = sqrt(sum_b mu_b^2)``: GDP composition of Gaussian mechanisms (Dong, Roth & Su 2019), each block
    at its own worst case (an upper bound when one record moves several blocks, as under replace-one)."""
    return math.sqrt(sum(block_mu(b) ** 2 for b in blocks))


def make_record(*, blocks, delta: float, adjacency: str, mechanism: str, covered: bool, notes, split: dict):
    """One privacy record for a whole pipeline; ``epsilon`` is computed from the composed ``mu`` of ``blocks``."""
    mu = composed_mu(blocks)
    eps = gdp_epsilon(delta, mu)
    bound = ("an upper bound: each block at its own worst case under replace-one" if adjacency == "replace-one"
             else "each block at its own worst case")
    accountant = (f"Gaussian DP (Dong, Roth & Su 2019), composition of {len(blocks)} Gaussian blocks ({bound}), "
                  f"mu={mu:.6g}")
    notes = tuple(notes) + ((FLOAT_NOTE,) if FLOAT_NOTE not in notes else ())
    return PrivacyRecord(epsilon=eps, delta=delta, adjacency=adjacency, accountant=accountant, mode="sound",
                         mechanism=mechanism, blocks=tuple(blocks), covered=covered, notes=notes,
                         split=dict(split))


def blocks_as_dicts(blocks) -> list[dict[str, Any]]:
    return [asdict(b) for b in blocks]
