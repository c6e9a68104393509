"""``release``: one call from a batch of labeled datasets to a batch of differentially private GMMs.

``release(X, y, num_classes, epsilon, delta, *, mechanism=..., mode=..., **options)`` is a short
dispatcher: it looks the pair ``(mode, mechanism)`` up in :data:`REGISTRY`, refuses every option the
chosen mechanism does not declare (one-line ``ValueError``) and calls it. Each mechanism object declares
what it needs: its options (with defaults), whether it solves a design, and the blocks it noises.

``mode="as-published"`` (Liu, Scaglione & Peisert 2025; label-level claim, NOT a DP guarantee for real
data; the weaknesses are written into the record's notes): the empirical labeled GMM of eq. (2)
(:func:`torchdpgmm.mixture.fit_labeled`) is perturbed by

* ``"kl"`` (:class:`KLMechanism`) -- the design of Algorithm 1 (:func:`torchdpgmm.design.design_mechanism`,
  variants ``"as-published"``, ``"global"``, ``"exact-kl"``), then colored Gaussian noise
  ``N(0, Gamma_k^{-1})`` on the means (eq. 5), Wishart noise ``W_d(I/gamma_k, d+1)`` on the covariances
  (eq. 6) and the random mapping of the weights with budget ``eps_0`` (eqs. 15, 25-27);
* ``"laplace"``, ``"gaussian"``, ``"colored"``, ``"r1smg"`` (:class:`BaselineMechanism`) -- the baselines
  of Sec. V-A (:mod:`torchdpgmm.release.baselines`), charged under the same accountant.

Its :class:`~torchdpgmm.release.result.Release` also carries the non-private ``fitted`` model and the realised
``kl`` per trial, which the paper's Monte Carlo studies need.

``mode="sound"`` (:class:`SoundMechanism`, :mod:`torchdpgmm.release.sound`): record-level (epsilon, delta)-DP with
public classes (``num_classes``), a public clipping bound (``clip_bound``, required), add/remove adjacency
by default; its Release holds only private values (``fitted`` and ``kl`` are None; evaluate with
:func:`torchdpgmm.release.evaluation.evaluate`, which is not private).

Every check on the inputs runs before any noise is drawn.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import (REFUSE_DELTA, REFUSE_EPSILON, WARN_DELTA, WARN_EPSILON, WeakPrivacyWarning,
                                    check_delta, check_epsilon, check_finite, check_labels, check_privacy_strength)
from torchdpgmm.release.result import Release

__all__ = ["release", "Release", "WeakPrivacyWarning", "check_privacy_strength", "REGISTRY", "Mechanism", "KLMechanism", "BaselineMechanism", "SoundMechanism",
           "MECHANISMS", "VARIANTS", "SOLVERS", "MODES", "AS_PUBLISHED_NOTES", "AS_PUBLISHED_CAVEATS"]

MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
VARIANTS = ("as-published", "global", "exact-kl")
SOLVERS = ("dual", "cvxpylayers")
MODES = ("as-published", "sound")

ADJACENCY = "label-flip"

_LABEL_NOTE = (
    "label-level DP only: neighbouring datasets differ in one label; the features themselves are not "
    "protected (docs/privacy.md, section 1)."
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
# the weaknesses of the published analysis, written into the notes of every as-published record
AS_PUBLISHED_CAVEATS = (
    "as-published mode reproduces Liu, Scaglione & Peisert (2025) and is NOT a verified DP guarantee:",
    "the Wishart mechanism of Jiang et al. (2016) charged by eq. (9) was shown not to be DP (Sheffet 2019; Amin et al. 2019)",
    "noise is calibrated to the dataset at hand (local sensitivity), which is not DP in general",
    "a label flip changes two classes, so max_k composition under-counts",
    "the random mapping's support depends on the data; lambda/|S| smoothing does not bound the likelihood ratio by e^eps0",
)

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
    "Wu et al.'s sensitivities assume N_k >= n/(2K) for every class (see extras['wu_assumption_holds'] "
    "per trial) and ||x||_1 <= R; under a label flip the class-mean change is at most 2R/N_k, within "
    "4KR/n exactly when N_k >= n/(2K)."
)


_RULE_TEXT = {
    "paper": "by the paper's rule sigma = S sqrt(2 ln(2/delta_part)) / eps_part (condition (10))",
    "classical": "by the classical rule sigma = S sqrt(2 ln(1.25/delta_part)) / eps_part (Dwork & Roth, eps_part <= 1)",
    "analytic": "by the analytic Gaussian calibration (Balle & Wang 2018)",
}


def _accountant_text(mechanism: str, calibration: str = "paper") -> str:
    if mechanism == "kl":
        return (
            "Liu, Scaglione & Peisert (2025) Theorem 1: eps >= max_k(eps_k + 3 gamma_k / (2 N_k)) + eps_0; Gaussian means by "
            "condition (10) (eps_k^2 / (2 ln(2/delta)) >= Delta^T Gamma_k Delta); Wishart charged "
            "3 gamma_k/(2 N_k); weights eps_0 by (11)"
        )
    if mechanism == "laplace":
        return (
            "Liu, Scaglione & Peisert (2025) Theorem 1 composition: eps = max_k(eps_means + eps_covariances) + eps_weights; "
            "Laplace scale = L1 sensitivity / eps_part (Wu et al. 2016 sensitivities); pure (eps, 0) parts"
        )
    return (
        "Liu, Scaglione & Peisert (2025) Theorem 1 composition: eps = max_k(eps_means + eps_covariances) + eps_weights, "
        f"delta split equally over the Gaussian parts; Gaussian std {_RULE_TEXT[calibration]}, "
        "L2 sensitivity <= Wu et al.'s L1"
        + ("; means by R1SMG (Ji & Li 2024), whatever the calibration" if mechanism == "r1smg" else "")
        + ("; means by the min-MSE colored Gaussian (Ravi et al.), SDP (23) with A = I, by the paper's condition (10) "
           "whatever the calibration" if mechanism == "colored" else "")
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
                batch = broadcast_shapes(v.shape, batch)
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
    return torch.broadcast_to(t, broadcast_shapes(t.shape, batch))


def _check_design(design, fitted, eps_t, delta_t, variant, lam, data=None):
    """A caller-supplied design (e.g. ``r.design.at(eps, variant=...)``) must belong to these data: the very records
    (``data = (X, y, mask)`` against the records it kept, :func:`torchdpgmm.design.algorithm.same_records`; equal
    counts and means are not enough, condition (10) is met for the records' own label-flip vectors), the variant,
    lam and (epsilon, delta)."""
    from torchdpgmm.design.algorithm import same_records

    kept = getattr(design, "_ctx", {}).get("data")
    if data is not None and kept is not None and not same_records(kept, data):
        raise ValueError("design was computed on other data (its records differ from these)")
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


# ----------------------------------------------------------------------------------------------------
# mechanism objects: each declares its options, whether it needs a design, and what it noises
# ----------------------------------------------------------------------------------------------------

_HINTS = {
    "clip_bound": "clip_bound is a sound-mode parameter (record-level DP): pass mode='sound'",
    "adjacency": "the as-published mode's adjacency is fixed (label flip); pass mode='sound' to choose one",
    "covariance_type": "covariance_type is a sound-mode parameter: pass mode='sound'",
    "variant": "variant selects the as-published design of Algorithm 1 (mode='as-published', mechanism='kl')",
    "solver": "solver selects the SDP solver of the as-published 'kl' and 'colored' mechanisms",
    "design": "design= is only meaningful for mode='as-published', mechanism='kl'",
    "data_bound": "data_bound is the L1 bound of the as-published baselines; sound mode uses clip_bound (L2)",
}


class Mechanism:
    """A release mechanism: ``mode``, ``name``, declared ``options`` (name -> default), ``needs_design``
    (solves a data-dependent design first) and ``noised_blocks`` (what the noise perturbs)."""

    mode: ClassVar[str] = ""
    names: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[dict[str, Any]] = {}
    needs_design: ClassVar[bool] = False
    noised_blocks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str) -> None:
        self.name = name

    def accepted(self) -> dict[str, Any]:
        return dict(self.options)

    def bind(self, options: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in; an option this mechanism does not declare is refused (one-line ValueError)."""
        accepted = self.accepted()
        for key in options:
            if key not in accepted:
                hint = _HINTS.get(key, f"it accepts {sorted(accepted)}")
                raise ValueError(f"{key}= is not supported by mode={self.mode!r}, mechanism={self.name!r}: {hint}")
        return accepted | options

    def __call__(self, X, y, num_classes, epsilon, delta, *, generator, mask, **options) -> Release:
        raise NotImplementedError


def _as_published_inputs(X, y, num_classes, epsilon, delta, mask):
    """Checks (data-dependent: the as-published mode is not DP) and the one eq. (2) fit per dataset."""
    from torchdpgmm.mixture import fit_labeled

    counts, batch = _validate(X, y, num_classes, epsilon, delta, mask)
    fitted0 = fit_labeled(X, y, num_classes, mask=mask, min_count=X.shape[-1] + 1)
    eps_t = _expand_batch(epsilon, batch, X.dtype, X.device)
    delta_t = _expand_batch(delta, batch, X.dtype, X.device)
    return counts, batch, fitted0, _expand_gmm(fitted0, batch), eps_t, delta_t


def _as_published_release(mech, model, fitted, eps_t, delta_t, split, notes, design, extras) -> Release:
    from torchdpgmm.privacy import PrivacyRecord
    from torchdpgmm.kl import kl_divergence

    privacy = PrivacyRecord(
        epsilon=eps_t, delta=delta_t, adjacency=ADJACENCY,
        accountant=_accountant_text(mech.name, split.get("calibration", "paper")),
        mode="as-published", mechanism=mech.name if mech.name != "kl" else f"kl ({split['variant']})",
        split=split, notes=notes,
    )
    extras["mechanism"] = mech.name
    return Release(model=model, privacy=privacy, design=design, extras=extras, fitted=fitted,
                   kl=kl_divergence(model, fitted))


class KLMechanism(Mechanism):
    """Algorithm 1 of Liu, Scaglione & Peisert (2025): design, then eqs. (5), (6), (15)."""

    mode = "as-published"
    names = ("kl",)
    options = {"variant": "as-published", "solver": "dual", "design": None, "design_generator": None,
               "lam": 1e-3, "max_iter": 50, "tol": 1e-3, "kl_draws": 128, "sdp_tol": 1e-6}
    needs_design = True
    noised_blocks = ("means (Gaussian, eq. 5)", "covariances (Wishart, eq. 6)", "weights (random mapping, eq. 15)")

    def _check(self, o: dict[str, Any]) -> None:
        if o["variant"] not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {o['variant']!r}")
        if o["solver"] not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {o['solver']!r}")
        if not (isinstance(o["lam"], (int, float)) and 0.0 < float(o["lam"]) < 1.0):
            raise ValueError(f"lam must lie in (0, 1), got {o['lam']!r}")

    def __call__(self, X, y, num_classes, epsilon, delta, *, generator, mask, **options) -> Release:
        from torchdpgmm.mechanisms import gaussian as gaussian_noise
        from torchdpgmm.mechanisms import random_mapping, wishart
        from torchdpgmm.mixture import LabeledGMM

        o = self.bind(options)
        self._check(o)
        _, batch, _, fitted, eps_t, delta_t = _as_published_inputs(X, y, num_classes, epsilon, delta, mask)
        variant, lam = o["variant"], o["lam"]
        if o["design"] is None:
            from torchdpgmm.design import design_mechanism

            # the design is a deterministic function of the data and the parameters (its own generator),
            # so `generator` drives the release noise only and design= reproduces the same release
            design = design_mechanism(
                X, y, num_classes, eps_t, delta_t, variant=variant, solver=o["solver"], mask=mask, lam=lam,
                generator=o["design_generator"], max_iter=o["max_iter"], tol=o["tol"], kl_draws=o["kl_draws"],
                sdp_tol=o["sdp_tol"])
        else:
            design = _check_design(o["design"], fitted, eps_t, delta_t, variant, lam, data=(X, y, mask))
        dtype, d = X.dtype, X.shape[-1]
        means = gaussian_noise(fitted.means, design.mean_noise_cov, generator=generator)
        covs = fitted.covariances + wishart(design.gamma, d, generator=generator)
        released_counts = random_mapping(fitted.counts, design.eps0, lam=lam, generator=generator)
        weights = released_counts.to(dtype) / released_counts.sum(-1, keepdim=True).to(dtype)
        model = LabeledGMM(weights, means, covs, counts=released_counts, validate_args=False)
        wishart_cost = 1.5 * design.gamma / fitted.counts.to(dtype)
        split = {
            "eps0 (weights, random mapping)": design.eps0,
            "eps_k (means, Gaussian)": design.eps_k,
            "3 gamma_k / (2 N_k) (covariances, Wishart)": wishart_cost,
            "total = max_k(eps_k + 3 gamma_k/(2 N_k)) + eps0": (design.eps_k + wishart_cost).amax(-1) + design.eps0,
            "variant": variant, "solver": o["solver"], "lambda": lam,
        }
        notes = [AS_PUBLISHED_CAVEATS[0], _LABEL_NOTE] + list(AS_PUBLISHED_CAVEATS[1:]) + [
            _PAPER_RULE_NOTE, _SURROGATE_NOTE if variant != "exact-kl" else _EXACT_NOTE]
        extras = {"released_counts": released_counts}
        return _as_published_release(self, model, fitted, eps_t, delta_t, split, notes, design, extras)


class BaselineMechanism(Mechanism):
    """The baselines of Sec. V-A of Liu, Scaglione & Peisert (2025) (:mod:`torchdpgmm.release.baselines`)."""

    mode = "as-published"
    names = ("laplace", "gaussian", "colored", "r1smg")
    options = {"data_bound": None, "split": None, "cov_floor": 1e-6, "calibration": "paper"}
    noised_blocks = ("weights", "means", "covariances")

    def accepted(self) -> dict[str, Any]:
        more = {"solver": "dual", "solver_kw": None} if self.name == "colored" else {}
        return dict(self.options) | more

    def _check(self, X, delta, o: dict[str, Any]) -> None:
        if o["data_bound"] is not None:
            check_epsilon(o["data_bound"], "data_bound")
        cf = o["cov_floor"]
        if not (isinstance(cf, (int, float)) and cf > 0 and math.isfinite(cf)):
            raise ValueError(f"cov_floor must be a finite float > 0, got {cf!r}")
        from torchdpgmm.privacy.calibration import GAUSSIAN_RULES

        if o["calibration"] not in GAUSSIAN_RULES:
            raise ValueError(f"calibration must be one of {GAUSSIAN_RULES}, got {o['calibration']!r}")
        if self.name == "colored" and o["solver"] not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {o['solver']!r}")
        if self.name == "r1smg":
            if X.shape[-1] <= 2:
                raise ValueError(f"mechanism='r1smg' needs dimension d > 2 (Ji & Li 2024), got d={X.shape[-1]}")
            if torch.is_tensor(delta) and delta.numel() != 1:
                raise ValueError("mechanism='r1smg' needs a scalar delta")

    def __call__(self, X, y, num_classes, epsilon, delta, *, generator, mask, **options) -> Release:
        from torchdpgmm.release.baselines import BudgetSplit, baseline_release, check_classical_domain

        o = self.bind(options)
        split = o["split"]
        if split is not None and not isinstance(split, BudgetSplit):
            split = BudgetSplit(*split)
        counts, batch, fitted0, fitted, eps_t, delta_t = _as_published_inputs(X, y, num_classes, epsilon, delta, mask)
        self._check(X, delta, o)
        check_classical_domain(epsilon, split, self.name, o["calibration"])  # the public epsilon, on the host
        dtype, data_batch = X.dtype, X.shape[:-2]
        n_t = (mask.sum(-1) if mask is not None else torch.full(data_batch, X.shape[-2], device=X.device)).to(dtype)
        notes = [AS_PUBLISHED_CAVEATS[0], _LABEL_NOTE]
        Xb, fit_b, R, extras = _baseline_bound(X, y, num_classes, mask, o["data_bound"], fitted0, notes)
        notes += [_WU_NOTE, _TWO_CLASS_NOTE]
        solver_kw = dict(o.get("solver_kw") or {})
        solver_kw.setdefault("solver", o.get("solver", "dual"))
        model, info = baseline_release(
            Xb, y, num_classes, eps_t, delta_t, self.name, _expand_gmm(fit_b, batch), data_bound=R, n=n_t,
            generator=generator, mask=mask, split=split, cov_floor=o["cov_floor"], calibration=o["calibration"],
            solver_kw=solver_kw, delta_scalar=delta)
        extras.update(info)
        extras["wu_assumption_holds"] = (counts.to(dtype) >= n_t[..., None] / (2 * num_classes)).all(-1).expand(batch)
        parts = info["epsilon_parts"]
        split_rec = {
            "weights": parts["weights"], "means": parts["means"], "covariances": parts["covariances"],
            "delta_parts": info["delta_parts"], "composition": "max_k(means + covariances) + weights",
            "cov_projection": f"eigenvalue floor {o['cov_floor']}",
            "weight_projection": "Euclidean projection onto the simplex with entries >= 1/n",
        }
        if self.name != "laplace":
            split_rec["calibration"] = o["calibration"]
            if o["calibration"] == "paper":
                notes.append(_PAPER_RULE_NOTE)
        if self.name == "colored":
            extras["mean_noise_cov"] = info["mean_noise_cov"]
            notes += [_LOCAL_NOTE, "colored: the mean noise covariance is fitted to the label-flip difference "
                      "vectors of the actual dataset (local sensitivity), exactly like the proposed mechanism."]
        return _as_published_release(self, model, fitted, eps_t, delta_t, split_rec, notes, None, extras)


def _baseline_bound(X, y, num_classes, mask, data_bound, fitted0, notes):
    """Wu et al.'s L1 data bound R: read from the data (leaks; noted) or given and enforced by clipping."""
    from torchdpgmm.release.baselines import clip_l1, data_bound_l1
    from torchdpgmm.mixture import fit_labeled

    data_batch = X.shape[:-2]
    if data_bound is None:
        notes.append(_R_LEAK_NOTE)
        return X, fitted0, data_bound_l1(X, mask), {"data_bound_source": "data (leaks)"}
    R = torch.as_tensor(data_bound, dtype=X.dtype, device=X.device)
    if R.dim() > len(data_batch):
        raise ValueError("data_bound must broadcast against the data batch shape X.shape[:-2]")
    Xb = clip_l1(X, R.expand(data_batch) if R.dim() else R)
    fit_b = fit_labeled(Xb, y, num_classes, mask=mask, min_count=X.shape[-1] + 1)
    return Xb, fit_b, R, {"data_bound_source": "user (enforced by L1 clipping)", "fitted_clipped": fit_b}


class SoundMechanism(Mechanism):
    """Record-level DP release of :mod:`torchdpgmm.release.sound` (public classes and clipping bound)."""

    mode = "sound"
    names = ("gaussian", "colored", "kl", "laplace")
    options = {"clip_bound": None, "adjacency": "add-remove", "covariance_type": "full", "center": None,
               "split": None, "prior_scale": None, "min_count": 2.0, "eig_floor": None, "noise_multiplier": 1.0,
               "num_draws": None, "noise": "discrete"}
    noised_blocks = ("counts", "sums", "second_moments")

    def __call__(self, X, y, num_classes, epsilon, delta, *, generator, mask, **options) -> Release:
        from torchdpgmm.release.sound import check_center, release_sound

        o = self.bind(options)
        c = o.get("center")
        if torch.is_tensor(c) and c.device.type != "cpu":  # the user's public centre: read back here, once
            check_center(c, X.shape[-1], read_device=True)  # (a host centre is checked by release_sound)
        return release_sound(X, y, num_classes, epsilon, delta, generator=generator, mask=mask,
                             mechanism=self.name, **o)


REGISTRY: dict[tuple[str, str], Mechanism] = {
    **{("as-published", "kl"): KLMechanism("kl")},
    **{("as-published", n): BaselineMechanism(n) for n in BaselineMechanism.names},
    **{("sound", n): SoundMechanism(n) for n in SoundMechanism.names},
}



# The budget rule (refuse epsilon > 1e3 or delta >= 0.5, warn above epsilon 10 or delta 1e-3) has one home,
# torchdpgmm._validation.check_privacy_strength, shared by every front door.


def release(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: Any,
    delta: Any,
    *,
    mechanism: str = "kl",
    mode: str = "sound",
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    allow_weak_privacy: bool = False,
    **options: Any,
) -> Release:
    """Release a batch of labeled GMMs (Liu, Scaglione & Peisert 2025; see the module docstring).

    Args:
        X, y: ``(..., N, d)`` features and ``(..., N)`` integer labels in ``[0, num_classes)``.
        num_classes: the PUBLIC number of classes K (never read from ``y``).
        epsilon, delta: as-published: floats or tensors broadcastable to ``X.shape[:-2]``; sound: a scalar
            ``delta`` (None for the pure-DP sound ``"laplace"``) and a scalar ``epsilon`` or several (a list, tuple
            or 1-D tensor of E values): then the model has a leading epsilon axis ``(E, *batch)``, the noise of all
            E is drawn in one call per block, ``Release.records`` holds one full record per epsilon and
            ``Release.privacy`` states the vector with ``covered=False`` (E releases of the same data, not one
            guarantee); ``Release.at_epsilon(e)`` is the release at ``epsilon[e]``.
        mechanism: ``"kl"`` | ``"laplace"`` | ``"gaussian"`` | ``"colored"`` | ``"r1smg"`` (as-published) or
            ``"kl"`` | ``"gaussian"`` | ``"colored"`` | ``"laplace"`` (sound).
        mode: ``"sound"`` (default: record-level DP, needs ``clip_bound``) or ``"as-published"`` (the
            paper's label-level release, not DP on records; pass it explicitly).
        generator: the only source of randomness. mask: ``(..., N)`` boolean, True on real rows.
        allow_weak_privacy: release even when ``epsilon > 1e3`` or ``delta >= 0.5`` (refused otherwise, see
            :func:`check_privacy_strength`; ``epsilon > 10`` or ``delta > 1e-3`` always warn).
        **options: declared by the mechanism (``REGISTRY[(mode, mechanism)].accepted()``); anything else is
            refused. As-published ``kl``: ``variant``, ``solver``, ``design``, ``design_generator``, ``lam``,
            ``max_iter``, ``tol``, ``kl_draws``, ``sdp_tol``. Baselines: ``data_bound``, ``split``,
            ``cov_floor``, ``calibration`` (+ ``solver``, ``solver_kw`` for ``colored``). Sound:
            ``clip_bound`` (required), ``adjacency`` (default ``"add-remove"``), ``covariance_type``
            (``"full"`` | ``"tied"`` | ``"diag"`` | ``"spherical"``), ``noise`` (``"discrete"``, the default:
            exact samplers of Canonne, Kamath & Steinke 2020; or ``"continuous"`` float64), ``center``,
            ``split``, ``prior_scale``, ``min_count``, ``eig_floor``, ``noise_multiplier``, ``num_draws``.

    Returns:
        :class:`~torchdpgmm.release.result.Release` (``model``, ``privacy``, ``design``, ``extras``; ``fitted`` and
        ``kl`` in as-published mode only).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    check_privacy_strength(epsilon, delta, allow_weak_privacy=allow_weak_privacy)
    impl = REGISTRY.get((mode, mechanism))
    if impl is None:
        if mode == "sound":
            from torchdpgmm.release.sound import _check_mechanism

            _check_mechanism(mechanism)  # raises with the reason
        known = sorted(n for m, n in REGISTRY if m == mode)
        raise ValueError(f"mechanism must be one of {known} in mode={mode!r}, got {mechanism!r}")
    return impl(X, y, num_classes, epsilon, delta, generator=generator, mask=mask, **options)
