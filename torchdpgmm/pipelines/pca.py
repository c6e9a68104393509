"""Principal component analysis in torch, batched over leading dimensions (Liu, Scaglione & Peisert 2025, Sec. V-D).

The paper reduces 784 pixels to d=5 principal components fitted on the N=5000 *private* training
images; that PCA is not privacy-accounted (the projection itself depends on the private data). The
pipelines keep that as the default and say so in their output; :func:`fit_pca` applied to a disjoint
public split is the alternative.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PCA", "fit_pca"]


@dataclass
class PCA:
    """A fitted projection: ``mean (..., D)``, ``components (..., k, D)`` (orthonormal rows), variances ``(..., k)``."""

    mean: torch.Tensor
    components: torch.Tensor
    explained_variance: torch.Tensor

    @property
    def n_components(self) -> int:
        return self.components.shape[-2]

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """Project ``X (..., n, D)`` to ``(..., n, k)``: ``(X - mean) @ components^T``."""
        dt = self.components.dtype
        return (X.to(dt) - self.mean.unsqueeze(-2)) @ self.components.transpose(-1, -2)

    def inverse_transform(self, Z: torch.Tensor) -> torch.Tensor:
        return Z.to(self.components.dtype) @ self.components + self.mean.unsqueeze(-2)


def fit_pca(
    X: torch.Tensor, n_components: int, mask: torch.Tensor | None = None, dtype: torch.dtype = torch.float64
) -> PCA:
    """Fit PCA to ``X (..., N, D)`` (rows with ``mask == False`` ignored) by eigendecomposing the covariance.

    Components are the top ``n_components`` eigenvectors of the (N-1)-normalised sample covariance,
    sign-fixed so that each component's entry of largest magnitude is positive (a deterministic choice;
    scikit-learn fixes signs differently, which only flips the sign of a feature).
    """
    if not torch.is_tensor(X) or X.dim() < 2:
        raise ValueError("X must be a tensor of shape (..., N, D)")
    D = X.shape[-1]
    if not isinstance(n_components, int) or not 1 <= n_components <= D:
        raise ValueError(f"n_components must be an int in [1, {D}], got {n_components!r}")
    Xd = X.to(dtype)
    if mask is None:
        w = torch.ones(Xd.shape[:-1], dtype=dtype, device=Xd.device)
    else:
        if mask.shape != X.shape[:-1]:
            raise ValueError(f"mask must have shape {tuple(X.shape[:-1])}, got {tuple(mask.shape)}")
        w = mask.to(dtype)
    n = w.sum(-1, keepdim=True)  # (..., 1)
    mean = (w.unsqueeze(-1) * Xd).sum(-2) / n
    Xc = (Xd - mean.unsqueeze(-2)) * w.unsqueeze(-1)
    cov = Xc.transpose(-1, -2) @ Xc / (n.unsqueeze(-1) - 1)
    evals, evecs = torch.linalg.eigh(cov)  # ascending
    top = evecs[..., :, -n_components:].flip(-1).transpose(-1, -2)  # (..., k, D), descending variance
    var = evals[..., -n_components:].flip(-1)
    idx = top.abs().argmax(-1, keepdim=True)
    sign = torch.sign(torch.gather(top, -1, idx))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return PCA(mean=mean, components=top * sign, explained_variance=var)
