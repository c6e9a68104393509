"""Real data sets used by the experiments of Liu, Scaglione & Peisert (2025), Sections V-B and V-D.

Every loader returns ``(X, y)``: ``X`` a floating tensor with one row per sample, ``y`` an int64
tensor of class labels in ``[0, K)``. Nothing here needs a network unless ``download=True`` is asked for.

* :func:`load_iris` - scikit-learn's copy of UCI Iris (N=150, d=4, K=3), each feature standardised to
  zero mean and unit variance as in Sec. V-B.
* :func:`load_digits` - scikit-learn's 8x8 digits (N=1797, d=64, K=10), pixels scaled to [0, 1].
* :func:`load_mnist` / :func:`load_fashion_mnist` - 28x28 images flattened to 784 pixels in [0, 1],
  read from a folder of IDX files (raw or gzipped). Fashion-MNIST defaults to the folder installed by
  Debian's ``dataset-fashion-mnist`` package.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .idx import find_idx_file, read_idx

__all__ = [
    "load_iris",
    "load_digits",
    "load_mnist",
    "load_fashion_mnist",
    "FASHION_MNIST_DEBIAN_DIR",
    "MNIST_FILES",
]

#: where Debian's ``dataset-fashion-mnist`` package installs the four gzipped IDX files
FASHION_MNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

#: split -> (images stem, labels stem); the same names serve MNIST and Fashion-MNIST
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def load_iris(standardize: bool = True, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Iris (scikit-learn's bundled copy): ``X (150, 4)``, ``y (150,)`` with classes setosa/versicolor/virginica.

    With ``standardize`` (default, as in Sec. V-B) each column is centred and divided by its population
    standard deviation (ddof=0), so every feature has mean 0 and variance 1.
    """
    from sklearn.datasets import load_iris as _sk_iris

    b = _sk_iris()
    X = torch.as_tensor(b.data, dtype=torch.float64)
    y = torch.as_tensor(b.target, dtype=torch.int64)
    if standardize:
        X = (X - X.mean(0)) / X.std(0, unbiased=False)
    return X.to(dtype), y


def load_digits(scale: bool = True, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 8x8 handwritten digits: ``X (1797, 64)`` (pixels / 16 when ``scale``), ``y (1797,)``."""
    from sklearn.datasets import load_digits as _sk_digits

    b = _sk_digits()
    X = torch.as_tensor(b.data, dtype=torch.float64)
    if scale:
        X = X / 16.0
    return X.to(dtype), torch.as_tensor(b.target, dtype=torch.int64)


def _check_split(split: str) -> None:
    if split not in MNIST_FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")


def _read_image_folder(root: Path, split: str, subdirs: tuple[str, ...], flatten: bool, dtype: torch.dtype):
    img_stem, lab_stem = MNIST_FILES[split]
    images = read_idx(find_idx_file(root, img_stem, subdirs))
    labels = read_idx(find_idx_file(root, lab_stem, subdirs))
    if images.dim() != 3:
        raise ValueError(f"{split} images must be a 3-d IDX array (n, rows, cols), got shape {tuple(images.shape)}")
    if labels.dim() != 1 or labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"{split} labels have shape {tuple(labels.shape)}, expected ({images.shape[0]},) to match the images"
        )
    X = images.to(dtype) / 255.0 if images.dtype == torch.uint8 else images.to(dtype)
    if flatten:
        X = X.reshape(X.shape[0], -1)
    return X, labels.to(torch.int64)


def load_mnist(
    root: str | Path,
    split: str = "train",
    download: bool = False,
    flatten: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST from a folder of IDX files: ``X (n, 784)`` in [0, 1] (``flatten=False``: ``(n, 28, 28)``), ``y (n,)``.

    ``root`` may hold the four files directly (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each raw or ``.gz``), or use torchvision's
    layout ``root/MNIST/raw/``. With ``download=True`` torchvision.datasets.MNIST fetches the files first
    (needs a network); otherwise nothing is downloaded. Images are float32 by default to save memory
    (60000 x 784); PCA and statistics downstream run in float64.
    """
    _check_split(split)
    root = Path(root)
    if download:
        try:
            from torchvision.datasets import MNIST
        except ImportError as exc:  # pragma: no cover - torchvision is a dependency
            raise RuntimeError("download=True needs torchvision") from exc
        try:
            MNIST(str(root), train=(split == "train"), download=True)
        except Exception as exc:  # network errors are many kinds
            raise RuntimeError(
                f"could not download MNIST into {root} ({exc}); put the IDX files in that folder and use download=False"
            ) from exc
    return _read_image_folder(root, split, ("raw", "MNIST/raw", "mnist"), flatten, dtype)


def load_fashion_mnist(
    root: str | Path | None = None,
    split: str = "train",
    download: bool = False,
    flatten: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST (same file names and sizes as MNIST); ``root`` defaults to Debian's folder.

    ``root=None`` reads :data:`FASHION_MNIST_DEBIAN_DIR` (``apt-get install dataset-fashion-mnist``).
    torchvision's layout ``root/FashionMNIST/raw/`` is also found; ``download=True`` uses
    torchvision.datasets.FashionMNIST (needs a network).
    """
    _check_split(split)
    if root is None:
        if download:
            raise ValueError("download=True needs root= a writable folder (the default is Debian's read-only copy)")
        root = FASHION_MNIST_DEBIAN_DIR
        if not root.is_dir():
            raise FileNotFoundError(
                f"{root} does not exist: install it with `apt-get install dataset-fashion-mnist` "
                "or pass root= a folder of Fashion-MNIST IDX files"
            )
    root = Path(root)
    if download:
        try:
            from torchvision.datasets import FashionMNIST

            FashionMNIST(str(root), train=(split == "train"), download=True)
        except Exception as exc:
            raise RuntimeError(
                f"could not download Fashion-MNIST into {root} ({exc}); use the IDX files with download=False"
            ) from exc
    return _read_image_folder(root, split, ("raw", "FashionMNIST/raw", "fashion-mnist"), flatten, dtype)
