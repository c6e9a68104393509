"""Sound (record-level, globally calibrated) release of a labeled Gaussian mixture.

The as-published mechanism of Liu, Scaglione & Peisert (2025) (eqs. 5, 6, 15, Theorem 1) protects label
flips only, calibrates its noise to the dataset at hand (local sensitivity), relies on the Wishart
mechanism (not DP: Sheffet 2019) and composes classes by ``max_k``. This module is the mode whose
guarantee holds (see ``docs/privacy.md``):

* **Adjacency** (:data:`ADJACENCIES`): ``"add-remove"`` (the DEFAULT, as in Opacus and jax-privacy: one
  record added or removed, N private) or ``"replace-one"`` (one record's features and/or label replaced;
  N public). A label flip is a replace-one neighbour.
* **Public inputs only**: the class set is ``range(num_classes)`` (never read from ``y``; empty classes
  are legal and released from noise alone), ``clip_bound`` B and ``center`` are given by the user.
* **No data-dependent failure**: after the PUBLIC schema checks (types, shapes, dtypes, parameters) no
  step raises, branches, loops or prints on private values. Rows whose label lies outside
  ``[0, num_classes)`` or whose features are not finite are DROPPED branch-free (an error would reveal
  them; dropping a row is at most a removal, within both adjacencies' sensitivities); the data owner can
  list them beforehand with :func:`torchdpgmm.release.evaluation.check_settings`. Inputs are cast to float64
  before clipping and the release is computed and returned in float64.
* **Clipping**: ``z = clip(x - center)`` with ``||z||_2 <= B`` (Liu, Scaglione & Peisert 2025, Sec. IV-C
  eq. (28), enforced rather than assumed).
* **Released statistics** (the sufficient statistics of eq. (2), :func:`torchdpgmm.mixture.class_moments`):
  counts ``n_k``, sums ``s_k`` and second moments, whose form depends on ``covariance_type``
  (scikit-learn's names): ``"full"`` ``Q_k = sum z z^T`` (K symmetric matrices), ``"tied"`` one pooled
  ``Q = sum_n z z^T``, ``"diag"`` ``sum z * z`` (K x d), ``"spherical"`` ``sum ||z||^2`` (K).
  ``"auto"`` (:mod:`torchdpgmm.release.covariance_rule`) releases the full blocks ``Q_k`` AND the pooled block
  ``P = sum_n z z^T`` (:data:`POOLED`, one more ``NoisedBlock``) with a split fixed from public facts, and
  shrinks full -> tied -> diag in post-processing (floors the counts at three noise stds and projects the class
  means onto the clipping ball); its split
  gives the counts at least :data:`torchdpgmm.release.covariance_rule.COUNTS_FLOOR`; validated in
  ``docs/results/covariance-rule.json``
  (``scripts/covariance_rule_validation.py``). The pooled block has the second moments' sensitivities below
  (L1 as for ``"tied"``); one record moves both blocks (:func:`joint_mu`).
  Per-block L2 sensitivities (Frobenius for matrices):

  ===============  ===========  ================================
  block            add-remove   replace-one (per block)
  ===============  ===========  ================================
  counts           1            sqrt(2)
  sums             B            2 B
  second moments   B^2          sqrt(2) B^2 (every type)
  ===============  ===========  ================================

* **Joint replace-one accounting**. The whole release is one Gaussian mechanism, so its GDP parameter is
  ``mu^2 = max over neighbours of sum_b ||Delta_b||^2 / sigma_b^2`` (Dong, Roth & Su 2019), not the sum
  of the per-block maxima. With ``g = 1/sigma_counts^2``, ``a = 1/sigma_sums^2``, ``b = 1/sigma_Q^2``:
  a record moving between classes gives ``2 g + 2 a B^2 + 2 b B^4`` (``|z| = |z'| = B``); a record
  replaced within its class gives ``max_t a (2B^2 - 2t) + b (2B^4 - 2t^2)`` over ``t = z.z'`` in
  ``[-B^2, B^2]`` (full, tied, diag), i.e. ``4 a B^2`` if ``a/(2b) >= B^2`` else
  ``2 a B^2 + 2 b B^4 + a^2/(2b)``; for ``"spherical"`` ``max_r (B + r)^2 (a + b (B - r)^2)`` over
  ``r = |z'|`` in ``[0, B]``. Add-remove: ``g + a B^2 + b B^4``. (:func:`joint_mu`; checked by brute force
  in ``tests/test_sound.py``.) The noise shape (split) is fixed first, then all scales are multiplied by
  the one factor that makes the joint ``mu`` equal the calibrated one: under replace-one 12% less noise
  than the per-block sum with the default split, 3-18% with the ``kl`` split for d >= 2
  (``scripts/sound_joint_factor.py``); identical under add-remove.
* **Mechanisms** (:data:`SOUND_MECHANISMS`): ``"gaussian"``, ``"colored"``, ``"kl"``: the Gaussian
  mechanism on every block, matrices with isotropic noise in Frobenius-isometric coordinates (diagonal
  ``sigma``, off-diagonal ``sigma/sqrt 2``). ``"laplace"``: the Laplace mechanism with L1 sensitivities
  (counts 1, sums ``sqrt(d) B``, second moments ``(d+1) B^2/2`` (full, tied: upper triangle) or ``B^2``
  (diag, spherical); doubled under replace-one, where a record moving between classes attains the sum for
  every type but tied), pure epsilon-DP by basic composition. ``"r1smg"`` is refused (not DP as
  calibrated; ``docs/privacy.md``).
* **Noise** (``noise``, :data:`NOISES`): ``"discrete"`` (the default) draws exact discrete Gaussian /
  discrete Laplace noise (Canonne, Kamath & Steinke 2020; :mod:`torchdpgmm.mechanisms.discrete`): the counts
  stay integers, sums and second moments are snapped to public grids ``g_b`` (a fixed small fraction of
  their noise scale) and the rounding (at most one grid unit per coordinate a record can touch) is added
  to the sensitivities; the Gaussian flavour is accounted in zCDP (``rho = W^2/2`` with ``W`` the joint
  whitened sensitivity including rounding, converted by Canonne, Kamath & Steinke 2020 Cor. 13), about 10%
  more noise than the continuous calibration. ``"continuous"`` draws float64 Gaussian / Laplace noise
  (exposed to floating-point attacks in principle, Mironov 2012) calibrated as below.
* **Calibration** (continuous): ``mu`` by the analytic Gaussian mechanism (Balle & Wang 2018): the largest
  mu with ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) <= delta``.
* **Estimates** (post-processing, branch-free): counts floored at ``min_count``; eq. (2) from the noisy
  statistics (:func:`torchdpgmm.mixture.moments_to_parameters`); covariances repaired by an eigenvalue
  (or variance) floor at the noise level (``eig_floor``), computed with ``torch`` ops only.

The ``kl`` flavour. With a Euclidean clipping ball every direction has the same sensitivity, so the
KL-optimal noise *shape* of the SDP (23) of Liu, Scaglione & Peisert and Ravi et al.'s min-MSE shape are
isotropic; what the KL objective still decides is the budget split. To first order each block adds
``a_b / u_b`` to the expected KL with ``u_b = (Delta_b/sigma_b)^2`` and, under a public prior scale ``s``
of the class covariances (``prior_scale``, default ``B/sqrt(d)``), ``a_counts = Delta_c^2/2``,
``a_sums = Delta_s^2 d/(2 s^2)`` and ``a_Q = Delta_Q^2 c_Q / s^4`` with ``c_Q = d(d+1)/8`` (full),
``d(d+1)/(8 K^2)`` (tied: one block shared by K classes), ``d/4`` (diag), ``1/(4d)`` (spherical).
Minimising ``sum a_b/u_b`` subject to ``sum u_b = mu^2`` gives ``u_b`` proportional to ``sqrt(a_b)``: only
public quantities enter.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from torchdpgmm._validation import check_clip_bound, check_delta, check_epsilon
from torchdpgmm.release.covariance_rule import POOLED, auto_split, floored_counts, shrunk_covariances
from torchdpgmm.release.diagnostics import second_moment_signal
from torchdpgmm.release.result import PER_RELEASE_EXTRAS
from torchdpgmm.mixture import COVARIANCE_TYPES as _MIXTURE_COVARIANCE_TYPES
from torchdpgmm.mixture import moments_to_parameters
from torchdpgmm.mechanisms import add_noise, clip_records
from torchdpgmm.mechanisms.clip import row_abs_max
from torchdpgmm.mechanisms.discrete import GAUSSIAN_SIGMA_MAX, LAPLACE_SCALE_MAX, add_noise_tv, rational_gaussian_variance, rational_laplace_scale
from torchdpgmm.privacy import Adjacency, NoisedBlock, PrivacyRecord
from torchdpgmm.privacy.record import with_sampler_tv
from torchdpgmm.privacy.calibration import gdp_delta, gdp_epsilon, gdp_mu, prime_zcdp_rho, zcdp_rho

if TYPE_CHECKING:  # pragma: no cover
    from torchdpgmm.release.result import Release

__all__ = [
    "release_sound",
    "kept_rows",
    "sound_statistics",
    "sensitivities",
    "joint_mu",
    "gdp_mu",
    "gdp_delta",
    "gdp_epsilon",
    "kl_split",
    "sound_settings",
    "check_center",
    "check_schema",
    "SoundSettings",
    "NOISES",
    "ADJACENCIES",
    "SOUND_MECHANISMS",
    "COVARIANCE_TYPES",
    "DEFAULT_ADJACENCY",
    "POOLED",
    "bytes_per_trial",
]

ADJACENCIES = (Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE)
DEFAULT_ADJACENCY = Adjacency.ADD_REMOVE
SOUND_MECHANISMS = ("gaussian", "colored", "kl", "laplace")
NOISES = ("discrete", "continuous")
BLOCKS = ("counts", "sums", "second_moments")
DEFAULT_SPLIT = {"counts": 0.1, "sums": 0.45, "second_moments": 0.45}
#: ``"auto"`` (:mod:`torchdpgmm.release.covariance_rule`) releases the ``"full"`` blocks and the pooled ``"tied"`` block
#: (:data:`POOLED`) and shrinks full -> tied -> diagonal in post-processing
COVARIANCE_TYPES = tuple(_MIXTURE_COVARIANCE_TYPES) + ("auto",)


# ----------------------------------------------------------------------------------------------------
# sensitivities, the joint replace-one bound and the KL-driven split
# ----------------------------------------------------------------------------------------------------

def _check_adjacency(adjacency: Any) -> Adjacency:
    value = Adjacency.parse(adjacency)  # the enum or its string; ValueError otherwise
    if value not in ADJACENCIES:
        raise ValueError(f"adjacency must be 'add-remove' or 'replace-one' in sound mode, got {adjacency!r}")
    return value


def _check_covariance_type(covariance_type: str) -> str:
    if covariance_type not in COVARIANCE_TYPES:
        raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")
    return "full" if covariance_type == "auto" else covariance_type  # auto releases the full blocks (+ pooled)


def _block_names(covariance_type: str) -> tuple[str, ...]:
    """The noised blocks of a release: the three of eq. (2), plus the pooled second moment for ``"auto"``."""
    return BLOCKS + ((POOLED,) if covariance_type == "auto" else ())


def sensitivities(
    clip_bound: float,
    dim: int,
    *,
    adjacency: str = DEFAULT_ADJACENCY,
    norm: str = "l2",
    covariance_type: str = "full",
) -> dict[str, float]:
    """Per-block global sensitivities of (counts, sums, second moments) for records with ``||z||_2 <= B``.

    ``norm="l2"`` (Frobenius for matrices) for Gaussian noise, ``norm="l1"`` (upper triangle of
    symmetric matrices) for Laplace noise; table in the module docstring. Under replace-one the Gaussian
    release is accounted jointly (:func:`joint_mu`), not by these per-block maxima.
    """
    adjacency = _check_adjacency(adjacency)
    pooled = covariance_type == "auto"  # the full blocks plus the pooled (tied) block, same sensitivity
    covariance_type = _check_covariance_type(covariance_type)
    B = float(clip_bound)
    f = 1.0 if adjacency == "add-remove" else 2.0
    if norm == "l2":
        if adjacency == "add-remove":
            out = {"counts": 1.0, "sums": B, "second_moments": B * B}
        else:
            out = {"counts": math.sqrt(2.0), "sums": 2 * B, "second_moments": math.sqrt(2.0) * B * B}
        return out | ({POOLED: out["second_moments"]} if pooled else {})
    if norm == "l1":
        # sum_{i<=j} |z_i z_j| = (||z||_1^2 + ||z||_2^2)/2 <= (d B^2 + B^2)/2; sum_i z_i^2 <= B^2
        q = (dim + 1) * B * B / 2 if covariance_type in ("full", "tied") else B * B
        out = {"counts": f, "sums": f * math.sqrt(dim) * B, "second_moments": f * q}
        return out | ({POOLED: f * q} if pooled else {})
    raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")


def joint_mu(
    noise_scales: dict[str, float],
    clip_bound: float,
    dim: int,
    *,
    adjacency: str = DEFAULT_ADJACENCY,
    covariance_type: str = "full",
) -> float:
    """GDP parameter ``mu = max_{D ~ D'} sqrt(sum_b ||Delta_b||^2 / sigma_b^2)`` of the three Gaussian blocks.

    ``noise_scales`` maps ``counts``, ``sums``, ``second_moments`` to the Gaussian standard deviations
    (isotropic in Frobenius-isometric coordinates for matrices), ``dim`` is d. Exact worst case over neighbouring
    datasets (derivation in the module docstring; Dong, Roth & Su 2019 for mu-GDP of the Gaussian
    mechanism). Only public numbers enter. A pooled block (``"auto"``, precision ``p = 1/sigma_P^2``) adds
    ``p B^4`` under add/remove; under replace-one ``2 p B^4`` to a move between classes (``z . z' = 0``;
    for d = 1 the vertex ``|z| = B, z' = 0`` of ``a(r^2+s^2) + b(r^4+s^4) + p(r^2-s^2)^2``) and ``p`` to
    ``b`` within a class (both blocks then change by ``zz^T - z'z'^T``).
    """
    adjacency = _check_adjacency(adjacency)
    covariance_type = _check_covariance_type(covariance_type)
    B2 = float(clip_bound) ** 2
    g, a, b = (1.0 / float(noise_scales[k]) ** 2 for k in BLOCKS)
    p = 1.0 / float(noise_scales[POOLED]) ** 2 if POOLED in noise_scales else 0.0
    if covariance_type == "tied":  # the tied block is the pooled one: one record moving classes keeps it
        b, p = 0.0, b + p
    if adjacency == "add-remove":
        return math.sqrt(g + a * B2 + (b + p) * B2 * B2)
    between = 2 * g + 2 * a * B2 + 2 * (b + p) * B2 * B2
    if dim == 1:  # pooled z^2 - z'^2: |z| = |z'| cancels it
        between = 2 * g + max(2 * a * B2 + 2 * b * B2 * B2, a * B2 + (b + p) * B2 * B2)
    b = b + p  # within a class the class block and the pooled block both move by zz^T - z'z'^T
    if covariance_type == "spherical" or dim == 1:  # z' = -r z/|z|: only the norms matter
        B = math.sqrt(B2)
        disc = B2 - 2 * a / b
        rs = [0.0, B] + ([(B + s * math.sqrt(disc)) / 2 for s in (-1.0, 1.0)] if disc >= 0 else [])
        within = max((B + r) ** 2 * (a + b * (B - r) ** 2) for r in rs if 0.0 <= r <= B)
    elif a / (2 * b) >= B2:
        within = 4 * a * B2
    else:
        within = 2 * a * B2 + 2 * b * B2 * B2 + a * a / (2 * b)
    return math.sqrt(max(between, within))


def kl_split(
    clip_bound: float,
    dim: int,
    *,
    adjacency: str = DEFAULT_ADJACENCY,
    prior_scale: float | None = None,
    covariance_type: str = "full",
    num_classes: int = 1,
) -> dict[str, float]:
    """Budget fractions ``w_b`` (of mu^2) minimising the first-order expected KL (module docstring).

    ``u_b`` proportional to ``sqrt(a_b)`` with ``a_counts = Dc^2/2``, ``a_sums = Ds^2 d/(2 s^2)``,
    ``a_Q = DQ^2 c_Q / s^4``; ``s = prior_scale`` (public), default ``B/sqrt(d)``.
    """
    covariance_type = _check_covariance_type(covariance_type)
    sens = sensitivities(clip_bound, dim, adjacency=adjacency, covariance_type=covariance_type)
    s = float(prior_scale) if prior_scale is not None else float(clip_bound) / math.sqrt(dim)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"prior_scale must be finite and > 0, got {prior_scale!r}")
    c_q = {"full": dim * (dim + 1) / 8, "tied": dim * (dim + 1) / (8 * num_classes ** 2),
           "diag": dim / 4, "spherical": 1 / (4 * dim)}[covariance_type]
    a = {
        "counts": sens["counts"] ** 2 / 2,
        "sums": sens["sums"] ** 2 * dim / (2 * s * s),
        "second_moments": sens["second_moments"] ** 2 * c_q / s ** 4,
    }
    r = {k: math.sqrt(v) for k, v in a.items()}
    tot = sum(r.values())
    return {k: v / tot for k, v in r.items()}


# ----------------------------------------------------------------------------------------------------
# the release: public checks, calibration, statistics, noise, estimates
# ----------------------------------------------------------------------------------------------------

#: step 4 of the ``"auto"`` rule (:func:`sound_settings`'s ``class_weight``)
CLASS_WEIGHTS = ("direction", "mean")


@dataclass(frozen=True)
class SoundSettings:
    """The validated PUBLIC settings of one sound release (nothing here is computed from the data)."""

    epsilon: float
    delta: float | None
    clip_bound: float
    adjacency: str
    mechanism: str
    covariance_type: str
    split: dict[str, float]
    center: torch.Tensor | None = None
    min_count: float = 2.0
    eig_floor: float | None = None
    noise_multiplier: float = 1.0
    num_draws: int | None = None
    noise: str = "discrete"
    shrink: bool = False  # covariance_type="auto": the full release, shrunk toward the pooled covariance
    class_weight: str = "direction"  # "auto"'s step 4: per eigen-direction or their mean (covariance_rule)


def _positive(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_center(center: Any, dim: int, *, read_device: bool = False) -> torch.Tensor:
    """A public clipping centre as float64 with last dimension ``dim``; ``ValueError`` (one line) otherwise.

    Finiteness is checked on the host. A centre already on an accelerator is read back only with ``read_device``
    (the user's centre, at the front door: :class:`torchdpgmm.release.dispatch.SoundMechanism`); a centre released
    there by a first stage (:mod:`torchdpgmm.release.centring`) is not waited for. A non-finite centre would make
    every clipped row non-finite, so every row would be dropped."""
    center = torch.as_tensor(center, dtype=torch.float64)
    read = read_device or center.device.type == "cpu"
    if center.shape[-1:] != (dim,) or (read and not bool(torch.isfinite(center).all())):
        raise ValueError(f"center must be a finite tensor with last dimension d={dim}")
    return center


def _check_privacy(epsilon: Any, delta: Any, mechanism: str) -> tuple[float, float | None]:
    for name, v in (("epsilon", epsilon), ("delta", delta)):
        if torch.is_tensor(v) and v.numel() != 1:
            raise ValueError(f"{name} must be a scalar in sound mode, got shape {tuple(v.shape)}")
        if isinstance(v, (list, tuple)):  # several epsilons: release_sound / release(epsilon=[...]) only
            raise ValueError(f"{name} must be a single number here, got {v!r}")
    check_epsilon(epsilon)  # a public Python number is checked without a tensor
    if mechanism == "laplace" and delta is None:
        return float(epsilon), None
    if delta is None:
        raise ValueError(f"mechanism {mechanism!r} needs delta in (0, 1)")
    check_delta(delta)
    return float(epsilon), float(delta)


def _check_mechanism(mechanism: str) -> None:
    if mechanism == "r1smg":
        raise ValueError(
            "mechanism 'r1smg' has no sound mode: its noise sqrt(sigma) z u puts probability ~r/sqrt(sigma) "
            "within distance r of the true value, which a neighbour cannot match (docs/privacy.md); use "
            "'gaussian', 'kl' or 'laplace'")
    if mechanism not in SOUND_MECHANISMS:
        raise ValueError(f"mechanism {mechanism!r} has no sound mode; choose one of {SOUND_MECHANISMS}")


def _check_split(split: Any, names: tuple[str, ...] = BLOCKS) -> dict[str, float]:
    if not isinstance(split, dict) or set(split) != set(names) or any(
            not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)) for v in split.values()):
        raise ValueError(f"split must give positive fractions for {sorted(names)}, got {split!r}")
    tot = sum(split.values())
    return {k: split[k] / tot for k in names}


def sound_settings(
    dim: int,
    num_classes: int,
    epsilon: Any,
    delta: Any,
    *,
    clip_bound: Any,
    adjacency: Any = DEFAULT_ADJACENCY,
    mechanism: str = "kl",
    covariance_type: str = "full",
    center: Any = None,
    split: dict[str, float] | None = None,
    prior_scale: float | None = None,
    min_count: float = 2.0,
    eig_floor: float | None = None,
    noise_multiplier: float = 1.0,
    num_draws: int | None = None,
    noise: str = "discrete",
    class_weight: str | None = None,
) -> SoundSettings:
    """Check every public setting of a sound release (one-line ``ValueError``), before any data is touched.

    ``class_weight`` (``covariance_type="auto"`` only; post-processing): step 4 of
    :mod:`torchdpgmm.release.covariance_rule` per eigen-direction (``"direction"``) or with one weight per class
    (``"mean"``, the image pipeline's class stage); None: ``"direction"`` if
    :data:`~torchdpgmm.release.covariance_rule.PER_DIRECTION` else ``"mean"``."""
    if clip_bound is None:
        raise ValueError(
            "clip_bound is required in sound mode: record-level DP needs a public bound B on ||x - center||_2 "
            "(records are clipped to it); taking it from the data would leak privacy")
    B = check_clip_bound(_positive(clip_bound, "clip_bound"))  # B**4 computable: one line, not an OverflowError
    _check_mechanism(mechanism)
    eps, dlt = _check_privacy(epsilon, delta, mechanism)
    adjacency = _check_adjacency(adjacency)
    shrink = covariance_type == "auto"  # the released blocks are the full ones; only post-processing differs
    covariance_type = _check_covariance_type(covariance_type)
    if center is not None:
        center = check_center(center, dim)
    if not (isinstance(min_count, (int, float)) and 1 <= min_count < math.inf):
        raise ValueError(f"min_count must be a finite number >= 1, got {min_count!r}")
    if eig_floor is not None:  # float("-inf") switches the PSD repair off (audits read the blocks back)
        if not (isinstance(eig_floor, (int, float)) and not isinstance(eig_floor, bool)
                and (math.isfinite(eig_floor) or eig_floor == -math.inf)):
            raise ValueError(f"eig_floor must be a finite number or -inf, got {eig_floor!r}")
        eig_floor = float(eig_floor)
    noise_multiplier = _positive(noise_multiplier, "noise_multiplier")
    if num_draws is not None and not (isinstance(num_draws, int) and not isinstance(num_draws, bool)
                                      and num_draws >= 1):
        raise ValueError(f"num_draws must be a positive int, got {num_draws!r}")
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    if split is not None:
        split = _check_split(split, _block_names("auto" if shrink else covariance_type))
    else:
        if mechanism == "kl":  # auto: counts, sums and the pooled block as for tied (public facts only)
            split = kl_split(B, dim, adjacency=adjacency, prior_scale=prior_scale,
                             covariance_type="tied" if shrink else covariance_type, num_classes=num_classes)
        else:
            split = dict(DEFAULT_SPLIT)
        if shrink:  # plus the class blocks (torchdpgmm.release.covariance_rule.auto_split)
            split = auto_split(split, num_classes=num_classes, dim=dim, epsilon=eps)
    if class_weight is None:
        from torchdpgmm.release import covariance_rule

        class_weight = "direction" if covariance_rule.PER_DIRECTION else "mean"
    if class_weight not in CLASS_WEIGHTS:
        raise ValueError(f"class_weight must be one of {CLASS_WEIGHTS}, got {class_weight!r}")
    return SoundSettings(eps, dlt, B, adjacency, mechanism, covariance_type, split, center, min_count, eig_floor,
                         noise_multiplier, num_draws, noise, shrink, class_weight)


def check_schema(X: Any, y: Any, num_classes: Any, mask: Any = None) -> int:
    """PUBLIC schema of the data: tensor types, integer labels, shapes. Never looks at a value; returns d."""
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int (the public number of classes), got {num_classes!r}")
    if not torch.is_tensor(X):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.dim() < 2 or X.is_complex() or X.dtype == torch.bool:
        raise ValueError(f"X must be a real tensor of shape (..., N, d), got {X.dtype} {tuple(X.shape)}")
    if not torch.is_tensor(y):
        raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
    if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise TypeError(f"y must hold integer labels, got dtype {y.dtype}")
    if tuple(y.shape) != tuple(X.shape[:-1]):
        raise ValueError(f"y must have shape X.shape[:-1] = {tuple(X.shape[:-1])}, got {tuple(y.shape)}")
    if mask is not None and (not torch.is_tensor(mask) or mask.dtype != torch.bool or mask.shape != y.shape):
        raise ValueError(f"mask must be a boolean tensor of shape {tuple(y.shape)}")
    return int(X.shape[-1])


def _ctype(st: SoundSettings) -> str:
    return "auto" if st.shrink else st.covariance_type


def _names(st: SoundSettings) -> tuple[str, ...]:
    return _block_names(_ctype(st))


def _norm(st: SoundSettings, block: str) -> str:
    return "frobenius" if block == POOLED or (block == "second_moments" and st.covariance_type in ("full", "tied")) \
        else "l2"


def _affected(st: SoundSettings, dim: int) -> dict[str, int]:
    """How many coordinates of each block one record's change can touch (each moves its grid rounding by
    at most one unit): one class under add/remove, two under replace-one; the tied block is shared."""
    r = 1 if st.adjacency == Adjacency.ADD_REMOVE else 2
    q = {"full": dim * (dim + 1) // 2, "tied": dim * (dim + 1) // 2, "diag": dim, "spherical": 1}[st.covariance_type]
    out = {"counts": r, "sums": r * dim, "second_moments": q if st.covariance_type == "tied" else r * q}
    return out | ({POOLED: dim * (dim + 1) // 2} if st.shrink else {})


def _grid_gaussian(sigma: float, grid: float) -> float:
    """The discrete Gaussian's standard deviation actually used (data units, never below ``sigma``)."""
    t, q, den = rational_gaussian_variance(sigma / grid)
    return grid * math.sqrt(t * q / den)


def _calibrate_gaussian(st: SoundSettings, dim: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Gaussian blocks. Continuous: analytic-Gaussian mu (Balle & Wang 2018), one factor on the fixed
    noise shape so that the joint worst case (:func:`joint_mu`) equals mu. Discrete: sums and second moments
    snapped to grids ``g_b = c sigma_b``, exact discrete Gaussian noise (Canonne, Kamath & Steinke 2020);
    the rounding adds at most ``c sqrt(M)`` to the whitened sensitivity (M coordinates touched, Minkowski),
    and the whole release is ``W^2/2``-zCDP with ``W <= sqrt(2 rho)``, ``rho = zcdp_rho(eps, delta)``."""
    names = _names(st)
    sens = sensitivities(st.clip_bound, dim, adjacency=st.adjacency, covariance_type=_ctype(st))
    shape = {k: sens[k] / math.sqrt(st.split[k]) for k in names}  # per-block-sum whitened sensitivity 1
    jm = lambda sig: joint_mu(sig, st.clip_bound, dim, adjacency=st.adjacency,  # noqa: E731
                              covariance_type=st.covariance_type)
    m = st.noise_multiplier
    if st.noise == "continuous":
        mu = gdp_mu(st.epsilon, st.delta)
        factor = jm({k: v / mu for k, v in shape.items()}) / mu
        scales = {k: m * factor * v / mu for k, v in shape.items()}
        blocks = tuple(NoisedBlock(k, "gaussian", factor * sens[k], scales[k], norm=_norm(st, k)) for k in names)
        return scales, {"kind": "gaussian", "sensitivities": sens, "mu": mu, "joint_factor": factor,
                        "grids": None, "requested": scales, "blocks": blocks, "accountant": (
            f"Gaussian DP (Dong, Roth & Su 2019), joint worst case over the noised blocks under {st.adjacency}, "
            f"mu={mu:.6g} (rho-zCDP={mu * mu / 2:.6g}); analytic Gaussian calibration (Balle & Wang 2018)")}
    rho = float(zcdp_rho(st.epsilon, st.delta))
    mu = math.sqrt(2 * rho)
    aff = _affected(st, dim)
    M = sum(aff[k] for k in names if k != "counts")
    c = min(0.01 * mu / math.sqrt(M), 2.0)
    lam = jm(shape) / (mu - c * math.sqrt(M))
    sigma = {k: lam * v for k, v in shape.items()}
    grids = {k: c * sigma[k] for k in names if k != "counts"}
    grids["counts"] = 1.0 if sigma["counts"] >= 0.25 else 2.0 ** math.floor(math.log2(4 * sigma["counts"]))
    for k in names:
        _check_sampler_range(st, k, m * sigma[k] / grids[k], GAUSSIAN_SIGMA_MAX)
    scales = {k: _grid_gaussian(m * sigma[k], grids[k]) for k in names}
    W = jm(scales) + math.sqrt(sum(aff[k] * (grids[k] / scales[k]) ** 2 for k in names if k != "counts"))
    share = {k: (sens[k] / scales[k]) ** 2 for k in names}
    tot = sum(share.values())
    blocks = tuple(NoisedBlock(k, "discrete-gaussian", scales[k] / grids[k] * W * math.sqrt(share[k] / tot),
                               scales[k] / grids[k], norm=_norm(st, k)) for k in names)
    return scales, {"kind": "gaussian", "sensitivities": sens, "mu": mu, "joint_factor": jm(shape),
                    "grids": grids, "requested": {k: m * v for k, v in sigma.items()}, "blocks": blocks, "accountant": (
        f"zCDP of the discrete Gaussian (Canonne, Kamath & Steinke 2020), joint worst case over the noised blocks "
        f"under {st.adjacency} including the grid rounding, rho={W * W / 2:.6g} <= {rho:.6g}; (eps, delta) by "
        f"Canonne, Kamath & Steinke 2020 Cor. 13")}


def _check_sampler_range(st: SoundSettings, block: str, units: float, limit: float) -> None:
    """Refuse a budget the exact discrete sampler cannot draw for (its noise ``units`` grid units above ``limit``) in
    one line; public values only, before any data is read."""
    if not units <= limit:
        raise ValueError(f"the budget is too small for the discrete noise: at epsilon={st.epsilon:g} (this "
                         f"release's share of yours) and delta={st.delta:g} the {block} block's noise would be "
                         f"{units:.3g} grid units, beyond the exact sampler's {limit:.3g} (such a release is noise "
                         f"alone); use a larger epsilon")


def _calibrate_laplace(st: SoundSettings, dim: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Laplace blocks, basic composition of pure-DP parts ``eps_b = split_b eps``. Discrete: counts on the
    integers, the other blocks on grids ``g_b`` with ``L1 / g_b + M_b`` grid-unit sensitivity (rounding),
    exact discrete Laplace noise (Canonne, Kamath & Steinke 2020), 99% of ``eps_b`` for the data."""
    names = _names(st)
    sens = sensitivities(st.clip_bound, dim, adjacency=st.adjacency, norm="l1", covariance_type=_ctype(st))
    m, eps_b = st.noise_multiplier, {k: st.epsilon * st.split[k] for k in names}
    if st.noise == "continuous":
        scales = {k: m * sens[k] / eps_b[k] for k in names}
        blocks = tuple(NoisedBlock(k, "laplace", sens[k], scales[k], norm="l1") for k in names)
        return scales, {"kind": "laplace", "sensitivities": sens, "grids": None, "requested": scales, "blocks": blocks,
                        "accountant": "basic composition of Laplace mechanisms (pure epsilon-DP)"}
    aff = _affected(st, dim)
    grids, scales, requested, blocks = {"counts": 1.0}, {}, {}, []
    for k in names:
        b = sens[k] / eps_b[k] if k == "counts" else sens[k] / (0.99 * eps_b[k])
        if k != "counts":
            grids[k] = 0.01 * eps_b[k] / aff[k] * b
        requested[k] = m * b
        _check_sampler_range(st, k, m * b / grids[k], LAPLACE_SCALE_MAX)
        t, s = rational_laplace_scale(m * b / grids[k])
        scales[k] = grids[k] * t / s
        gsens = sens[k] / grids[k] + (0 if k == "counts" else aff[k])
        blocks.append(NoisedBlock(k, "discrete-laplace", gsens, t / s, norm="l1"))
    return scales, {"kind": "laplace", "sensitivities": sens, "grids": grids, "requested": requested,
                    "blocks": tuple(blocks),
                    "accountant": "basic composition of discrete Laplace mechanisms (pure epsilon-DP; Canonne, "
                                  "Kamath & Steinke 2020), grid rounding included in the sensitivities"}


def _calibrate(st: SoundSettings, dim: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Noise scales of the three blocks (std for Gaussian, b for Laplace; data units) and the record's blocks.

    Public host math on Python floats, memoised per setting (:func:`_calibrate_cached`): a study releasing
    many batches at the same settings calibrates once, and the release's device work never waits for it."""
    key = (st.epsilon, st.delta, st.clip_bound, str(st.adjacency), st.mechanism, st.covariance_type,
           tuple(sorted(st.split.items())), st.noise_multiplier, st.noise, st.shrink, int(dim))
    scales, info = _calibrate_cached(key)
    return dict(scales), dict(info)


@functools.lru_cache(maxsize=1024)
def _calibrate_cached(key: tuple) -> tuple[dict[str, float], dict[str, Any]]:
    eps, dlt, B, adjacency, mechanism, ctype, split, m, noise, shrink, dim = key
    st = SoundSettings(eps, dlt, B, Adjacency.parse(adjacency), mechanism, ctype, dict(split), None,
                       noise_multiplier=m, noise=noise, shrink=shrink)
    return (_calibrate_laplace if mechanism == "laplace" else _calibrate_gaussian)(st, dim)


def _perturb(stats, scales, st: SoundSettings, info: dict[str, Any], generator):
    """Add the calibrated noise (the noise layer, :func:`torchdpgmm.mechanisms.add_noise`) to (counts, sums,
    second moments[, pooled second moment]), in this fixed order. Discrete counts stay integers when their
    grid is 1."""
    counts, *rest = stats
    kind, grids = info["kind"], info["grids"] or {}
    sym = st.covariance_type in ("full", "tied")
    if st.noise == "discrete" and grids["counts"] == 1.0:
        counts = counts.round().to(torch.int64)
    out = []
    info["sampler_draws"], info["sampler_tv"] = 0, 0.0  # the record's sampler_tv (shapes and public scales only)
    for k, x in zip(_names(st), (counts, *rest)):
        y, _ = add_noise(x, info["requested"][k], kind=kind, noise=st.noise, grid=grids.get(k, 1.0),
                         symmetric=(sym and k == "second_moments") or k == POOLED, generator=generator)
        out.append(y.to(torch.float64))
        if st.noise == "discrete":
            n, tv = add_noise_tv(x, info["requested"][k], kind=kind, grid=grids.get(k, 1.0),
                                 symmetric=(sym and k == "second_moments") or k == POOLED)
            info["sampler_draws"], info["sampler_tv"] = info["sampler_draws"] + n, info["sampler_tv"] + tv
    return tuple(out)


def _perturb_epsilons(stats, cals, sts: list[SoundSettings], generator):
    """Noise for E epsilons at once: ``(E, ...)`` per block. Continuous noise: ONE draw per block for all E
    (the scales a public ``(E, 1, ...)`` tensor). Discrete noise: the exact samplers take one public scale per
    call, so the E draws of a block are E calls, in the order of E scalar releases (same random stream)."""
    if sts[0].noise == "discrete":
        per = [_perturb(stats, scales, st, info, generator) for (scales, info), st in zip(cals, sts)]
        return tuple(torch.stack(blocks) for blocks in zip(*per))
    st, E = sts[0], len(sts)
    kind = cals[0][1]["kind"]
    sym = st.covariance_type in ("full", "tied")
    out = []
    for k, x in zip(_names(st), stats):
        symmetric = (sym and k == "second_moments") or k == POOLED
        lead = x.dim() - (2 if symmetric else 0)  # the scale broadcasts over the batch (and, if not symmetric, entries)
        scale = _device_vector([info["requested"][k] for _, info in cals], x.device).reshape((E,) + (1,) * lead)
        y, _ = add_noise(x.unsqueeze(0).expand((E,) + x.shape), scale, kind=kind, noise="continuous",
                         symmetric=symmetric, generator=generator)
        out.append(y.to(torch.float64))
    return tuple(out)


def _estimate(noisy, scales, st: SoundSettings, kind: str, grids=None):
    """Post-processing: count floor, eq. (2) from noisy moments (``"auto"``: the full -> tied -> diagonal
    shrinkage of :func:`torchdpgmm.release.covariance_rule.shrunk_covariances`), branch-free PSD repair at the noise
    level."""
    out, floor, rule = _estimate_parts(noisy, scales, st, kind, grids)
    out["covariances"] = _psd_repair(out["covariances"], floor, st)
    return _finish(out, scales, st, kind, rule)


def _estimate_parts(noisy, scales, st: SoundSettings, kind: str, grids=None):
    """:func:`_estimate` up to the PSD repair: ``(out, floor (..., K, 1), rule)``. ``grids``: the discrete noise's
    public grids (the record's), for the Laplace signal test."""
    n_c, s_n, q_n, *pooled = noisy
    K, d = s_n.shape[-2:]
    lap = math.sqrt(2.0) if kind == "laplace" else 1.0  # std of Laplace noise of scale b
    if st.shrink:  # public flag: step 0 of the rule, counts within NOISE_SDS noise stds of zero are unresolved
        n_hat = floored_counts(n_c, scales["counts"] * lap, st.min_count)
    else:
        n_hat = torch.clamp(n_c, min=st.min_count)
    q_std = scales["second_moments"] * lap
    rule = None
    if st.shrink:  # public flag
        rule = shrunk_covariances(n_hat, s_n, q_n, pooled[0], q_std, scales[POOLED] * lap,
                                  per_direction=st.class_weight == "direction")
        weights, means, cov = rule["weights"], rule["means"], rule["covariances"]
    else:
        weights, means, cov = moments_to_parameters(n_hat, s_n, q_n, covariance_type=st.covariance_type)
    if st.eig_floor is None:
        # eigenvalues below the spectral size of the second-moment noise (~ sqrt(d) std / (n - 1)) are not
        # resolved; a function of released values and public constants only
        if st.covariance_type == "tied":
            denom = torch.clamp(n_hat.sum(-1, keepdim=True) - K, min=1.0).expand_as(n_hat)
        else:
            denom = torch.clamp(n_hat - 1, min=1.0)
        per = {"full": math.sqrt(d), "tied": math.sqrt(d), "diag": 1.0, "spherical": 1.0 / d}[st.covariance_type]
        entry = rule["noise_std"] if st.shrink else q_std / denom
        floor = torch.clamp(per * entry, min=1e-9 * st.clip_bound ** 2).unsqueeze(-1)
    else:
        floor = torch.full(n_hat.shape + (1,), st.eig_floor, dtype=torch.float64, device=n_hat.device)
    out = {"weights": weights, "means": means, "covariances": cov, "counts": n_hat}
    grids = grids or {}  # the noisy second moments against an empty table's (the diagnostics'); public scales
    out["signal"] = second_moment_signal(q_n, pooled[0] if pooled else None, st.covariance_type,
                                         scales["second_moments"], scales.get(POOLED), kind=kind,
                                         grids=(grids.get("second_moments"), grids.get(POOLED)))
    return out, floor, rule


def _psd_repair(cov, floor, st: SoundSettings):
    """Eigenvalues (full, tied) or variances (diag, spherical) floored at ``floor``. On the CPU by
    ``torch.linalg.eigh``; on an accelerator with ``d <= JACOBI_MAX_DIM`` by a fixed number of Jacobi sweeps
    (:func:`torchdpgmm.mechanisms.psd.jacobi_eigh`: ``torch.linalg.eigh`` checks its convergence on the host, one
    synchronisation per call, and cuSOLVER's batched solver takes a workspace per matrix), otherwise one
    ``torch.linalg.eigh`` for every epsilon of a batched release."""
    if st.covariance_type in ("full", "tied"):
        evals, evecs = _eigh(cov)
        cov = (evecs * torch.maximum(evals, floor).unsqueeze(-2)) @ evecs.transpose(-1, -2)
        return 0.5 * (cov + cov.transpose(-1, -2))
    return torch.diag_embed(torch.maximum(torch.diagonal(cov, dim1=-2, dim2=-1), floor))


def _eigh(cov: torch.Tensor, jacobi: bool | None = None):
    """Eigen-decomposition for the PSD repair: Jacobi sweeps on an accelerator for small d (:func:`_psd_repair`)."""
    from torchdpgmm.mechanisms.psd import JACOBI_MAX_DIM, jacobi_eigh

    if jacobi is None:
        jacobi = cov.device.type != "cpu" and cov.shape[-1] <= JACOBI_MAX_DIM
    return jacobi_eigh(cov) if jacobi else torch.linalg.eigh(cov)


def _finish(out, scales, st: SoundSettings, kind: str, rule):
    """:func:`_estimate` after the PSD repair: ``"auto"``'s class means, the public centre added back."""
    if st.shrink:  # public flag: step 6 of the rule, in the metric of the repaired covariances
        out |= _auto_means(out, scales, st, math.sqrt(2.0) if kind == "laplace" else 1.0, rule)
    if st.center is not None:
        means = out["means"]
        out["means"] = means + _on_device(st.center, means.device).unsqueeze(-2)  # (..., d): one centre per batch
    return out


def _device_vector(values: list[float], device: torch.device) -> torch.Tensor:
    """Public Python floats as a float64 vector on ``device``, without a copy from host memory (on CUDA one fill
    per value, the value a kernel argument: a copy from pageable memory would wait for the device)."""
    if device.type == "cpu":
        return torch.tensor(values, dtype=torch.float64)
    return torch.stack([torch.full((), float(v), dtype=torch.float64, device=device) for v in values])


def _on_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A public host tensor on ``device``; to CUDA through pinned memory without blocking (a copy from pageable
    memory would wait for the device)."""
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _auto_means(out, scales, st: SoundSettings, lap: float, rule) -> dict[str, Any]:
    """``"auto"``: step 6 of the rule (:func:`torchdpgmm.release.covariance_rule.shrunk_means`), the James-Stein
    weights only when :data:`torchdpgmm.release.covariance_rule.MEAN_SHRINKAGE` is on (zero noise otherwise: the
    projection onto the clipping ball alone), and the rule's weights for ``extras``."""
    from torchdpgmm.release import covariance_rule

    on = 1.0 if covariance_rule.MEAN_SHRINKAGE else 0.0  # a public constant of the rule
    evals, evecs = torch.linalg.eigh(out["covariances"])
    prec = (evecs / torch.clamp(evals, min=1e-300).unsqueeze(-2)) @ evecs.transpose(-1, -2)
    means, lam = covariance_rule.shrunk_means(out["means"], out["counts"], prec, on * scales["sums"] * lap,
                                              on * scales["counts"] * lap, st.clip_bound)
    return {"means": means, "shrinkage": {"class_covariances": rule["class_shrinkage"],
                                          "pooled_to_diagonal": rule["diag_shrinkage"], "class_means": lam}}


def kept_rows(Z: torch.Tensor, y: torch.Tensor, num_classes: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The rows every stage of a sound release keeps, as a ``(..., N)`` bool (branch-free, no host read): a finite
    record ``Z (..., N, d)`` (the row as that stage maps it: centred, clipped), a label ``y`` in
    ``[0, num_classes)``, and ``mask`` where given. A row is finite iff its largest ``|z_i|`` is (NaN propagates):
    no ``(..., N, d)`` temporary, unlike ``isfinite(Z)``."""
    valid = torch.isfinite(row_abs_max(Z).squeeze(-1)) & (y >= 0) & (y < num_classes)
    return valid if mask is None else valid & mask


def _clipped_statistics(X, y, num_classes, st: SoundSettings, mask):
    """float64 cast, clipping, branch-free row filter (mask, label range, finite clipped features), moments.

    A row is dropped when its label is outside ``[0, num_classes)``, its mask is False or its clipped record is not
    finite (a non-finite feature, or a finite row that overflows once centred): the clipped rows are zeroed in place
    (no copy of the data), then :func:`torchdpgmm.mixture.class_moments`' per-class products run on them."""
    from torchdpgmm.mixture import _moments

    center = None if st.center is None else _on_device(st.center, X.device)
    Z = clip_records(X.to(torch.float64), st.clip_bound, center=center)  # a fresh (..., N, d) array
    yl = y.long()
    valid = kept_rows(Z, yl, num_classes, mask)
    Z.masked_fill_(~valid.unsqueeze(-1), 0.0)
    stats = _moments(Z, yl, valid, num_classes, st.covariance_type)
    del Z
    if st.shrink:  # the pooled block sum_n z z^T (auto): the sum of the class blocks
        stats = stats + (stats[2].sum(-3),)
    if st.num_draws is not None:
        stats = tuple(t.expand((st.num_draws,) + t.shape) for t in stats)
    return stats


def _notes(st: SoundSettings) -> list[str]:
    notes = [
        f"record-level DP, adjacency {st.adjacency}; records clipped to ||x - center||_2 <= {st.clip_bound:g}",
        "global sensitivities only; classes, bound, noise shapes and budget split from public quantities",
        "rows with a label outside [0, num_classes) or non-finite features are dropped (no error, no branch)",
    ]
    if st.mechanism in ("colored", "kl"):
        notes.append("with a Euclidean clipping ball the KL-optimal (and min-MSE) noise shape is isotropic; "
                     f"'{st.mechanism}' differs from 'gaussian' only through the budget split")
    if st.noise == "discrete":
        notes.append("exact discrete noise (Canonne, Kamath & Steinke 2020): counts on the integers, sums and "
                     "second moments snapped to public grids, the rounding accounted in the sensitivities")
    else:
        notes.append("continuous float64 noise (not protected against floating-point attacks, Mironov 2012)")
    if st.noise_multiplier != 1.0:
        notes.append(f"noise scaled by {st.noise_multiplier:g}: the stated guarantee does NOT hold (test use only)")
    return notes


def sound_statistics(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: float,
    delta: float | None,
    *,
    clip_bound: float | None = None,
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    signal: bool = False,
    **options: Any,
) -> tuple[dict[str, torch.Tensor], Any]:
    """Record-level DP release of the labeled GMM's parameters (module docstring); returns tensors and a record.

    Shapes: ``X (..., N, d)`` (any real dtype; cast to float64), integer ``y (..., N)``, optional boolean
    ``mask (..., N)`` (False rows are padding). ``options``: ``adjacency`` (default ``"add-remove"``),
    ``mechanism`` (default ``"kl"``), ``covariance_type``, ``center`` (checked finite when given as numbers or a
    CPU tensor; a centre on an accelerator is not read back), ``split``, ``prior_scale``,
    ``min_count``, ``eig_floor`` (a number; ``float("-inf")`` switches the PSD repair off so that an
    auditor can read the noisy blocks back), ``noise_multiplier`` (< 1 breaks the guarantee; auditor tests only),
    ``num_draws`` (n independent releases of the same data in a new leading dim). Returns
    ``({"weights" (...,K), "means" (...,K,d), "covariances" (...,K,d,d), "counts" (...,K)}, record)``
    in float64; with ``signal=True`` also ``"signal_second_moments" (...)`` (and ``"auto"``'s
    ``"signal_pooled_second_moment" (...)``), release_sound's ``extras["signal"]``. Every check is on public inputs
    and happens before any noise is drawn.
    """
    out, st, scales, info, d = _run(X, y, num_classes, epsilon, delta, clip_bound, generator, mask, options)
    out.pop("shrinkage", None)  # diagnostics of "auto": in release_sound's extras
    found = out.pop("signal", {})
    if signal:  # public flag: flat, every value a tensor
        out |= {f"signal_{k}": v for k, v in found.items()}
    return out, _record(st, scales, info, d)


def _run(X, y, num_classes, epsilon, delta, clip_bound, generator, mask, options):
    """Public checks (may raise), then the data path (never raises, branches or loops on private values)."""
    d = check_schema(X, y, num_classes, mask)
    st = sound_settings(d, num_classes, epsilon, delta, clip_bound=clip_bound, **options)
    scales, info = _calibrate(st, d)
    # ---- nothing below may depend on private values for control flow ----
    stats = _clipped_statistics(X, y, num_classes, st, mask)
    out = _estimate(_perturb(stats, scales, st, info, generator), scales, st, info["kind"], info["grids"])
    return out, st, scales, info, d


def bytes_per_trial(n: int, num_classes: int, dim: int, *, epsilons: int = 1) -> int:
    """Peak device bytes one trial occupies while a block of trials is released (:func:`release_sound` with
    ``epsilons`` epsilons in one call, float64 ``X (T, n, d)`` and int64 ``y (T, n)``) and evaluated (the KL
    against the eq. (2) fit): an analytic estimate for sizing blocks (``T = budget // bytes_per_trial``).

    The inputs (``8 n (d + 1)``), two ``(n, d)`` float64 arrays at a time (the clipped rows and one class's
    masked rows in the release; the centred rows and one class's rows in the evaluation), a boolean row mask, and
    per epsilon twice the model and its statistics (``2 K (d^2 + d + 2)`` float64: noisy statistics, estimate
    and PSD-repair temporaries). Checked against the live bytes measured by ``benchmarks/bench_syncs.py``
    (continuous noise; the exact discrete samplers add their own working set, proportional to the
    ``epsilons K (d^2 + d + 1)`` draws). At n = 1000, K = 5, d = 3 and 7 epsilons: 88,840 bytes."""
    for name, v in (("n", n), ("num_classes", num_classes), ("dim", dim), ("epsilons", epsilons)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    K, d = num_classes, dim
    return 8 * n * (d + 1) + 16 * n * d + n + epsilons * 2 * 8 * K * (d * d + d + 2)


def _epsilon_batch(epsilon: Any) -> list[Any] | None:
    """The E public epsilons of a batched release (a 1-D tensor or a list / tuple, E >= 1: ``[1.0]`` and
    ``tensor([1.0])`` are both a batch of one), or None for one epsilon (a number or a 0-d tensor). Read on the host
    once (a public input)."""
    batch = isinstance(epsilon, (list, tuple)) or (torch.is_tensor(epsilon) and epsilon.dim() == 1)
    if batch and not len(epsilon):
        raise ValueError("epsilon is empty")
    if isinstance(epsilon, (list, tuple)):
        return [float(e) if torch.is_tensor(e) and e.numel() == 1 else e for e in epsilon]
    if batch:
        return [float(e) for e in epsilon.detach().to("cpu", torch.float64).tolist()]
    return None


def _run_epsilons(X, y, num_classes, epsilons, delta, clip_bound, generator, mask, options):
    """A batched-epsilon release: public checks and calibration per epsilon (host math), the statistics once,
    the noise of every epsilon in one batched draw per block, post-processing per epsilon (E public steps)."""
    d = check_schema(X, y, num_classes, mask)
    sts = [sound_settings(d, num_classes, e, delta, clip_bound=clip_bound, **options) for e in epsilons]
    if sts[0].delta is not None and sts[0].mechanism != "laplace" and sts[0].noise != "continuous":
        prime_zcdp_rho([st.epsilon for st in sts], sts[0].delta)  # one bisection for the grid (same values)
    cals = [_calibrate(st, d) for st in sts]
    # ---- nothing below may depend on private values for control flow ----
    stats = _clipped_statistics(X, y, num_classes, sts[0], mask)
    noisy = _perturb_epsilons(stats, cals, sts, generator)
    parts = [_estimate_parts(tuple(t[i] for t in noisy), scales, st, info["kind"], info["grids"])
             for i, ((scales, info), st) in enumerate(zip(cals, sts))]
    cov = _psd_repair(torch.stack([o["covariances"] for o, _, _ in parts]), torch.stack([f for _, f, _ in parts]),
                      sts[0])  # every epsilon in one repair (one eigh)
    outs = [_finish(o | {"covariances": cov[i]}, scales, st, info["kind"], rule)
            for i, ((o, _, rule), (scales, info), st) in enumerate(zip(parts, cals, sts))]
    out = {k: torch.stack([o[k] for o in outs]) for k in ("weights", "means", "covariances", "counts")}
    for key in PER_RELEASE_EXTRAS:
        if key in outs[0]:
            out[key] = {k: torch.stack([o[key][k] for o in outs]) for k in outs[0][key]}
    return out, sts, cals, d


def _batch_record(sts: list[SoundSettings], records: tuple[PrivacyRecord, ...]) -> PrivacyRecord:
    """The record of a batched-epsilon release: the vector of epsilons, NOT covered (the E releases of the same
    data are not composed); ``Release.records[e]`` is the full record of ``model[e]``."""
    st = sts[0]
    eps = torch.tensor([s.epsilon for s in sts], dtype=torch.float64)
    note = (f"epsilon batch: {len(sts)} independent releases of the same data, one per epsilon (leading axis of the "
            "model); the guarantee holds for each release alone (Release.records[e], Release.at_epsilon(e)), not "
            "for the batch together (not covered: an odometer refuses this record)")
    return with_sampler_tv(PrivacyRecord(
        epsilon=eps, delta=0.0 if st.delta is None else st.delta, adjacency=st.adjacency,
        accountant="one record per epsilon: " + records[0].accountant.split(",")[0] + ", ... (Release.records)",
        mode="sound", mechanism=st.mechanism, split=dict(st.split), notes=(note,) + tuple(records[0].notes),
        blocks=(), covered=False), max(r.sampler_tv for r in records), max(r.sampler_draws for r in records))


def _noise_summary(scales: dict[str, float], info: dict[str, Any], st: SoundSettings) -> dict[str, Any]:
    """Public noise description for ``extras`` (scales in data units; grids for discrete noise)."""
    key = "laplace_scale" if info["kind"] == "laplace" else "sigma"
    out: dict[str, Any] = {f"{key}_{k}": v for k, v in scales.items()} | {"noise": st.noise}
    if info["kind"] == "gaussian":
        out |= {"mu": info["mu"], "joint_factor": info["joint_factor"]}
    if info["grids"] is not None:
        out |= {f"grid_{k}": v for k, v in info["grids"].items()}
    return out


def _record(st: SoundSettings, scales: dict[str, float], info: dict[str, Any], dim: int) -> PrivacyRecord:
    """The release's typed PrivacyRecord: guarantee, accountant, one NoisedBlock per block, notes."""
    notes = _notes(st)
    if st.num_draws is not None and st.num_draws > 1:
        notes.append(f"num_draws={st.num_draws}: independent releases of the same data; the guarantee holds for "
                     "each draw alone, not for the draws together (not covered: an odometer refuses it)")
    if info["kind"] == "gaussian" and st.adjacency == Adjacency.REPLACE_ONE:
        notes.append(
            f"replace-one accounted jointly over the three blocks (worst case of one record's change): noise "
            f"{info['joint_factor']:.4f} x the per-block-sum calibration; each block's stated sensitivity is its "
            "share of the joint worst case")
    return with_sampler_tv(PrivacyRecord(
        epsilon=st.epsilon, delta=0.0 if st.delta is None else st.delta, adjacency=st.adjacency,
        accountant=info["accountant"], mode="sound", mechanism=st.mechanism, split=dict(st.split),
        notes=tuple(notes), blocks=info["blocks"],
        covered=st.noise_multiplier == 1.0 and (st.num_draws is None or st.num_draws == 1),
    ), info.get("sampler_tv", 0.0), info.get("sampler_draws", 0))


def release_sound(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: float,
    delta: float | None,
    *,
    clip_bound: float | None = None,
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    **options: Any,
) -> "Release":
    """Record-level (epsilon, delta)-DP release of a labeled GMM (module docstring); returns a ``Release``.

    ``Release.model`` is the released ``LabeledGMM`` (float64), ``Release.privacy`` its record and
    ``Release.extras`` public diagnostics (noise scales, settings; for ``"auto"`` also ``shrinkage``: the rule's
    weights ``class_covariances`` (..., K), ``pooled_to_diagonal`` (...) and ``class_means`` (..., K), functions of
    released values; ``signal``: the noisy second moments' z-scores against an empty table (Gaussian or Laplace),
    :func:`torchdpgmm.release.diagnostics.second_moment_signal`). Nothing non-private is returned:
    ``Release.fitted`` and ``Release.kl`` are None; evaluate against the data explicitly with
    :func:`torchdpgmm.release.evaluation.evaluate` (not private). ``delta`` may be None for ``mechanism="laplace"``
    (pure epsilon-DP). ``options`` as in :func:`sound_statistics`.
    """
    from torchdpgmm.mixture import LabeledGMM
    from torchdpgmm.release.result import Release

    epsilons = _epsilon_batch(epsilon)
    if epsilons is not None:
        return _release_epsilons(X, y, num_classes, epsilons, delta, clip_bound, generator, mask, options)
    out, st, scales, info, d = _run(X, y, num_classes, epsilon, delta, clip_bound, generator, mask, options)
    model = LabeledGMM(out["weights"], out["means"], out["covariances"], counts=out["counts"], validate_args=False)
    extras = {
        "mode": "sound", "mechanism": st.mechanism, "clip_bound": st.clip_bound, "adjacency": st.adjacency,
        "covariance_type": "auto" if st.shrink else st.covariance_type, "noise": _noise_summary(scales, info, st), "dim": d,
        "sensitivities": dict(info["sensitivities"]),
    }
    # "auto"'s rule weights, Gaussian noise's second-moment z-scores (post-processing of released values)
    extras |= {key: out[key] for key in PER_RELEASE_EXTRAS if key in out}
    return Release(model=model, privacy=_record(st, scales, info, d), extras=extras)


def _release_epsilons(X, y, num_classes, epsilons, delta, clip_bound, generator, mask, options) -> "Release":
    """:func:`release_sound` for a vector of E epsilons: the model's batch shape is ``(E, *batch)``."""
    from torchdpgmm.mixture import LabeledGMM
    from torchdpgmm.release.result import Release

    out, sts, cals, d = _run_epsilons(X, y, num_classes, epsilons, delta, clip_bound, generator, mask, options)
    model = LabeledGMM(out["weights"], out["means"], out["covariances"], counts=out["counts"], validate_args=False)
    records = tuple(_record(st, scales, info, d) for st, (scales, info) in zip(sts, cals))
    st, info = sts[0], cals[0][1]
    extras = {
        "mode": "sound", "mechanism": st.mechanism, "clip_bound": st.clip_bound, "adjacency": st.adjacency,
        "covariance_type": "auto" if st.shrink else st.covariance_type, "dim": d,
        "noise": tuple(_noise_summary(scales, inf, s) for s, (scales, inf) in zip(sts, cals)),
        "sensitivities": dict(info["sensitivities"]), "epsilons": tuple(s.epsilon for s in sts),
    }
    extras |= {key: out[key] for key in PER_RELEASE_EXTRAS if key in out}
    return Release(model=model, privacy=_batch_record(sts, records), extras=extras, records=records)
