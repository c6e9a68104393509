"""The typed privacy record that travels with every release.

One :class:`PrivacyRecord` per release: the guarantee claimed (``epsilon``, ``delta``, ``adjacency``),
how it was accounted, and one :class:`NoisedBlock` per noised statistic (its sensitivity and noise scale
as numbers, not strings), so that an accountant (:mod:`torchdpgmm.privacy.accountants`) can recompose
several releases tightly (:class:`torchdpgmm.privacy.odometer.BudgetOdometer`).

A release whose noise came from a user-given seed is marked in its record (:func:`with_seeded_noise_note`, the note
:data:`SEEDED_NOISE_NOTE`, :class:`SeededNoiseWarning`); :func:`child_seed` derives the independent streams of
one seed (the release's noise, the synthetic draws) for the estimators and the command line. Here, not in the
estimators, so that the command line's ``release`` imports no scikit-learn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

from torchdpgmm.privacy.adjacency import Adjacency

__all__ = ["NoisedBlock", "PrivacyRecord", "MECHANISMS", "NORMS", "SAMPLER_NOTE", "sampler_delta", "with_sampler_tv",
           "SEEDED_NOISE_NOTE", "SeededNoiseWarning", "FIT_STREAM", "SAMPLE_STREAM", "child_seed", "with_seeded_noise_note"]

MECHANISMS = ("gaussian", "laplace", "discrete-gaussian", "discrete-laplace", "subsampled-gaussian",
              "wishart", "random-mapping", "r1smg", "none")
NORMS = ("l1", "l2", "frobenius")


@dataclass(frozen=True)
class NoisedBlock:
    """One noised statistic of a release.

    Attributes:
        name: the block (e.g. ``"counts"``, ``"sums"``, ``"second_moments"``, ``"means"``).
        mechanism: one of :data:`MECHANISMS`.
        sensitivity: the global sensitivity in ``norm`` (grid units for discrete mechanisms).
        noise_scale: standard deviation (Gaussian kinds; for ``"subsampled-gaussian"`` the noise std
            ``noise_multiplier * clip`` with ``sensitivity = clip``) or scale ``b`` (Laplace kinds:
            density ``exp(-|x|/b)``).
        norm: ``"l1"``, ``"l2"`` or ``"frobenius"``.
        count: how many times the block was released (iterations, steps).
        sampling_rate: Poisson sampling probability (``"subsampled-gaussian"`` only; 1 otherwise).
    """

    name: str
    mechanism: str
    sensitivity: float
    noise_scale: float
    norm: str = "l2"
    count: int = 1
    sampling_rate: float = 1.0

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        for n in ("sensitivity", "noise_scale", "sampling_rate"):
            v = getattr(self, n)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"NoisedBlock.{n} must be a finite number >= 0, got {v!r}")
            object.__setattr__(self, n, float(v))
        if not (0 < self.sampling_rate <= 1):
            raise ValueError(f"NoisedBlock.sampling_rate must lie in (0, 1], got {self.sampling_rate!r}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"NoisedBlock.count must be a positive int, got {self.count!r}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _plain(v: Any) -> Any:
    """JSON-friendly copy: tensors/arrays to numbers or lists, enums to their values."""
    if torch.is_tensor(v):
        v = v.detach().cpu()
        return v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Adjacency):
        return v.value
    if isinstance(v, NoisedBlock):
        return v.to_dict()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _short(v: Any) -> str:
    """A one-token summary: numbers as ``%.4g``, tensors by shape/min/max (never their contents)."""
    if torch.is_tensor(v) or isinstance(v, np.ndarray):
        t = torch.as_tensor(v).detach()
        if t.numel() == 1:
            return f"{float(t):.4g}"
        if t.numel() == 0:
            return f"tensor(shape={tuple(t.shape)})"
        t = t.to(torch.float64)
        return f"tensor(shape={tuple(t.shape)}, min={float(t.min()):.4g}, max={float(t.max()):.4g})"
    if isinstance(v, float):
        return f"{v:.4g}"
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "...'"


@dataclass(repr=False)
class PrivacyRecord:
    """What a release spent and under which assumptions; travels with every released model.

    Attributes:
        epsilon, delta: the total guarantee claimed (floats, or tensors for batched studies).
        adjacency: an :class:`Adjacency` (strings are converted; free-text descriptions written by older
            code are mapped by :meth:`Adjacency.from_description` and kept in ``notes``).
        accountant: how the parts were composed (e.g. ``"GDP"``, ``"PLD"``, ``"basic composition"``).
        mode: ``"sound"``, ``"as-published"``, ``"non-private"``, ...
        mechanism: the release mechanism's name.
        split: per-part budget (tensors allowed).
        notes: caveats a user must read.
        blocks: one :class:`NoisedBlock` per noised statistic.
        covered: True only if every step that touches private data is inside ``epsilon``.
        sampler_tv: an upper bound on the total-variation distance between the joint law of the noise the release
            actually drew and exact draws of the stated mechanisms (the fixed-work discrete samplers,
            :func:`torchdpgmm.mechanisms.discrete.tv_bound`, at most ``n 2^-64`` for ``n`` draws; 0 for continuous
            noise). The release is then ``(epsilon, delta + delta_sampler)``-DP with ``delta_sampler = (1 + e^epsilon)
            sampler_tv`` (:attr:`delta_sampler`; a "pure" Laplace record is ``(epsilon, delta_sampler)``-DP).
        sampler_draws: how many draws of the discrete samplers ``sampler_tv`` covers (0 for continuous noise).
        seeded: True when the noise came from a user-given seed (``random_state`` / ``--seed``): anyone who
            knows the seed can regenerate and remove it, so :class:`~torchdpgmm.privacy.odometer.BudgetOdometer`
            refuses such a record unless told ``allow_seeded=True`` (for tests and reproductions only).

    The positional order (epsilon, delta, adjacency, accountant, mode, mechanism, split, notes) is kept
    from the first version of this record so that older callers construct unchanged.
    """

    epsilon: Any
    delta: Any
    adjacency: Adjacency
    accountant: str
    mode: str
    mechanism: str = ""
    split: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    blocks: tuple[NoisedBlock, ...] = ()
    covered: bool = False
    seeded: bool = False
    sampler_tv: float = 0.0
    sampler_draws: int = 0

    def __post_init__(self) -> None:
        notes = (self.notes,) if isinstance(self.notes, str) else tuple(self.notes)
        if not isinstance(self.adjacency, Adjacency):
            try:
                self.adjacency = Adjacency.parse(self.adjacency)
            except ValueError:
                text = self.adjacency
                self.adjacency = Adjacency.from_description(text)
                notes = notes + (f"adjacency stated as {text!r}, read as {self.adjacency.value!r}",)
        self.notes = notes
        blocks = tuple(NoisedBlock(**b) if isinstance(b, dict) else b for b in self.blocks)
        if not all(isinstance(b, NoisedBlock) for b in blocks):
            raise TypeError("PrivacyRecord.blocks must hold NoisedBlock instances")
        self.blocks = blocks
        if not isinstance(self.covered, bool):
            raise TypeError(f"PrivacyRecord.covered must be a bool, got {type(self.covered).__name__}")
        if not isinstance(self.seeded, bool):
            raise TypeError(f"PrivacyRecord.seeded must be a bool, got {type(self.seeded).__name__}")
        if self.split is None:
            self.split = {}
        tv = self.sampler_tv
        if isinstance(tv, bool) or not isinstance(tv, (int, float)) or not (0 <= tv <= 1):
            raise ValueError(f"PrivacyRecord.sampler_tv must be a number in [0, 1], got {tv!r}")
        self.sampler_tv = float(tv)
        if isinstance(self.sampler_draws, bool) or not isinstance(self.sampler_draws, int) or self.sampler_draws < 0:
            raise ValueError(f"PrivacyRecord.sampler_draws must be an int >= 0, got {self.sampler_draws!r}")

    @property
    def delta_sampler(self) -> Any:
        """What the samplers' distance from exact draws adds to ``delta``: ``(1 + e^epsilon) sampler_tv``
        (:func:`sampler_delta`; a tensor for a batched record, 0 for continuous noise)."""
        return sampler_delta(self.epsilon, self.sampler_tv)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (tensors become numbers or lists); :meth:`from_dict` inverts it."""
        # ``seeded`` is written only when True and ``sampler_tv`` / ``sampler_draws`` only when the TV is > 0, so records of unseeded releases and
        # of continuous noise keep their earlier form
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)
                if (f.name != "seeded" or self.seeded)
                and (f.name not in ("sampler_tv", "sampler_draws") or self.sampler_tv > 0)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PrivacyRecord":
        """Rebuild a record from :meth:`to_dict` output (records written before ``blocks``/``covered``
        existed load with no blocks and ``covered=False``)."""
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown privacy record fields: {sorted(unknown)}")
        return cls(**d)

    def events(self) -> list:
        """``[(event, count)]`` for the noised blocks (:func:`~torchdpgmm.privacy.events.events_from_blocks`)."""
        from torchdpgmm.privacy.events import events_from_blocks

        return events_from_blocks(self.blocks)

    def __repr__(self) -> str:
        blocks = ", ".join(f"{b.name}:{b.mechanism}" + (f"x{b.count}" if b.count > 1 else "") for b in self.blocks)
        return (f"PrivacyRecord(mode={self.mode!r}, mechanism={_short(self.mechanism)}, "
                f"epsilon={_short(self.epsilon)}, delta={_short(self.delta)}, adjacency={self.adjacency.value!r}, "
                f"accountant={_short(self.accountant)}, blocks=[{blocks}], covered={self.covered}, "
                f"notes={len(self.notes)})")

    __str__ = __repr__


#: The first words of the note :func:`with_sampler_tv` adds (one such note per record).
SAMPLER_NOTE = "discrete samplers:"


def sampler_delta(epsilon: Any, tv: float) -> Any:
    """``(1 + e^epsilon) tv``: the ``delta`` that a mechanism's output law within total variation ``tv`` of an
    (epsilon, delta)-DP mechanism's adds (for every neighbouring pair and event S, ``P'(S) <= P(S) + tv <= e^eps
    (P'_nb(S) + tv) + delta + tv``). ``epsilon`` a number or a tensor (batched records); 0 when ``tv`` is 0."""
    if float(tv) == 0.0:
        return 0.0
    if torch.is_tensor(epsilon):
        return (1.0 + torch.exp(epsilon.to(torch.float64))) * float(tv)
    e = float(epsilon)
    return (1.0 + math.exp(e)) * float(tv) if e < 700 else math.inf  # e^709 overflows a float


def with_sampler_tv(record: PrivacyRecord, tv: float, draws: int | None) -> PrivacyRecord:
    """``record`` with ``sampler_tv = tv`` (the bound for all ``draws`` draws of its discrete samplers, from
    :func:`torchdpgmm.mechanisms.discrete.sampler_tv`; None: the record's own ``sampler_draws``) and ONE note that
    says what it means (replacing a note of a stage's record); the record unchanged when ``draws`` is 0 (continuous
    noise)."""
    from dataclasses import replace

    draws = record.sampler_draws if draws is None else int(draws)
    if draws <= 0:
        return record
    pure = not torch.is_tensor(record.delta) and record.delta is not None and float(record.delta) == 0.0
    extra = f"(1 + e^epsilon) x {float(tv):.3g}"  # the formula, not its value: epsilon may be a device tensor
    claim = f"(epsilon, {extra})-DP, not pure epsilon-DP" if pure else f"(epsilon, delta + {extra})-DP"
    note = (f"{SAMPLER_NOTE} the {draws} draws of the fixed-work discrete samplers are within total variation "
            f"{float(tv):.3g} of exact draws (sampler_tv; at most 2^-64 per draw), so the release is {claim} "
            "(delta_sampler)")
    notes = tuple(n for n in record.notes if not n.startswith(SAMPLER_NOTE)) + (note,)
    return replace(record, sampler_tv=float(tv), sampler_draws=draws, notes=notes)


# ---------------------------------------------------------------- seeded noise (a user-given seed)
SEEDED_NOISE_NOTE = (
    "the noise was drawn from a user-given seed (random_state / --seed): anyone who knows the seed can "
    "regenerate the noise and remove it, and releases of different data with the same seed have the same "
    "noise, so their differences are exact; for a release you publish leave the seed unset (fresh OS entropy)"
)


class SeededNoiseWarning(UserWarning):
    """Emitted when a sound release draws its noise from a user-given seed (reproducible, not secret)."""


#: a release's noise and its synthetic draws come from independent streams of one user seed (numpy SeedSequence
#: children; :func:`child_seed`), for the estimators and the command line alike
FIT_STREAM, SAMPLE_STREAM = 0, 1


def child_seed(seed: int, stream: int) -> int:
    """The seed of ``stream`` (:data:`FIT_STREAM` for the release's noise, :data:`SAMPLE_STREAM` for synthetic
    draws) derived from a user seed: independent numpy ``SeedSequence`` children, so the two never share numbers
    and another seed's streams are unrelated. Used by the estimators and the command line alike."""
    return int(np.random.SeedSequence(int(seed), spawn_key=(stream,)).generate_state(1, np.uint64)[0] % 2**62)


def with_seeded_noise_note(record: PrivacyRecord) -> PrivacyRecord:
    """The privacy record with :data:`SEEDED_NOISE_NOTE` added and marked ``seeded`` (a sound release whose
    noise came from a seed; :class:`~torchdpgmm.privacy.odometer.BudgetOdometer` refuses it by default)."""
    from dataclasses import replace

    return replace(record, notes=tuple(record.notes) + (SEEDED_NOISE_NOTE,), seeded=True)
