"""``release``: one call from a batch of labeled datasets to a batch of differentially private GMMs.

``release(X, y, K, epsilon, delta, mechanism=...)`` fits the empirical labeled GMM of eq. (2) per
trial, perturbs it with the chosen mechanism and returns a :class:`~torchdpgmm.result.Release` with the
released model, the non-private fit, the realised ``KL(released || fitted)`` (Appendix B, exact per
draw) and a :class:`~torchdpgmm.accounting.PrivacyRecord`.

Mechanisms (paper 000):

* ``"kl"`` -- the proposed mechanism: the design of Algorithm 1 (:func:`torchdpgmm.design.design_mechanism`,
  variants ``"as-published"``, ``"global"``, ``"exact-kl"``), then colored Gaussian noise
  ``N(0, Gamma_k^{-1})`` on the means (eq. 5), Wishart noise ``W_d(I/gamma_k, d+1)`` on the covariances
  (eq. 6), and the random mapping of the weights with budget ``eps_0`` (eqs. 15, 25-27).
* ``"laplace"``, ``"gaussian"``, ``"colored"``, ``"r1smg"`` -- the baselines of Sec. V-A
  (:mod:`torchdpgmm.baselines`), charged under the same accountant.

``mode="as-published"`` reproduces the paper, label-level adjacency, with the weaknesses listed in
DESIGN.md Sec. 4 written into the record's notes. ``mode="sound"`` dispatches to
:func:`torchdpgmm.sound.release_sound` (record-level DP with clipping) and refuses if it is missing.

All input checks run before any noise is drawn.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from torchdpgmm._validation import check_delta, check_epsilon, check_finite, check_labels

try:  # the lead owns result.py; re-exported here so `torchdpgmm.Release` resolves
    from torchdpgmm.result import Release
except ImportError:  # pragma: no cover - only before the core lands
    Release = None  # type: ignore[assignment]

__all__ = ["release", "Release", "MECHANISMS", "VARIANTS", "SOLVERS", "MODES", "AS_PUBLISHED_NOTES"]

MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
VARIANTS = ("as-published", "global", "exact-kl")
SOLVERS = ("dual", "cvxpylayers")
MODES = ("as-published", "sound")

ADJACENCY = "label-flip"

_LABEL_NOTE = (
    "label-level DP only: neighbouring datasets differ in one label; the features themselves are not "
    "protected (DESIGN.md Sec. 4)."
)
_LOCAL_NOTE = (
    "Noise is calibrated to the actual dataset (local sensitivity: the noise shapes and the budget split "
    "depend on D); noise calibrated to local sensitivity is not differentially private in general."
)
_TWO_CLASS_NOTE = (
    "A label flip changes two classes at once, so the parallel composition 'max over classes' of "
    "Theorem 1 / eq. (9) under-counts the privacy loss."
)
AS_PUBLISHED_NOTES = (_LABEL_NOTE, _LOCAL_NOTE, _TWO_CLASS_NOTE)
_PAPER_RULE_NOTE = (
    "Gaussian noise is calibrated by the paper's rule sigma = Delta sqrt(2 ln(2/delta)) / eps (condition "
    "(10)), which is not (eps, delta)-DP for large per-part eps (above about 9.4 at delta = 1e-5)."
)
_SURROGATE_NOTE = (
    "The objective (12) replaces -E ln|Sigma + W| + ln|Sigma| by -E ln|W| (a surrogate); its interior "
    "optimum gamma = (d+1) tr(Sigma^-1)/d is spurious: the exact expected KL falls monotonically in gamma."
)
_EXACT_NOTE = (
    "variant exact-kl: the budget split minimises the exact expected KL of the Wishart term instead of "
    "the surrogate of eq. (12); the privacy accounting is unchanged (Theorem 1)."
)
_R_LEAK_NOTE = (
    "The data bound R = max_n ||x_n||_1 of Wu et al.'s sensitivities was read from the data (as "
    "public re-implementations do); R itself is released without protection and leaks information. "
    "Pass data_bound=R (enforced by clipping) to avoid this."
)
_WU_NOTE = (
    "Wu et al.'s sensitivities assume N_k >= n/(2K) for every class (see extra['wu_assumption_holds'] "
    "per trial) and ||x||_1 <= R; under a label flip the class-mean change is at most 2R/N_k, within "
    "4KR/n exactly when N_k >= n/(2K)."
)


def _accountant_text(mechanism: str) -> str:
    if mechanism == "kl":
        return (
            "paper 000 Theorem 1: eps >= max_k(eps_k + 3 gamma_k / (2 N_k)) + eps_0; Gaussian means by "
            "condition (10) (eps_k^2 / (2 ln(2/delta)) >= Delta^T Gamma_k Delta); Wishart charged "
            "3 gamma_k/(2 N_k); weights eps_0 by (11)"
        )
    if mechanism == "laplace":
        return (
            "paper 000 Theorem 1 composition: eps = max_k(eps_means + eps_covariances) + eps_weights; "
            "Laplace scale = L1 sensitivity / eps_part (Wu et al. 2016 sensitivities); pure (eps, 0) parts"
        )
    return (
        "paper 000 Theorem 1 composition: eps = max_k(eps_means + eps_covariances) + eps_weights, "
        "delta split equally over the Gaussian parts; Gaussian std by the paper's rule "
        "sigma = S sqrt(2 ln(2/delta_part)) / eps_part (condition (10)), L2 sensitivity <= Wu et al.'s L1"
        + ("; means by R1SMG (Ji & Li 2024)" if mechanism == "r1smg" else "")
        + ("; means by the min-MSE colored Gaussian (Ravi et al.), SDP (23) with A = I" if mechanism == "colored" else "")
    )


def _validate(X, y, num_classes, epsilon, delta, mask):
    if not torch.is_tensor(X):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if not X.dtype.is_floating_point:
        raise TypeError(f"X must be a floating tensor, got dtype {X.dtype}")
    if X.dim() < 2:
        raise ValueError(f"X must have shape (..., N, d), got {tuple(X.shape)}")
    if not torch.is_tensor(y):
        raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
    if tuple(y.shape) != tuple(X.shape[:-1]):
        raise ValueError(f"y must have shape X.shape[:-1] = {tuple(X.shape[:-1])}, got {tuple(y.shape)}")
    if mask is not None:
        if not torch.is_tensor(mask) or mask.dtype != torch.bool:
            raise TypeError("mask must be a boolean torch.Tensor")
        if tuple(mask.shape) != tuple(y.shape):
            raise ValueError(f"mask must have shape {tuple(y.shape)}, got {tuple(mask.shape)}")
    check_labels(y, num_classes, mask)
    check_finite(X, "X", mask)
    check_epsilon(epsilon)
    check_delta(delta)
    batch = X.shape[:-2]
    for name, v in (("epsilon", epsilon), ("delta", delta)):
        if torch.is_tensor(v):
            try:
                batch = torch.broadcast_shapes(v.shape, batch)
            except RuntimeError:
                raise ValueError(
                    f"{name} of shape {tuple(v.shape)} does not broadcast against the data batch shape "
                    f"{tuple(X.shape[:-2])}"
                ) from None
    d = X.shape[-1]
    yy = y if mask is None else torch.where(mask, y, torch.full_like(y, num_classes))
    counts = torch.nn.functional.one_hot(yy.long(), num_classes + 1)[..., :num_classes].sum(-2)
    low = counts < d + 1
    if bool(low.any()):
        kmin = int(counts.min())
        raise ValueError(
            f"y: every class needs at least d + 1 = {d + 1} points (eq. 2c must be nonsingular for the KL and "
            f"the design); the smallest class in the batch has {kmin}"
        )
    return counts, torch.Size(batch)


def _expand_gmm(g, batch):
    """View of a LabeledGMM broadcast to ``batch`` (no copy)."""
    from torchdpgmm.mixture import LabeledGMM

    K, d = g.num_classes, g.dim
    if tuple(g.batch_shape) == tuple(batch):
        return g
    counts = None if g.counts is None else g.counts.expand(*batch, K)
    return LabeledGMM(
        g.weights.expand(*batch, K), g.means.expand(*batch, K, d), g.covariances.expand(*batch, K, d, d),
        counts=counts, validate_args=False,
    )


def _expand_batch(v: Any, batch, dtype, device) -> torch.Tensor:
    t = torch.as_tensor(v, dtype=dtype, device=device) if not torch.is_tensor(v) else v.to(dtype=dtype, device=device)
    return torch.broadcast_to(t, torch.broadcast_shapes(t.shape, batch))


def _check_design(design, fitted, eps_t, delta_t, variant, lam):
    """A caller-supplied design (e.g. ``r.design.at(eps, variant=...)``) must belong to these data."""
    if design.variant != variant:
        raise ValueError(f"design.variant={design.variant!r} does not match variant={variant!r}")
    if float(design.lam) != float(lam):
        raise ValueError(f"design.lam={design.lam} does not match lam={lam}")
    if tuple(design.eps0.shape) != tuple(eps_t.shape):
        raise ValueError(f"design batch shape {tuple(design.eps0.shape)} does not match {tuple(eps_t.shape)}")
    if not torch.equal(design.counts.to(fitted.counts.dtype).expand_as(fitted.counts), fitted.counts) or not torch.allclose(
        design.means.expand_as(fitted.means), fitted.means, rtol=1e-10, atol=1e-12
    ):
        raise ValueError("design was computed on other data (class counts / means differ)")
    if not torch.allclose(design.epsilon.expand_as(eps_t), eps_t) or not torch.allclose(
        design.delta.to(delta_t.dtype).expand_as(delta_t), delta_t
    ):
        raise ValueError("design was computed for another (epsilon, delta)")
    return design


def release(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: Any,
    delta: Any,
    mechanism: str = "kl",
    variant: str = "as-published",
    solver: str = "dual",
    mode: str = "as-published",
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    **kw: Any,
):
    """Release a batch of labeled GMMs under ``(epsilon, delta)``-DP (paper 000; see module docstring).

    Parameters
    ----------
    X, y : ``(..., N, d)`` features and ``(..., N)`` integer labels in ``[0, num_classes)``.
    epsilon, delta : floats or tensors broadcastable to the batch shape ``X.shape[:-2]``.
    mechanism : ``"kl"`` (Algorithm 1) or a baseline ``"laplace" | "gaussian" | "colored" | "r1smg"``.
    variant, solver : passed to :func:`torchdpgmm.design.design_mechanism` (``mechanism="kl"``).
    mode : ``"as-published"`` or ``"sound"`` (dispatches to :func:`torchdpgmm.sound.release_sound`).
    generator : the only source of randomness.
    mask : ``(..., N)`` boolean, ``True`` on real rows (ragged batches).
    **kw : ``lam`` (smoothing lambda of eq. 15, default 1e-3) and design options for ``"kl"``
        (``design=`` a precomputed :class:`~torchdpgmm.design.MechanismDesign` of the same data, e.g.
        ``previous.design.at(eps, variant=...)`` to skip the SDP; it is checked against the data);
        for baselines ``data_bound`` (R; ``None`` = read from the data, leaks), ``split``
        (:class:`~torchdpgmm.baselines.BudgetSplit`), ``cov_floor`` (default 1e-6), ``calibration``
        (default ``"paper"``), ``solver_kw`` (colored SDP options).

    Returns
    -------
    Release with ``.model``, ``.fitted``, ``.kl`` (shape ``X.shape[:-2]``), ``.privacy``, ``.design``
    (``"kl"`` and ``"colored"``: the design / SDP data) and ``.extra``.
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")

    if mode == "sound":
        try:
            from torchdpgmm.sound import release_sound
        except ImportError as exc:
            raise NotImplementedError(
                "mode='sound' needs torchdpgmm.sound.release_sound, which is not available in this build; "
                "refusing rather than falling back to the as-published (label-level) mechanism"
            ) from exc
        if "clip_bound" not in kw:
            raise ValueError("mode='sound' needs clip_bound=B (the public L2 bound on every row)")
        # the sound module validates its own inputs (before any noise) and owns its mechanisms
        return release_sound(X, y, num_classes, epsilon, delta, generator=generator, mask=mask,
                             mechanism=mechanism, **kw)

    design_in = kw.pop("design", None)
    design_generator = kw.pop("design_generator", None)
    if design_in is not None and mechanism != "kl":
        raise ValueError("design= is only meaningful for mechanism='kl'")
    lam = kw.pop("lam", 1e-3)
    if not (isinstance(lam, (int, float)) and 0.0 < float(lam) < 1.0):
        raise ValueError(f"lam must lie in (0, 1), got {lam!r}")
    data_bound = kw.pop("data_bound", None)
    split = kw.pop("split", None)
    cov_floor = kw.pop("cov_floor", 1e-6)
    calibration = kw.pop("calibration", "paper")
    solver_kw = dict(kw.pop("solver_kw", None) or {})
    solver_kw.setdefault("solver", solver)
    if mechanism != "kl" and kw:
        raise ValueError(f"unknown keyword arguments for mechanism={mechanism!r}: {sorted(kw)}")
    counts, batch = _validate(X, y, num_classes, epsilon, delta, mask)
    if data_bound is not None:
        check_epsilon(data_bound, "data_bound")
    if not (isinstance(cov_floor, (int, float)) and cov_floor > 0 and math.isfinite(cov_floor)):
        raise ValueError(f"cov_floor must be a finite float > 0, got {cov_floor!r}")
    if mechanism == "r1smg":
        if X.shape[-1] <= 2:
            raise ValueError(f"mechanism='r1smg' needs dimension d > 2 (Ji & Li 2024), got d={X.shape[-1]}")
        if torch.is_tensor(delta) and delta.numel() != 1:
            raise ValueError("mechanism='r1smg' needs a scalar delta")
    if split is not None:
        from torchdpgmm.baselines import BudgetSplit

        if not isinstance(split, BudgetSplit):
            split = BudgetSplit(*split)

    from torchdpgmm.accounting import AS_PUBLISHED_CAVEATS, PrivacyRecord
    from torchdpgmm.kl import kl_divergence
    from torchdpgmm.mixture import LabeledGMM, fit_labeled

    dtype, device = X.dtype, X.device
    data_batch = X.shape[:-2]
    # fit once per dataset; parameters with extra leading dims (e.g. an epsilon grid) broadcast over it
    fitted0 = fit_labeled(X, y, num_classes, mask=mask, min_count=X.shape[-1] + 1)
    fitted = _expand_gmm(fitted0, batch)
    eps_t = _expand_batch(epsilon, batch, dtype, device)
    delta_t = _expand_batch(delta, batch, dtype, device)
    extra: dict[str, Any] = {}
    notes = [AS_PUBLISHED_CAVEATS[0], _LABEL_NOTE]

    if mechanism == "kl":
        from torchdpgmm.design import design_mechanism
        from torchdpgmm.mechanisms import gaussian as gaussian_noise
        from torchdpgmm.mechanisms import random_mapping, wishart

        # epsilon / delta broadcast against the data batch inside the design; the SDP is solved once per
        # dataset and class whatever their shape (DESIGN.md Sec. 3, reduction 1)
        if design_in is None:
            # the design is a deterministic function of the data and the parameters: its common-random-
            # number draws (exact-kl) come from its own fixed generator unless design_generator= is given,
            # so `generator` drives the release noise only (and design= reproduces the same release)
            design = design_mechanism(
                X, y, num_classes, eps_t, delta_t, variant=variant, solver=solver, mask=mask, lam=lam,
                generator=design_generator, **kw,
            )
        else:
            design = _check_design(design_in, fitted, eps_t, delta_t, variant, lam)
        d = X.shape[-1]
        means = gaussian_noise(fitted.means, design.mean_noise_cov, generator=generator)
        covs = fitted.covariances + wishart(design.gamma, d, generator=generator)
        released_counts = random_mapping(fitted.counts, design.eps0, lam=lam, generator=generator)
        weights = released_counts.to(dtype) / released_counts.sum(-1, keepdim=True).to(dtype)
        model = LabeledGMM(weights, means, covs, counts=released_counts, validate_args=False)
        extra["released_counts"] = released_counts
        wishart_cost = 1.5 * design.gamma / fitted.counts.to(dtype)
        split_rec = {
            "eps0 (weights, random mapping)": design.eps0,
            "eps_k (means, Gaussian)": design.eps_k,
            "3 gamma_k / (2 N_k) (covariances, Wishart)": wishart_cost,
            "total = max_k(eps_k + 3 gamma_k/(2 N_k)) + eps0": (design.eps_k + wishart_cost).amax(-1) + design.eps0,
            "variant": variant,
            "solver": solver,
            "lambda": lam,
        }
        notes += list(AS_PUBLISHED_CAVEATS[1:]) + [_PAPER_RULE_NOTE, _SURROGATE_NOTE if variant != "exact-kl" else _EXACT_NOTE]
        design_out = design
    else:
        from torchdpgmm.baselines import baseline_release, clip_l1, data_bound_l1

        n_t = (mask.sum(-1) if mask is not None else torch.full(data_batch, X.shape[-2], device=device)).to(dtype)
        if data_bound is None:
            R = data_bound_l1(X, mask)
            Xb, fit_b = X, fitted0
            notes.append(_R_LEAK_NOTE)
            extra["data_bound_source"] = "data (leaks)"
        else:
            R = torch.as_tensor(data_bound, dtype=dtype, device=device)
            if R.dim() > len(data_batch):
                raise ValueError("data_bound must broadcast against the data batch shape X.shape[:-2]")
            Xb = clip_l1(X, R.expand(data_batch) if R.dim() else R)
            fit_b = fit_labeled(Xb, y, num_classes, mask=mask, min_count=X.shape[-1] + 1)
            extra["data_bound_source"] = "user (enforced by L1 clipping)"
            extra["fitted_clipped"] = fit_b
        notes += [_WU_NOTE, _TWO_CLASS_NOTE]
        model, info = baseline_release(
            Xb, y, num_classes, eps_t, delta_t, mechanism, _expand_gmm(fit_b, batch), data_bound=R, n=n_t,
            generator=generator, fitted_data=fit_b,
            mask=mask, split=split, cov_floor=cov_floor, calibration=calibration, solver_kw=solver_kw,
            delta_scalar=delta,
        )
        extra.update(info)
        extra["wu_assumption_holds"] = (counts.to(dtype) >= n_t[..., None] / (2 * num_classes)).all(-1).expand(batch)
        split_rec = {
            "weights": info["epsilon_parts"]["weights"],
            "means": info["epsilon_parts"]["means"],
            "covariances": info["epsilon_parts"]["covariances"],
            "delta_parts": info["delta_parts"],
            "composition": "max_k(means + covariances) + weights",
            "cov_projection": f"eigenvalue floor {cov_floor}",
            "weight_projection": "Euclidean projection onto the simplex with entries >= 1/n",
        }
        if mechanism in ("gaussian", "colored", "r1smg"):
            split_rec["calibration"] = calibration
            if calibration == "paper":
                notes.append(_PAPER_RULE_NOTE)
        design_out = None
        if mechanism == "colored":
            extra["mean_noise_cov"] = info["mean_noise_cov"]
            notes.append(_LOCAL_NOTE)
            notes.append(
                "colored: the mean noise covariance is fitted to the label-flip difference vectors of the "
                "actual dataset (local sensitivity), exactly like the proposed mechanism."
            )
    kl = kl_divergence(model, fitted)
    privacy = PrivacyRecord(
        epsilon=eps_t,
        delta=delta_t,
        adjacency=ADJACENCY,
        accountant=_accountant_text(mechanism),
        mode="as-published",
        mechanism=mechanism if mechanism != "kl" else f"kl ({variant})",
        split=split_rec,
        notes=notes,
    )
    extra["mechanism"] = mechanism
    return Release(model=model, fitted=fitted, kl=kl, privacy=privacy, design=design_out, extra=extra)


# ``torchdpgmm.release`` is both this module and, at the top level, the function ``release``. Importing the
# submodule makes Python bind the *module* to the package attribute, which would shadow the function
# for ``tdg.release(...)``. Making the module callable keeps both spellings working.
import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any):
        return release(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
