"""Small shared pieces of the EM family: noise, post-processing, clipping, information criteria, records.

Noise primitives and the PSD shift come from the core (:mod:`torchdpgmm.mechanisms`); this module only
adapts them (symmetric-matrix noise, clipping, the weight normalisation of the DP-MSNM paper, 2021).
:func:`make_record` builds the typed privacy record of the privacy package (``NoisedBlock`` entries and
``covered``). All noise is drawn by :mod:`torchdpgmm.mechanisms`.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import torch

__all__ = [
    "laplace",
    "gaussian_noise",
    "laplace_symmetric",
    "gaussian_symmetric",
    "shift_psd",
    "shift_pd",
    "normalise_weights_minmax",
    "clip_rows_l1",
    "clip_rows_l2",
    "project_l1_ball",
    "PrivacyRecord",
    "make_record",
    "noised_block",
    "num_params_gmm",
    "num_params_msnm",
    "information_criteria",
]


from torchdpgmm.privacy import PrivacyRecord  # noqa: E402  (re-exported for the EM modules)
from torchdpgmm.mechanisms import laplace_noise as _laplace_noise, normal_noise, symmetric_noise
from torchdpgmm.mechanisms.psd import shift_psd as _core_shift_psd


def check_em_budget(epsilon: Any, delta: Any = None, *, needs_delta: bool = False, stacklevel: int = 3) -> None:
    """The EM entry points' budget checks, before anything touches the data: ``epsilon`` one finite number > 0 (a
    batch of datasets shares one budget; a tensor of several said "only one element tensors can be converted"),
    ``delta`` as :func:`~torchdpgmm._validation.check_delta` wants it (given, or ``needs_delta``: None refused too),
    and the package's one budget rule
    (:func:`~torchdpgmm._validation.check_privacy_strength`; its warning points ``stacklevel`` frames up from here)."""
    from torchdpgmm._validation import check_delta, check_epsilon, check_privacy_strength

    check_epsilon(epsilon)
    if (torch.is_tensor(epsilon) or hasattr(epsilon, "__len__")) and torch.as_tensor(epsilon).numel() != 1:
        raise ValueError(f"epsilon must be one number here (a batch of datasets shares one budget), got "
                         f"{torch.as_tensor(epsilon).numel()} values: call once per epsilon")
    if delta is not None or needs_delta:
        check_delta(delta)
    check_privacy_strength(epsilon, delta, stacklevel=stacklevel, override=False)


def check_number(name: str, value: Any, *, above: float = 0.0, or_equal: bool = False, allow_none: bool = False) -> None:
    """One-line refusal of a public number: ``TypeError`` unless a real number (a string or a bool is not one; a
    one-element tensor is), ``ValueError`` unless finite and ``> above`` (``>=`` with ``or_equal``). ``None`` passes
    with ``allow_none``."""
    if value is None and allow_none:
        return
    tensor1 = torch.is_tensor(value) and value.numel() == 1 and value.dtype != torch.bool
    if isinstance(value, bool) or not (isinstance(value, numbers.Real) or tensor1):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    x = float(value)
    if not (math.isfinite(x) and (x >= above if or_equal else x > above)):
        raise ValueError(f"{name} must be finite and {'>=' if or_equal else '>'} {above:g}, got {value!r}")


def check_iterations(name: str, value: Any, minimum: int = 1) -> None:
    """``value`` an int (not a bool: ``True`` ran as 1) of at least ``minimum``, else a one-line ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def check_shares(name: str, split: Any, count: int) -> None:
    """``split`` a sequence of ``count`` finite positive numbers (a NaN share passed ``s <= 0`` and dropped its block
    from the record), else a one-line error; the caller checks how they must sum."""
    if isinstance(split, (str, bytes)) or not hasattr(split, "__len__") or len(split) != count:
        raise ValueError(f"{name} must be {count} positive shares, got {split!r}")
    for v in split:
        check_number(f"every share of {name}", v)


def check_init_params(init_params: Any, batch: tuple, shapes: tuple, names: tuple) -> None:
    """The caller's start ``init_params`` (public): one tensor per name, each of shape ``shapes[i]`` or one that
    broadcasts to ``batch + shapes[i]``, else a one-line ``ValueError`` (it failed in ``expand`` mid-fit)."""
    if init_params is None:
        return
    if isinstance(init_params, (str, bytes)) or not hasattr(init_params, "__len__") or len(init_params) != len(names):
        raise ValueError(f"init_params must be ({', '.join(names)}), got {type(init_params).__name__}")
    for t, shape, name in zip(init_params, shapes, names):
        try:
            got = tuple(torch.as_tensor(t).shape)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"init_params' {name} must be a tensor, got {type(t).__name__}") from None
        target = (*batch, *shape)
        try:
            ok = tuple(torch.broadcast_shapes(got, target)) == target
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"init_params' {name} must have shape {shape} (or broadcast to {target}), got {got}")


def noised_block(name: str, mechanism: str, sensitivity: Any, noise_scale: Any, norm: str, count: int = 1):
    """A block description (dict with the privacy package's ``NoisedBlock`` fields) for a batch of datasets, or
    ``None`` for an empty batch. Where the sensitivity and noise scale differ across the batch (they depend on a
    per-dataset ``n``: a ragged batch), the block is the worst case, the pair of the dataset with the largest
    ``sensitivity / noise_scale``: the Laplace and Gaussian mechanisms' privacy depends on a block only through that
    ratio, so every dataset's release is covered by it. Until 2026-12-02 such a block was left out, and the record of
    a covered fit listed no block at all."""
    s, b = torch.broadcast_tensors(torch.as_tensor(sensitivity, dtype=torch.float64).detach(),
                                   torch.as_tensor(noise_scale, dtype=torch.float64).detach())
    s, b = s.flatten(), b.flatten()
    if s.numel() == 0:
        return None
    # sensitivity over noise scale; a zero scale is infinite unless the sensitivity is 0 too (R = 0 from the data)
    ratio = torch.where(b > 0, s / torch.where(b > 0, b, torch.ones_like(b)),
                        torch.where(s > 0, torch.full_like(s, math.inf), torch.zeros_like(s)))
    i = int(ratio.argmax())  # public: n, R, epsilon (a host read after the fit, as the float()s below)
    return {"name": name, "mechanism": mechanism, "sensitivity": float(s[i]), "noise_scale": float(b[i]), "norm": norm,
            "count": int(count)}


def make_record(*, epsilon: float, delta: float, adjacency: str, accountant: str, mode: str, mechanism: str,
                split: dict[str, Any], notes: list[str], blocks: tuple = (), covered: bool = False):
    """The release's typed privacy record (:class:`torchdpgmm.privacy.PrivacyRecord`, one ``NoisedBlock`` per
    noised statistic). ``covered`` is True only if every step that touches the data is inside ``epsilon``;
    ``blocks`` entries that are ``None`` (an empty batch) are left out."""
    from torchdpgmm.privacy import NoisedBlock

    blocks = tuple(NoisedBlock(**b) for b in blocks if b is not None)
    return PrivacyRecord(epsilon=epsilon, delta=delta, adjacency=adjacency, accountant=accountant, mode=mode,
                         mechanism=mechanism, split=split, notes=tuple(notes), blocks=blocks, covered=bool(covered))


def laplace(x: torch.Tensor, scale: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x + Lap(0, scale)`` element-wise (``scale`` must broadcast to ``x.shape``).

    Uses the core's unvalidated sampler :func:`torchdpgmm.mechanisms.laplace.laplace_noise` (inputs are
    validated once at the public entry point, so the iteration loop stays free of host syncs)."""
    scale = torch.as_tensor(scale, dtype=x.dtype, device=x.device)
    return x + _laplace_noise(x.shape, scale, generator)  # scale must broadcast to x.shape


def gaussian_noise(x: torch.Tensor, std: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x + N(0, std^2)`` i.i.d. element-wise (spherical Gaussian mechanism)."""
    std = torch.as_tensor(std, dtype=x.dtype, device=x.device)  # broadcasts to x
    return x + normal_noise(x.shape, std, generator, dtype=x.dtype, device=x.device)


def laplace_symmetric(S: torch.Tensor, scale: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """Add Laplace noise to the upper triangle (with diagonal) of ``S`` and mirror it (stays symmetric)."""
    scale = torch.as_tensor(scale, dtype=S.dtype, device=S.device)
    return S + symmetric_noise(S.shape[:-2], S.shape[-1], scale.reshape(scale.shape[:-2]) if scale.dim() >= 2 else scale,
                               kind="laplace", generator=generator, dtype=S.dtype, device=S.device)


def gaussian_symmetric(S: torch.Tensor, std: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """Add i.i.d. Gaussian noise to the upper triangle (with diagonal) of ``S`` and mirror it."""
    std = torch.as_tensor(std, dtype=S.dtype, device=S.device)
    return S + symmetric_noise(S.shape[:-2], S.shape[-1], std.reshape(std.shape[:-2]) if std.dim() >= 2 else std,
                               kind="gaussian", generator=generator, dtype=S.dtype, device=S.device)


def shift_psd(S: torch.Tensor, floor: float = 0.0) -> torch.Tensor:
    """``S + rho I`` with ``rho = max(0, floor - lambda_min(S))`` (Wu et al. 2016; DP-MSNM paper eq. 11), via
    :func:`torchdpgmm.mechanisms.psd.shift_psd`. ``floor = 0`` is the paper's ``min{r >= 0 : S + r I >= 0}``;
    a small positive floor keeps the result invertible (the next E-step needs the inverse)."""
    return _core_shift_psd(S, floor)


#: :func:`shift_pd`'s floor relative to the Frobenius norm of the matrix it repairs: far above float64's rounding of an
#: eigenvalue (``d * 2^-52 ||S||``, which swamped an absolute 1e-6 at data scales of 1e3 and more), far below any
#: floor that matters at unit scale (where the absolute ``psd_floor`` 1e-6 still rules)
PD_RELATIVE_FLOOR = 1e-12


def shift_pd(S: torch.Tensor, floor: float) -> torch.Tensor:
    """:func:`shift_psd` with the floor ``max(floor, PD_RELATIVE_FLOOR * ||S_k||_F)`` for each matrix ``S_k``: positive
    definite to the next Cholesky factor at any scale of the data. DPGMM's and DP-MSNM's noisy covariances, in data
    units, reach ``1e9`` and more at a data scale of ``1e3``; ``eigvalsh``'s rounding of ``lambda_min`` then exceeded
    the absolute 1e-6 and the next E-step's Cholesky raised. The floor is post-processing of the noisy matrix (no
    bound on the Laplace draw is needed); where the relative term is below ``floor`` the result is
    :func:`shift_psd`'s, bit for bit."""
    rel = PD_RELATIVE_FLOOR * torch.linalg.matrix_norm(S)
    return _core_shift_psd(S, torch.clamp(rel, min=floor))


def normalise_weights_minmax(w: torch.Tensor, zeta: float = 1e-3) -> torch.Tensor:
    """Post-processing of noisy weights of the DP-MSNM paper (2021) ("Post-processing step"):

    ``w <- (w - min w) / (max w - min w)``, then ``pi_k = (w_k + zeta) / (sum_j w_j + G zeta)``.
    When all entries are equal the min-max step is 0/0; we then return uniform weights.
    """
    lo = w.amin(-1, keepdim=True)
    hi = w.amax(-1, keepdim=True)
    span = hi - lo
    scaled = torch.where(span > 0, (w - lo) / torch.where(span > 0, span, torch.ones_like(span)),
                         torch.zeros_like(w))
    G = w.shape[-1]
    return (scaled + zeta) / (scaled.sum(-1, keepdim=True) + G * zeta)


def _clip_rows(X: torch.Tensor, bound: Any, norm: str) -> torch.Tensor:
    """The noise layer's :func:`torchdpgmm.mechanisms.clip_records` (float64) for one bound, or one per
    dataset broadcasting against ``X.shape[:-2]`` (older callers pass ``bound[..., None, None]``)."""
    from torchdpgmm.mechanisms import clip_records

    bt = torch.as_tensor(bound, dtype=torch.float64, device=X.device)
    bt = bt.reshape(bt.shape[:-2]) if bt.dim() >= 2 else bt
    return clip_records(X, bt, norm=norm).to(X.dtype)


def clip_rows_l1(X: torch.Tensor, R: Any) -> torch.Tensor:
    """Scale each row so that ``||x||_1 <= R`` (rows already inside are unchanged); see :func:`_clip_rows`."""
    return _clip_rows(X, R, "l1")


def clip_rows_l2(X: torch.Tensor, B: Any) -> torch.Tensor:
    """Scale each row so that ``||x||_2 <= B`` (rows already inside are unchanged); see :func:`_clip_rows`."""
    return _clip_rows(X, B, "l2")


def project_l1_ball(v: torch.Tensor, radius: Any) -> torch.Tensor:
    """Radially scale vectors (last dim) into the L1 ball of ``radius`` (a clipping, not the Euclidean
    projection: enough to enforce a norm bound)."""
    radius = torch.as_tensor(radius, dtype=v.dtype, device=v.device)
    n1 = v.abs().sum(-1, keepdim=True)
    return v * torch.where(n1 > radius, radius / n1.clamp(min=torch.finfo(v.dtype).tiny), torch.ones_like(n1))


def num_params_gmm(G: int, d: int) -> int:
    """Free parameters of a full-covariance G-component GMM in d dimensions."""
    return (G - 1) + G * (d + d * (d + 1) // 2)


def num_params_msnm(G: int, d: int) -> int:
    """Free parameters of a G-component skew-normal mixture (xi, Lambda, eta per component)."""
    return (G - 1) + G * (2 * d + d * (d + 1) // 2)


def information_criteria(loglik: torch.Tensor, num_params: int, n: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``AIC = -2 l + 2 p`` and ``BIC = -2 l + p log n`` (``loglik`` total over the points)."""
    n = torch.as_tensor(n, dtype=loglik.dtype, device=loglik.device)
    aic = -2.0 * loglik + 2.0 * num_params
    bic = -2.0 * loglik + num_params * torch.log(n)
    return aic, bic
