"""Neighbouring relations between datasets (the ``adjacency`` of a privacy guarantee).

- ``ADD_REMOVE``: one record added or removed; the number of records N is private (the default of
  Opacus and dp-accounting).
- ``REPLACE_ONE``: one record (features and/or label) replaced by another; N is public.
- ``LABEL_FLIP``: only one record's label changes (the label-level claim of Liu, Scaglione & Peisert
  2025); kept for the as-published reproduction, it protects labels, not records.
"""
from __future__ import annotations

import enum
from typing import Any

__all__ = ["Adjacency"]


class Adjacency(str, enum.Enum):
    """A neighbouring relation; compares equal to its string value (``Adjacency.ADD_REMOVE == "add-remove"``)."""

    ADD_REMOVE = "add-remove"
    REPLACE_ONE = "replace-one"
    LABEL_FLIP = "label-flip"

    def __str__(self) -> str:  # the plain value, e.g. in f-strings and JSON-like output
        return self.value

    @classmethod
    def parse(cls, value: Any) -> "Adjacency":
        """Return the member for an ``Adjacency`` or its exact string value; ``ValueError`` otherwise."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value == member.value:
                    return member
        allowed = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"adjacency must be one of {allowed}, got {value!r}")

    @classmethod
    def from_description(cls, text: str) -> "Adjacency":
        """Map a free-text adjacency written by older code (e.g. ``"replace-one record"``,
        ``"one record removed (...)"``) to a member, reading it conservatively: anything mentioning a
        replacement is ``REPLACE_ONE``, a label flip ``LABEL_FLIP``, an addition/removal alone
        ``ADD_REMOVE``. ``ValueError`` when none applies."""
        try:
            return cls.parse(text)
        except ValueError:
            pass
        if not isinstance(text, str):
            raise ValueError(f"adjacency must be an Adjacency or a string, got {type(text).__name__}")
        t = text.lower()
        if "label" in t and "flip" in t:
            return cls.LABEL_FLIP
        if "replace" in t:
            return cls.REPLACE_ONE
        if "remov" in t or "add" in t:
            return cls.ADD_REMOVE
        return cls.parse(text)  # raises the standard message
