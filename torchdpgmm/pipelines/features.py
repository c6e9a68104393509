"""Images -> PCA features for the MNIST-style experiments (Liu, Scaglione & Peisert 2025, Sec. V-D).

Sample ``N`` private training images, fit PCA to ``d`` components and project the private sample and
the full test split. ``pca_fit="private"`` (default, as in the paper) fits PCA on the private sample
itself: the projection is a function of the private data and is NOT covered by the release's privacy
guarantee. ``pca_fit="public"`` fits it on a disjoint split of the training set (images never used as
private records), which keeps the whole pipeline inside the stated guarantee.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .pca import PCA, fit_pca

__all__ = ["ImageFeatures", "load_image_split", "prepare_features", "PCA_NOTES"]

PCA_NOTES = {
    "private": "PCA fitted on the private training sample (as in the paper): NOT privacy-accounted; "
    "the released model's guarantee does not cover the projection.",
    "public": "PCA fitted on a disjoint public split of the training images (never used as private records).",
}


@dataclass
class ImageFeatures:
    """PCA features of a private training sample and the full test split."""

    X_train: torch.Tensor  # (N, d) float64
    y_train: torch.Tensor  # (N,) int64
    X_test: torch.Tensor  # (n_test, d) float64
    y_test: torch.Tensor  # (n_test,)
    pca: PCA
    pca_fit: str
    train_index: torch.Tensor  # rows of the training split used as private records
    note: str


def load_image_split(dataset: str, data_dir: str | Path | None, split: str):
    """``(X, y)`` of ``dataset`` in {"mnist", "fashion-mnist", "digits"} (digits: a fixed 70/30 split)."""
    from torchdpgmm import data as tdata

    if dataset == "mnist":
        if data_dir is None:
            raise ValueError("--data-dir is required for mnist (a folder of MNIST IDX files)")
        return tdata.load_mnist(data_dir, split=split)
    if dataset == "fashion-mnist":
        return tdata.load_fashion_mnist(data_dir, split=split)
    if dataset == "digits":
        X, y = tdata.load_digits(dtype=torch.float32)
        g = torch.Generator().manual_seed(12345)
        perm = torch.randperm(X.shape[0], generator=g, device="cpu")
        cut = int(0.7 * X.shape[0])
        idx = perm[:cut] if split == "train" else perm[cut:]
        return X[idx], y[idx]
    raise ValueError(f"dataset must be 'mnist', 'fashion-mnist' or 'digits', got {dataset!r}")


def prepare_features(
    X_train_images: torch.Tensor,
    y_train_images: torch.Tensor,
    X_test_images: torch.Tensor,
    y_test_images: torch.Tensor,
    n_train: int = 5000,
    n_components: int = 5,
    pca_fit: str = "private",
    n_public: int = 5000,
    generator: torch.Generator | None = None,
) -> ImageFeatures:
    """Sample ``n_train`` private images without replacement, fit PCA (``pca_fit``), project train and test.

    The subsample is a host-side permutation: ``generator`` is a CPU generator (the generator rule,
    :mod:`torchdpgmm.pipelines.generators`); move the features to the device afterwards."""
    from .generators import check_generator_device

    if pca_fit not in PCA_NOTES:
        raise ValueError(f"pca_fit must be 'private' or 'public', got {pca_fit!r}")
    check_generator_device(generator, "cpu")
    n_all = X_train_images.shape[0]
    need = n_train + (n_public if pca_fit == "public" else 0)
    if n_train < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train}")
    if need > n_all:
        public = f" + n_public={n_public} for the public PCA" if pca_fit == "public" else ""
        raise ValueError(f"n_train={n_train}{public} exceeds the {n_all} training images (pass a smaller --n-train)")
    perm = torch.randperm(n_all, generator=generator, device="cpu").to(X_train_images.device)
    idx = perm[:n_train]
    Xp = X_train_images[idx].reshape(n_train, -1)
    if pca_fit == "private":
        pca = fit_pca(Xp, n_components)
    else:
        pub = perm[n_train : n_train + n_public]
        pca = fit_pca(X_train_images[pub].reshape(n_public, -1), n_components)
    return ImageFeatures(
        X_train=pca.transform(Xp),
        y_train=y_train_images[idx].to(torch.int64),
        X_test=pca.transform(X_test_images.reshape(X_test_images.shape[0], -1)),
        y_test=y_test_images.to(torch.int64),
        pca=pca,
        pca_fit=pca_fit,
        train_index=idx,
        note=PCA_NOTES[pca_fit],
    )
