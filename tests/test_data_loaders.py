"""Loaders on self-written IDX files (raw and gzipped), Iris standardisation, digits. No network."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # tiny tensors: a single thread avoids oversubscription on busy 2-core machines
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

from torchdpgmm.data import (
    find_idx_file,
    load_digits,
    load_fashion_mnist,
    load_iris,
    load_mnist,
    read_idx,
    write_idx,
)


def _idx_bytes(arr: np.ndarray, code: int, be_dtype: str) -> bytes:
    # written by hand from the format description, independent of write_idx
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", s) for s in arr.shape)
    return head + arr.astype(be_dtype).tobytes()


def _write_mnist_folder(folder, n_train=7, n_test=5, gz=False, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n, stem in (("train", n_train, "train"), ("test", n_test, "t10k")):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = rng.integers(0, 10, size=(n,), dtype=np.uint8)
        for name, arr in ((f"{stem}-images-idx3-ubyte", imgs), (f"{stem}-labels-idx1-ubyte", labs)):
            data = _idx_bytes(arr, 0x08, "u1")
            if gz:
                with gzip.open(folder / (name + ".gz"), "wb") as fh:
                    fh.write(data)
            else:
                (folder / name).write_bytes(data)
        out[split] = (imgs, labs)
    return out


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_from_idx_folder(tmp_path, gz):
    ref = _write_mnist_folder(tmp_path / "m", gz=gz)
    for split in ("train", "test"):
        X, y = load_mnist(tmp_path / "m", split=split)
        imgs, labs = ref[split]
        assert X.shape == (imgs.shape[0], 784) and X.dtype == torch.float32
        np.testing.assert_allclose(X.numpy(), imgs.reshape(len(imgs), -1) / 255.0, rtol=0, atol=1e-7)
        assert y.dtype == torch.int64
        np.testing.assert_array_equal(y.numpy(), labs)
    X3, _ = load_mnist(tmp_path / "m", split="test", flatten=False, dtype=torch.float64)
    assert X3.shape == (5, 28, 28) and X3.dtype == torch.float64


def test_torchvision_layout_and_fashion(tmp_path):
    ref = _write_mnist_folder(tmp_path / "root" / "MNIST" / "raw", gz=True, seed=1)
    X, y = load_mnist(tmp_path / "root", split="train")
    np.testing.assert_array_equal(y.numpy(), ref["train"][1])
    ref2 = _write_mnist_folder(tmp_path / "f" / "FashionMNIST" / "raw", seed=2)
    X, y = load_fashion_mnist(tmp_path / "f", split="test")
    np.testing.assert_array_equal(y.numpy(), ref2["test"][1])


def test_loader_errors(tmp_path):
    with pytest.raises(ValueError, match="split"):
        load_mnist(tmp_path, split="valid")
    with pytest.raises(FileNotFoundError, match="train-images"):
        load_mnist(tmp_path, split="train")
    # labels that do not match the images
    d = tmp_path / "bad"
    _write_mnist_folder(d)
    (d / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(3, np.uint8), 0x08, "u1"))
    with pytest.raises(ValueError, match="labels"):
        load_mnist(d)
    (tmp_path / "junk").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "junk")
    (tmp_path / "short").write_bytes(_idx_bytes(np.zeros((2, 3), np.uint8), 0x08, "u1")[:-1])
    with pytest.raises(ValueError, match="payload"):
        read_idx(tmp_path / "short")


@pytest.mark.parametrize(
    "dtype,code,be",
    [(np.int16, 0x0B, ">i2"), (np.int32, 0x0C, ">i4"), (np.float32, 0x0D, ">f4"), (np.float64, 0x0E, ">f8")],
)
def test_read_idx_types_and_roundtrip(tmp_path, dtype, code, be):
    arr = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype) * 3
    (tmp_path / "a.idx").write_bytes(_idx_bytes(arr, code, be))
    t = read_idx(tmp_path / "a.idx")
    np.testing.assert_array_equal(t.numpy(), arr)
    p = write_idx(tmp_path / "b.idx.gz", torch.from_numpy(arr))
    assert p.read_bytes()[:2] == b"\x1f\x8b"
    np.testing.assert_array_equal(read_idx(p).numpy(), arr)
    # the hand-written bytes and write_idx agree exactly
    write_idx(tmp_path / "c.idx", arr)
    assert (tmp_path / "c.idx").read_bytes() == (tmp_path / "a.idx").read_bytes()


def test_find_idx_dot_spelling(tmp_path):
    (tmp_path / "train-images.idx3-ubyte").write_bytes(b"")
    assert find_idx_file(tmp_path, "train-images-idx3-ubyte").name == "train-images.idx3-ubyte"


def test_iris_standardised_against_sklearn():
    from sklearn.datasets import load_iris as sk

    b = sk()
    ref = (b.data - b.data.mean(0)) / b.data.std(0)
    X, y = load_iris()
    assert X.shape == (150, 4) and X.dtype == torch.float64
    np.testing.assert_allclose(X.numpy(), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(X.numpy().mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.numpy().var(0), 1, atol=1e-12)
    np.testing.assert_array_equal(np.bincount(y.numpy()), [50, 50, 50])
    Xr, _ = load_iris(standardize=False)
    np.testing.assert_allclose(Xr.numpy(), b.data)


def test_digits():
    X, y = load_digits()
    assert X.shape == (1797, 64) and float(X.max()) == 1.0 and float(X.min()) == 0.0
    assert set(y.tolist()) == set(range(10))


def test_fashion_mnist_debian_if_installed():
    from torchdpgmm.data import FASHION_MNIST_DEBIAN_DIR

    if not (FASHION_MNIST_DEBIAN_DIR / "t10k-labels-idx1-ubyte.gz").exists():
        pytest.skip("dataset-fashion-mnist is not installed")
    X, y = load_fashion_mnist(split="test")
    assert X.shape == (10000, 784)
    assert torch.bincount(y).tolist() == [1000] * 10
