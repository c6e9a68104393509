"""The UCI Parkinsons voice data (195 recordings of 31 people, 22 numeric features, 2 classes).

Source and licence: Little, McSharry, Hunter, Spielman & Ramig (2009), "Suitability of dysphonia
measurements for telemonitoring of Parkinson's disease", IEEE Transactions on Biomedical Engineering;
UCI Machine Learning Repository ("Parkinsons" data set), licensed CC BY 4.0 (attribution: the citation
above). The file is shipped unchanged as ``torchdpgmm/data/parkinsons.csv``.

Columns: ``name`` (a recording identifier, not a feature), 22 numeric voice measures
(:data:`PARKINSONS_FEATURES`) and ``status`` (1 = Parkinson's disease, 147 rows; 0 = healthy, 48 rows).
Xi, Kantarcioglu & Inan (2011) use this data set in their last experiment; its majority-class error is
48/195 = 0.2462.

A copy is checked before it is used: the SHA-256 of its text (line endings normalised to ``\\n``, so a
checkout with CRLF or LF endings both pass), the header, the row count and that every feature parses as
a finite number and every status is 0 or 1. Any failure is a one-line ``ValueError``.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
from importlib import resources
from pathlib import Path

import torch

__all__ = [
    "PARKINSONS_FEATURES",
    "PARKINSONS_SHA256",
    "PARKINSONS_CITATION",
    "PARKINSONS_LICENSE",
    "load_parkinsons",
]

PARKINSONS_CITATION = (
    "Little, McSharry, Hunter, Spielman & Ramig (2009), Suitability of dysphonia measurements for "
    "telemonitoring of Parkinson's disease, IEEE Trans. Biomed. Eng.; "
    "UCI Machine Learning Repository (Parkinsons data set)"
)
PARKINSONS_LICENSE = "CC BY 4.0"
#: SHA-256 of the shipped file with line endings normalised to LF
PARKINSONS_SHA256 = "0c69b4e7596fef4d1f4413e8b924ab09ea9494c5b2c8a2a934d6aa01df378282"
PARKINSONS_FEATURES = (
    "MDVP:Fo(Hz)", "MDVP:Fhi(Hz)", "MDVP:Flo(Hz)", "MDVP:Jitter", "MDVP:Jitter(Abs)", "MDVP:RAP",
    "MDVP:PPQ", "Jitter:DDP", "MDVP:Shimmer", "MDVP:Shimmer(dB)", "Shimmer:APQ3", "Shimmer:APQ5",
    "MDVP:APQ", "Shimmer:DDA", "NHR", "HNR", "RPDE", "DFA", "spread1", "spread2", "D2", "PPE",
)
_HEADER = ("name",) + PARKINSONS_FEATURES[:16] + ("status",) + PARKINSONS_FEATURES[16:]
_NUM_ROWS = 195


def _read_bytes(path: str | Path | None) -> tuple[bytes, str]:
    if path is None:
        return resources.files("torchdpgmm.data").joinpath("parkinsons.csv").read_bytes(), "the shipped parkinsons.csv"
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p} is not a file")
    return p.read_bytes(), str(p)


def _parse(text: str, where: str) -> tuple[list[list[float]], list[int]]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(c.strip() for c in rows[0]) != _HEADER:
        raise ValueError(f"{where}: header does not match the UCI Parkinsons columns (name, 22 features, status)")
    body = [r for r in rows[1:] if r]
    if len(body) != _NUM_ROWS:
        raise ValueError(f"{where}: expected {_NUM_ROWS} data rows, found {len(body)}")
    idx = [_HEADER.index(f) for f in PARKINSONS_FEATURES]
    s_idx = _HEADER.index("status")
    feats, labels = [], []
    for i, r in enumerate(body, start=2):
        if len(r) != len(_HEADER):
            raise ValueError(f"{where}: line {i} has {len(r)} fields, expected {len(_HEADER)}")
        try:
            vals = [float(r[j]) for j in idx]
        except ValueError:
            raise ValueError(f"{where}: line {i} has a non-numeric feature") from None
        if not all(math.isfinite(v) for v in vals):
            raise ValueError(f"{where}: line {i} has a non-finite feature")
        if r[s_idx].strip() not in ("0", "1"):
            raise ValueError(f"{where}: line {i} has status {r[s_idx]!r}, expected 0 or 1")
        feats.append(vals)
        labels.append(int(r[s_idx]))
    return feats, labels


def load_parkinsons(
    path: str | Path | None = None, *, dtype: torch.dtype = torch.float64, verify: bool = True
) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """Return ``(X (195, 22), y (195,), feature_names)``: the 22 voice features (float64 by default),
    ``status`` as int64 labels (1 = Parkinson's, 0 = healthy) and the feature names in column order.

    ``path=None`` reads the copy shipped with the package. ``verify`` (default) also requires the file's
    SHA-256 (LF-normalised) to be :data:`PARKINSONS_SHA256`, so an altered copy is refused; the header,
    row count, numeric features and 0/1 status are always checked. Failures raise a one-line ValueError.
    """
    raw, where = _read_bytes(path)
    text_bytes = raw.replace(b"\r\n", b"\n")
    if verify and hashlib.sha256(text_bytes).hexdigest() != PARKINSONS_SHA256:
        raise ValueError(f"{where}: checksum mismatch, not the UCI Parkinsons file shipped with torchdpgmm "
                         "(altered or truncated copy); pass verify=False to read it anyway")
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None
    feats, labels = _parse(text, where)
    X = torch.tensor(feats, dtype=torch.float64).to(dtype)
    y = torch.tensor(labels, dtype=torch.int64)
    return X, y, PARKINSONS_FEATURES
