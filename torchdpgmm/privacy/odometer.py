"""A privacy budget odometer: records releases, answers "epsilon spent at delta", refuses overruns.

Each release is priced by its record's noised blocks (composed tightly with every earlier release by
the chosen accountant); a record without blocks, or with blocks the chosen accountant cannot price
(multi-dimensional discrete Gaussians under PLD), is taken at its stated (epsilon, delta); an accountant that can
price neither (GDP, exact for Gaussian noise only, on a record with discrete noise) refuses it in one line
(``ValueError``) naming the accountants that can. A release
whose record is not ``covered`` (some data-touching step is outside its epsilon) is refused: there is
no guarantee to add up. So is a ``seeded`` record (noise from a user-given seed, which anyone knowing the
seed can remove) unless the odometer was built with ``allow_seeded=True``. (Rogers, Roth, Ullman & Vadhan 2016 define odometers; this one composes
non-adaptively chosen parameters, which is what the accountants are valid for.)

The exact discrete samplers are within total variation ``sampler_tv`` of exact draws (a record's ``sampler_tv``,
at most 2^-64 per draw). Releases priced by their blocks are then together within ``T = sum sampler_tv`` of the
ideal composition, so ``epsilon`` is spent at ``delta`` when the ideal composition is
``(epsilon, delta - (1 + e^epsilon) T)``-DP: the odometer answers ``get_epsilon(delta - (1 + e^a) T)`` with
``a = get_epsilon((1 - eta) delta)`` for the first ``eta`` of (1/2, 1e-3, 1e-6) with ``(1 + e^a) T <= eta delta``
(then the answer is at most ``a``, so the bound holds), otherwise infinity. With continuous noise ``T = 0`` and
nothing changes; with discrete noise the shift is about 1e-20 in delta. A record taken at its stated point is
taken at ``(epsilon, delta + delta_sampler)``, what its notes claim, when ``delta_sampler = (1 + e^epsilon)
sampler_tv`` is at least a millionth of ``delta`` (:data:`STATED_SAMPLER_SLACK`), and at ``(epsilon, delta)``
below that: an approximation by at most a millionth of delta (about 1e-19 at small epsilon) that lets a release be
spent at its own delta. The share grows with ``e^epsilon`` (1e-2 at epsilon 40, where it counts); a record whose
``delta + delta_sampler`` reaches 1 claims nothing and is refused in one line, and so is an epsilon whose
``e^epsilon`` overflows a float.
"""
from __future__ import annotations

import math
from typing import Any

from torchdpgmm.privacy.accountants import Accountant, make_accountant
from torchdpgmm.privacy.adjacency import Adjacency
from torchdpgmm.privacy.events import ApproxDPEvent, PrivacyEvent, events_from_blocks
from torchdpgmm.privacy.record import PrivacyRecord

__all__ = ["BudgetOdometer", "BudgetExceededError"]


#: the samplers' share of delta, relative to a record's delta, below which a record taken at its stated point is taken
#: at its stated delta (module docstring)
STATED_SAMPLER_SLACK = 1e-6
#: the largest epsilon taken at a stated point (the PLD of an (epsilon, delta) point needs e^epsilon as a float)
MAX_STATED_EPSILON = 700.0


class BudgetExceededError(RuntimeError):
    """Raised by :meth:`BudgetOdometer.spend` when a release would exceed the budget (nothing is recorded)."""


def _scalar(v: Any, name: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"record.{name} must be a scalar to be spent, got {v!r}") from None
    return f


class BudgetOdometer:
    """Adds up releases on one dataset under a total ``(epsilon_budget, delta)``.

    Args:
        epsilon_budget: the total epsilon allowed at ``delta``.
        delta: the delta at which the budget is measured (in (0, 1)).
        accountant: ``"pld"`` (default), ``"gdp"``, ``"zcdp"``, ``"rdp"`` or an :class:`Accountant` (copied).
        adjacency: the neighbouring relation all spent records must share (default add-remove).
        allow_seeded: also spend records whose noise came from a user-given seed (reproductions, tests);
            their noise is not secret, so the sum is not a guarantee about a publication.
    """

    def __init__(self, epsilon_budget: float, delta: float, *, accountant: str | Accountant = "pld",
                 adjacency: Adjacency | str = Adjacency.ADD_REMOVE, allow_seeded: bool = False) -> None:
        if not (isinstance(epsilon_budget, (int, float)) and math.isfinite(epsilon_budget) and epsilon_budget > 0):
            raise ValueError(f"epsilon_budget must be a finite number > 0, got {epsilon_budget!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        self.epsilon_budget = float(epsilon_budget)
        self.delta = float(delta)
        self.adjacency = Adjacency.parse(adjacency)
        self._accountant = make_accountant(accountant, adjacency=self.adjacency)
        if not isinstance(allow_seeded, bool):
            raise TypeError(f"allow_seeded must be a bool, got {type(allow_seeded).__name__}")
        self.allow_seeded = allow_seeded
        self.history: list[dict[str, Any]] = []
        self._sampler_tv = 0.0  # the spent records' samplers' total variation from exact draws, summed

    @staticmethod
    def _epsilon(accountant: Accountant, sampler_tv: float, delta: float) -> float:
        """Epsilon at ``delta`` of ``accountant``'s composition whose samplers are within ``sampler_tv`` of exact
        draws (module docstring)."""
        if sampler_tv == 0.0:
            return accountant.get_epsilon(delta)
        for eta in (0.5, 1e-3, 1e-6):
            a = accountant.get_epsilon((1 - eta) * delta)
            slack = (1.0 + math.exp(min(a, 700.0))) * sampler_tv
            if math.isfinite(a) and slack <= eta * delta:
                return accountant.get_epsilon(delta - slack)
        return math.inf

    def _events(self, item: PrivacyRecord | PrivacyEvent) -> tuple[list[tuple[PrivacyEvent, int]], float]:
        """``(events, sampler_tv)``: how ``item`` is priced, and the samplers' TV its pricing must carry (module
        docstring: a record priced by its blocks carries its ``sampler_tv``; one at its stated point, or an event,
        none)."""
        if isinstance(item, PrivacyEvent):
            return [(item, 1)], 0.0
        if not isinstance(item, PrivacyRecord):
            raise TypeError(f"spend() takes a PrivacyRecord or a PrivacyEvent, got {type(item).__name__}")
        if not item.covered:
            raise ValueError(f"record (mode={item.mode!r}) is not covered: some step that touches the data is "
                             "outside its epsilon, so it cannot be added to a budget")
        if item.seeded and not self.allow_seeded:
            raise ValueError("record is seeded (noise drawn from a user-given seed, which anyone knowing it can "
                             "remove): refit without random_state / --seed, or build the odometer with allow_seeded=True")
        if item.adjacency is not self.adjacency:
            raise ValueError(f"record adjacency {item.adjacency.value!r} differs from the odometer's "
                             f"{self.adjacency.value!r}")
        eps = _scalar(item.epsilon, "epsilon")
        # the release's own claim is (epsilon, delta + delta_sampler). Below a millionth of delta the samplers' share
        # is left out (about 1e-19 at small epsilon: the documented approximation that lets a release be spent at
        # its own delta); above it, it counts (at epsilon 40 it is 1e-2, a thousand times a delta of 1e-5; beyond
        # about 50 it passes 1 and the claim is void)
        stated_delta, extra = _scalar(item.delta, "delta"), float(item.delta_sampler)
        claimed = stated_delta + (extra if extra > STATED_SAMPLER_SLACK * stated_delta else 0.0)
        # e^epsilon must stay a float for the PLD of a stated point (dp_accounting computes it)
        stated = [(ApproxDPEvent(eps, claimed), 1)] if claimed < 1 and eps < MAX_STATED_EPSILON else []
        events = events_from_blocks(item.blocks) if item.blocks else []  # TypeError: blocks with no DP accounting
        for candidate in (events, stated):  # the blocks, tightly; else the release's own (epsilon, delta) claim
            if not candidate:
                continue
            try:
                probe = self._accountant.copy()
                for e, c in candidate:
                    probe.compose(e, c)
            except TypeError:  # e.g. multi-dimensional discrete Gaussians under the PLD accountant
                continue
            if candidate is stated and claimed > self.delta:  # no epsilon at the odometer's delta covers it
                raise ValueError(f"the record is taken at its stated point, delta {stated_delta:g} + its samplers' "
                                 f"{extra:.3g}, above the odometer's delta {self.delta:g}: "
                                 "build the odometer with a larger delta, or use accountant='zcdp', which prices "
                                 "the record's discrete blocks")
            return candidate, (_scalar(item.sampler_tv, "sampler_tv") if candidate is events else 0.0)
        if claimed >= 1:
            raise ValueError(f"the record's own guarantee is void: delta + delta_sampler = {claimed:.3g} >= 1 at "
                             f"epsilon {eps:g} (its discrete samplers' share grows as e^epsilon); release with a "
                             "smaller epsilon or continuous noise")
        if eps >= MAX_STATED_EPSILON:
            raise ValueError(f"the {self._accountant.name} accountant cannot take a stated epsilon of {eps:g} (e^epsilon "
                             "overflows a float): such a release protects nothing a budget could track")
        kinds = sorted({b.mechanism for b in item.blocks}) or ["none"]
        raise ValueError(f"the {self._accountant.name} accountant cannot price this record: its noise "
                         f"({', '.join(kinds)}) is not of a kind it composes exactly and it cannot take the "
                         "record's stated (epsilon, delta) either; use accountant='zcdp' or 'pld'")

    def _trial(self, item: PrivacyRecord | PrivacyEvent) -> tuple[Accountant, float, float]:
        """``(accountant, sampler_tv, epsilon)`` as they would be after ``item`` were spent (nothing recorded)."""
        events, tv = self._events(item)
        trial = self._accountant.copy()
        for e, c in events:
            trial.compose(e, c)
        tv += self._sampler_tv
        return trial, tv, self._epsilon(trial, tv, self.delta)

    def would_spend(self, item: PrivacyRecord | PrivacyEvent) -> float:
        """Epsilon at ``delta`` after ``item`` were spent (nothing is recorded)."""
        return self._trial(item)[2]

    def spend(self, item: PrivacyRecord | PrivacyEvent, *, label: str = "") -> float:
        """Record ``item``; returns epsilon spent at ``delta``. ``BudgetExceededError`` (nothing recorded)
        if the composed epsilon would exceed ``epsilon_budget``."""
        trial, tv, eps = self._trial(item)
        if eps > self.epsilon_budget:
            raise BudgetExceededError(
                f"release refused: epsilon would reach {eps:.4g} at delta={self.delta:g}, above the budget "
                f"{self.epsilon_budget:g} (spent so far {self.epsilon_spent():.4g})")
        self._accountant, self._sampler_tv = trial, tv
        self.history.append({"label": label, "item": item, "epsilon_after": eps})
        return eps

    def epsilon_spent(self, delta: float | None = None) -> float:
        """Epsilon of everything spent so far, at ``delta`` (default the odometer's)."""
        if not self._accountant.ledger:
            return 0.0
        return self._epsilon(self._accountant, self._sampler_tv, self.delta if delta is None else delta)

    def remaining(self) -> float:
        return max(0.0, self.epsilon_budget - self.epsilon_spent())

    def __repr__(self) -> str:
        return (f"BudgetOdometer(spent={self.epsilon_spent():.4g}/{self.epsilon_budget:g} at delta={self.delta:g}, "
                f"releases={len(self.history)}, accountant={self._accountant.name})")
