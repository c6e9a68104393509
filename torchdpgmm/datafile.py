"""Reading labeled tables (CSV or NPZ) for the command line, with one-line errors.

CSV: a header row (column names must be unique); one label column; the feature columns are every other
column unless named. NPZ: arrays ``X`` (N x d) and ``y`` (N), optional ``feature_names`` and
``class_names``.

The class set. With ``classes=[...]`` (the public class set, e.g. ``--classes a,b,c``; REQUIRED for a sound
release) the classes are exactly those, in that order, and a class without rows is legal. Without it
(as-published mode only) the class names are the sorted label values found in the file, which depends on
the data.

``private=True`` (sound mode): rows with a label outside ``classes`` get label -1 and rows with non-finite
features are kept as they are; the sound release drops both without a branch on them (a refusal would
reveal that such a row exists). Error messages name no row and no cell value. Otherwise such rows are
refused as schema errors.
"""
from __future__ import annotations

import csv
import io
import math
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

__all__ = ["LabeledTable", "read_labeled_table", "read_labeled_images", "write_labeled_csv", "feature_width"]


@dataclass
class LabeledTable:
    X: torch.Tensor            # (N, d) float64
    y: torch.Tensor            # (N,) long, class indices
    class_names: list[str]
    feature_names: list[str]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def check_class_list(classes: Sequence[str]) -> list[str]:
    """The public class list as strings: non-empty, no blanks, no class named twice (as :func:`class_key` reads
    a name: ``1`` and ``1.0`` are one class)."""
    out = [str(c).strip() for c in classes]
    if not out or any(c == "" for c in out):
        raise ValueError("--classes must list at least one class name, comma separated (e.g. --classes a,b,c)")
    keys = [class_key(c) for c in out]
    dup = sorted({c for c, k in zip(out, keys) if keys.count(k) > 1})
    if dup:
        raise ValueError(f"--classes names a class twice: {', '.join(dup)}")
    return out


_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
#: the spellings of a boolean label (an NPZ's bool ``y`` as text, a CSV column written from booleans; pandas'
#: ``read_csv`` reads exactly these as booleans): the numbers 1 and 0, as numpy's bool is a 0/1 integer type
BOOLEAN_TEXT = {"True": 1, "true": 1, "TRUE": 1, "False": 0, "false": 0, "FALSE": 0}


def cell_number(text: str) -> float:
    """A feature cell's number, as both front doors read it: a boolean text (:data:`BOOLEAN_TEXT`) is 1 or 0, as a
    ``bool`` column is, anything else Python's ``float`` (``ValueError`` for a cell that is not a number)."""
    return float(BOOLEAN_TEXT[text]) if text in BOOLEAN_TEXT else float(text)


def class_key(label: str) -> tuple:
    """What a label is matched by against ``--classes``: a decimal number by its exact value (``1``, ``1.0``, ``01``
    and ``1e0`` name one class, as a CSV written from a float column writes ``1.0``; ``9007199254740993`` is not
    ``9007199254740992``, as the estimator's int64 labels are not), a boolean (``True`` / ``true`` / ``TRUE``, and
    ``False`` ...) as the number 1 or 0 (the estimator matches a bool ``y`` to ``classes=[0, 1]`` so: ``--classes 0,1``
    and ``--classes False,True`` name the same two classes), any other text by its text (``1_0``, ``inf``)."""
    if _DECIMAL.fullmatch(label):
        try:
            return ("number", Decimal(label))
        except (InvalidOperation, ValueError):  # an exponent beyond the decimal module's range: matched as text
            return ("text", label)
    if label in BOOLEAN_TEXT:
        return ("number", Decimal(BOOLEAN_TEXT[label]))
    return ("text", label)


def _finish(X: np.ndarray, labels: Sequence, feature_names: list[str], source: str,
            class_names: Sequence[str] | None = None, classes: Sequence[str] | None = None,
            private: bool = False) -> LabeledTable:
    if private and X.size == 0 and feature_names:  # N = 0 is a dataset like any other under add/remove: the
        X = np.asarray(X, dtype=np.float64).reshape(0, len(feature_names))  # release is noise alone, no refusal
    if X.ndim != 2 or (X.shape[0] == 0 and not private) or X.shape[1] == 0:
        raise ValueError(f"{source}: need a non-empty N x d feature table, got {X.ndim} dimension(s)"
                         + ("" if private else f" of shape {X.shape}"))
    if not private and not np.all(np.isfinite(X)):  # sound mode: the release drops such rows branch-free
        rows = np.where(~np.isfinite(X).all(1))[0]
        where = "" if private else f" in {len(rows)} row(s), first at data row {rows[0] + 1}"
        raise ValueError(f"{source}: non-finite or missing feature values{where}")
    labels = [str(v).strip() for v in labels]
    key = str
    if classes is not None:  # the public class set: the only source of the classes
        uniq, key = check_class_list(classes), class_key
        if not private and not {key(v) for v in labels} <= {key(c) for c in uniq}:
            raise ValueError(f"{source}: the label column holds values that are not among --classes "
                             "(a schema error; check the class list and the label column)")
    elif class_names is None:
        uniq = sorted(set(labels), key=lambda s: (0, float(s)) if _is_number(s) else (1, s))
    else:
        uniq = [str(c) for c in class_names]
        extra = set(labels) - set(uniq)
        if extra:
            raise ValueError(f"{source}: labels {sorted(extra)[:5]} are not among class_names")
    if classes is None and len(set(labels)) < 2:
        raise ValueError(f"{source}: the label column has a single class; a mixture release needs at least 2")
    index = {key(c): i for i, c in enumerate(uniq)}
    # sound mode: a label outside --classes gets -1 and its row is dropped by the release (an error would
    # reveal that such a row exists; check_settings reports it to the data owner)
    y = torch.tensor([index.get(key(v), -1) for v in labels], dtype=torch.long)
    return LabeledTable(torch.as_tensor(X, dtype=torch.float64), y, uniq, feature_names)


def _is_number(s: str) -> bool:
    try:
        return math.isfinite(float(s))
    except ValueError:
        return False


def _not_integers(names: Sequence[str]) -> list[str]:
    """The class names that no integer label can match (:func:`class_key`: ``1.0`` matches the label 1)."""
    keys = [class_key(c) for c in names]
    return [c for c, (kind, v) in zip(names, keys) if not (kind == "number" and v == v.to_integral_value())]


def _label_text(v) -> str:
    """A numeric label as the text ``--classes`` names it: integral values as integers (``1.0`` -> ``"1"``)."""
    return str(int(v)) if isinstance(v, (int, float)) and math.isfinite(v) and v == int(v) else str(v)


def _one_line_record(line: str, delim: str) -> list[str]:
    """One physical line as a record's fields; a line the csv module cannot parse gives no fields (the
    record is then dropped by the release as a malformed row)."""
    try:
        return next(csv.reader([line], delimiter=delim), [])
    except csv.Error:
        return []


def _read_npz(path: Path, classes: Sequence[str] | None, private: bool, uint8_pixels: bool = False) -> LabeledTable:
    """The NPZ branch of :func:`read_labeled_table` (arrays ``X``, ``y``; optional names); ``uint8_pixels``: a uint8
    ``X`` (its dtype is public schema) is read as pixels ``k / 255``, as the IDX reader reads them."""
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"{path}: cannot read NPZ ({exc})") from None
    for key in ("X", "y"):
        if key not in data:
            raise ValueError(f"{path}: NPZ must contain arrays 'X' and 'y' (found {sorted(data.files)})")
    try:  # numpy: "Object arrays cannot be loaded when allow_pickle=False" (never unpickled here)
        X, y = data["X"], data["y"]
        names = {k: data[k] for k in ("feature_names", "class_names") if k in data}
    except ValueError:
        raise ValueError(f"{path}: NPZ arrays must be numbers or strings, not Python objects (for labels or names "
                         "from pandas save e.g. y=series.to_numpy(dtype=str), feature_names=df.columns.to_numpy("
                         "dtype=str))") from None
    # an array's dtype is public schema (the same for every dataset of that file type): refused in one line
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{path}: NPZ array X must have a numeric dtype (integers or floats), got {X.dtype}")
    if y.dtype.kind not in "biuUS":
        raise ValueError(f"{path}: NPZ array y must hold integer or string labels, got dtype {y.dtype} "
                         "(convert float labels to integers or strings)")
    X = np.asarray(X, dtype=np.float64) / 255.0 if uint8_pixels and X.dtype == np.uint8 else \
        np.asarray(X, dtype=np.float64)
    if y.dtype.kind == "S":
        y = np.char.decode(y, "utf-8", errors="replace")
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"{path}: y must be a vector with one label per row of X")
    fn = [str(f) for f in names["feature_names"]] if "feature_names" in names else [f"x{i}" for i in range(X.shape[1] if X.ndim == 2 else 0)]
    cn = [str(c) for c in names["class_names"]] if "class_names" in names else None
    if cn is not None and np.issubdtype(y.dtype, np.integer):
        if not private and (y.min() < 0 or y.max() >= len(cn)):
            raise ValueError(f"{path}: integer labels must index class_names")
        y = np.array([cn[i] if 0 <= i < len(cn) else "" for i in y.tolist()], dtype=object)  # "": dropped
    if not private and any(v in ("nan", "inf", "-inf") for v in np.asarray(y, dtype=object).tolist()):
        raise ValueError(f"{path}: y contains NaN or inf labels")
    if classes is not None and cn is None and np.issubdtype(y.dtype, np.integer):  # public schema and classes
        named = [str(c).strip() for c in classes]
        bad = _not_integers(named)  # no integer label matches them
        if bad:  # every label would be dropped as outside the classes: a noise-only release
            raise ValueError(f"{path}: NPZ array y holds integer labels but --classes names {', '.join(bad[:3])}: "
                             "name the integers (e.g. --classes 0,1), or store class_names in the NPZ")
    return _finish(X, list(y), fn, str(path), cn, classes, private)


def _header_fields(line: str, suffix: str) -> tuple[str, list[str]]:
    """A CSV/TSV header line's delimiter (the header decides: a tab without a comma, or a .tsv file) and its column
    names, stripped (``csv.Error`` on a malformed line)."""
    delim = "\t" if suffix == ".tsv" or ("\t" in line and "," not in line) else ","
    return delim, [h.strip() for h in next(csv.reader([line], delimiter=delim))]


def _csv_records(path: Path, suffix: str, private: bool) -> tuple[list[str], list[list[str]]]:
    """The header and the records of a CSV/TSV file (the parsing part of :func:`read_labeled_table`)."""
    # private (sound) mode: bytes that are not UTF-8 are replaced, and every physical line after the header is
    # one record, parsed on its own, so that no record's content (a stray quote, a blank line, a huge field)
    # changes how many records there are or how the others are read
    try:
        with open(path, newline="", encoding="utf-8-sig", errors="replace" if private else "strict") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    # a record ends at "\n" only (str.splitlines would also split at \v, \f, \u2028, ... inside a record)
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last record; it does not start one
    if not lines:
        raise ValueError(f"{path}: empty file")
    try:
        delim, header = _header_fields(lines[0], suffix)
        if not private:  # the csv module's own record splitting (quoted newlines inside a field are kept)
            reader = csv.reader(io.StringIO(text), delimiter=delim)
            next(reader)
            rows = [r for r in reader if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise ValueError(f"{path}: cannot parse the CSV ({exc})") from None
    if private:
        rows = [_one_line_record(line, delim) for line in lines[1:]]
    return header, rows


def read_labeled_table(path: str | Path, label_column: str | None = None,
                       feature_columns: Sequence[str] | None = None, *, classes: Sequence[str] | None = None,
                       private: bool = False, uint8_pixels: bool = False) -> LabeledTable:
    """Read ``path`` (``.csv`` or ``.npz``); raises ``ValueError`` with a one-line reason on bad input.

    ``classes``: the public class set (module docstring). ``private``: no row numbers or values in errors.
    ``uint8_pixels``: an NPZ whose ``X`` is uint8 is read as pixels ``k / 255`` (a CSV's cells have no dtype: taken
    as written).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        if feature_columns is not None:  # an NPZ's X has no column names to pick from
            raise ValueError(f"{path}: --features and --bounds COL=LOW:HIGH / --schema name columns of a CSV; an "
                             "NPZ's X is released whole (give --bounds LOW:HIGH for all of its columns, save the "
                             "columns you want in X, or use a CSV with a header)")
        if label_column is not None:  # a flag that would be ignored: its labels are the array y
            raise ValueError(f"{path}: --label-column names a column of a CSV; an NPZ's labels are its array y")
        return _read_npz(path, classes, private, uint8_pixels)
    if suffix not in (".csv", ".txt", ".tsv"):
        raise ValueError(f"{path}: unsupported file type {suffix!r} (use .csv or .npz)")
    if label_column is None:
        raise ValueError("--label-column is required for CSV input")
    header, rows = _csv_records(path, suffix, private)
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"{path}: the header names column(s) {', '.join(map(repr, dup))} more than once; "
                         "rename them so that every column name is unique")
    if label_column not in header:
        raise ValueError(f"{path}: no column named {label_column!r} (columns: {', '.join(header)})")
    li = header.index(label_column)
    if feature_columns is not None and label_column in feature_columns:
        raise ValueError(f"the feature columns name the label column {label_column!r}: a label cannot also be a feature")
    if feature_columns is None:
        feature_columns = [h for h in header if h != label_column]
    missing = [c for c in feature_columns if c not in header]
    if missing:
        raise ValueError(f"{path}: no column(s) named {', '.join(map(repr, missing))}")
    fi = [header.index(c) for c in feature_columns]
    X = np.empty((len(rows), len(fi)), dtype=np.float64)
    labels = []
    # private (sound) mode refuses nothing that depends on a row: a malformed row, a non-numeric cell or a
    # missing label becomes a row that the release drops (NaN features / a label outside the classes)
    for r_i, r in enumerate(rows):
        if len(r) != len(header):
            if private:
                labels.append("")
                X[r_i] = math.nan
                continue
            raise ValueError(f"{path}: data row {r_i + 1} has {len(r)} fields, header has {len(header)}")
        labels.append(r[li].strip())
        for j, c in enumerate(fi):
            v = r[c].strip()
            try:
                X[r_i, j] = cell_number(v) if v != "" else math.nan
            except ValueError:
                if private:
                    X[r_i, j] = math.nan
                    continue
                raise ValueError(f"{path}: column {header[c]!r} is not numeric (row {r_i + 1}: {v!r})") from None
    if not private and any(lab == "" or lab.lower() == "nan" for lab in labels):
        raise ValueError(f"{path}: missing or NaN labels in column {label_column!r}")
    return _finish(X, labels, list(feature_columns), str(path), None, classes, private)


def read_labeled_images(path: str | Path, classes: Sequence[str], label_column: str | None = None,
                        feature_columns: Sequence[str] | None = None, *, uint8_pixels: bool = True) -> LabeledTable:
    """Private training images for the synthetic-data pipeline: a folder of IDX files in MNIST's layout
    (``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte``, raw or ``.gz``; uint8 pixels scaled to
    [0, 1] unless ``uint8_pixels`` is off) or a table that :func:`read_labeled_table` reads (``.npz`` / ``.csv``, one image per row).
    ``feature_columns`` picks a table's columns (default: every column but the label). ``uint8_pixels`` (the
    default; ``synthesize`` turns it off with public bounds, which are in the file's own units, 0 to 255 for uint8
    pixels): uint8 pixels, an IDX folder's or an NPZ's ``X``, are scaled to [0, 1] (the dtype is public schema; the default clips assume pixels
    in [0, 1]). A CSV's cells have no dtype and are taken as written.
    Labels are matched against the public ``classes`` as :func:`class_key` reads both (numbers by value); a row
    whose label is not among them gets index -1 (dropped by the release, never refused). Errors name no row and no
    value."""
    path = Path(path)
    if not path.is_dir():
        return read_labeled_table(path, label_column, feature_columns, classes=classes, private=True,
                                  uint8_pixels=uint8_pixels)
    from torchdpgmm.data.idx import find_idx_file, read_idx
    from torchdpgmm.data.loaders import MNIST_FILES

    if label_column is not None or feature_columns is not None:  # flags that would be ignored
        raise ValueError(f"{path}: --label-column and the columns of --bounds / --schema name columns of a CSV; an "
                         "IDX folder's labels are its label file and its features every pixel")

    names = check_class_list(classes)
    bad = _not_integers(names)
    if bad:  # IDX labels are integers (public schema): every row would be dropped, a noise-only release
        raise ValueError(f"{path}: the IDX label file holds integer labels but --classes names {', '.join(bad[:3])}: "
                         "name the integers (e.g. --classes 0,1,...,9)")
    img_stem, lab_stem = MNIST_FILES["train"]
    try:
        files = [find_idx_file(path, stem, ("raw", "MNIST/raw", "FashionMNIST/raw")) for stem in (img_stem, lab_stem)]
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: no IDX training files ({exc})") from None
    try:
        images, labels = (read_idx(f) for f in files)
    except (ValueError, OSError, EOFError, zlib.error):  # their messages may quote sizes (N * 784 bytes)
        raise ValueError(f"{path}: the IDX training files are not valid IDX (bad header, type or length)") from None
    if images.dim() != 3 or labels.dim() != 1 or labels.shape[0] != images.shape[0]:
        raise ValueError(f"{path}: IDX images must be (n, rows, cols) with one label each")  # n is private
    X = images.reshape(images.shape[0], images.shape[1] * images.shape[2]).to(torch.float64)  # -1 fails at n = 0
    X = X / 255.0 if uint8_pixels and images.dtype == torch.uint8 else X  # with public bounds: the file's units
    index = {class_key(c): i for i, c in enumerate(names)}
    y = torch.tensor([index.get(class_key(_label_text(v)), -1) for v in labels.tolist()], dtype=torch.long)
    return LabeledTable(X, y, names, [f"pixel{i}" for i in range(X.shape[1])])


def feature_width(path: str | Path, label_column: str | None = None,
                  feature_columns: Sequence[str] | None = None) -> int | None:
    """The number of feature columns :func:`read_labeled_images` would read from ``path``, from public schema alone
    (the named columns, a CSV's header row, an NPZ's array header, an IDX file's dimensions; never a record), so
    that a setting the width makes impossible is refused before the data are read. None when the header does not
    say (a missing or malformed file: the reader then gives its own error)."""
    if feature_columns is not None:
        return len(feature_columns)
    path = Path(path)
    try:
        if path.is_dir():
            return _idx_width(path)
        suffix = path.suffix.lower()
        if suffix == ".npz":
            shape = _npz_shape(path, "X")
            return int(shape[1]) if shape is not None and len(shape) == 2 else None
        if suffix in (".csv", ".txt", ".tsv") and label_column is not None:
            with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
                line = fh.readline().rstrip("\r\n")
            header = _header_fields(line, suffix)[1]
            return len(header) - 1 if header.count(label_column) == 1 and len(set(header)) == len(header) else None
    except (OSError, ValueError, EOFError, KeyError, StopIteration, csv.Error, zlib.error, zipfile.BadZipFile):
        return None
    return None


def _npz_shape(path: Path, key: str) -> tuple[int, ...] | None:
    """The shape of array ``key`` of an NPZ from its ``.npy`` header (the array itself is not read)."""
    with zipfile.ZipFile(path) as zf, zf.open(f"{key}.npy") as fh:
        version = np.lib.format.read_magic(fh)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        return None if read is None else tuple(read(fh)[0])


def _idx_width(path: Path) -> int | None:
    """``rows x cols`` of an IDX folder's training images, from the file's header (:mod:`torchdpgmm.data.idx`)."""
    from torchdpgmm.data.idx import _open, find_idx_file
    from torchdpgmm.data.loaders import MNIST_FILES

    try:
        f = find_idx_file(path, MNIST_FILES["train"][0], ("raw", "MNIST/raw", "FashionMNIST/raw"))
    except FileNotFoundError:
        return None
    with _open(f) as fh:
        head = fh.read(4 + 4 * 3)
    if len(head) != 16 or head[:2] != b"\0\0" or head[3] != 3:
        return None
    _, rows, cols = struct.unpack(">3I", head[4:])
    return int(rows) * int(cols)


def write_labeled_csv(path: str | Path, X: torch.Tensor, y: torch.Tensor, class_names: Sequence[str],
                      feature_names: Sequence[str], label_column: str = "label",
                      integer_columns: Sequence[int] = ()) -> None:
    """Write synthetic rows as CSV, atomically and readable (0644 under the usual umask); ``integer_columns``
    (the public discrete columns, already rounded) are written as integers (``3``, not ``3.0``)."""
    import io

    from torchdpgmm.modelfile import atomic_write_text

    if label_column in feature_names:
        raise ValueError(f"--label-column {label_column!r} is also a feature name; choose another")
    Xn = X.detach().cpu().to(torch.float64).numpy()
    yn = y.detach().cpu().numpy()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(feature_names) + [label_column])
    ints = set(int(j) for j in integer_columns)
    for row, lab in zip(Xn, yn):
        w.writerow([str(int(round(v))) if j in ints else repr(float(v)) for j, v in enumerate(row)]
                   + [class_names[int(lab)]])
    atomic_write_text(Path(path), buf.getvalue())
