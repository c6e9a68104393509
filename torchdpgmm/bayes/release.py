"""Laplace release of per-class Gaussian statistics (Xi, Kantarcioglu & Inan 2011, Sections 4.1 and 5).

Pipeline of the paper's Section 5, steps 2-3, batched over any leading (trial) dimensions:

1. truncation of each class's records to ``mu_k +- k sigma_k`` per attribute (Section 4.1, ``k = 6``);
   the box comes from the *known* generating parameters, so it is public. We clamp (a record outside the
   box is moved onto it) rather than discard, which keeps shapes fixed; with ``k = 6`` a coordinate falls
   outside with probability 2e-9, so the two readings agree in practice;
2. normalisation of every attribute to ``[0, 1]`` with that box (Section 1.1);
3. per class, the mean (Theorem 3.1, sensitivity ``d/n_k``) and the upper triangle of the ``1/n_k``
   covariance (Theorem 3.7) each get independent Laplace noise of scale ``sensitivity / epsilon_part``,
   i.e. the sensitivities are taken in normalised units, which is the paper's "adjusting for the actual
   range of every attribute" (noise on the original scale is ``diag(w) . diag(w)`` times it);
4. step 3(a)-(c) PD repair of the noisy covariance (:func:`torchdpgmm.mechanisms.psd.xi_repair`);
5. back-transformation to the original units.

Privacy: the classes hold disjoint records, so (with labels fixed, as in the paper's sibling databases
of equal size) parallel composition gives each class the full ``epsilon``, split between mean and
covariance as ``mean_fraction`` / ``1 - mean_fraction`` (the paper does not state its split). The class
sizes ``n_k`` (hence the mixing weights) are treated as public, as the paper's Section 4 does ("the
number of records ... sensitivity 0"); this is recorded in the release's notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import check_epsilon, check_finite, check_labels
from torchdpgmm.bayes._compat import laplace, xi_repair
from torchdpgmm.mechanisms.psd import eigenvalue_floor, shift_psd
from torchdpgmm.bayes.sensitivity import range_adjusted_sensitivities

__all__ = [
    "GaussianClasses",
    "XiRelease",
    "truncation_box",
    "truncate",
    "normalize",
    "class_statistics",
    "xi_release",
]


@dataclass
class GaussianClasses:
    """Parameters of a labeled Gaussian mixture: ``weights (...,K)``, ``means (...,K,d)``,
    ``covariances (...,K,d,d)``. Any object with these three attributes (e.g. the core's
    ``LabeledGMM``) is accepted wherever a model is expected."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor

    def to_labeled_gmm(self):
        from torchdpgmm.mixture import LabeledGMM

        return LabeledGMM(self.weights, self.means, self.covariances)


@dataclass
class XiRelease:
    """Result of :func:`xi_release`: the released model, the noise-free model from the same truncated
    data, the class counts, the Laplace scales (normalised units) and the privacy record."""

    model: GaussianClasses
    nonprivate: GaussianClasses
    counts: torch.Tensor
    mean_scale: torch.Tensor
    cov_scale: torch.Tensor
    was_pd: torch.Tensor
    privacy: Any = None
    notes: list[str] = field(default_factory=list)


def truncation_box(means: torch.Tensor, covariances: torch.Tensor, k: float = 6.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``mu -+ k sigma`` per attribute (Section 4.1), from ``means (...,K,d)`` and ``covariances (...,K,d,d)``."""
    if not k > 0:
        raise ValueError(f"k must be > 0, got {k!r}")
    sd = torch.diagonal(covariances, dim1=-2, dim2=-1).clamp(min=0).sqrt()
    return means - k * sd, means + k * sd


def _per_record(box: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Gather ``box (...,K,d)`` at labels ``y (...,N)`` -> ``(...,N,d)``."""
    batch = broadcast_shapes(box.shape[:-2], y.shape[:-1])
    box = box.expand(batch + box.shape[-2:])
    y = y.expand(batch + y.shape[-1:])
    idx = y.unsqueeze(-1).expand(y.shape + box.shape[-1:])
    return torch.gather(box, -2, idx)


def truncate(x: torch.Tensor, y: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Clamp every record to its class's box ``[lo_y, hi_y]`` (Section 5, step 2)."""
    return torch.minimum(torch.maximum(x, _per_record(lo, y)), _per_record(hi, y))


def normalize(x: torch.Tensor, y: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Map each record affinely into ``[0,1]^d`` with its class's box (Section 1.1)."""
    lo_r, hi_r = _per_record(lo, y), _per_record(hi, y)
    return (x - lo_r) / (hi_r - lo_r)


def class_statistics(
    x: torch.Tensor, y: torch.Tensor, num_classes: int, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Counts ``(...,K)``, means ``(...,K,d)`` and ``1/n_k`` covariances ``(...,K,d,d)`` per class
    (the estimators of Theorems 3.1 and 3.5-3.7). ``mask (...,N)`` marks valid rows of padded data; the
    masked-out rows may hold anything, even NaN or a label outside ``[0, K)`` (zeroed before any arithmetic,
    as in :func:`torchdpgmm.mixture.class_moments`)."""
    if mask is not None:  # NaN * 0 = NaN: a masked row must be zeroed, not merely weighted by 0
        keep = mask != 0
        x = torch.where(keep.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))
        y = torch.where(keep, y, torch.zeros((), dtype=y.dtype, device=y.device))
    onehot = torch.nn.functional.one_hot(y, num_classes).to(x.dtype)  # (...,N,K)
    if mask is not None:
        onehot = onehot * mask.unsqueeze(-1).to(x.dtype)
    counts = onehot.sum(-2)
    safe = counts.clamp(min=1.0)
    sums = onehot.transpose(-1, -2) @ x  # (...,K,d)
    means = sums / safe.unsqueeze(-1)
    # second moments class by class keeps memory at O(N d) per class
    covs = []
    for k in range(num_classes):
        w = onehot[..., k].unsqueeze(-1)
        xc = x - means[..., k, :].unsqueeze(-2)
        covs.append((xc * w).transpose(-1, -2) @ xc / safe[..., k, None, None])
    return counts, means, torch.stack(covs, dim=-3)


def _mirror_upper(S: torch.Tensor) -> torch.Tensor:
    upper = torch.triu(S)
    return upper + upper.transpose(-1, -2) - torch.diag_embed(torch.diagonal(S, dim1=-2, dim2=-1))


def xi_release(
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: float,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    mean_fraction: float = 0.5,
    cov_bound: str = "upper",
    repair: str = "xi",
    mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> XiRelease:
    """Release class weights, means and covariances as in Xi et al. Section 5, steps 2-3.

    ``x (...,N,d)``, ``y (...,N)`` (labels in ``[0, K)``), public box ``lo, hi (...,K,d)`` (e.g.
    :func:`truncation_box` of the generating parameters). ``cov_bound`` picks Theorem 3.7's ``"upper"``
    bound (default, what the paper proves) or the attained ``"exact"`` one. ``repair`` maps the noisy
    covariance to a positive definite one: ``"xi"`` (step 3(a)-(c), default), or the core's other repairs
    ``"floor"`` (eigenvalues clipped at 1e-6 in normalised units) and ``"shift"`` (``S + rho I``, margin
    1e-6); all are post-processing. Every class needs ``n_k >= 2``.
    """
    check_epsilon(epsilon)
    if not 0.0 < mean_fraction < 1.0:
        raise ValueError(f"mean_fraction must lie in (0, 1), got {mean_fraction!r}")
    if repair not in ("xi", "floor", "shift"):
        raise ValueError(f"repair must be 'xi', 'floor' or 'shift', got {repair!r}")
    if cov_bound not in ("upper", "lower", "exact"):
        raise ValueError(f"cov_bound must be 'upper', 'lower' or 'exact', got {cov_bound!r}")
    if not torch.is_tensor(x) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (..., N, d)")
    check_finite(x, "x", mask)
    check_labels(y, num_classes, mask)
    if y.shape != x.shape[:-1]:
        raise ValueError(f"y must have shape {tuple(x.shape[:-1])}, got {tuple(y.shape)}")
    widths = (hi - lo).to(x.dtype)
    if lo.shape[-2:] != (num_classes, x.shape[-1]) or hi.shape != lo.shape:
        raise ValueError(f"lo and hi must have shape (..., {num_classes}, {x.shape[-1]})")
    if not bool((widths > 0).all()):
        raise ValueError("hi must exceed lo in every attribute")
    if mask is not None:  # padding may hold anything (NaN, any label): zeroed before any arithmetic
        keep = mask != 0
        x = torch.where(keep.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))
        y = torch.where(keep, y, torch.zeros((), dtype=y.dtype, device=y.device))
    onehot = torch.nn.functional.one_hot(y, num_classes)
    if mask is not None:
        onehot = onehot * mask.unsqueeze(-1)
    if bool((onehot.sum(-2) < 2).any()):
        raise ValueError("every class needs at least 2 records (Theorem 3.7 assumes n >= 2)")

    lo = lo.to(x.dtype)
    xt = truncate(x, y, lo, lo + widths)
    u = normalize(xt, y, lo, lo + widths)
    counts, m_u, c_u = class_statistics(u, y, num_classes, mask)
    d = x.shape[-1]
    ones = torch.ones(d, dtype=x.dtype, device=x.device)
    mean_sens, cov_sens = range_adjusted_sensitivities(counts, ones, bound=cov_bound)
    mean_scale = mean_sens / (mean_fraction * epsilon)
    cov_scale = cov_sens / ((1.0 - mean_fraction) * epsilon)

    m_noisy = laplace(m_u, mean_scale.unsqueeze(-1), generator=generator)
    c_noisy = _mirror_upper(laplace(c_u, cov_scale[..., None, None], generator=generator))
    evals = torch.linalg.eigvalsh(c_noisy)
    was_pd = (evals > 0).all(-1)
    if repair == "xi":
        c_rep = xi_repair(c_noisy)
    elif repair == "floor":
        c_rep = eigenvalue_floor(c_noisy, 1e-6)
    else:
        c_rep = shift_psd(c_noisy, margin=1e-6)

    def back(m, c):
        return lo + widths * m, widths.unsqueeze(-1) * c * widths.unsqueeze(-2)

    weights = counts / counts.sum(-1, keepdim=True)
    mean_p, cov_p = back(m_noisy, c_rep)
    mean_0, cov_0 = back(m_u, c_u)
    notes = [
        "Xi et al. (2011) Laplace release: truncation to the public box, normalisation to [0,1]^d, "
        f"mean sensitivity d/n_k, covariance sensitivity Theorem 3.7 ({cov_bound}), "
        f"PD repair {repair}; epsilon split mean {mean_fraction:g} / covariance {1 - mean_fraction:g} per class; "
        "classes are disjoint (parallel composition); class counts treated as public as in the paper.",
    ]
    privacy = _privacy_record(epsilon, mean_fraction, cov_bound, notes)
    return XiRelease(
        model=GaussianClasses(weights, mean_p, cov_p),
        nonprivate=GaussianClasses(weights, mean_0, cov_0),
        counts=counts,
        mean_scale=mean_scale,
        cov_scale=cov_scale,
        was_pd=was_pd,
        privacy=privacy,
        notes=notes,
    )


def _privacy_record(epsilon: float, mean_fraction: float, cov_bound: str, notes: list[str]):
    """Typed record of the 2011 release: pure epsilon-DP under replace-one of a record's features with the
    labels and class sizes fixed (the paper's sibling databases); the class counts (hence the weights) are
    released without noise, so the release is not covered when labels or class sizes are private."""
    from torchdpgmm.privacy import PrivacyRecord

    return PrivacyRecord(
        epsilon=float(epsilon),
        delta=0.0,
        adjacency="replace-one",
        accountant="basic composition within a class, parallel composition across classes",
        mode="as-published",
        mechanism=f"xi2011-laplace ({cov_bound} covariance sensitivity)",
        split={"mean": mean_fraction * float(epsilon), "covariance": (1 - mean_fraction) * float(epsilon)},
        notes=tuple(notes) + ("adjacency: one record's features replaced, labels and class sizes fixed; the class "
                              "counts are released without noise (not covered if labels are private)",),
        covered=False,
    )
