"""Neighbouring datasets to audit on: stress pairs for the as-published release and the worst-case pairs of
the sound mode (each pair says its adjacency relation and what separates the two datasets).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["NeighbourPair", "outlier_label_flip", "hull_moving_point", "tiny_class", "extreme_clipping", "worst_case_add_remove", "worst_case_replace_one"]


@dataclass
class NeighbourPair:
    """Two neighbouring labeled datasets and what separates them."""

    name: str
    X0: torch.Tensor
    y0: torch.Tensor
    X1: torch.Tensor
    y1: torch.Tensor
    relation: str  # "label-flip" (also replace-one) | "replace-one" | "add-remove"
    description: str
    index: int = -1
    class_from: int = -1
    class_to: int = -1
    mask0: torch.Tensor | None = None
    mask1: torch.Tensor | None = None

    @property
    def dataset0(self):
        return (self.X0, self.y0) if self.mask0 is None else (self.X0, self.y0, self.mask0)

    @property
    def dataset1(self):
        return (self.X1, self.y1) if self.mask1 is None else (self.X1, self.y1, self.mask1)

    def to(self, device) -> "NeighbourPair":
        """The same pair with every tensor on ``device`` (pairs are public fixtures drawn on the host with a
        CPU generator; the audit draws its releases where the data are, with a generator of that device)."""
        import dataclasses

        mv = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
              if torch.is_tensor(getattr(self, f.name))}
        return dataclasses.replace(self, **mv)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "relation": self.relation, "description": self.description,
                "N": int(self.X0.shape[-2]), "index": self.index, "class_from": self.class_from,
                "class_to": self.class_to}


def _base(num_per_class, num_classes, dim, generator, spread=1.0, sep=4.0):
    from torchdpgmm.pipelines.generators import check_generator_device

    check_generator_device(generator, "cpu")  # pairs are host fixtures: NeighbourPair.to(device) moves them
    dtype = torch.float64
    centres = torch.zeros(num_classes, dim, dtype=dtype)
    for k in range(num_classes):
        centres[k, k % dim] = sep * (1 + k // dim) * (1 if k % 2 == 0 else -1)
    X = torch.cat([centres[k] + spread * torch.randn(num_per_class, dim, dtype=dtype, generator=generator, device="cpu")
                   for k in range(num_classes)])
    y = torch.cat([torch.full((num_per_class,), k, dtype=torch.long) for k in range(num_classes)])
    return X, y, centres


def outlier_label_flip(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, distance: float = 30.0,
                       generator: torch.Generator | None = None) -> NeighbourPair:
    """A far outlier in class 0 (D0) that flips to class 1 (D1): label-flip / replace-one neighbours.

    Stresses the class-0 and class-1 means and covariances at once (a flip changes two classes) and,
    for local-sensitivity calibration, the noise scale itself.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    x_out = c[0] + distance * torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, x_out[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1 = y0.clone()
    y1[-1] = 1
    return NeighbourPair("outlier-flip", X0, y0, X0.clone(), y1, "label-flip",
                         f"outlier at distance {distance:g} from class 0 flips to class 1", X0.shape[0] - 1, 0, 1)


def hull_moving_point(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, offset: float = 5.0,
                      generator: torch.Generator | None = None) -> NeighbourPair:
    """Class 0 lies on a line except one point ``offset`` off it; in D1 that point flips to class 1.

    Removing the point collapses class 0's convex hull of label-flip differences to the line, so a
    mechanism calibrated to that hull (Gamma_k of Liu, Scaglione & Peisert 2025, eq. 10) adds almost no noise off the line in
    D1: a noise-scale attack. Class 0 keeps a tiny isotropic jitter so its covariance stays invertible.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    t = torch.linspace(-3, 3, num_per_class, dtype=X.dtype)
    line = torch.zeros(num_per_class, dim, dtype=X.dtype)
    line[:, 0] = t
    jitter = 1e-3 * torch.randn(num_per_class, dim, dtype=X.dtype, generator=generator, device="cpu")
    X[:num_per_class] = c[0] + line + jitter
    x_off = c[0].clone()
    x_off[1 % dim] += offset
    X0 = torch.cat([X, x_off[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1 = y0.clone()
    y1[-1] = 1
    return NeighbourPair("hull-point", X0, y0, X0.clone(), y1, "label-flip",
                         f"class 0 on a line; the only off-line point (offset {offset:g}) flips to class 1",
                         X0.shape[0] - 1, 0, 1)


def tiny_class(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, tiny: int = 3,
               generator: torch.Generator | None = None) -> NeighbourPair:
    """The last class has only ``tiny`` points (``1 <= tiny <= num_per_class``); in D1 one of them flips to
    class 0 (label flip)."""
    if isinstance(tiny, bool) or not isinstance(tiny, numbers.Integral) or not 1 <= tiny <= num_per_class:
        raise ValueError(f"tiny must be an int in [1, num_per_class = {num_per_class}] (one of its points "
                         f"flips), got {tiny!r}")
    tiny = int(tiny)  # a NumPy integer as its Python value
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    keep = torch.cat([torch.arange((num_classes - 1) * num_per_class),
                      (num_classes - 1) * num_per_class + torch.arange(tiny)])
    X0, y0 = X[keep], y[keep]
    y1 = y0.clone()
    y1[-1] = 0
    return NeighbourPair("tiny-class", X0, y0, X0.clone(), y1, "label-flip",
                         f"class {num_classes - 1} has {tiny} points; one flips to class 0", X0.shape[0] - 1,
                         num_classes - 1, 0)


def extreme_clipping(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 10.0,
                     factor: float = 100.0, generator: torch.Generator | None = None) -> NeighbourPair:
    """Replace-one, record level: a class-0 record at ``+factor*B*u`` is replaced by one at ``-factor*B*u``.

    After clipping they sit at ``+-B u``: the class-0 sum moves by exactly ``2B`` (the replace-one
    sensitivity) while the second moments do not move at all. Not a label-flip neighbour.
    """
    X, y, c = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    X1 = torch.cat([X, (-factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    return NeighbourPair("extreme-clip", X0, y0, X1, y0.clone(), "replace-one",
                         f"class-0 record at +{factor:g}B u replaced by -{factor:g}B u (B={clip_bound:g})",
                         X0.shape[0] - 1, 0, 0)


def worst_case_add_remove(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 1.0,
                          factor: float = 10.0, generator: torch.Generator | None = None) -> NeighbourPair:
    """D1 = D0 plus one class-0 record at ``factor B u`` with ``u = (1, ..., 1)/sqrt(d)``.

    After clipping the record sits at ``B u``: the counts move by 1, the class-0 sum by ``B`` (L2) and
    ``sqrt(d) B`` (L1), the second moment by ``B^2`` (Frobenius) and ``(d + 1) B^2 / 2`` (L1 on the upper
    triangle). Every add/remove sensitivity of the sound mode is attained at once, so under Gaussian
    noise this pair is exactly as private as the release's total mu (:func:`sound_pair_mu`). Encoded
    with masks: ``X0 = X1`` have N + 1 rows and ``mask0`` drops the last one.
    """
    X, y, _ = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    mask1 = torch.ones(X0.shape[0], dtype=torch.bool)
    mask0 = mask1.clone()
    mask0[-1] = False
    return NeighbourPair("worst-add-remove", X0, y0, X0.clone(), y0.clone(), "add-remove",
                         f"one class-0 record at {factor:g}B (1,...,1)/sqrt(d) added (B={clip_bound:g})",
                         X0.shape[0] - 1, -1, 0, mask0=mask0, mask1=mask1)


def worst_case_replace_one(num_per_class: int = 50, num_classes: int = 3, dim: int = 2, clip_bound: float = 1.0,
                           kind: str = "label-flip", cosine: float = -0.25, factor: float = 10.0,
                           generator: torch.Generator | None = None) -> NeighbourPair:
    """Replace-one pairs that attain the sound mode's per-block sensitivities as far as one change can.

    ``kind="label-flip"``: a record at ``factor B u`` (clipped to ``B u``) moves from class 0 to class 1:
    counts ``sqrt(2)``, sums ``sqrt(2) B``, second moments ``sqrt(2) B^2`` (L2). ``kind="same-class"``:
    the record is replaced by one of norm B at cosine ``cosine`` to it (sums ``B sqrt(2 - 2c)``, second
    moments ``B^2 sqrt(2 - 2c^2)``); ``c = -1/4`` maximises the composed mu of an even sums/moments split.
    No single change attains all three replace-one sensitivities (counts ``sqrt 2``, sums ``2B``,
    moments ``sqrt(2) B^2``) at once.
    """
    if kind not in ("label-flip", "same-class"):
        raise ValueError(f"kind must be 'label-flip' or 'same-class', got {kind!r}")
    if kind == "same-class" and dim < 2:
        raise ValueError(f"kind='same-class' needs dim >= 2 (a second direction to turn the record to), got {dim!r}")
    if kind == "same-class" and not -1.0 <= cosine <= 1.0:
        raise ValueError(f"cosine must lie in [-1, 1], got {cosine!r}")
    X, y, _ = _base(num_per_class, num_classes, dim, generator)
    u = torch.ones(dim, dtype=X.dtype) / math.sqrt(dim)
    X0 = torch.cat([X, (factor * clip_bound * u)[None]])
    y0 = torch.cat([y, torch.tensor([0])])
    y1, X1 = y0.clone(), X0.clone()
    if kind == "label-flip":
        y1[-1] = 1
        desc = f"record at {factor:g}B u (clipped to B u) flips from class 0 to class 1 (B={clip_bound:g})"
        return NeighbourPair("worst-label-flip", X0, y0, X1, y1, "label-flip", desc, X0.shape[0] - 1, 0, 1)
    v = torch.zeros(dim, dtype=X.dtype)
    v[0], v[1] = 1.0, -1.0
    v = v / torch.linalg.vector_norm(v)
    X1[-1] = factor * clip_bound * (cosine * u + math.sqrt(1 - cosine * cosine) * v)
    desc = f"class-0 record at {factor:g}B u replaced by one at cosine {cosine:g} to it (both clipped to norm B)"
    return NeighbourPair("worst-same-class", X0, y0, X1, y1, "replace-one", desc, X0.shape[0] - 1, 0, 0)
