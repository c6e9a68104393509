"""Reading and writing IDX files, the format of MNIST and Fashion-MNIST.

An IDX file is: two zero bytes, one type byte, one byte holding the number of dimensions ``n``, ``n``
big-endian 32-bit sizes, then the data in C order, big-endian. Files may be gzipped (``.gz``); this
module reads both, so a folder of files downloaded by hand, unpacked or not, works without a network.
"""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

__all__ = ["read_idx", "write_idx", "find_idx_file"]

# IDX type byte -> numpy dtype (big-endian where it matters)
_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_NUMPY_TO_IDX = {
    np.dtype(np.uint8): 0x08,
    np.dtype(np.int8): 0x09,
    np.dtype(np.int16): 0x0B,
    np.dtype(np.int32): 0x0C,
    np.dtype(np.float32): 0x0D,
    np.dtype(np.float64): 0x0E,
}


def _open(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":  # gzip signature, whatever the file is called
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_idx(path: str | Path) -> torch.Tensor:
    """Read one IDX file (raw or gzipped) into a tensor of its stored shape and type.

    ``uint8`` data stays ``torch.uint8``; the other integer types become int8/int16/int32 and the float
    types float32/float64 (native byte order).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    with _open(path) as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number)")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_TYPES:
        raise ValueError(f"{path}: unknown IDX data type 0x{type_code:02x}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_TYPES[type_code]
    count = int(np.prod(shape, dtype=np.int64)) if ndim else 1
    expected = header + count * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(f"{path}: IDX payload has {len(raw) - header} bytes, header implies {expected - header}")
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=header).reshape(shape)
    arr = arr.astype(dtype.newbyteorder("="), copy=True)
    return torch.from_numpy(arr)


def write_idx(path: str | Path, data, compress: bool | None = None) -> Path:
    """Write ``data`` (tensor or array) as an IDX file; gzip it when ``compress`` (default: name ends in .gz)."""
    path = Path(path)
    arr = data.detach().cpu().numpy() if torch.is_tensor(data) else np.asarray(data)
    dt = arr.dtype.newbyteorder("=")
    if dt not in _NUMPY_TO_IDX:
        raise ValueError(f"data has dtype {arr.dtype}, which IDX cannot store")
    code = _NUMPY_TO_IDX[dt]
    payload = struct.pack(">BBBB", 0, 0, code, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    payload += np.ascontiguousarray(arr, dtype=dt.newbyteorder(">")).tobytes()
    if compress is None:
        compress = path.suffix == ".gz"
    opener = gzip.open if compress else open
    with opener(path, "wb") as fh:
        fh.write(payload)
    return path


def find_idx_file(root: str | Path, stem: str, subdirs: tuple[str, ...] = ()) -> Path:
    """Locate ``stem`` or ``stem.gz`` in ``root`` or one of ``root/<subdir>`` (first match wins).

    Accepts both the dash and the dot spelling of the usual names (``train-images-idx3-ubyte`` and
    ``train-images.idx3-ubyte``).
    """
    root = Path(root)
    names = [stem, stem.replace("-idx", ".idx")]
    tried = []
    for base in (root,) + tuple(root / s for s in subdirs):
        for n in names:
            for cand in (base / n, base / (n + ".gz")):
                tried.append(cand)
                if cand.is_file():
                    return cand
    raise FileNotFoundError(
        f"no IDX file {stem!r} (raw or .gz) under {root}; looked for: " + ", ".join(str(t) for t in tried[:4]) + ", ..."
    )
