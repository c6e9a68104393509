"""Data sets and IDX file I/O (DESIGN.md section 6).

Loaders return ``(X, y)`` tensors; see :mod:`torchdpgmm.data.loaders`. ``load_ais`` (AIS athletes
data, shipped as ``ais.csv``) lives in :mod:`torchdpgmm.data.ais` and is imported on first use.
"""
from __future__ import annotations

from typing import Any

from .idx import find_idx_file, read_idx, write_idx
from .loaders import (
    FASHION_MNIST_DEBIAN_DIR,
    MNIST_FILES,
    load_digits,
    load_fashion_mnist,
    load_iris,
    load_mnist,
)

__all__ = [
    "read_idx",
    "write_idx",
    "find_idx_file",
    "load_iris",
    "load_digits",
    "load_mnist",
    "load_fashion_mnist",
    "load_ais",
    "FASHION_MNIST_DEBIAN_DIR",
    "MNIST_FILES",
]


def load_ais(*args: Any, **kwargs: Any):
    """AIS data (202 athletes); implemented in :mod:`torchdpgmm.data.ais`, imported lazily."""
    from .ais import load_ais as _load_ais

    return _load_ais(*args, **kwargs)
