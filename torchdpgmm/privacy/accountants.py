"""Accountants: compose privacy events and answer epsilon(delta) / delta(epsilon).

- :class:`GDPAccountant`: Gaussian events only, exact: ``mu^2 = sum (Delta/sigma)^2`` (Dong, Roth &
  Su 2019, Cor. 3.3), converted by :func:`~torchdpgmm.privacy.calibration.gdp_epsilon`.
- :class:`PLDAccountant`: privacy-loss distributions (Koskela et al. 2020; dp-accounting's PLD as the
  engine, pessimistic discretisation, so an upper bound up to the discretisation interval): Gaussian,
  Laplace, Poisson-subsampled Gaussian, discrete Laplace, one-dimensional discrete Gaussian and
  (epsilon, delta) events.
- :class:`ZCDPAccountant`: zero-concentrated DP (Bun & Steinke 2016), exact composition for Gaussian and
  discrete Gaussian events (``rho = Delta^2 / (2 sigma^2)``, Canonne, Kamath & Steinke 2020 Thm 4; Renyi
  divergences of independent coordinates add), converted by their Cor. 13; the accountant that matches
  :func:`~torchdpgmm.privacy.calibration.zcdp_rho` calibration of a discrete release.
- :class:`RDPAccountant`: Renyi DP (Mironov 2017; dp-accounting's RDP), a looser cross-check that also
  prices multi-dimensional discrete Gaussians through their zCDP bound.

Laplace events (continuous or discrete) of a vector-valued query are priced in the PLD accountant by the
one-dimensional pair (``Lap(0, b)`` vs ``Lap(Delta_1, b)``), dp-accounting's convention for
``LaplaceDpEvent``; the pure bound ``eps = Delta_1 / b`` (ZCDP/RDP accountants, records) does not rely on it.

Each has ``compose(event, count=1)`` (returns self), ``get_epsilon(delta)``, ``get_delta(epsilon)`` and
``copy()``; ``ledger`` lists what was composed. Adjacency: sensitivities already encode the neighbouring
relation; it matters only for subsampled events (dp-accounting's ``NeighboringRelation``), so the
PLD/RDP accountants take ``adjacency`` (``LABEL_FLIP`` is a replace-one neighbour).
"""
from __future__ import annotations

import copy as _copy
import math
from typing import Any

from torchdpgmm.privacy.adjacency import Adjacency
from torchdpgmm.privacy.calibration import gdp_delta, gdp_epsilon, zcdp_delta, zcdp_epsilon
from torchdpgmm.privacy.events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    SubsampledGaussianEvent,
)

__all__ = ["Accountant", "GDPAccountant", "ZCDPAccountant", "PLDAccountant", "RDPAccountant", "make_accountant"]


def _flatten(event: PrivacyEvent, count: int) -> list[tuple[PrivacyEvent, int]]:
    if isinstance(event, ComposedEvent):
        return [(e, c * count) for sub in event.events for e, c in _flatten(sub, 1)]
    return [(event, count)]


class Accountant:
    """Common bookkeeping; subclasses price the ledger."""

    name = "accountant"

    def __init__(self, *, adjacency: Adjacency | str = Adjacency.ADD_REMOVE) -> None:
        self.adjacency = Adjacency.parse(adjacency)
        self.ledger: list[tuple[PrivacyEvent, int]] = []

    def _check(self, event: PrivacyEvent) -> None:  # raise TypeError for events this accountant cannot price
        raise NotImplementedError

    def compose(self, event: PrivacyEvent, count: int = 1) -> "Accountant":
        """Record ``count`` adaptive repetitions of ``event``; ``TypeError`` if it cannot be priced."""
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a PrivacyEvent, got {type(event).__name__}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        flat = _flatten(event, count)
        for e, _ in flat:
            self._check(e)
        self.ledger.extend((e, c) for e, c in flat if c > 0)
        return self

    def copy(self) -> "Accountant":
        return _copy.deepcopy(self)

    def get_epsilon(self, delta: float) -> float:
        raise NotImplementedError

    def get_delta(self, epsilon: float) -> float:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(events={len(self.ledger)}, adjacency={self.adjacency.value!r})"


class GDPAccountant(Accountant):
    """Exact composition of Gaussian mechanisms in Gaussian DP: ``mu^2 = sum_i count_i (Delta_i/sigma_i)^2``."""

    name = "GDP"

    def _check(self, event: PrivacyEvent) -> None:
        if not isinstance(event, GaussianEvent):
            raise TypeError(f"GDPAccountant is exact for Gaussian events only, got {type(event).__name__}; "
                            "use PLDAccountant")

    @property
    def mu(self) -> float:
        return math.sqrt(sum(c * e.mu ** 2 for e, c in self.ledger))

    def get_epsilon(self, delta: float) -> float:
        return float(gdp_epsilon(delta, self.mu))

    def get_delta(self, epsilon: float) -> float:
        return float(gdp_delta(epsilon, self.mu))


class ZCDPAccountant(Accountant):
    """Exact zCDP composition: ``rho = sum_i count_i rho_i`` with ``rho = Delta^2/(2 sigma^2)`` for Gaussian
    and discrete Gaussian events and ``rho = eps^2/2`` for (discrete) Laplace ones (pure eps-DP implies
    eps^2/2-zCDP, Bun & Steinke 2016 Prop. 1.4; loose)."""

    name = "zCDP"

    def _check(self, event: PrivacyEvent) -> None:
        if not isinstance(event, (GaussianEvent, DiscreteGaussianEvent, LaplaceEvent, DiscreteLaplaceEvent)):
            raise TypeError(f"ZCDPAccountant cannot price {type(event).__name__}; use PLDAccountant or RDPAccountant")

    @property
    def rho(self) -> float:
        tot = 0.0
        for e, c in self.ledger:
            if isinstance(e, (GaussianEvent, DiscreteGaussianEvent)):
                tot += c * e.sensitivity ** 2 / (2 * e.sigma ** 2)
            else:
                tot += c * e.epsilon ** 2 / 2
        return tot

    def get_epsilon(self, delta: float) -> float:
        return float(zcdp_epsilon(self.rho, delta))

    def get_delta(self, epsilon: float) -> float:
        return float(zcdp_delta(self.rho, epsilon))


def _relation(adjacency: Adjacency) -> Any:
    from dp_accounting import NeighboringRelation

    if adjacency is Adjacency.ADD_REMOVE:
        return NeighboringRelation.ADD_OR_REMOVE_ONE
    return NeighboringRelation.REPLACE_ONE


class PLDAccountant(Accountant):
    """Privacy-loss-distribution accountant on dp-accounting's PLD (pessimistic estimates)."""

    name = "PLD"

    def __init__(self, *, adjacency: Adjacency | str = Adjacency.ADD_REMOVE,
                 value_discretization_interval: float = 1e-4) -> None:
        super().__init__(adjacency=adjacency)
        self.value_discretization_interval = float(value_discretization_interval)
        # (settings, the ledger entries folded, their PLD or None while none has a privacy loss): one value, replaced
        # whole, so the PLD and what it holds never disagree (an interrupted fold, two threads)
        self._fold: tuple = (None, (), None)

    def _check(self, event: PrivacyEvent) -> None:
        ok = (GaussianEvent, LaplaceEvent, SubsampledGaussianEvent, DiscreteLaplaceEvent, ApproxDPEvent)
        if isinstance(event, ok):
            if isinstance(event, DiscreteLaplaceEvent) and event.sensitivity != int(event.sensitivity):
                raise TypeError("PLDAccountant needs an integer sensitivity for discrete Laplace events")
            return
        if isinstance(event, DiscreteGaussianEvent) and event.dim == 1 and event.sensitivity == int(event.sensitivity):
            return
        raise TypeError(f"PLDAccountant cannot price {event!r}; multi-dimensional discrete Gaussians are "
                        "priced by RDPAccountant (zCDP)")

    def _event_pld(self, e: PrivacyEvent):
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as P

        vdi = self.value_discretization_interval
        if isinstance(e, GaussianEvent):
            if e.sensitivity == 0:
                return None
            return P.from_gaussian_mechanism(e.sigma, sensitivity=e.sensitivity, value_discretization_interval=vdi)
        if isinstance(e, LaplaceEvent):
            if e.sensitivity == 0:
                return None
            return P.from_laplace_mechanism(e.scale, sensitivity=e.sensitivity, value_discretization_interval=vdi)
        if isinstance(e, SubsampledGaussianEvent):
            p = P.from_gaussian_mechanism(e.noise_multiplier, sensitivity=1.0, sampling_prob=e.sampling_rate,
                                          value_discretization_interval=vdi,
                                          neighboring_relation=_relation(self.adjacency))
            return p.self_compose(e.steps) if e.steps > 1 else p
        if isinstance(e, DiscreteLaplaceEvent):
            if e.sensitivity == 0:
                return None
            return P.from_discrete_laplace_mechanism(1.0 / e.scale, sensitivity=int(e.sensitivity),
                                                     value_discretization_interval=vdi)
        if isinstance(e, DiscreteGaussianEvent):
            if e.sensitivity == 0:
                return None
            return P.from_discrete_gaussian_mechanism(e.sigma, sensitivity=int(e.sensitivity),
                                                      value_discretization_interval=vdi)
        assert isinstance(e, ApproxDPEvent)
        return P.from_privacy_parameters(common.DifferentialPrivacyParameters(e.epsilon, e.delta),
                                         value_discretization_interval=vdi)

    def _composed(self):
        """The ledger's PLD, composed in ledger order. The ledger only grows through :meth:`compose`, so the entries
        added since the last call are folded onto the kept PLD: the same left fold as composing the whole ledger at
        once (the same numbers), while an odometer that spends n times builds n event PLDs rather than n^2 / 2. If
        the folded entries are no longer the ledger's first ones, or the adjacency or the discretisation changed
        (public attributes), the fold starts again from the whole ledger."""
        key = (self.adjacency, self.value_discretization_interval)
        fold_key, folded, pld = self._fold
        if fold_key != key or tuple(self.ledger[:len(folded)]) != folded:
            folded, pld = (), None
        for entry in self.ledger[len(folded):]:
            e, c = entry
            p = self._event_pld(e)
            if p is not None:
                p = p.self_compose(c) if c > 1 else p
                pld = p if pld is None else pld.compose(p)
            folded = (*folded, entry)
            self._fold = (key, folded, pld)  # after each entry: an interrupted fold keeps what it finished
        self._fold = (key, folded, pld)
        return pld

    def get_epsilon(self, delta: float) -> float:
        pld = self._composed()
        return 0.0 if pld is None else float(pld.get_epsilon_for_delta(delta))

    def get_delta(self, epsilon: float) -> float:
        pld = self._composed()
        return 0.0 if pld is None else float(pld.get_delta_for_epsilon(epsilon))


class RDPAccountant(Accountant):
    """Renyi-DP accountant on dp-accounting's ``RdpAccountant`` (a cross-check; looser than PLD).

    Discrete Gaussian events enter as ``ZCDpEvent(rho)`` with ``rho = Delta^2/(2 sigma^2)``; discrete
    Laplace (pure epsilon-DP) as ``ZCDpEvent(epsilon^2/2)`` (Bun & Steinke 2016, Prop. 1.4)."""

    name = "RDP"

    def __init__(self, *, adjacency: Adjacency | str = Adjacency.ADD_REMOVE, orders: Any = None) -> None:
        super().__init__(adjacency=adjacency)
        self.orders = orders

    def _check(self, event: PrivacyEvent) -> None:
        if isinstance(event, ApproxDPEvent):
            raise TypeError("RDPAccountant cannot price an (epsilon, delta) event; use PLDAccountant")
        if isinstance(event, SubsampledGaussianEvent) and self.adjacency is not Adjacency.ADD_REMOVE:
            raise TypeError("dp-accounting's RDP prices Poisson subsampling under add-remove only; "
                            "use PLDAccountant for replace-one")

    def _dp_event(self, e: PrivacyEvent):
        import dp_accounting as dpa

        if isinstance(e, GaussianEvent):
            return dpa.GaussianDpEvent(e.sigma / e.sensitivity) if e.sensitivity > 0 else dpa.NoOpDpEvent()
        if isinstance(e, LaplaceEvent):
            return dpa.LaplaceDpEvent(e.scale / e.sensitivity) if e.sensitivity > 0 else dpa.NoOpDpEvent()
        if isinstance(e, SubsampledGaussianEvent):
            inner = dpa.PoissonSampledDpEvent(e.sampling_rate, dpa.GaussianDpEvent(e.noise_multiplier))
            return dpa.SelfComposedDpEvent(inner, e.steps)
        if isinstance(e, DiscreteGaussianEvent):
            return dpa.ZCDpEvent(e.rho)
        assert isinstance(e, DiscreteLaplaceEvent)
        return dpa.ZCDpEvent(e.epsilon ** 2 / 2)

    def _accountant(self):
        from dp_accounting.rdp import RdpAccountant

        acc = RdpAccountant(self.orders, _relation(self.adjacency))
        for e, c in self.ledger:
            acc.compose(self._dp_event(e), c)
        return acc

    def get_epsilon(self, delta: float) -> float:
        return float(self._accountant().get_epsilon(delta))

    def get_delta(self, epsilon: float) -> float:
        return float(self._accountant().get_delta(epsilon))


def make_accountant(kind: str | Accountant = "pld", *, adjacency: Adjacency | str = Adjacency.ADD_REMOVE) -> Accountant:
    """An accountant from its name (``"gdp"``, ``"zcdp"``, ``"pld"``, ``"rdp"``) or a fresh copy of an instance."""
    if isinstance(kind, Accountant):
        return kind.copy()
    table = {"gdp": GDPAccountant, "zcdp": ZCDPAccountant, "pld": PLDAccountant, "rdp": RDPAccountant}
    if not isinstance(kind, str) or kind.lower() not in table:
        raise ValueError(f"accountant must be one of {sorted(table)} or an Accountant, got {kind!r}")
    return table[kind.lower()](adjacency=adjacency)
