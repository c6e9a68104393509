"""The most powerful statistic: the exact log-likelihood ratio for outputs whose density is known.

By the Neyman-Pearson lemma the log-likelihood ratio ``ln p1(o)/p0(o)`` of the output under the two
datasets gives, at every false-positive rate, the smallest false-negative rate of any test, so its
threshold tests trace the pair's exact tradeoff curve (Dong, Roth & Su 2019). When the output density is
known (the Gaussian, Laplace and discrete blocks of the sound mode) :class:`LikelihoodRatio` and
:func:`sound_log_ratio` compute it exactly (the auditing strategy of Nasr et al. 2021); otherwise the
auditor keeps the threshold test on a projection (:mod:`torchdpgmm.audit.statistics`).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from torchdpgmm.audit.statistics import Statistic, _get

__all__ = ["LikelihoodRatio", "gaussian_log_ratio", "laplace_log_ratio", "symmetric_gaussian_log_ratio", "symmetric_laplace_log_ratio", "noiseless_sound_blocks", "sound_blocks", "sound_log_ratio", "sound_pair_mu"]


class LikelihoodRatio(Statistic):
    """The Neyman-Pearson statistic ``ln p1(o) - ln p0(o)`` (Neyman & Pearson 1933; Nasr et al. 2021).

    ``log_ratio(output) -> (n,)``. Nothing is fitted, so the selection draws only choose the threshold.
    Its threshold tests are the most powerful tests of D0 against D1 at every false-positive rate, so
    they trace the pair's exact tradeoff curve (Dong, Roth & Su 2019). Large values are evidence for D1.
    """

    def __init__(self, log_ratio: Callable[[Any], torch.Tensor]):
        self.log_ratio = log_ratio

    def features(self, output):
        s = self.log_ratio(output)
        return s.reshape(s.shape[0], 1).to(torch.float64)

    def fit(self, f0, f1):
        return lambda f: f[..., 0]


def _f64(v, device):
    return torch.as_tensor(v, dtype=torch.float64, device=device)


def gaussian_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """``sum_i [(v_i - m0_i)^2 - (v_i - m1_i)^2] / (2 s_i^2)`` over independent Gaussian coordinates.

    ``value (n, *event)``; ``mean0``, ``mean1``, ``scale`` broadcast to ``event``. Also the exact log-ratio
    of the discrete Gaussian on the integers (Canonne, Kamath & Steinke 2020) when both means are
    integers: the two shifted PMFs have the same normalising constant, which cancels.
    """
    v = value.to(torch.float64)
    m0, m1, s = _f64(mean0, v.device), _f64(mean1, v.device), _f64(scale, v.device)
    return ((m1 - m0) * (v - 0.5 * (m0 + m1)) / (s * s)).reshape(v.shape[0], -1).sum(-1)


def laplace_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """``sum_i (|v_i - m0_i| - |v_i - m1_i|) / b_i`` over independent Laplace coordinates of scale ``b_i``.

    Also exact for the discrete Laplace on the integers with integer means (Canonne, Kamath & Steinke
    2020), whose PMF is proportional to ``exp(-|v - m| / b)``.
    """
    v = value.to(torch.float64)
    m0, m1, b = _f64(mean0, v.device), _f64(mean1, v.device), _f64(scale, v.device)
    return (((v - m0).abs() - (v - m1).abs()) / b).reshape(v.shape[0], -1).sum(-1)


def symmetric_gaussian_log_ratio(value: torch.Tensor, mean0, mean1, sigma) -> torch.Tensor:
    """Symmetric ``d x d`` Gaussian noise with std ``sigma`` on the diagonal and ``sigma/sqrt(2)`` off it
    (isotropic in Frobenius-isometric coordinates): ``<V - (M0 + M1)/2, M1 - M0>_F / sigma^2``."""
    v = value.to(torch.float64)
    m0, m1, s = _f64(mean0, v.device), _f64(mean1, v.device), _f64(sigma, v.device)
    return ((m1 - m0) * (v - 0.5 * (m0 + m1))).reshape(v.shape[0], -1).sum(-1) / (s * s)


def symmetric_laplace_log_ratio(value: torch.Tensor, mean0, mean1, scale) -> torch.Tensor:
    """Symmetric ``d x d`` noise, i.i.d. Laplace of scale ``b`` on the upper triangle (diagonal included)."""
    d = value.shape[-1]
    iu = torch.triu_indices(d, d, device=value.device)
    m0, m1 = _f64(mean0, value.device), _f64(mean1, value.device)
    return laplace_log_ratio(value[..., iu[0], iu[1]], m0[..., iu[0], iu[1]], m1[..., iu[0], iu[1]], scale)


def noiseless_sound_blocks(X: torch.Tensor, y: torch.Tensor, num_classes: int, clip_bound: float, *,
                           mask: torch.Tensor | None = None, center: torch.Tensor | None = None
                           ) -> dict[str, torch.Tensor]:
    """Per-class counts, sums and second moments of records clipped to ``||x - center||_2 <= B``.

    An independent implementation of the statistics the sound mode releases (clipping as in Abadi et
    al. 2016), used as the two means of the likelihood ratio. ``X (N, d)``, ``y (N,)``, ``mask (N,)``. As in
    the release, a row that is masked out or whose label lies outside ``[0, num_classes)`` contributes nothing
    (such a row may hold anything, even NaN).
    """
    X = X.to(torch.float64)
    yl = y.long()
    keep = (yl >= 0) & (yl < num_classes)
    if mask is not None:
        keep = keep & mask.bool()
    X = torch.where(keep.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
    Z = X - (0.0 if center is None else _f64(center, X.device))
    norm = torch.linalg.vector_norm(Z, dim=-1, keepdim=True)
    Z = torch.where(norm > clip_bound, Z * (clip_bound / norm.clamp_min(1e-300)), Z)
    # one-hot by comparison: an out-of-range label gives a row of zeros (torch's one_hot refuses it)
    oh = (yl.unsqueeze(-1) == torch.arange(num_classes, device=yl.device)).to(torch.float64)
    if mask is not None:
        oh = oh * mask.to(torch.float64).unsqueeze(-1)
    return {"counts": oh.sum(0), "sums": oh.T @ Z, "second_moments": torch.einsum("nk,ni,nj->kij", oh, Z, Z)}


def sound_blocks(output: Any, center: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Read the noisy blocks back from a sound release: ``n = counts``, ``s = (means - center) n``,
    ``Q = C (n - 1) + s s^T / n``.

    Exact for the sums and second moments when the release was made with ``eig_floor=float("-inf")``
    (the PSD repair is then the identity up to rounding); the counts are exact wherever the noisy count
    lies above ``min_count`` (the clamp is the only step that loses information).
    """
    n = _get(output, "counts").to(torch.float64)
    m = _get(output, "means").to(torch.float64)
    C = _get(output, "covariances").to(torch.float64)
    if center is not None:
        m = m - _f64(center, m.device)
    s = m * n.unsqueeze(-1)
    Q = C * (n - 1)[..., None, None] + s.unsqueeze(-1) * s.unsqueeze(-2) / n[..., None, None]
    return {"counts": n, "sums": s, "second_moments": Q}


def _noise_scales(noise: Any) -> dict[str, tuple[str, float]]:
    """``{block: ("gaussian" | "laplace", scale in data units)}`` of a sound release.

    Accepts a ``Release`` (its ``extras["noise"]``), a noise dict (``sigma_counts``, ...,
    ``laplace_scale_counts``, ...: data units, as the release's extras and older records hold them), an
    object with such a ``noise`` dict, or a typed record with continuous ``blocks`` (``NoisedBlock``).
    Discrete blocks state their scale in grid units, so a record with discrete blocks is refused: pass the
    release's ``extras["noise"]``. For discrete noise the continuous forms are used with the data-unit
    scale; they are exact for means on the grid (Canonne, Kamath & Steinke 2020).
    """
    ex = getattr(noise, "extras", None) or getattr(noise, "extra", None)
    if isinstance(ex, dict) and "noise" in ex:
        noise = ex["noise"]
    noise = getattr(noise, "noise", noise) if not isinstance(noise, dict) else noise
    if isinstance(noise, dict):
        out = {}
        for kind, prefix in (("gaussian", "sigma_"), ("laplace", "laplace_scale_")):
            out.update({k[len(prefix):]: (kind, float(v)) for k, v in noise.items() if k.startswith(prefix)})
        if out:
            return out
    blocks = getattr(noise, "blocks", None)
    if blocks:
        if any(b.mechanism.startswith("discrete") for b in blocks):
            raise ValueError("discrete blocks state their noise scale in grid units; pass the release's "
                             "extras['noise'] (scales in data units) instead of its record")
        return {b.name: ("laplace" if b.mechanism == "laplace" else "gaussian", float(b.noise_scale))
                for b in blocks}
    raise ValueError(f"no noise scales found in {noise!r}")


def _dataset_blocks(dataset, num_classes, clip_bound, center):
    mask = dataset[2] if len(dataset) > 2 else None
    return noiseless_sound_blocks(dataset[0], dataset[1], num_classes, clip_bound, mask=mask, center=center)


def sound_log_ratio(dataset0, dataset1, num_classes: int, clip_bound: float, noise: Any, *,
                    center: torch.Tensor | None = None) -> LikelihoodRatio:
    """The exact Neyman-Pearson statistic of the sound mode's noisy blocks (counts, sums, second moments).

    ``noise``: the release's noise scales in data units (the ``Release``, its ``extras["noise"]``, or a
    record with continuous blocks; see :func:`_noise_scales`). Gaussian blocks
    use :func:`gaussian_log_ratio` / :func:`symmetric_gaussian_log_ratio`, Laplace blocks the Laplace
    forms; independent blocks add. Apply it to releases made with ``eig_floor=float("-inf")`` so that
    :func:`sound_blocks` reads the blocks back; with the eigenvalue floor on it is still a valid (weaker)
    statistic.
    """
    sc = _noise_scales(noise)
    b0 = _dataset_blocks(dataset0, num_classes, clip_bound, center)
    b1 = _dataset_blocks(dataset1, num_classes, clip_bound, center)
    forms = {"gaussian": (gaussian_log_ratio, symmetric_gaussian_log_ratio),
             "laplace": (laplace_log_ratio, symmetric_laplace_log_ratio)}

    def log_ratio(output):
        o = sound_blocks(output, center)
        total = 0.0
        for k in ("counts", "sums", "second_moments"):
            kind, scale = sc[k]
            fn = forms[kind][1 if k == "second_moments" else 0]
            total = total + fn(o[k], b0[k], b1[k], scale)
        return total

    return LikelihoodRatio(log_ratio)


def sound_pair_mu(dataset0, dataset1, num_classes: int, clip_bound: float, noise: Any, *,
                  center: torch.Tensor | None = None) -> float:
    """``mu = sqrt(sum_b ||f_b(D1) - f_b(D0)||^2 / sigma_b^2)`` (Frobenius for the second moments).

    Under Gaussian noise the log-likelihood ratio is ``N(-mu^2/2, mu^2)`` on D0 and ``N(mu^2/2, mu^2)``
    on D1, so the pair's exact tradeoff curve is ``G_mu`` (Dong, Roth & Su 2019): :func:`audit_ceiling`
    with :func:`gdp_tradeoff` then says what any audit of this pair can certify.
    """
    sc = _noise_scales(noise)
    if any(kind != "gaussian" for kind, _ in sc.values()):
        raise ValueError("sound_pair_mu needs Gaussian noise on every block")
    b0 = _dataset_blocks(dataset0, num_classes, clip_bound, center)
    b1 = _dataset_blocks(dataset1, num_classes, clip_bound, center)
    return math.sqrt(sum(float(((b1[k] - b0[k]) ** 2).sum()) / sc[k][1] ** 2 for k in b0))
