"""Public feature transform and differentially private PCA.

* :func:`lowfreq_dct` -- a fixed, data-independent transform: the orthonormal 2-D DCT-II of each image,
  keeping the ``keep x keep`` lowest frequencies (28x28 -> 14x14 = 196 coefficients). It touches no
  private statistic, so it costs no budget; the DP PCA that follows then perturbs a 196x196 instead of a
  785x785 matrix.
* :func:`dp_pca` -- the Gaussian mechanism on the clipped count, sum and second moment of the records
  (``z = clip(x - c, C)``, ``c`` a public centre; Dwork, Talwar, Thakurta & Zhang 2014 "Analyze Gauss"),
  followed by post-processing: mean ``c + s~/n~``, covariance ``Q~/n~ - m m^T``, top eigenvectors.
  L2 (Frobenius) sensitivities of one record:

  ==============  ==========  =============
  block           add-remove  replace-one
  ==============  ==========  =============
  count           1           0
  sum             C           2 C
  second moment   C^2         sqrt(2) C^2
  ==============  ==========  =============

  (replace-one: ``||z z^T - z' z'^T||_F^2 = |z|^4 + |z'|^4 - 2 (z.z')^2 <= 2 C^4``). The symmetric noise
  is isotropic in Frobenius-isometric coordinates (diagonal ``sigma``, off-diagonal ``sigma/sqrt 2``), so the
  Frobenius sensitivity is the right one. The centring is thus itself private (noisy mean), never taken
  from the raw data.
* :func:`project_to_ball` -- ``u = V^T (x - m) / R`` clipped to the unit ball (``R`` public).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import torch

from torchdpgmm.mechanisms import clip_records, gaussian

from ._privacy import NoisedBlock, parse_adjacency

__all__ = ["dct_basis", "lowfreq_dct", "pca_sensitivities", "DPPCA", "dp_pca", "project_to_ball",
           "symmetric_gaussian_noise", "DEFAULT_PCA_SPLIT",
           "check_pca_input"]

#: fractions of the PCA's mu^2 for (count, sum, second moment); public
DEFAULT_PCA_SPLIT = {"count": 0.05, "sum": 0.15, "second_moment": 0.8}


def dct_basis(n: int, keep: int, *, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """Rows ``0..keep-1`` of the orthonormal DCT-II matrix of size ``n``: ``(keep, n)``."""
    if not (isinstance(n, int) and isinstance(keep, int) and 1 <= keep <= n):
        raise ValueError(f"need integers 1 <= keep <= n, got keep={keep!r}, n={n!r}")
    k = torch.arange(keep, dtype=dtype, device=device).unsqueeze(-1)
    i = torch.arange(n, dtype=dtype, device=device)
    D = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    D[0] = D[0] / math.sqrt(2.0)
    return D


def lowfreq_dct(images: torch.Tensor, *, size: int = 28, keep: int = 14) -> torch.Tensor:
    """``(..., size*size)`` or ``(..., size, size)`` images -> ``(..., keep*keep)`` low-frequency DCT-II
    coefficients (orthonormal, so norms can only shrink: a pixel-space bound stays valid)."""
    X = images if images.dtype.is_floating_point else images.to(torch.float64)
    if X.shape[-1] == size * size:
        X = X.reshape(*X.shape[:-1], size, size)
    if X.shape[-2:] != (size, size):
        raise ValueError(f"images must be (..., {size * size}) or (..., {size}, {size}), got {tuple(images.shape)}")
    D = dct_basis(size, keep, device=X.device, dtype=X.dtype)  # public transform: the input's precision
    lead = X.shape[:-2]
    Y = X.reshape(-1, size) @ D.T  # rows: (..., size, keep), two plain GEMMs instead of N small ones
    Y = Y.reshape(-1, size, keep).transpose(-1, -2).reshape(-1, size) @ D.T  # (..., keep(col), keep(row))
    return Y.reshape(*lead, keep, keep).transpose(-1, -2).reshape(*lead, keep * keep).to(torch.float64)


def pca_sensitivities(clip_bound: float, adjacency: str) -> dict[str, float]:
    """L2 sensitivities of (count, sum, second moment) of records clipped to ``||z|| <= clip_bound``."""
    C = float(clip_bound)
    if parse_adjacency(adjacency) == "add-remove":
        return {"count": 1.0, "sum": C, "second_moment": C * C}
    return {"count": 0.0, "sum": 2 * C, "second_moment": math.sqrt(2.0) * C * C}


def symmetric_gaussian_noise(d: int, sigma: float, *, generator=None, dtype=torch.float64, device=None,
                             batch: tuple[int, ...] = ()) -> torch.Tensor:
    """Symmetric ``(*batch, d, d)`` noise, i.i.d. ``N(0, sigma^2)`` in Frobenius-isometric coordinates:
    ``(G + G^T)/2`` with ``G`` i.i.d. ``N(0, sigma^2)`` has diagonal variance ``sigma^2`` and off-diagonal
    ``sigma^2/2``, i.e. ``||E||_F^2`` is a sum of ``d(d+1)/2`` i.i.d. ``N(0, sigma^2)`` squares."""
    G = gaussian(torch.zeros(*batch, d, d, dtype=dtype, device=device), sigma * sigma, generator=generator,
                 check_mean=False)  # zeros: nothing to check, and no host read on the hot path
    return 0.5 * (G + G.transpose(-1, -2))


def usable_records(X: torch.Tensor, mask: torch.Tensor | None, fill) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X with every masked or non-finite row replaced by fill, the boolean mask of usable rows)``, without a
    branch on the data (a row is non-finite iff its sum is, except a finite row whose sum overflows float64,
    which is dropped too). ``fill`` is chosen by the caller so that a replaced row is a zero record."""
    finite = torch.isfinite(X.sum(-1))
    mask = finite if mask is None else mask.to(finite.device) & finite
    fill = torch.as_tensor(fill, dtype=X.dtype, device=X.device)
    return torch.where(mask.unsqueeze(-1), X, fill), mask


def record_count(n_rows: int, mask: torch.Tensor, adjacency: str) -> torch.Tensor:
    """The count a noisy mean or PCA releases, ``(1,)`` float64: under add/remove the usable rows (a dropped
    row is a removed one); under replace-one the public number of rows, an unusable row being a zero record
    (replacing a record by an unusable one must not move a count whose sensitivity is recorded as 0)."""
    if adjacency == "replace-one":
        return torch.tensor([float(n_rows)], dtype=torch.float64, device=mask.device)
    return mask.sum().to(torch.float64).reshape(1)


def check_pca_input(X, mask) -> None:
    """Refuse, in one line naming no size of the data (public facts only), an ``X`` that is not a tensor ``(N, D)``
    or a ``mask`` that is not a boolean ``(N,)`` (a longer mask used to broadcast in a message quoting N)."""
    if not torch.is_tensor(X) or X.dim() != 2:
        raise ValueError("X must be a tensor of shape (N, D)")
    if mask is not None and (not torch.is_tensor(mask) or mask.shape != X.shape[:1] or mask.dtype != torch.bool):
        raise ValueError("mask must be a boolean tensor of shape (N,): one entry per row of X")


@dataclass
class DPPCA:
    """A privately estimated projection: ``mean (D,)``, ``components (k, D)``, ``eigenvalues (k,)``."""

    mean: torch.Tensor
    components: torch.Tensor
    eigenvalues: torch.Tensor
    count: torch.Tensor
    blocks: tuple = ()
    extras: dict = field(default_factory=dict)

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        return (X.to(self.components.dtype) - self.mean) @ self.components.T


def dp_pca(X: torch.Tensor, n_components: int, *, clip_bound: float, mu: float, adjacency: str = "add-remove",
           center: torch.Tensor | None = None, split: dict[str, float] | None = None,
           mask: torch.Tensor | None = None, generator: torch.Generator | None = None) -> DPPCA:
    """``mu``-GDP PCA of ``X (N, D)`` (module docstring); ``center`` public (default 0). A row where the
    boolean ``mask (N,)`` is False, or that holds a non-finite value, is a zero record (no branch), counted
    only under replace-one (whose count is the public N), so under add/remove it is as if absent."""
    adjacency = parse_adjacency(adjacency)
    check_pca_input(X, mask)
    D = X.shape[-1]
    if not (isinstance(n_components, numbers.Integral) and not isinstance(n_components, bool)
            and 1 <= n_components <= D):
        raise ValueError(f"n_components must be an int in [1, {D}], got {n_components!r}")
    if not (float(clip_bound) > 0 and math.isfinite(float(clip_bound))):
        raise ValueError(f"clip_bound must be positive and finite, got {clip_bound!r}")
    if not (float(mu) > 0 and math.isfinite(float(mu))):
        raise ValueError(f"mu must be positive and finite, got {mu!r}")
    n_components = int(n_components)
    split = dict(DEFAULT_PCA_SPLIT if split is None else split)
    if set(split) != set(DEFAULT_PCA_SPLIT) or any(not (v > 0) for v in split.values()):
        raise ValueError(f"split must give positive fractions for {sorted(DEFAULT_PCA_SPLIT)}, got {split!r}")
    tot = sum(split.values())
    Xd = X.to(torch.float64)
    c = torch.zeros(D, dtype=torch.float64, device=X.device) if center is None else \
        torch.as_tensor(center, dtype=torch.float64, device=X.device)
    Xd, mask = usable_records(Xd, mask, c)  # a masked or non-finite row becomes the centre: a zero record
    Z = clip_records(Xd, float(clip_bound), center=c)  # the noise layer's one clipping function
    sens = pca_sensitivities(clip_bound, adjacency)
    # sigma_b = Delta_b / (mu sqrt(w_b)) with Delta_b at add-remove scale: sum_b (Delta_b/sigma_b)^2 = mu^2
    ref = pca_sensitivities(clip_bound, "add-remove") if adjacency == "add-remove" else \
        {"count": 1.0, "sum": sens["sum"], "second_moment": sens["second_moment"]}
    sig = {b: ref[b] / (float(mu) * math.sqrt(split[b] / tot)) for b in split}
    if adjacency == "replace-one":  # the count does not move; its noise is free, keep it for a fixed shape
        sig["count"] = 1.0 / float(mu)
    n = gaussian(record_count(Z.shape[0], mask, adjacency), sig["count"] ** 2, generator=generator, check_mean=False)[0]
    s = gaussian(Z.sum(0), sig["sum"] ** 2, generator=generator, check_mean=False)
    Q = Z.T @ Z + symmetric_gaussian_noise(D, sig["second_moment"], generator=generator, device=X.device)
    # the released second moment's signal against its noise (post-processing, a tensor: no host read): its trace is
    # sum_n ||z_n||^2 plus the sum of D diagonal noise coordinates of std sigma, so an empty table's z is N(0, 1)
    signal = torch.diagonal(Q).sum() / (sig["second_moment"] * math.sqrt(D))
    n_hat = n.clamp_min(1.0)
    m = s / n_hat
    cov = Q / n_hat - torch.outer(m, m)
    evals, evecs = torch.linalg.eigh(0.5 * (cov + cov.T))
    comps = evecs[:, -n_components:].flip(-1).T
    blocks = tuple(NoisedBlock(name=f"pca-{b}", mechanism="gaussian", sensitivity=sens[b], noise_scale=sig[b],
                               norm="frobenius" if b == "second_moment" else "l2") for b in ("count", "sum", "second_moment"))
    return DPPCA(mean=c + m, components=comps, eigenvalues=evals[-n_components:].flip(-1), count=n_hat, blocks=blocks,
                 extras={"sigma": sig, "clip_bound": float(clip_bound), "second_moment_signal": signal})


def project_to_ball(X: torch.Tensor, pca: DPPCA, radius: float) -> torch.Tensor:
    """``u = clip(V^T (x - m) / R, 1)``: rows of the unit ball (``R`` public; post-processing of the PCA)."""
    return clip_records(pca.transform(X) / float(radius), 1.0)
