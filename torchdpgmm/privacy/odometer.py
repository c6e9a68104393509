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
"""
from __future__ import annotations

import math
from typing import Any

from torchdpgmm.privacy.accountants import Accountant, make_accountant
from torchdpgmm.privacy.adjacency import Adjacency
from torchdpgmm.privacy.events import ApproxDPEvent, PrivacyEvent, events_from_blocks
from torchdpgmm.privacy.record import PrivacyRecord

__all__ = ["BudgetOdometer", "BudgetExceededError"]


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

    def _events(self, item: PrivacyRecord | PrivacyEvent) -> list[tuple[PrivacyEvent, int]]:
        if isinstance(item, PrivacyEvent):
            return [(item, 1)]
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
        stated = [(ApproxDPEvent(_scalar(item.epsilon, "epsilon"), _scalar(item.delta, "delta")), 1)]
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
            return candidate
        kinds = sorted({b.mechanism for b in item.blocks}) or ["none"]
        raise ValueError(f"the {self._accountant.name} accountant cannot price this record: its noise "
                         f"({', '.join(kinds)}) is not of a kind it composes exactly and it cannot take the "
                         "record's stated (epsilon, delta) either; use accountant='zcdp' or 'pld'")

    def would_spend(self, item: PrivacyRecord | PrivacyEvent) -> float:
        """Epsilon at ``delta`` after ``item`` were spent (nothing is recorded)."""
        trial = self._accountant.copy()
        for e, c in self._events(item):
            trial.compose(e, c)
        return trial.get_epsilon(self.delta)

    def spend(self, item: PrivacyRecord | PrivacyEvent, *, label: str = "") -> float:
        """Record ``item``; returns epsilon spent at ``delta``. ``BudgetExceededError`` (nothing recorded)
        if the composed epsilon would exceed ``epsilon_budget``."""
        events = self._events(item)
        trial = self._accountant.copy()
        for e, c in events:
            trial.compose(e, c)
        eps = trial.get_epsilon(self.delta)
        if eps > self.epsilon_budget:
            raise BudgetExceededError(
                f"release refused: epsilon would reach {eps:.4g} at delta={self.delta:g}, above the budget "
                f"{self.epsilon_budget:g} (spent so far {self.epsilon_spent():.4g})")
        self._accountant = trial
        self.history.append({"label": label, "item": item, "epsilon_after": eps})
        return eps

    def epsilon_spent(self, delta: float | None = None) -> float:
        """Epsilon of everything spent so far, at ``delta`` (default the odometer's)."""
        if not self._accountant.ledger:
            return 0.0
        return self._accountant.get_epsilon(self.delta if delta is None else delta)

    def remaining(self) -> float:
        return max(0.0, self.epsilon_budget - self.epsilon_spent())

    def __repr__(self) -> str:
        return (f"BudgetOdometer(spent={self.epsilon_spent():.4g}/{self.epsilon_budget:g} at delta={self.delta:g}, "
                f"releases={len(self.history)}, accountant={self._accountant.name})")
