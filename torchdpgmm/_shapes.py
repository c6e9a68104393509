"""Shape arithmetic without tensors.

``torch.broadcast_shapes`` imports ``torch.fx.experimental.symbolic_shapes`` and with it sympy on its first call
(0.3 s with compiled bytecode, 2.7 s on a fresh GPU machine without it, in a command's start-up: the profile of
the issue-36 sweep on an H100). The release calls it once per model, so every command paid that import; this
is the same rule in plain Python.
"""
from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["broadcast_shapes"]


def broadcast_shapes(*shapes: Iterable[int]) -> torch.Size:
    """The shape that ``shapes`` broadcast to, by NumPy's rule (align on the right; each size equal, or 1), as
    the ``torch.Size`` that ``torch.broadcast_shapes`` returns.

    Raises ``RuntimeError`` (the error ``torch.broadcast_shapes`` raises) when two sizes differ and neither is 1.
    """
    shapes = [tuple(int(n) for n in s) for s in shapes]
    out: list[int] = []
    for i in range(1, max((len(s) for s in shapes), default=0) + 1):
        size = 1
        for s in shapes:
            if i <= len(s) and s[-i] != 1:
                if size != 1 and s[-i] != size:
                    raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: {shapes}")
                size = s[-i]
        out.append(size)
    return torch.Size(reversed(out))
