"""Input checks shared by every public entry point.

Every check raises ``ValueError`` (or ``TypeError`` for wrong kinds) with a message that names the
argument, *before* any noise is drawn: a release never silently degrades to something non-private.
Checks that need a tensor's value (finiteness, label range, class sizes) synchronise with the host
once; they run at the API boundary, never inside the batched hot paths.
"""
from __future__ import annotations

import contextvars
import functools
import math
import numbers
import warnings
from typing import Any, Callable

import numpy as np
import torch

__all__ = [
    "MAX_SEED",
    "check_seed",
    "check_no_repeats",
    "check_privacy_strength",
    "check_sampler_delta",
    "allow_weak_privacy",
    "budget_scope",
    "checks_budget",
    "WeakPrivacyWarning",
    "WARN_EPSILON",
    "WARN_DELTA",
    "REFUSE_EPSILON",
    "REFUSE_DELTA",
    "check_clip_bound",
    "check_epsilon",
    "check_delta",
    "check_privacy_params",
    "check_finite",
    "check_labels",
    "as_float_tensor",
]


def _scalar_values(x: Any, name: str) -> torch.Tensor:
    if torch.is_tensor(x):
        return x.detach()
    if isinstance(x, (str, bytes)):  # torch.as_tensor would say "new(): invalid data type 'str'"
        raise TypeError(f"{name} must be a real number (or a list or tensor of them), got {type(x).__name__}")
    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except TypeError:
        raise TypeError(f"{name} must be a real number (or a list or tensor of them), got {x!r}") from None
    except (ValueError, RuntimeError, OverflowError) as exc:  # a ragged list, an int beyond float64
        raise ValueError(f"{name} must be a real number (or a list or tensor of them): {exc}") from None


def _python_number(x: Any) -> float | None:
    """``x`` as a float when it is a plain Python number (no tensor is made: checking a public number reads
    nothing back from a device and dispatches no op), else None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    return None


def check_epsilon(epsilon: Any, name: str = "epsilon") -> None:
    """Raise ``ValueError`` unless every entry of ``epsilon`` is finite and > 0."""
    e = _python_number(epsilon)
    if e is not None:
        if not (math.isfinite(e) and e > 0):
            raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")
        return
    t = _scalar_values(epsilon, name)
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()) or not bool((t > 0).all()):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")


#: the smallest delta accepted: below it ``1/delta`` and the calibrations' log-space terms leave float64's normal
#: range (delta 1e-310 gave a NaN noise scale), and no guarantee that small means anything
MIN_DELTA = 1e-300


#: seeds are below 2^63: a study's generators take seed + small offsets, a sweep's rows and block seeds are int64
MAX_SEED = 2 ** 63


def check_seed(seed: Any, name: str = "seed") -> None:
    """Refuse a seed that is not an integer in ``[0, MAX_SEED)`` (numpy integers included; one-line ValueError)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) < MAX_SEED:
        raise ValueError(f"{name} must be an integer >= 0 and < 2^63, got {seed!r}")


def check_no_repeats(name: str, values: Any) -> None:
    """Refuse a list of grid values, mechanisms or settings that names one twice (it would run, count or list the same
    cell twice): one-line ValueError naming the repeats (floats as ``:g``)."""
    vals = list(values)
    dup = sorted({f"{v:g}" if isinstance(v, float) else str(v) for v in vals if vals.count(v) > 1})
    if dup:
        raise ValueError(f"{name} must not repeat a value (names {', '.join(dup)} twice)")


def check_delta(delta: Any, name: str = "delta") -> None:
    """Raise ``ValueError`` unless every entry of ``delta`` lies in ``[MIN_DELTA, 1)`` (``MIN_DELTA`` = 1e-300)."""
    v = _python_number(delta)
    if v is not None:
        if not (math.isfinite(v) and MIN_DELTA <= v < 1):
            raise ValueError(f"{name} must lie in [{MIN_DELTA:g}, 1), got {delta!r}")
        return
    t = _scalar_values(delta, name)
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()) or not bool(((t >= MIN_DELTA) & (t < 1)).all()):
        raise ValueError(f"{name} must lie in [{MIN_DELTA:g}, 1), got {delta!r}")


def check_privacy_params(epsilon: Any, delta: Any | None = None) -> None:
    """:func:`check_epsilon` and, when given, :func:`check_delta` ((epsilon, delta)-DP, Dwork & Roth 2014)."""
    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta)


def check_finite(x: torch.Tensor, name: str, mask: torch.Tensor | None = None) -> None:
    """Raise ``ValueError`` if ``x`` (restricted to ``mask`` rows when given) has NaN or inf."""
    if not torch.is_tensor(x):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    bad = ~torch.isfinite(x)
    if mask is not None:
        m = mask
        while m.dim() < bad.dim():
            m = m.unsqueeze(-1)
        bad = bad & m
    if bool(bad.any()):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")


def check_labels(y: torch.Tensor, num_classes: int, mask: torch.Tensor | None = None) -> None:
    """Raise unless ``y`` is an integer tensor with values in ``[0, num_classes)`` (on unmasked rows)."""
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    if not torch.is_tensor(y):
        raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
    if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise TypeError(f"y must hold integer labels, got dtype {y.dtype}")
    bad = (y < 0) | (y >= num_classes)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        raise ValueError(f"labels must lie in [0, {num_classes}); found values outside that range")


def as_float_tensor(x: Any, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Convert array-likes to a floating tensor (float64 unless ``x`` is already floating)."""
    if not torch.is_tensor(x):
        try:
            x = torch.as_tensor(x)
        except Exception as exc:  # pragma: no cover - message path
            raise TypeError(f"{name} must be a tensor or array-like: {exc}") from None
    if dtype is not None:
        return x.to(dtype)
    if not x.dtype.is_floating_point:
        x = x.to(torch.float64)
    return x


def _is_real_scalar(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.ndim(v) == 0


def check_clip_bound(clip_bound: Any, dim: int | None = None) -> float:
    """Validate a public L2 clipping bound ``B`` and return it as a float.

    ``B`` must be a real scalar with ``B**4`` a normal, finite float64 (about ``1e-77 < B < 1e77``):
    the second-moment block's sensitivity is ``B**2`` and the KL-driven budget split divides by ``B**4``
    (Liu, Scaglione & Peisert 2025 eq. (28) with the sound mode's global sensitivities), so a bound outside
    that range cannot be computed with. Rescale the features instead.
    """
    if not _is_real_scalar(clip_bound):
        raise TypeError(f"clip_bound must be a real number, got {type(clip_bound).__name__}")
    B = float(clip_bound)
    if not (math.isfinite(B) and B > 0):
        raise ValueError(f"clip_bound must be a positive finite number, got {clip_bound!r}")
    scale = B / math.sqrt(dim) if dim else B
    with np.errstate(over="ignore", under="ignore"):
        b4 = float(np.float64(min(scale, B)) ** 4), float(np.float64(B) ** 4)
    if not all(np.isfinite(v) and v >= np.finfo(np.float64).tiny for v in b4):
        raise ValueError(
            f"clip_bound={clip_bound!r} is outside the range the release computes with (B**4 must be a "
            "normal float64, about 1e-77 < B < 1e77); rescale the features (e.g. StandardScaler) and the bound"
        )
    return B


# ---------------------------------------------------------------------------------------------- the budget rule
# One rule at every front door (the estimators, release(), the pipeline and every command of the CLI; issue 38
# item 2). Public thresholds: they depend only on the user's epsilon and delta, never on the data, so checking them
# is DP-safe (docs/privacy.md, "Settings that void a guarantee").
WARN_EPSILON = 10.0  # above: little protection (Dwork & Roth 2014, Sec. 2.3 discuss epsilon of order 1)
WARN_DELTA = 1e-3  # above: larger than 1/N for any table of over 1000 rows
REFUSE_EPSILON = 1e3  # above: exp(epsilon) makes the guarantee vacuous
REFUSE_DELTA = 0.5  # at or above: the mechanism may publish a random half of the records


class WeakPrivacyWarning(UserWarning):
    """A release whose (public) epsilon or delta gives little or no protection."""


#: the caveat every as-published use prints (the estimators warn it, the command line prints it): here, not in the
#: estimators' module, so that the command line says it without importing scikit-learn
AS_PUBLISHED_WARNING = (
    "mode='as-published' reproduces Liu, Scaglione & Peisert (2025): label-level adjacency only, noise "
    "calibrated to the data at hand, a Wishart mechanism that is not DP; it is NOT a valid differential "
    "privacy guarantee. Use mode='sound' (with classes=[...] and clip_bound=B) to release real data."
)


class AsPublishedWarning(UserWarning):
    """Emitted whenever the label-level, as-published mechanism is used."""


# inside a front door's call (budget_scope): the kinds of weak-budget warning ("epsilon", "delta") already given,
# so that the release layer's own check of the same budget does not repeat them; None outside any front door
_WARNED: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("torchdpgmm_weak_budget_warned",
                                                                         default=None)


# inside allow_weak_privacy(): the Python front doors' refusals of the one budget rule only warn
_ALLOW_WEAK: contextvars.ContextVar[bool] = contextvars.ContextVar("torchdpgmm_allow_weak_privacy", default=False)


class allow_weak_privacy:
    """``with allow_weak_privacy(): est.fit(X, y)``: inside the scope the Python front doors (the estimators, and
    :func:`check_privacy_strength` wherever it is called) turn the one budget rule's refusals (``epsilon > 1e3``,
    ``delta >= 0.5``, and a discrete release whose samplers leave ``delta + delta_sampler >= 0.5``,
    :func:`check_sampler_delta`) into :class:`WeakPrivacyWarning`, as ``release(..., allow_weak_privacy=True)`` does
    for the first two (``release()`` itself never checks the samplers' share; the estimators and the command do).
    For measurements beyond a meaningful guarantee (the low-noise limit of a study), never for a release you
    publish: the record still states the delta that holds. The command line has no such scope and ignores an
    enclosing one (:class:`budget_scope` with ``override=False``). A ContextVar: do not ``yield`` or ``await``
    inside the scope (a generator or a task made there keeps it after the ``with`` ends); threads started inside do
    not inherit it (they refuse)."""

    def __enter__(self) -> "allow_weak_privacy":
        self._token = _ALLOW_WEAK.set(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _ALLOW_WEAK.reset(self._token)


def _largest(v: Any) -> float | None:
    """The largest non-NaN entry of a number, a list or a tensor (a batch is as weak as its weakest setting);
    None for None or a value that is not numeric (left to the caller's own validation)."""
    if v is None:
        return None
    x = _python_number(v)
    if x is not None:
        return None if math.isnan(x) else x
    try:
        t = torch.as_tensor(v, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        return None
    t = t[~torch.isnan(t)]
    return float(t.max()) if t.numel() else None


def check_privacy_strength(epsilon: Any, delta: Any, *, allow_weak_privacy: bool = False,
                           stacklevel: int = 2, override: bool = True, warn: bool = True) -> list[str]:
    """The one budget rule: refuse or warn about privacy parameters that void the guarantee (public values only).

    ``epsilon > 1e3`` (:data:`REFUSE_EPSILON`) or ``delta >= 0.5`` (:data:`REFUSE_DELTA`) raise a one-line
    ``ValueError`` unless ``allow_weak_privacy=True`` (then they only warn); ``epsilon > 10`` (:data:`WARN_EPSILON`)
    or ``delta > 1e-3`` (:data:`WARN_DELTA`) issue a :class:`WeakPrivacyWarning`. Tensors and lists are judged by
    their largest entry. Non-numeric values are left to the caller's own validation. Inside a
    :class:`budget_scope` (a front door's call) each kind of warning is given once. Returns the warnings' texts
    (also those already given in the scope), for a front door that prints them itself. Inside
    :class:`allow_weak_privacy` the refusals warn too. ``override=False``: the refusal's message does not offer
    ``allow_weak_privacy=True`` (a front door that has no such argument). ``warn=False``: refuse
    only (a front door whose release checks the same budget again and warns there)."""
    eps, dlt = _largest(epsilon), _largest(delta)
    allow_weak_privacy = allow_weak_privacy or _ALLOW_WEAK.get()
    if (eps is not None and eps > REFUSE_EPSILON or dlt is not None and dlt >= REFUSE_DELTA) and not allow_weak_privacy:
        raise ValueError(f"epsilon <= {REFUSE_EPSILON:g} and delta < {REFUSE_DELTA:g} are required for a "
                         "meaningful guarantee" + (" (pass allow_weak_privacy=True to release anyway)" if override else ""))
    weak = []
    if eps is not None and eps > WARN_EPSILON:
        weak.append(("epsilon", f"epsilon = {eps:g} > {WARN_EPSILON:g} protects little"))
    if dlt is not None and dlt > WARN_DELTA:
        weak.append(("delta", f"delta = {dlt:g} > {WARN_DELTA:g} may let a record be published "
                              "(choose delta well below 1/N)"))
    given = _WARNED.get()
    for kind, msg in weak if warn else ():
        if given is not None and kind in given:
            continue
        if given is not None:
            given.add(kind)
        warnings.warn(msg, WeakPrivacyWarning, stacklevel=stacklevel + 1)
    return [msg for _, msg in weak]


def warn_sampler_delta(epsilon: Any, delta: Any, delta_sampler: Any, *, stacklevel: int = 2) -> None:
    """The one budget rule's companion for exact discrete noise: its samplers are within total variation of exact
    draws, which adds a record's ``delta_sampler`` (:attr:`torchdpgmm.privacy.PrivacyRecord.delta_sampler`,
    ``(1 + e^epsilon) sampler_tv``) to delta (public values only). Negligible at small epsilon (about 1e-19), it passes
    a delta of 1e-5 near epsilon 32 and 1 near epsilon 50, where the guarantee claims nothing: a
    :class:`WeakPrivacyWarning` (once in a :class:`budget_scope`) when it exceeds ``delta``."""
    eps, dlt, extra = _largest(epsilon), _largest(delta), _largest(delta_sampler)
    d = 0.0 if dlt is None else dlt
    if eps is None or extra is None or extra <= d:
        return
    given = _WARNED.get()
    if given is not None:
        if "sampler" in given:
            return
        given.add("sampler")
    void = ", which claims nothing" if d + extra >= 1 else ""
    warnings.warn(f"epsilon = {eps:g} with exact discrete noise: its samplers add delta_sampler = {extra:.3g} to "
                  f"delta = {d:g}, so the release is (epsilon, delta + delta_sampler)-DP{void}; choose a smaller "
                  "epsilon (or, through torchdpgmm.release.release, noise='continuous')", WeakPrivacyWarning,
                  stacklevel=stacklevel + 1)


def check_sampler_delta(epsilon: Any, delta: Any, delta_sampler: Any, *, stacklevel: int = 2) -> None:
    """A front door's check of a finished sound release before it hands the model over (public values only): the
    one budget rule applied to the delta the release actually holds, ``delta + delta_sampler``. At or above
    :data:`REFUSE_DELTA` (between epsilon 40 and 60 on a small table with the default discrete noise) it protects
    nothing, and a one-line ``ValueError`` is raised so that nothing is returned or written (a warning inside
    :class:`allow_weak_privacy`); below, :func:`warn_sampler_delta`."""
    eps, extra = _largest(epsilon), _largest(delta_sampler)
    d = _largest(delta) or 0.0
    if eps is not None and extra is not None and d + extra >= REFUSE_DELTA and not _ALLOW_WEAK.get():
        raise ValueError(f"epsilon = {eps:g} is too large for the exact discrete noise: its samplers add "
                         f"delta_sampler = {extra:.3g} to delta = {d:g}, and a delta of {REFUSE_DELTA:g} or more "
                         "protects nothing; nothing was released: choose a smaller epsilon")
    warn_sampler_delta(epsilon, delta, delta_sampler, stacklevel=stacklevel + 1)


class budget_scope:
    """``with budget_scope(): ...``: one front door's call (an estimator's ``fit``, a command of the CLI). The
    front door checks the budget first (:func:`check_privacy_strength`: refusals before any data are read); a
    weak-budget warning is then given once in the scope, not again by the release layer's check of the same
    budget. Refusals are never suppressed here; ``override=False`` (the command line) also ignores an enclosing
    :class:`allow_weak_privacy` (a Python caller running ``cli.main`` inside one gets the command's refusals)."""

    def __init__(self, *, override: bool = True) -> None:
        self._override = override

    def __enter__(self) -> "budget_scope":
        self._token = _WARNED.set(set())
        self._allow = None if self._override else _ALLOW_WEAK.set(False)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._allow is not None:
            _ALLOW_WEAK.reset(self._allow)
        _WARNED.reset(self._token)


def checks_budget(fit: Callable) -> Callable:
    """Decorator of an estimator's ``fit``: :func:`check_privacy_strength` of ``self.epsilon`` and ``self.delta``
    before anything else (a meaningless budget refused before the data are read, a weak one warned once, pointing
    at the caller's line), then ``fit`` inside a :class:`budget_scope`."""

    @functools.wraps(fit)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with budget_scope():
            check_privacy_strength(getattr(self, "epsilon", None), getattr(self, "delta", None), stacklevel=2,
                                   override=False)
            return fit(self, *args, **kwargs)

    return wrapper


# the smallest --memory-budget: below it not even one chunk of a small sweep (plus torch's own working memory)
# fits, so a smaller budget would be ignored in effect
MIN_MEMORY_BUDGET = 16 * 2 ** 20


def byte_count(text: str) -> float:
    """``"2e9"``, ``"512MiB"``, ``"4GB"`` -> bytes, at least :data:`MIN_MEMORY_BUDGET` (every ``--memory-budget``: the
    sweep and the studies fig1-fig5); a bad value is an ``argparse.ArgumentTypeError``, one usage line."""
    import argparse

    units = {"kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "kb": 1e3, "mb": 1e6, "gb": 1e9, "b": 1}
    t = str(text).strip().lower()
    unit = next((u for u in units if t.endswith(u)), None)
    try:
        value = float(t[: -len(unit)]) * units[unit] if unit else float(t)
    except ValueError:  # not a number: refused below with the same line (NaN fails every comparison)
        value = math.nan
    if not (value >= MIN_MEMORY_BUDGET and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a byte count of at least {MIN_MEMORY_BUDGET // 2 ** 20}MiB "
                                         f"(e.g. 512MiB or 2e9), got {text!r}")
    return value


byte_count.__name__ = "byte count"  # argparse names the type so
