"""Labelled numeric tables for the ``tabular`` study: ``(X, y, names, public_bounds_or_None, source)``.

scikit-learn's bundled tables (breast cancer, wine, digits as 64 columns with documented range 0..16),
the package's AIS (label: sex; the 11 numeric columns) and Parkinsons (label: status; 22 voice features;
Little et al. 2009), and mlbench tables (Leisch & Dimitriadou, R package ``mlbench``) exported to
``torchdpgmm/data/mlbench_*.csv`` by ``scripts/export_mlbench.R`` when they are present.

``public_bounds`` is ``(lower, upper)`` for every column when the table's documentation states the range
(digits 0..16, Satellite 0..255, LetterRecognition 0..15, Sonar 0..1); otherwise ``None`` and the study
uses the training split's min-max as a stand-in for bounds a user would know.
"""
from __future__ import annotations

import csv
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["Table", "TABLE_NAMES", "load_table", "available_tables"]


class Table(NamedTuple):
    name: str
    X: np.ndarray
    y: np.ndarray
    names: tuple[str, ...]
    public_bounds: tuple[float, float] | None
    source: str


# mlbench export name -> (label column, documented public range of every feature or None)
_MLBENCH = {
    "Satellite": ("classes", (0.0, 255.0)),
    "Vowel": ("Class", None),
    "Glass": ("Type", None),
    "Ionosphere": ("Class", None),
    "PimaIndiansDiabetes": ("diabetes", None),
    "Sonar": ("Class", (0.0, 1.0)),
    "LetterRecognition": ("lettr", (0.0, 15.0)),
}
_SKLEARN = ("breast_cancer", "wine", "digits")
TABLE_NAMES = _SKLEARN + ("ais", "parkinsons") + tuple(_MLBENCH)


def _sklearn(name: str) -> Table:
    from sklearn import datasets

    b = getattr(datasets, f"load_{name}")()
    bounds = (0.0, 16.0) if name == "digits" else None
    names = tuple(str(n) for n in b.feature_names)
    return Table(name, b.data.astype(np.float64), b.target.astype(np.int64), names, bounds, "scikit-learn")


def _read_csv(fname: str) -> list[dict[str, str]]:
    with resources.files("torchdpgmm.data").joinpath(fname).open("r", newline="") as fh:
        return list(csv.DictReader(fh))


def _mlbench(name: str) -> Table:
    label, bounds = _MLBENCH[name]
    rows = _read_csv(f"mlbench_{name}.csv")
    cols = [c for c in rows[0] if c != label]
    # mlbench codes a few columns as factors (Ionosphere V1 0/1, V2 constant); all are exported as numbers
    X = np.array([[float(r[c]) for c in cols] for r in rows], dtype=np.float64)
    _, y = np.unique([r[label] for r in rows], return_inverse=True)
    keep = X.std(0) > 0  # a constant column (Ionosphere V2) carries nothing; dropped by its public name
    return Table(name, X[:, keep], y.astype(np.int64), tuple(c for c, k in zip(cols, keep) if k), bounds, "R mlbench")


def available_tables() -> list[str]:
    """Names of the tables loadable here (mlbench ones only when their CSV was exported)."""
    pkg = resources.files("torchdpgmm.data")
    return [n for n in TABLE_NAMES if n not in _MLBENCH or pkg.joinpath(f"mlbench_{n}.csv").is_file()]


def load_table(name: str) -> Table:
    if name in _SKLEARN:
        return _sklearn(name)
    if name == "ais":
        rows = _read_csv("ais.csv")
        from .ais import AIS_NUMERIC_COLUMNS as cols

        X = np.array([[float(r[c]) for c in cols] for r in rows])
        y = np.array([r["sex"] == "male" for r in rows], dtype=np.int64)
        return Table("ais", X, y, tuple(cols), None, "torchdpgmm.data (R sn)")
    if name == "parkinsons":
        rows = _read_csv("parkinsons.csv")
        cols = [c for c in rows[0] if c not in ("name", "status")]
        X = np.array([[float(r[c]) for c in cols] for r in rows])
        y = np.array([int(r["status"]) for r in rows], dtype=np.int64)
        return Table("parkinsons", X, y, tuple(cols), None, "torchdpgmm.data (UCI)")
    if name in _MLBENCH:
        return _mlbench(name)
    raise ValueError(f"unknown table {name!r}; known: {', '.join(TABLE_NAMES)}")
