"""Sound (record-level, globally calibrated) release of a labeled Gaussian mixture.

The "as published" mechanism of paper 000 (eqs. 5, 6, 15, Theorem 1) protects label flips only, calibrates
its noise to the actual dataset (local sensitivity), relies on the Wishart mechanism (not DP: Sheffet 2019)
and composes classes by ``max_k``. This module is the mode whose guarantee holds (DESIGN.md Sec. 4):

* **Adjacency**: record level. ``"add-remove"`` (one record added or removed; the number of records is
  private) or ``"replace-one"`` (one record's features and/or label replaced; N public). A label flip is a
  replace-one neighbour, so a replace-one release also protects labels.
* **Clipping**: every record is clipped to ``||x - center||_2 <= B`` (``clip_bound``, user given, REQUIRED;
  ``center`` public, default 0). This is paper 000 Sec. IV-C eq. (28) enforced rather than assumed.
* **Released statistics** (per class k, on clipped and centred records z = clip(x - center)):
  counts ``n_k``, sums ``s_k = sum z``, second moments ``Q_k = sum z z^T``. One record changes them by

  ================  ===============  ===============
  block             add-remove (L2)  replace-one (L2)
  ================  ===============  ===============
  counts (K)        1                sqrt(2)
  sums (K x d)      B                2 B
  second moments    B^2 (Frobenius)  sqrt(2) B^2
  ================  ===============  ===============

  (replace-one: ``||z z^T - z' z'^T||_F^2 = |z|^4 + |z'|^4 - 2 (z.z')^2 <= 2 B^4``; sums move by
  ``|z - z'| <= 2B`` within a class, ``sqrt(2) B`` across classes). These are *global* sensitivities.
* **Mechanisms**: ``"gaussian"``, ``"colored"``, ``"kl"``: the Gaussian mechanism on each block; the second
  moments get isotropic noise in the Frobenius-isometric coordinates of the symmetric matrices (diagonal
  ``sigma``, off-diagonal ``sigma/sqrt 2``), so their Frobenius sensitivity is exact. ``"laplace"``: the
  Laplace mechanism with L1 sensitivities (counts 1, sums ``sqrt(d) B``, upper triangle of ``Q``
  ``(d+1) B^2 / 2``; doubled under replace-one), pure epsilon-DP by basic composition. ``"r1smg"`` is
  refused: the audit (docs/privacy.md) and an exact quadrature show R1SMG is not (eps, delta)-DP as
  calibrated (:func:`torchdpgmm.audit.r1smg_ball_delta`).
* **Accounting**: all Gaussian blocks together are ``mu``-GDP with
  ``mu^2 = sum_b (Delta_b / sigma_b)^2`` (Dong, Roth & Su 2019; equivalently rho-zCDP with
  ``rho = mu^2/2``, exact for Gaussian mechanisms, also under adaptive composition). ``mu`` is calibrated
  by the analytic Gaussian mechanism (Balle & Wang 2018): the largest mu with
  ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) <= delta``. The split ``mu_b^2 = w_b mu^2`` (fractions
  ``w_b``) depends only on public quantities, so the whole release is (eps, delta)-DP, not only each part.
* **Estimates** (post-processing): counts projected to ``>= min_count``; means ``center + s~_k / n~_k``;
  covariances ``(Q~_k - s~_k s~_k^T / n~_k) / (n~_k - 1)`` symmetrised with eigenvalues floored at
  ``eig_floor`` (PSD repair; default the noise level ``sqrt(d) * std(Q noise) / (n~_k - 1)``); weights ``n~ / sum n~``.

The ``kl`` flavour. With a Euclidean clipping ball every direction has the same sensitivity, so the
KL-optimal noise *shape* of the paper's SDP (23) (``min tr(Sigma_k^{-1} C)`` s.t. ``C >= (B/mu_s)^2 I``) and
Ravi et al.'s min-MSE shape (``A = I``) are both isotropic: ``"colored"`` and ``"kl"`` keep isotropic noise.
What the KL objective still decides is the budget split. To first order the expected KL contributed by
each block is ``a_b / u_b`` with ``u_b = (Delta_b/sigma_b)^2`` and, under a public isotropic prior scale
``s`` for the class covariances (``prior_scale``, default ``B / sqrt(d)``),
``a_counts = Delta_c^2 / 2``, ``a_sums = Delta_s^2 d / (2 s^2)``, ``a_Q = Delta_Q^2 d (d+1) / (8 s^4)``
(each times ``sum_k 1/(N n_k)``, a common factor that cancels). Minimising ``sum a_b/u_b`` subject to
``sum u_b = mu^2`` gives ``u_b ∝ sqrt(a_b)``. Only public quantities (d, B, s, adjacency) enter, so the
design is post-processing of nothing private.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdpgmm._validation import check_delta, check_epsilon, check_finite, check_labels
from torchdpgmm.mechanisms import clip_records, laplace_noise, normal_noise, symmetric_noise
from torchdpgmm.privacy import gdp_delta, gdp_epsilon, gdp_mu  # noqa: F401  (re-exported)

__all__ = [
    "release_sound",
    "sound_statistics",
    "sensitivities",
    "gdp_mu",
    "gdp_delta",
    "gdp_epsilon",
    "kl_split",
    "ADJACENCIES",
    "SOUND_MECHANISMS",
]

ADJACENCIES = ("add-remove", "replace-one")
SOUND_MECHANISMS = ("gaussian", "colored", "kl", "laplace")
DEFAULT_SPLIT = {"counts": 0.1, "sums": 0.45, "second_moments": 0.45}


# accounting: the calibrations live in torchdpgmm.privacy (gdp_mu/gdp_delta/gdp_epsilon are re-exported
# here for existing callers: experiments/audit.py and the tests use ``sound.gdp_mu``/``sound.gdp_epsilon``)

# ----------------------------------------------------------------------------------------------------
# sensitivities and the KL-driven split
# ----------------------------------------------------------------------------------------------------

def sensitivities(clip_bound: float, dim: int, adjacency: str = "replace-one", norm: str = "l2") -> dict[str, float]:
    """Global sensitivities of (counts, sums, second moments) for records with ``||z||_2 <= B``.

    ``norm="l2"`` (Frobenius for the second moments) for Gaussian noise, ``norm="l1"`` (upper triangle of
    the second moments) for Laplace noise. See the module docstring for the derivation.
    """
    _check_adjacency(adjacency)
    B = float(clip_bound)
    if norm == "l2":
        if adjacency == "add-remove":
            return {"counts": 1.0, "sums": B, "second_moments": B * B}
        return {"counts": math.sqrt(2.0), "sums": 2 * B, "second_moments": math.sqrt(2.0) * B * B}
    if norm == "l1":
        f = 1.0 if adjacency == "add-remove" else 2.0
        # sum_{i<=j} |z_i z_j| = (||z||_1^2 + ||z||_2^2)/2 <= (d B^2 + B^2)/2
        return {"counts": f * 1.0, "sums": f * math.sqrt(dim) * B, "second_moments": f * (dim + 1) * B * B / 2}
    raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")


def kl_split(clip_bound: float, dim: int, adjacency: str = "replace-one", prior_scale: float | None = None) -> dict[str, float]:
    """Budget fractions ``w_b`` (of mu^2) minimising the first-order expected KL (module docstring).

    ``u_b ∝ sqrt(a_b)`` with ``a_counts = Dc^2/2``, ``a_sums = Ds^2 d/(2 s^2)``,
    ``a_Q = DQ^2 d(d+1)/(8 s^4)``; ``s = prior_scale`` (public), default ``B/sqrt(d)``.
    """
    sens = sensitivities(clip_bound, dim, adjacency)
    s = float(prior_scale) if prior_scale is not None else float(clip_bound) / math.sqrt(dim)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"prior_scale must be finite and > 0, got {prior_scale!r}")
    a = {
        "counts": sens["counts"] ** 2 / 2,
        "sums": sens["sums"] ** 2 * dim / (2 * s * s),
        "second_moments": sens["second_moments"] ** 2 * dim * (dim + 1) / (8 * s ** 4),
    }
    r = {k: math.sqrt(v) for k, v in a.items()}
    tot = sum(r.values())
    return {k: v / tot for k, v in r.items()}


# ----------------------------------------------------------------------------------------------------
# the release
# ----------------------------------------------------------------------------------------------------

def _check_adjacency(adjacency: str) -> None:
    if adjacency not in ADJACENCIES:
        raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")


@dataclass
class SoundRecord:
    """Privacy accounting of one sound release (turned into a PrivacyRecord when the core provides it)."""

    epsilon: float
    delta: float
    adjacency: str
    accountant: str
    mode: str = "sound"
    split: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    noise: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("epsilon", "delta", "adjacency", "accountant", "mode", "split", "notes", "noise")}


def sound_statistics(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: float,
    delta: float,
    clip_bound: float | None,
    adjacency: str = "replace-one",
    mechanism: str = "kl",
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    *,
    center: torch.Tensor | None = None,
    split: dict[str, float] | None = None,
    prior_scale: float | None = None,
    min_count: float = 2.0,
    eig_floor: float | None = None,
    noise_multiplier: float = 1.0,
    num_draws: int | None = None,
) -> tuple[dict[str, torch.Tensor], SoundRecord]:
    """Release (weights, means, covariances, counts) under record-level DP; returns tensors and a record.

    Shapes: ``X (...,N,d)``, ``y (...,N)``, optional boolean ``mask (...,N)`` (False rows are padding).
    Returns ``{"weights" (...,K), "means" (...,K,d), "covariances" (...,K,d,d), "counts" (...,K)}``.
    ``noise_multiplier`` scales every noise standard deviation; values < 1 break the guarantee and exist
    only so that the auditor's tests can build a deliberately broken mechanism (the record says so).
    ``num_draws=n`` returns n independent releases of the same data (new leading dim), computing the
    clipped statistics once: the fast path for Monte Carlo privacy audits.
    """
    # ---- validation, before any noise is drawn --------------------------------------------------
    if clip_bound is None:
        raise ValueError(
            "clip_bound is required in sound mode: record-level DP needs a public bound B on ||x - center||_2 "
            "(records are clipped to it); taking it from the data would leak privacy"
        )
    try:
        B = float(clip_bound)
    except (TypeError, ValueError):
        raise ValueError(f"clip_bound must be a positive finite number, got {clip_bound!r}") from None
    if not (B > 0 and math.isfinite(B)):
        raise ValueError(f"clip_bound must be a positive finite number, got {clip_bound!r}")
    for name, v in (("epsilon", epsilon), ("delta", delta)):
        if torch.is_tensor(v) and v.numel() != 1:
            raise ValueError(f"{name} must be a scalar in sound mode, got shape {tuple(v.shape)}")
    epsilon = float(epsilon)
    check_epsilon(epsilon)
    if mechanism != "laplace" or delta is not None:
        delta = float(delta)
        check_delta(delta)
    _check_adjacency(adjacency)
    if mechanism == "r1smg":
        raise ValueError(
            "mechanism 'r1smg' has no sound mode: its noise sqrt(sigma) z u puts probability ~r/sqrt(sigma) "
            "within distance r of the true value, which a neighbour cannot match; the audit finds epsilon far "
            "above the claim (docs/privacy.md). Use 'gaussian', 'kl' or 'laplace'"
        )
    if mechanism not in SOUND_MECHANISMS:
        raise ValueError(f"mechanism {mechanism!r} has no sound mode; choose one of {SOUND_MECHANISMS}")
    if not torch.is_tensor(X):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.dim() < 2:
        raise ValueError(f"X must have shape (..., N, d), got {tuple(X.shape)}")
    X = X.to(torch.float64)  # float64 before clipping and summing (see torchdpgmm.mechanisms.clip)
    if not torch.is_tensor(y) or y.shape != X.shape[:-1]:
        raise ValueError(f"y must be a tensor of shape {tuple(X.shape[:-1])}, got {getattr(y, 'shape', type(y))}")
    if mask is not None:
        if not torch.is_tensor(mask) or mask.dtype != torch.bool or mask.shape != y.shape:
            raise ValueError(f"mask must be a boolean tensor of shape {tuple(y.shape)}")
    check_labels(y, num_classes, mask)
    check_finite(X, "X", mask)
    if center is not None:
        center = torch.as_tensor(center, dtype=X.dtype, device=X.device)
        if center.shape[-1:] != X.shape[-1:]:
            raise ValueError(f"center must have last dimension d={X.shape[-1]}, got {tuple(center.shape)}")
        check_finite(center, "center")
    if not (min_count >= 1):
        raise ValueError(f"min_count must be >= 1, got {min_count!r}")
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
    K, d = num_classes, X.shape[-1]
    if split is not None:
        if set(split) != set(DEFAULT_SPLIT) or any(not (split[k] > 0) for k in split):
            raise ValueError(f"split must give positive fractions for {sorted(DEFAULT_SPLIT)}, got {split!r}")
        tot = sum(split.values())
        split = {k: v / tot for k, v in split.items()}
    elif mechanism == "kl":
        split = kl_split(B, d, adjacency, prior_scale)
    else:
        split = dict(DEFAULT_SPLIT)

    # ---- statistics on clipped records ----------------------------------------------------------
    dtype, device = X.dtype, X.device
    Z = clip_records(X, B, center=center)
    onehot = torch.nn.functional.one_hot(y.long(), K).to(dtype)  # (...,N,K)
    if mask is not None:
        onehot = onehot * mask.unsqueeze(-1).to(dtype)
    counts = onehot.sum(-2)  # (...,K)
    sums = onehot.transpose(-1, -2) @ Z  # (...,K,d)
    second = torch.einsum("...nk,...ni,...nj->...kij", onehot, Z, Z)  # (...,K,d,d)
    if num_draws is not None:
        if not (isinstance(num_draws, int) and num_draws >= 1):
            raise ValueError(f"num_draws must be a positive int, got {num_draws!r}")
        counts = counts.expand((num_draws,) + counts.shape)
        sums = sums.expand((num_draws,) + sums.shape)
        second = second.expand((num_draws,) + second.shape)
    batch = counts.shape[:-1]

    notes = [
        f"record-level DP, adjacency {adjacency}; records clipped to ||x - center||_2 <= {B:g}",
        "global sensitivities only; noise shapes and budget split from public quantities",
    ]
    if mechanism in ("colored", "kl"):
        notes.append(
            "with a Euclidean clipping ball the KL-optimal (and min-MSE) noise shape is isotropic; "
            f"'{mechanism}' differs from 'gaussian' only through the budget split"
        )
    if noise_multiplier != 1.0:
        notes.append(f"noise scaled by {noise_multiplier:g}: the stated guarantee does NOT hold (test use only)")

    # ---- noise -----------------------------------------------------------------------------------
    if mechanism == "laplace":
        sens = sensitivities(B, d, adjacency, norm="l1")
        eps_b = {k: epsilon * w for k, w in split.items()}
        scale = {k: noise_multiplier * sens[k] / eps_b[k] for k in sens}
        n_c = counts + laplace_noise(counts.shape, scale["counts"], generator, dtype=dtype, device=device)
        s_n = sums + laplace_noise(sums.shape, scale["sums"], generator, dtype=dtype, device=device)
        q_n = second + symmetric_noise(batch + (K,), d, scale["second_moments"], kind="laplace",
                                       generator=generator, dtype=dtype, device=device)
        record = SoundRecord(
            epsilon=epsilon, delta=0.0 if delta is None else delta, adjacency=adjacency,
            accountant="basic composition of Laplace mechanisms (pure epsilon-DP)",
            split=split, notes=notes, noise={f"laplace_scale_{k}": v for k, v in scale.items()},
        )
    else:
        sens = sensitivities(B, d, adjacency, norm="l2")
        mu = gdp_mu(epsilon, delta)
        sigma = {k: noise_multiplier * sens[k] / (mu * math.sqrt(split[k])) for k in sens}
        n_c = counts + normal_noise(counts.shape, sigma["counts"], generator, dtype=dtype, device=device)
        s_n = sums + normal_noise(sums.shape, sigma["sums"], generator, dtype=dtype, device=device)
        q_n = second + symmetric_noise(batch + (K,), d, sigma["second_moments"], kind="gaussian", isometric=True,
                                       generator=generator, dtype=dtype, device=device)
        record = SoundRecord(
            epsilon=epsilon, delta=delta, adjacency=adjacency,
            accountant=f"Gaussian DP (exact composition of Gaussian mechanisms), mu={mu:.6g}, rho-zCDP={mu * mu / 2:.6g}; analytic Gaussian calibration",
            split=split, notes=notes, noise={f"sigma_{k}": v for k, v in sigma.items()} | {"mu": mu},
        )

    # ---- post-processing ------------------------------------------------------------------------
    n_hat = torch.clamp(n_c, min=float(min_count))
    means_c = s_n / n_hat.unsqueeze(-1)
    cov = (q_n - s_n.unsqueeze(-1) * s_n.unsqueeze(-2) / n_hat[..., None, None]) / (n_hat[..., None, None] - 1)
    cov = 0.5 * (cov + cov.transpose(-1, -2))
    if eig_floor is None:
        # noise-level floor: the second-moment noise has spectral norm ~ 2 sqrt(d) * std per entry, so
        # eigenvalues below ~ sqrt(d) std / (n~ - 1) are not resolved; a function of released values only
        q_std = sigma["second_moments"] if mechanism != "laplace" else math.sqrt(2.0) * scale["second_moments"]
        floor = torch.clamp(math.sqrt(d) * q_std / (n_hat - 1), min=1e-9 * B * B).unsqueeze(-1)
    else:
        floor = torch.as_tensor(float(eig_floor), dtype=dtype, device=device)
    evals, evecs = torch.linalg.eigh(cov)
    cov = (evecs * torch.maximum(evals, floor).unsqueeze(-2)) @ evecs.transpose(-1, -2)
    cov = 0.5 * (cov + cov.transpose(-1, -2))
    means = means_c + (center if center is not None else 0.0)
    weights = n_hat / n_hat.sum(-1, keepdim=True)
    return {"weights": weights, "means": means, "covariances": cov, "counts": n_hat}, record


# ----------------------------------------------------------------------------------------------------
# Release wrapper
# ----------------------------------------------------------------------------------------------------

def release_sound(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: float,
    delta: float | None,
    clip_bound: float | None = None,
    adjacency: str = "replace-one",
    mechanism: str = "kl",
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    **kw: Any,
):
    """Record-level (epsilon, delta)-DP release of a labeled GMM (module docstring); returns a ``Release``.

    ``Release.model`` is the released ``LabeledGMM``; ``Release.fitted`` the non-private empirical fit
    (paper 000 eq. 2, on the raw, unclipped records; for evaluation only, never publish it);
    ``Release.kl = kl_divergence(model, fitted)`` (Appendix B; NaN when a class has < 2 records, where
    eq. 2c is undefined); ``Release.privacy`` the :class:`~torchdpgmm.accounting.PrivacyRecord`.
    ``delta`` may be None for ``mechanism="laplace"`` (pure epsilon-DP). Keyword options: ``center``,
    ``split``, ``prior_scale``, ``min_count``, ``eig_floor``, ``num_draws`` (see :func:`sound_statistics`).
    """
    from torchdpgmm.accounting import PrivacyRecord
    from torchdpgmm.kl import kl_divergence
    from torchdpgmm.mixture import LabeledGMM, fit_labeled
    from torchdpgmm.result import Release

    stats, rec = sound_statistics(
        X, y, num_classes, epsilon, delta, clip_bound, adjacency, mechanism, generator, mask, **kw
    )
    model = LabeledGMM(stats["weights"], stats["means"], stats["covariances"], counts=stats["counts"],
                       validate_args=False)
    Xf = X.to(torch.float64)
    try:
        fitted = fit_labeled(Xf, y, num_classes, mask)
        kl = kl_divergence(model, fitted)
    except ValueError:  # a class with < 2 records: eq. (2c) undefined; the release itself is still valid
        w, m, c, n = _fit_empirical(Xf, y, num_classes, mask)
        fitted = LabeledGMM(w, m, c, counts=n, validate_args=False)
        kl = torch.full(model.batch_shape, float("nan"), dtype=Xf.dtype, device=Xf.device)
    privacy = PrivacyRecord(
        epsilon=rec.epsilon, delta=rec.delta, adjacency=rec.adjacency, accountant=rec.accountant,
        mode="sound", mechanism=mechanism, split=dict(rec.split),
        notes=list(rec.notes) + [f"noise: {rec.noise}"],
    )
    extra = {"mode": "sound", "mechanism": mechanism, "clip_bound": float(clip_bound), "noise": dict(rec.noise)}
    return Release(model=model, fitted=fitted, kl=kl, privacy=privacy, design=None, extra=extra)


def _fit_empirical(X, y, K, mask):
    """Per-class fit (eq. 2a-c) that tolerates classes with < 2 records (their covariance is 0)."""
    dtype = X.dtype
    oh = torch.nn.functional.one_hot(y.long(), K).to(dtype)
    if mask is not None:
        oh = oh * mask.unsqueeze(-1).to(dtype)
        X = torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=dtype, device=X.device))
    n = oh.sum(-2)
    mean = (oh.transpose(-1, -2) @ X) / torch.clamp(n, min=1).unsqueeze(-1)
    D = X.unsqueeze(-3) - mean.unsqueeze(-2)
    w = oh.transpose(-1, -2).unsqueeze(-1)
    cov = (D * w).transpose(-1, -2) @ D / torch.clamp(n - 1, min=1)[..., None, None]
    return n / n.sum(-1, keepdim=True), mean, cov, n
