"""Data sets and IDX file I/O.

Loaders return ``(X, y)`` tensors; see :mod:`torchdpgmm.data.loaders`. ``load_ais`` (AIS athletes
data, shipped as ``ais.csv``) lives in :mod:`torchdpgmm.data.ais` and ``load_parkinsons`` (UCI Parkinsons
voice data, shipped as ``parkinsons.csv``; Little et al. 2009, CC BY 4.0) in :mod:`torchdpgmm.data.parkinsons`;
both are imported on first use.
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
    "load_parkinsons",
    "FASHION_MNIST_DEBIAN_DIR",
    "MNIST_FILES",
]


def load_ais(*args: Any, **kwargs: Any):
    """AIS data (202 athletes); implemented in :mod:`torchdpgmm.data.ais`, imported lazily."""
    from .ais import load_ais as _load_ais

    return _load_ais(*args, **kwargs)


def load_parkinsons(*args: Any, **kwargs: Any):
    """UCI Parkinsons data (195 recordings, 22 features); see :mod:`torchdpgmm.data.parkinsons`."""
    from .parkinsons import load_parkinsons as _load

    return _load(*args, **kwargs)
