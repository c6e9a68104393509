"""Privacy events as values (what was released, not how much it cost); accountants price them.

Modelled on dp-accounting's ``DpEvent`` and Opacus' split: events are plain frozen dataclasses, the
accountants of :mod:`torchdpgmm.privacy.accountants` compose them.

- :class:`GaussianEvent` ``(sensitivity, sigma)``: Gaussian mechanism, L2 sensitivity.
- :class:`LaplaceEvent` ``(sensitivity, scale)``: Laplace mechanism, L1 sensitivity, density ``exp(-|x|/b)``.
- :class:`SubsampledGaussianEvent` ``(noise_multiplier, sampling_rate, steps)``: DP-SGD (Abadi et al.
  2016) with Poisson sampling.
- :class:`DiscreteGaussianEvent` ``(sensitivity, sigma)``: discrete Gaussian on Z^m (Canonne, Kamath &
  Steinke 2020), L2 sensitivity in grid units.
- :class:`DiscreteLaplaceEvent` ``(sensitivity, scale)``: discrete Laplace on Z^m, L1 sensitivity in grid
  units, ``P(k) ∝ exp(-|k|/scale)``.
- :class:`ApproxDPEvent` ``(epsilon, delta)``: a mechanism known only to be (epsilon, delta)-DP.
- :class:`ComposedEvent` ``(events)``: sequential (adaptive) composition.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

__all__ = [
    "PrivacyEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "SubsampledGaussianEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "ApproxDPEvent",
    "ComposedEvent",
    "events_from_blocks",
]


def _pos(name: str, v: float, *, allow_zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {v!r}")
    return float(v)


class PrivacyEvent:
    """Base class of the events (for ``isinstance`` checks)."""

    def _check(self, positive: tuple[str, ...], nonnegative: tuple[str, ...] = ("sensitivity",)) -> None:
        """Validate and float-cast the named fields of a frozen event (``ValueError`` naming the field)."""
        for name in nonnegative:
            object.__setattr__(self, name, _pos(name, getattr(self, name), allow_zero=True))
        for name in positive:
            object.__setattr__(self, name, _pos(name, getattr(self, name)))


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian mechanism ``f(D) + N(0, sigma^2 I)`` with L2 sensitivity ``sensitivity``; mu-GDP with
    ``mu = sensitivity / sigma`` (Dong, Roth & Su 2019)."""

    sensitivity: float
    sigma: float

    def __post_init__(self) -> None:
        self._check(("sigma",))

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma


@dataclass(frozen=True)
class LaplaceEvent(PrivacyEvent):
    """Laplace mechanism ``f(D) + Lap(scale)`` per coordinate with L1 sensitivity ``sensitivity``;
    pure ``epsilon = sensitivity / scale``."""

    sensitivity: float
    scale: float

    def __post_init__(self) -> None:
        self._check(("scale",))

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class SubsampledGaussianEvent(PrivacyEvent):
    """``steps`` rounds of the Poisson-subsampled Gaussian mechanism (DP-SGD: clip C, noise
    ``noise_multiplier * C``, each record included with probability ``sampling_rate``)."""

    noise_multiplier: float
    sampling_rate: float
    steps: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _pos("noise_multiplier", self.noise_multiplier))
        q = _pos("sampling_rate", self.sampling_rate)
        if q > 1:
            raise ValueError(f"sampling_rate must lie in (0, 1], got {q!r}")
        object.__setattr__(self, "sampling_rate", q)
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive int, got {self.steps!r}")


@dataclass(frozen=True)
class DiscreteGaussianEvent(PrivacyEvent):
    """Discrete Gaussian ``N_Z(0, sigma^2)`` added to each coordinate of an integer-valued query with L2
    sensitivity ``sensitivity`` (grid units). It is ``rho``-zCDP with ``rho = sensitivity^2/(2 sigma^2)``
    (Canonne, Kamath & Steinke 2020, Thm 4 in one dimension; Renyi divergences of independent
    coordinates add, so the bound holds in Z^m with the L2 sensitivity). ``dim`` = number of coordinates
    (1 allows the exact one-dimensional PLD)."""

    sensitivity: float
    sigma: float
    dim: int = 1

    def __post_init__(self) -> None:
        self._check(("sigma",))
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be a positive int, got {self.dim!r}")

    @property
    def rho(self) -> float:
        return self.sensitivity ** 2 / (2 * self.sigma ** 2)


@dataclass(frozen=True)
class DiscreteLaplaceEvent(PrivacyEvent):
    """Discrete Laplace ``P(k) ∝ exp(-|k|/scale)`` on each coordinate of an integer-valued query with L1
    sensitivity ``sensitivity`` (grid units); pure ``epsilon = sensitivity / scale`` (Canonne, Kamath &
    Steinke 2020, Sec. 2)."""

    sensitivity: float
    scale: float

    def __post_init__(self) -> None:
        self._check(("scale",))

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class ApproxDPEvent(PrivacyEvent):
    """A mechanism known only to be (epsilon, delta)-DP (e.g. a release whose record has no blocks)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _pos("epsilon", self.epsilon, allow_zero=True))
        d = _pos("delta", self.delta, allow_zero=True)
        if d >= 1:
            raise ValueError(f"delta must lie in [0, 1), got {d!r}")
        object.__setattr__(self, "delta", d)


@dataclass(frozen=True)
class ComposedEvent(PrivacyEvent):
    """Sequential (adaptive) composition of ``events``."""

    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        ev = tuple(self.events)
        if not all(isinstance(e, PrivacyEvent) for e in ev):
            raise TypeError("ComposedEvent.events must hold PrivacyEvent instances")
        object.__setattr__(self, "events", ev)


def events_from_blocks(blocks: Iterable) -> list[tuple[PrivacyEvent, int]]:
    """``[(event, count)]`` for the :class:`~torchdpgmm.privacy.record.NoisedBlock` s of a record.

    ``TypeError`` for a block whose mechanism no accountant can price (``"wishart"``,
    ``"random-mapping"``, ``"r1smg"``, ``"none"``): such a release has no DP guarantee to compose."""
    out: list[tuple[PrivacyEvent, int]] = []
    for b in blocks:
        m = b.mechanism
        if m == "gaussian":
            ev: PrivacyEvent = GaussianEvent(b.sensitivity, b.noise_scale)
        elif m == "laplace":
            ev = LaplaceEvent(b.sensitivity, b.noise_scale)
        elif m == "discrete-gaussian":
            ev = DiscreteGaussianEvent(b.sensitivity, b.noise_scale, dim=2)  # dim > 1: no 1-D shortcut
        elif m == "discrete-laplace":
            ev = DiscreteLaplaceEvent(b.sensitivity, b.noise_scale)
        elif m == "subsampled-gaussian":
            if b.sensitivity <= 0:
                continue
            ev = SubsampledGaussianEvent(b.noise_scale / b.sensitivity, b.sampling_rate, 1)
        else:
            raise TypeError(f"block {b.name!r} uses mechanism {m!r}, which has no DP accounting")
        out.append((ev, b.count))
    return out
