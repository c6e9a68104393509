"""The Australian Institute of Sport data (202 athletes, 13 columns; shipped with R package ``sn``).

The CSV is shipped inside the package (``torchdpgmm/data/ais.csv``). Columns: ``sex``, ``sport`` (strings)
and the numeric ``RCC, WCC, Hc, Hg, Fe, BMI, SSF, Bfat, LBM, Ht, Wt``.
"""
from __future__ import annotations

import csv
from importlib import resources
from typing import Sequence

import torch

__all__ = ["AIS_NUMERIC_COLUMNS", "AIS_SKEWED_PAIR", "load_ais"]

AIS_NUMERIC_COLUMNS = ("RCC", "WCC", "Hc", "Hg", "Fe", "BMI", "SSF", "Bfat", "LBM", "Ht", "Wt")
# The DP-MSNM paper (2021) uses "columns 2-3" of AIS, which is ambiguous (sex/sport are not numeric). We use BMI and body
# fat percentage: both right-skewed, and a standard skew-normal example (Azzalini's sn documentation).
AIS_SKEWED_PAIR = ("BMI", "Bfat")


def load_ais(columns: Sequence[str] | None = None, dtype: torch.dtype = torch.float64,
             return_columns: bool = False):
    """Return the AIS numeric columns as a ``(202, len(columns))`` tensor (all numeric columns by default)."""
    cols = tuple(AIS_NUMERIC_COLUMNS if columns is None else columns)
    unknown = [c for c in cols if c not in AIS_NUMERIC_COLUMNS]
    if unknown:
        raise ValueError(f"columns must be among {AIS_NUMERIC_COLUMNS}, got unknown {unknown}")
    with resources.files("torchdpgmm.data").joinpath("ais.csv").open("r", newline="") as fh:
        rows = list(csv.DictReader(fh))
    X = torch.tensor([[float(r[c]) for c in cols] for r in rows], dtype=dtype)
    return (X, cols) if return_columns else X
