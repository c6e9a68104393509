"""Public per-feature bounds: the affine map of a table into the unit box and back.

A record-level DP release needs a public bound on every record. For a table the natural public facts
are per-column ranges that a user knows without looking at the data (heights of adults lie in
[100, 230] cm, a probability in [0, 1]); diffprivlib calls them ``bounds=(lower, upper)``,
smartnoise-synth's min-max transformer and OpenDP's cuts use the same idea. :class:`Bounds` holds them
and maps a table affinely into the unit box ``[0, 1]^d``:

    u = (x - lower) / (upper - lower),   clipped to [0, 1] (a record outside the bounds is moved to the
                                          nearest point of the box, never dropped and never refused)

The release runs in the unit box. By default (``center="noisy-mean"``, :data:`DEFAULT_CENTER`) it has two stages
(:mod:`torchdpgmm.release.centring`): a private centre first (the noisy mean of the records, with
``CENTRE_FRACTION`` of the budget, shrunk toward the box's middle by how noisy it is), then the mixture with the
records clipped to the ball of radius ``CENTRED_CLIP_RADIUS = 1/2`` about that centre
(:attr:`Bounds.centred_clip_bound`, the radius of the ball inscribed in the box, whatever d). With
``center="box"`` it runs in one stage about the box's middle ``c = (1/2, ..., 1/2)`` with the clip bound
``B = CLIP_FRACTION * sqrt(d)/2`` (:attr:`Bounds.release_clip_bound`): a public fraction of the half-diagonal
``sqrt(d)/2`` (:attr:`Bounds.unit_clip_bound`, the ball that just holds the box). Every noised block scales with
``B`` (sums) or ``B^2`` (second moments), while records sit well inside the box's corners, so a smaller ball trades
a radial pull of the records beyond it onto its sphere (a bias toward its centre) for less noise; on a skewed
table (most records in one corner) a ball about the box's middle pulls most records far, one about the data's
private centre much less. Both constants were chosen on validation splits (``scripts/clip_rule_validation.py``
-> ``docs/results/clip-rule.json``; its ``--centre`` -> ``docs/results/centre-rule.json``); pass
``clip_bound=bounds.unit_clip_bound`` with ``center="box"`` to clip nothing inside the bounds (an unbiased model
of in-bounds data, at the larger noise).
A Gaussian released there maps back exactly: ``mu_x = lower + s * mu_u`` and
``Sigma_x = diag(s) Sigma_u diag(s)`` with ``s = upper - lower``. Synthetic rows of ``DPGaussianMixture.sample``
are drawn from the released model restricted to the bounds (:func:`truncated_sample`: rejection, never clipped onto a
bound); :meth:`Bounds.clip_rows` then rounds the discrete columns.

Discrete columns (issue 26 item 4) are public schema too: :meth:`Bounds.with_discrete` records the
integer-valued columns (counts, ordinal scores; integer bounds) and the one-hot groups (0/1 columns of one
categorical feature, e.g. from ``pandas.get_dummies``). The release still models them as continuous (a
Gaussian); :meth:`Bounds.clip_rows`, post-processing of synthetic rows, rounds an integer column to the
nearest integer inside its bounds and sets each one-hot group to exactly one 1, at its largest value
(the group's argmax), so synthetic rows carry values the column can hold.

Bounds are public: they are given by the user, never read from the data, and every check here is a
check of those public values (a bad bound raises one line before any data is read). Non-finite cells
stay non-finite through :meth:`Bounds.to_unit` so that the sound release drops their rows.
"""
from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

__all__ = ["Bounds", "CLIP_FRACTION", "CENTRED_CLIP_RADIUS", "CENTERS", "DEFAULT_CENTER", "check_center",
           "parse_bounds_text", "parse_discrete_text", "pipeline_rows_in_box", "table_pipeline_clips",
           "truncated_sample", "PRIVATE_RADIUS", "release_in_unit_box"]

#: The default clip bound of a release in the unit box as a fraction of its half-diagonal ``sqrt(d)/2``
#: (module docstring): chosen by the mean validation accuracy of the default release's Bayes classifier over 14
#: tables x 4 epsilons (``docs/results/clip-rule.json``; kept unless another fraction beats it by more than two
#: standard errors of the paired difference, ``scripts/clip_rule_validation.py``); public, never read off data.
CLIP_FRACTION = 0.5
#: The default clip bound about a PRIVATE centre (``center="noisy-mean"``, :mod:`torchdpgmm.release.centring`), in
#: unit-box units whatever d: the radius of the ball inscribed in the unit box. Chosen with the centre's budget
#: share on validation splits only (``docs/results/centre-rule.json``, ``scripts/clip_rule_validation.py --centre``):
#: against fractions of ``sqrt(d)/2`` and other lengths, the highest mean Bayes accuracy over 14 tables x 4 epsilons.
CENTRED_CLIP_RADIUS = 0.5
#: Where a release in the unit box is centred: ``"noisy-mean"`` (the default: a private centre released first with
#: a small share of the budget, :mod:`torchdpgmm.release.centring`) or ``"box"`` (the box's middle, one stage).
CENTERS = ("noisy-mean", "box")
DEFAULT_CENTER = "noisy-mean"


def check_center(center: Any) -> str:
    """``center`` as one of :data:`CENTERS` (None: :data:`DEFAULT_CENTER`); a one-line ``ValueError`` otherwise."""
    if center is None:
        return DEFAULT_CENTER
    if not isinstance(center, str) or center not in CENTERS:
        raise ValueError(f"center must be one of {CENTERS} (with bounds), got {center!r}")
    return center


def table_pipeline_clips(dim: int) -> tuple[float, float, float]:
    """``(mean_clip, pca_clip, radius)`` of the accounted pipeline on a table in the centred unit box (the
    defaults of ``DPSyntheticClassifier(bounds=...)`` and ``synthesize --bounds``): the noisy mean's clip
    ``sqrt(d)/2`` (the ball that holds the box), the DP PCA's clip and the class stage's radius
    ``CLIP_FRACTION * sqrt(d)/2``; the fraction validated for the pipeline on validation splits
    (``docs/results/clip-rule-pipeline.json``, ``scripts/clip_rule_validation.py --pipeline``). Public: d only."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
        raise ValueError(f"table_pipeline_clips needs the number of columns, an int >= 1, got {dim!r}")
    half = math.sqrt(int(dim)) / 2.0
    return half, CLIP_FRACTION * half, CLIP_FRACTION * half


def _real(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{what} must be a real number, got {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{what} must be finite, got {v!r}")
    return f


#: the least and largest width of a column's bounds (the released covariances scale with its square)
WIDTH_RANGE = (1e-100, 1e100)


class Bounds:
    """Public box ``[lower_j, upper_j]`` per feature, with the affine map into the unit box.

    Parameters
    ----------
    lower, upper : sequences of d finite reals with ``lower_j < upper_j``, each width within :data:`WIDTH_RANGE`
        and more than ``1e-12`` of the bounds' magnitude.
    names : optional sequence of d column names (kept for tables written back in the user's units).
    """

    def __init__(self, lower: Sequence[float], upper: Sequence[float], names: Sequence[str] | None = None) -> None:
        lo = [_real(v, f"lower bound of feature {j}") for j, v in enumerate(lower)]
        hi = [_real(v, f"upper bound of feature {j}") for j, v in enumerate(upper)]
        if len(lo) != len(hi) or not lo:
            raise ValueError(f"bounds need one (lower, upper) pair per feature, got {len(lo)} lower and {len(hi)} upper")
        label = (lambda j: repr(str(names[j]))) if names is not None else (lambda j: str(j))
        if names is not None and len(names) != len(lo):
            raise ValueError(f"bounds name {len(names)} columns for {len(lo)} features")
        for j, (a, b) in enumerate(zip(lo, hi)):
            if not a < b:
                raise ValueError(f"bounds of feature {label(j)} must satisfy lower < upper, got ({a:g}, {b:g})")
            if not math.isfinite(b - a):
                raise ValueError(f"bounds of feature {label(j)} span more than the largest float, got ({a:g}, {b:g})")
            if not WIDTH_RANGE[0] <= b - a <= WIDTH_RANGE[1] or b - a < 1e-12 * max(abs(a), abs(b)):
                # the model comes back to the user's units through the width squared (covariances): it must be a
                # normal float, and the unit box must resolve the range in float64
                raise ValueError(f"bounds of feature {label(j)} must span between {WIDTH_RANGE[0]:g} and "
                                 f"{WIDTH_RANGE[1]:g}, and more than 1e-12 of their magnitude (rescale the column), "
                                 f"got ({float(a)!r}, {float(b)!r})")  # repr: (1, 1 + 1e-15) is not (1, 1)
        self.lower = np.asarray(lo, dtype=np.float64)
        self.upper = np.asarray(hi, dtype=np.float64)
        self.names = tuple(str(n) for n in names) if names is not None else None
        self.integer: tuple[int, ...] = ()  # integer-valued columns (set by with_discrete)
        self.onehot: tuple[tuple[int, ...], ...] = ()  # one-hot groups of column indices

    # ------------------------------------------------------------------ construction
    @classmethod
    def parse(cls, bounds: Any, n_features: int | None = None, names: Sequence[str] | None = None) -> "Bounds":
        """Bounds from what a user passes (public values only).

        ``bounds`` may be a :class:`Bounds`; one pair ``(lower, upper)`` for every feature (needs
        ``n_features``); a sequence of d pairs; a dict ``{column: (lower, upper)}`` (needs ``names``, the
        table's columns, and must name each of them); or an ``(lower_array, upper_array)`` pair of arrays
        (diffprivlib's convention). With two features a 2 x 2 nesting reads both ways; it is taken the one way that
        gives lower < upper for both columns (``[(140, 210), (30, 150)]``: two pairs) and refused in one line when
        both ways do (``([0, 10], [5, 20])``): pass a dict or a :class:`Bounds` then.
        """
        if isinstance(bounds, Bounds):
            out = bounds
        elif isinstance(bounds, dict):
            if names is None:
                raise ValueError("bounds given as {column: (lower, upper)} need a table with column names")
            missing = [str(n) for n in names if n not in bounds]
            extra = [str(k) for k in bounds if k not in set(names)]
            if missing:
                raise ValueError(f"bounds name no range for column(s) {', '.join(missing)}")
            if extra:
                raise ValueError(f"bounds name column(s) {', '.join(extra)} that the table does not have")
            pairs = [cls._pair(bounds[n], f"bounds of column {n!r}") for n in names]
            out = cls([p[0] for p in pairs], [p[1] for p in pairs], names)
        else:
            if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__"):
                raise ValueError(f"bounds must be (lower, upper), a list of pairs or a dict, got {bounds!r}")
            arr = np.asarray(bounds, dtype=object)
            if arr.ndim == 1 and len(arr) == 2 and all(np.ndim(v) == 0 for v in arr):
                if n_features is None:
                    raise ValueError("one (lower, upper) pair for all features needs the number of features")
                a, b = cls._pair(bounds, "bounds")
                out = cls([a] * n_features, [b] * n_features, names)
            else:
                out = cls._arrays_or_pairs(bounds, n_features, names)
        if n_features is not None and out.dim != n_features:
            raise ValueError(f"bounds cover {out.dim} features but the data have {n_features}")
        if names is not None and out.names is None:
            out = cls(out.lower, out.upper, names)
        return out

    @classmethod
    def _arrays_or_pairs(cls, bounds: Any, n_features: int | None, names: Sequence[str] | None) -> "Bounds":
        """``(lower_array, upper_array)`` (diffprivlib's convention) or a sequence of d ``(lower, upper)`` pairs:
        the reading that gives valid bounds for ``n_features`` columns. Two arrays of two entries read both ways
        (``([0, 10], [5, 20])``: lower (0, 10) and upper (5, 20), or the pairs (0, 10) and (5, 20)); when both
        readings are valid the form is refused in one line instead of guessed."""
        readings: list[tuple[str, Any]] = []
        two = len(bounds) == 2 and all(np.ndim(v) == 1 for v in bounds) and len(bounds[0]) == len(bounds[1])
        if two and (n_features is None or len(bounds[0]) == n_features):
            readings.append(("arrays", lambda: cls(list(bounds[0]), list(bounds[1]), names)))
        if n_features is None or len(bounds) == n_features:
            def pairs() -> "Bounds":
                ps = [cls._pair(p, f"bounds of feature {j}") for j, p in enumerate(bounds)]
                return cls([p[0] for p in ps], [p[1] for p in ps], names)
            readings.append(("pairs", pairs))
        if not readings:  # neither shape fits the number of features: the pairs' error names the problem
            ps = [cls._pair(p, f"bounds of feature {j}") for j, p in enumerate(bounds)]
            return cls([p[0] for p in ps], [p[1] for p in ps], names)
        valid, first_error = [], None
        for kind, make in readings:
            try:
                valid.append((kind, make()))
            except ValueError as exc:
                first_error = first_error or exc
        if not valid:
            raise first_error  # type: ignore[misc]
        if len(valid) == 2:
            lo, hi = (list(map(float, v)) for v in bounds)
            raise ValueError(f"bounds {[lo, hi]} are ambiguous for 2 features: (lower, upper) arrays give lower "
                             f"{tuple(lo)} and upper {tuple(hi)}, two (lower, upper) pairs give {tuple(lo)} and "
                             f"{tuple(hi)}; pass {{column: (lower, upper)}} with a DataFrame, or "
                             "torchdpgmm.bounds.Bounds(lower, upper)")
        return valid[0][1]

    @staticmethod
    def _pair(p: Any, what: str) -> tuple[float, float]:
        if isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2:
            raise ValueError(f"{what} must be a (lower, upper) pair, got {p!r}")
        return _real(p[0], f"{what}: lower"), _real(p[1], f"{what}: upper")

    @classmethod
    def from_schema(cls, path: str | Path, names: Sequence[str] | None = None) -> "Bounds":
        """Bounds from a JSON schema file: ``{"columns": {"Ht": [140, 210], "Wt": [30, 150]}}`` (or the
        dict without the ``columns`` key). ``names`` (the columns used, in order) picks and orders them."""
        try:
            spec = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read the schema file {str(path)!r}: {exc.strerror or exc}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"the schema file {str(path)!r} is not valid JSON") from None
        cols = spec.get("columns", spec) if isinstance(spec, dict) else None
        if not isinstance(cols, dict) or not cols:
            raise ValueError(f"the schema file {str(path)!r} must hold {{\"columns\": {{name: [lower, upper]}}}}")
        if names is None:
            names = list(cols)
        missing = [str(n) for n in names if n not in cols]
        if missing:
            raise ValueError(f"the schema file gives no range for column(s) {', '.join(missing)}")
        pairs = [cls._pair(cols[n], f"schema range of column {n!r}") for n in names]
        return cls([p[0] for p in pairs], [p[1] for p in pairs], list(names))

    # ------------------------------------------------------------------ the map
    @property
    def dim(self) -> int:
        return int(self.lower.shape[0])

    @property
    def scale(self) -> np.ndarray:
        return self.upper - self.lower

    @property
    def unit_center(self) -> torch.Tensor:
        """The middle of the unit box, the public centre of the release there."""
        return torch.full((self.dim,), 0.5, dtype=torch.float64)

    @property
    def unit_clip_bound(self) -> float:
        """``sqrt(d)/2``: the smallest ball about the unit box's middle that holds the whole box."""
        return math.sqrt(self.dim) / 2.0

    @property
    def release_clip_bound(self) -> float:
        """``CLIP_FRACTION * sqrt(d)/2``: the default clip bound of a release in the unit box (module
        docstring); records farther than this from the box's middle are pulled onto its sphere."""
        return CLIP_FRACTION * self.unit_clip_bound

    @property
    def centred_clip_bound(self) -> float:
        """``min(CENTRED_CLIP_RADIUS, sqrt(d)/2)`` = 1/2: the default clip bound about a private centre
        (``center="noisy-mean"``, :mod:`torchdpgmm.release.centring`), the radius of the ball inscribed in the box."""
        return min(CENTRED_CLIP_RADIUS, self.unit_clip_bound)

    def clip_bound_for(self, center: str | None = None) -> float:
        """The default clip bound of a release centred as ``center`` (:data:`CENTERS`; None: the default)."""
        return self.centred_clip_bound if check_center(center) == "noisy-mean" else self.release_clip_bound

    def max_clip_bound(self, center: str | None = None) -> float:
        """The largest clip bound (unit-box units) that can clip anything in the box: ``sqrt(d)/2`` about the box's
        middle (the ball of that radius holds the box); ``sqrt(d)`` about the private centre, which lies within
        ``sqrt(d)/2`` of the middle (:func:`torchdpgmm.release.centring.shrunk_centre`). Public: d only."""
        return self.unit_clip_bound * (2.0 if check_center(center) == "noisy-mean" else 1.0)

    def check_clip_bound(self, clip_bound: float, center: str | None = None) -> float:
        """``clip_bound`` (unit-box units) unless it exceeds :meth:`max_clip_bound`: such a bound clips nothing that
        a smaller one would not, and every noise scale grows with it (the released means of AIS heights with
        ``--clip-bound 100`` were 1,158.8 and -344.6 cm). Refused in one line."""
        top = self.max_clip_bound(center)
        if float(clip_bound) > top:
            where = "the box's middle" if check_center(center) == "box" else "the private centre"
            raise ValueError(f"clip bound {float(clip_bound):g} is beyond {top:.4g}, the radius about {where} that "
                             f"already holds the whole unit box of the bounds (d={self.dim}): a larger bound only adds "
                             f"noise; with bounds the clip bound is in unit-box units (default "
                             f"{self.clip_bound_for(center):.4g}), leave it out or give at most {top:.4g}")
        return float(clip_bound)

    def _like(self, v: np.ndarray, X: Any):
        if torch.is_tensor(X):
            return torch.as_tensor(v, dtype=torch.float64, device=X.device)
        return v

    def to_unit(self, X: Any) -> Any:
        """``clip((X - lower) / (upper - lower), 0, 1)`` per column; non-finite cells stay NaN (their rows
        are dropped by the sound release). Works on numpy arrays and torch tensors (last dim d)."""
        lo, s = self._like(self.lower, X), self._like(self.scale, X)
        if torch.is_tensor(X):
            X = X.to(torch.float64)
            U = (X - lo) / s
            return torch.where(torch.isfinite(X), U.clamp(0.0, 1.0), torch.full_like(U, float("nan")))
        X = np.asarray(X, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            U = (X - lo) / s
        return np.where(np.isfinite(X), np.clip(U, 0.0, 1.0), np.nan)

    def from_unit(self, U: Any, *, clip: bool = True) -> Any:
        """``lower + (upper - lower) * U``, with ``U`` clipped into the unit box first (so the rows lie
        within the bounds) unless ``clip=False``."""
        lo, s = self._like(self.lower, U), self._like(self.scale, U)
        if torch.is_tensor(U):
            U = U.to(torch.float64)
            return lo + s * (U.clamp(0.0, 1.0) if clip else U)
        U = np.asarray(U, dtype=np.float64)
        return lo + s * (np.clip(U, 0.0, 1.0) if clip else U)

    def means_from_unit(self, means: torch.Tensor) -> torch.Tensor:
        """Means released in the unit box, in the user's units (no clipping: a mean is a parameter)."""
        return self.from_unit(means, clip=False)

    def covariances_from_unit(self, cov: torch.Tensor) -> torch.Tensor:
        """``diag(s) Sigma diag(s)`` for covariances ``(..., d, d)`` released in the unit box."""
        s = torch.as_tensor(self.scale, dtype=cov.dtype, device=cov.device)
        return cov * s.unsqueeze(-1) * s.unsqueeze(-2)

    def model_from_unit(self, model: Any) -> Any:
        """A :class:`~torchdpgmm.mixture.LabeledGMM` released in the unit box, in the user's units: the exact
        affine map of every Gaussian (``mu = lower + s mu_u``, ``Sigma = diag(s) Sigma_u diag(s)``);
        post-processing."""
        from torchdpgmm.mixture import LabeledGMM

        return LabeledGMM(model.weights, self.means_from_unit(model.means),
                          self.covariances_from_unit(model.covariances), counts=model.counts)

    # ------------------------------------------------------------------ discrete columns
    def _label(self, j: int) -> str:
        return repr(self.names[j]) if self.names is not None else f"index {j}"

    def with_discrete(self, integer: Sequence[int] = (), onehot: Sequence[Sequence[int]] = ()) -> "Bounds":
        """A copy that also records the integer columns ``integer`` and the one-hot groups ``onehot`` (column
        indices; public schema). An integer column needs integer bounds; a one-hot column the bounds (0, 1); a
        group at least two columns; no column twice. Refusals name the column in one line."""
        seen: set[int] = set()

        def index(j: Any) -> int:
            if isinstance(j, (bool, np.bool_)) or not isinstance(j, numbers.Integral):
                raise ValueError(f"discrete column index must be an int, got {j!r}")
            if not -self.dim <= int(j) < self.dim:
                raise ValueError(f"discrete column index {int(j)} is out of range for {self.dim} column(s)")
            j = int(j) % self.dim
            if j in seen:
                raise ValueError(f"discrete lists column {self._label(j)} more than once")
            seen.add(j)
            return j

        ints = tuple(index(j) for j in integer)
        for j in ints:
            lo, hi = float(self.lower[j]), float(self.upper[j])
            if lo != math.floor(lo) or hi != math.floor(hi):
                raise ValueError(f"discrete column {self._label(j)} needs integer bounds, got ({lo:g}, {hi:g})")
        groups = []
        for g in onehot:
            g = tuple(index(j) for j in g)
            if len(g) < 2:
                raise ValueError("a one-hot group needs at least two columns, got "
                                 + ", ".join(self._label(j) for j in g))
            for j in g:
                if (float(self.lower[j]), float(self.upper[j])) != (0.0, 1.0):
                    raise ValueError(f"one-hot column {self._label(j)} needs bounds (0, 1), got "
                                     f"({self.lower[j]:g}, {self.upper[j]:g})")
            groups.append(g)
        out = Bounds(self.lower, self.upper, self.names)
        out.integer, out.onehot = ints, tuple(groups)
        return out

    @property
    def whole_number_columns(self) -> tuple[int, ...]:
        """The columns that :meth:`clip_rows` leaves as whole numbers (written ``3``, not ``3.0``; int64 in a
        DataFrame): the integer columns and every one-hot group's."""
        return tuple(self.integer) + tuple(j for group in self.onehot for j in group)

    def discrete_columns(self, discrete: Any, names: Sequence[str] | None = None) -> "Bounds":
        """:meth:`with_discrete` from what a user passes: a list whose entries are a column (a name, or an index)
        or a one-hot group (a tuple or list of columns). Names are looked up in ``names`` (the table's columns;
        default the bounds' own names). ``None`` or an empty list: no discrete column."""
        if discrete is None:
            return self.with_discrete()
        if isinstance(discrete, (str, bytes)) or not isinstance(discrete, (list, tuple, np.ndarray)):
            raise ValueError(f"discrete must be a list of column names or indices, got {type(discrete).__name__}")
        cols = [str(n) for n in names] if names is not None else (list(self.names) if self.names else None)

        def index(c: Any) -> int:
            if isinstance(c, str):
                if cols is None or c not in cols:
                    raise ValueError(f"discrete column {c!r} is not one of the feature columns" + (
                        "" if cols is not None else " (names need X with column names, a DataFrame)"))
                return cols.index(c)
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, numbers.Integral):
                raise ValueError(f"discrete entry {c!r} is neither a column name (str) nor a column index (int)")
            return int(c)

        integer, groups = [], []
        for c in discrete:
            if isinstance(c, (list, tuple)):
                groups.append([index(x) for x in c])
            else:
                integer.append(index(c))
        return self.with_discrete(integer, groups)

    def discrete_names(self) -> list[Any]:
        """The discrete columns as :meth:`discrete_columns` reads them (names where known): integer columns,
        then one-hot groups as lists."""
        name = (lambda j: self.names[j]) if self.names is not None else (lambda j: j)
        return [name(j) for j in self.integer] + [[name(j) for j in g] for g in self.onehot]

    def clip_rows(self, X: Any) -> np.ndarray:
        """Synthetic rows in the user's units made valid (post-processing): every column clipped into its bounds;
        an integer column rounded to the nearest integer (``numpy.rint``) inside its bounds; a one-hot group set
        to 1 at its largest value (first on a tie) and 0 elsewhere."""
        X = np.array(X.detach().cpu().numpy() if torch.is_tensor(X) else X, dtype=np.float64)
        raw = X.copy()
        X = np.clip(X, self.lower, self.upper)
        j = list(self.integer)
        if j:
            X[:, j] = np.clip(np.rint(X[:, j]), self.lower[j], self.upper[j])
        for g in self.onehot:
            g = list(g)
            X[:, g] = 0.0
            X[np.arange(len(X)), np.asarray(g)[np.argmax(raw[:, g], axis=1)]] = 1.0
        return X

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"lower": self.lower.tolist(), "upper": self.upper.tolist()}
        if self.names is not None:
            d["names"] = list(self.names)
        if self.integer:
            d["integer"] = list(self.integer)
        if self.onehot:
            d["onehot"] = [list(g) for g in self.onehot]
        return d

    @classmethod
    def from_dict(cls, d: Any) -> "Bounds":
        if not isinstance(d, dict) or "lower" not in d or "upper" not in d:
            raise ValueError("bounds must be an object with 'lower' and 'upper' lists")
        lo, hi = d["lower"], d["upper"]
        if not isinstance(lo, list) or not isinstance(hi, list):
            raise ValueError("bounds 'lower' and 'upper' must be lists of numbers")
        names = d.get("names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise ValueError("bounds 'names' must be a list of strings")
        if names is not None and len(set(names)) != len(names):
            raise ValueError("bounds 'names' must not repeat a column")
        integer, onehot = d.get("integer", []), d.get("onehot", [])
        if not isinstance(integer, list) or not isinstance(onehot, list) or \
                not all(isinstance(g, list) for g in onehot):
            raise ValueError("bounds 'integer' must be a list of column indices and 'onehot' a list of lists")
        out = cls(lo, hi, names)
        return out.with_discrete(integer, onehot) if integer or onehot else out

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Bounds) and np.array_equal(self.lower, other.lower)
                and np.array_equal(self.upper, other.upper) and self.names == other.names
                and self.integer == other.integer and self.onehot == other.onehot)

    def __repr__(self) -> str:
        cols = self.names or [str(j) for j in range(self.dim)]
        body = ", ".join(f"{n}=[{a:g}, {b:g}]" for n, a, b in zip(cols, self.lower, self.upper))
        return f"Bounds({body})"


def parse_bounds_text(text: str, names: Sequence[str] | None = None, n_features: int | None = None) -> Bounds:
    """The command line's ``--bounds``: ``LOW:HIGH`` for every column, or ``COL=LOW:HIGH,COL=LOW:HIGH``
    naming every used column (``names``, in the order of the features)."""
    text = text.strip()

    def pair(s: str, what: str) -> tuple[float, float]:
        parts = s.split(":")
        if len(parts) != 2:
            raise ValueError(f"{what} must be LOW:HIGH, got {s!r}")
        try:
            a, b = float(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"{what} must be LOW:HIGH with numbers, got {s!r}") from None
        return a, b

    if "=" not in text:
        a, b = pair(text, "--bounds")
        if n_features is None:
            n_features = len(names) if names is not None else None
        return Bounds.parse((a, b), n_features=n_features, names=names)
    spec: dict[str, tuple[float, float]] = {}
    for item in text.split(","):
        if "=" not in item:
            raise ValueError(f"--bounds entries must be COLUMN=LOW:HIGH, got {item!r}")
        col, rng = item.split("=", 1)
        col = col.strip()
        if col in spec:
            raise ValueError(f"--bounds names column {col!r} twice")
        spec[col] = pair(rng.strip(), f"--bounds for {col!r}")
    if names is None:
        names = list(spec)
    return Bounds.parse(spec, names=list(names))


def parse_discrete_text(text: str) -> list[Any]:
    """The command line's ``--discrete``: comma-separated columns, a one-hot group written ``A+B+C``
    (``kids,colour_red+colour_blue+colour_green``); an entry that is a whole number is a column index."""
    out: list[Any] = []

    def col(s: str) -> Any:
        s = s.strip()
        if not s:
            raise ValueError(f"--discrete has an empty column name in {text!r}")
        return int(s) if s.lstrip("-").isdigit() else s

    for item in text.split(","):
        out.append([col(c) for c in item.split("+")] if "+" in item else col(item))
    return out


#: rejection rounds of :func:`truncated_sample` before the Gibbs fallback, and the fallback's sweeps: on released
#: models of 30- to 64-column tables, 5 to 100 sweeps differ from 300 no more than two runs of 300 differ from each
#: other (column means, standard deviations, correlations at 10,000 chains: ``scripts/gibbs_mixing.py`` ->
#: ``docs/results/gibbs-mixing.json``); 30 keeps a margin for more correlated models
SAMPLE_ROUNDS = 200
GIBBS_SWEEPS = 30
#: coordinates per block of :func:`_gibbs_inside`'s deferred updates
GIBBS_BLOCK = 16


_SQRT1_2 = math.sqrt(0.5)


def _truncated_normal(mean: torch.Tensor, std: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                      generator: torch.Generator | None) -> torch.Tensor:
    """One draw of ``N(mean, std^2)`` restricted to ``[lo, hi]`` per element (inverse CDF on the side of the
    interval nearer the mean, where it is accurate), kept inside the interval. ``lo`` and ``hi`` broadcast against
    ``mean`` (a column's bounds as 0-d tensors in the Gibbs sweeps). Few ops (the Gibbs fallback runs it once per
    coordinate per sweep, so on a GPU its launches are the sampler's time)."""
    a, b = (lo - mean) / std, (hi - mean) / std
    flip = a > 0  # sample -z on (-b, -a): the lower tail, where Phi (by erfc) keeps its relative precision
    a2, b2 = torch.where(flip, -b, a), torch.where(flip, -a, b)
    # 2 Phi(t) = erfc(-t / sqrt 2), accurate in the lower tail (torch.special.ndtr is not: 0 at -8.5)
    pa, pb = torch.special.erfc(a2 * -_SQRT1_2), torch.special.erfc(b2 * -_SQRT1_2)
    u = torch.rand(mean.shape, dtype=mean.dtype, device=mean.device, generator=generator)
    z = torch.special.ndtri(torch.lerp(pa, pb, u) * 0.5)
    # beyond ~37 stds the CDF underflows (z = -inf): the tail's exponential limit below b2 (rate |b2|, cut at a2)
    t = b2.abs().clamp(min=1.0)
    tail = torch.addcdiv(b2, torch.log1p(u * torch.expm1((a2 - b2) * t)), t)
    z = torch.where(z > -math.inf, z, tail).clamp(a2, b2)  # -inf: the CDFs underflowed (or pa = pb = 0)
    return torch.addcmul(mean, std, torch.where(flip, -z, z)).clamp(lo, hi)


def _gibbs_inside(x: torch.Tensor, means: torch.Tensor, cov: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                  generator: torch.Generator | None, sweeps: int = GIBBS_SWEEPS, *,
                  labels: torch.Tensor) -> torch.Tensor:
    """Gibbs sweeps of the Gaussian ``N(means, cov[labels])`` (per row) restricted to the box, from ``x`` clipped into
    it: each coordinate drawn exactly from its 1-D truncated conditional
    ``x_j | x_-j ~ N(mu_j - (P (x - mu))_-j,j / P_jj, 1 / P_jj)``, ``P`` the class precision. Approximate (a Markov
    chain): the fallback of :func:`truncated_sample` for rows whose Gaussian puts almost no mass in the box.

    ``cov (K, d, d)`` is one matrix per class, ``labels (n,)`` each row's: ``P`` is inverted once per class. The
    products ``s = P (x - mu)`` are kept per row and brought up to date once per block of :data:`GIBBS_BLOCK`
    coordinates (one matrix product per class present); inside a block the changes of its earlier coordinates are
    added from an ``(n, B, B)`` gather. So a step costs ``O(n B)`` and a sweep ``O(n d^2)`` in few large products,
    not ``d`` gathers of ``(n, d)`` rows (the same chain: the same uniforms in the same order). The conditional
    mean is ``x_j - s_j / P_jj`` (``s_j`` with the block's earlier changes), and each coordinate's ``1 / P_jj``, its
    square root and bounds are taken once, before the sweeps: a step is a few dozen elementwise ops over the rows,
    which is what a GPU pays per step (launches, not arithmetic)."""
    P = torch.linalg.inv(cov)
    P = 0.5 * (P + P.mT)
    x = torch.minimum(torch.maximum(x, lo), hi)  # a new tensor: updated in place below
    n, d = x.shape
    var = 1.0 / torch.diagonal(P, dim1=-2, dim2=-1)[labels]  # (n, d): the conditionals' variances
    var_j = [v.contiguous() for v in var.unbind(-1)]
    sd_j = [v.sqrt() for v in var_j]
    lo_j, hi_j = lo.unbind(0), hi.unbind(0)
    present = [int(c) for c in torch.unique(labels).tolist()]  # post-processing: host reads are harmless here
    rows = {c: (labels == c).nonzero().squeeze(-1) for c in present}
    z = x - means
    s = torch.empty_like(z)
    for c in present:
        s[rows[c]] = z[rows[c]] @ P[c]
    B = GIBBS_BLOCK
    blocks = [(a, min(a + B, d)) for a in range(0, d, B)]
    # per block, per coordinate i of the block: P[labels][:, a:b, a + i], (n, b - a)
    inner = [[g.contiguous() for g in P[:, a:b, a:b][labels].unbind(-1)] for a, b in blocks]
    for _ in range(sweeps):
        for (a, b), G in zip(blocks, inner):
            delta = torch.zeros(n, b - a, dtype=x.dtype, device=x.device)  # this block's changes not yet in s
            for i in range(b - a):
                j = a + i
                sj = s[:, j] + torch.linalg.vecdot(delta, G[i]) if i else s[:, j]  # (P z)_j with the changes
                xj = x[:, j]
                new = _truncated_normal(xj - sj * var_j[j], sd_j[j], lo_j[j], hi_j[j], generator)
                delta[:, i] = new - xj
                x[:, j] = new
            for c in present:  # s += delta P[c][a:b, :] for the rows of class c
                r = rows[c]
                s.index_add_(0, r, delta[r] @ P[c, a:b, :])
    return x


def truncated_sample(model: Any, lower: Any, upper: Any, generator: torch.Generator | None = None, *,
                     counts: torch.Tensor | None = None, n: int | None = None,
                     rounds: int = SAMPLE_ROUNDS, to_box: Any = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Rows of the released :class:`~torchdpgmm.mixture.LabeledGMM` (one model, no batch) restricted to the box
    ``[lower, upper]`` (post-processing of the released model, no privacy cost); returns ``(x (n, d), y (n,),
    fallback)``.

    ``counts (K,)``: that many rows of each class, each from its class Gaussian restricted to the box (``x | y, x in
    box``); else ``n`` rows of the mixture restricted to the box (``(x, y) | x in box``: the class of a rejected row
    is drawn again too). Exact rejection sampling: every row is redrawn until it falls inside, for at most
    ``rounds`` rounds (only the rows still outside are redrawn); a row still outside then (probability ``(1 - p)^rounds``
    for a Gaussian with mass ``p`` in the box: rare unless ``p`` is below a few percent) is drawn by
    :data:`GIBBS_SWEEPS` Gibbs sweeps of exact 1-D truncated conditionals from its last draw clipped into the box
    (approximate; ``fallback`` counts these rows). Rejection stops early for a class (``counts``) or the mixture
    (``n``) whose share of draws inside so far, ``(accepted + 1) / (drawn + 1)``, is below ``1 / rounds``: with that
    mass most of its rows would reach the fallback anyway, after ``rounds`` futile redraws (a 64-column table's
    class spent half its sampling time there). A row sent to the fallback keeps the class of its last draw: with
    ``n``, the fallback's rows follow the released weights, not the weights conditioned on the box (the exact law
    would favour the class with the most mass inside, however small). No row is clipped onto a bound: a continuous
    coordinate equals a bound with probability zero.

    ``to_box``: an affine map of the model's rows to the box's coordinates (a model released in another space, e.g.
    a projection of lower rank); the rows are tested, and returned, mapped. A row still outside after ``rounds`` has
    no Gibbs fallback there: it is clipped into the box (``fallback`` counts it; the caller says so)."""
    lo = torch.as_tensor(np.asarray(lower, dtype=np.float64), device=model.device)
    hi = torch.as_tensor(np.asarray(upper, dtype=np.float64), device=model.device)
    fixed = counts is not None

    def draw(c: torch.Tensor | None, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        if c is not None:
            x, y, _ = model.sample_counts(c, generator)
        else:
            x, y = model.sample(m, generator)
        return (x, y) if to_box is None else (to_box(x), y)

    x, y = draw(counts, 0 if n is None else int(n))
    inside = lambda v: ((v >= lo) & (v <= hi)).all(-1)  # noqa: E731
    done = inside(x)
    K = model.num_classes if fixed else 1
    group = (lambda v: v) if fixed else (lambda v: torch.zeros_like(v))  # noqa: E731  (per class, or one group)
    drawn = torch.bincount(group(y), minlength=K).to(torch.float64)
    accepted = torch.bincount(group(y)[done], minlength=K).to(torch.float64)
    for _ in range(int(rounds) - 1):
        pending = ~done
        if to_box is None:  # a group whose box mass is estimated below 1/rounds goes straight to the Gibbs fallback
            pending &= ((accepted + 1) / (drawn + 1) >= 1.0 / int(rounds))[group(y)]
        todo = pending.nonzero().squeeze(-1)  # post-processing of released values: host syncs are harmless here
        if todo.numel() == 0:
            break
        if fixed:  # redraw the pending rows of each class (sample_counts returns them in class order)
            yt = y[todo]
            order = torch.argsort(yt, stable=True)
            xc, yc = draw(torch.bincount(yt, minlength=model.num_classes), 0)
            todo = todo[order]
        else:
            xc, yc = draw(None, int(todo.numel()))
        ok = inside(xc)
        x[todo] = torch.where(ok.unsqueeze(-1), xc, x[todo])
        y[todo] = torch.where(ok, yc, y[todo])
        done[todo] = ok
        drawn += torch.bincount(group(yc), minlength=K)
        accepted += torch.bincount(group(yc)[ok], minlength=K)
    rest = (~done).nonzero().squeeze(-1)
    if rest.numel() and to_box is not None:
        x[rest] = torch.minimum(torch.maximum(x[rest], lo), hi)
    elif rest.numel():
        yr = y[rest]
        x[rest] = _gibbs_inside(x[rest], model.means[yr], model.covariances, lo, hi, generator, labels=yr)
    return x, y, int(rest.numel())


def pipeline_rows_in_box(model: Any, pca: Any, radius: float, n: int,
                         generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``n`` rows (unit-box coordinates, ``(n, d)``), their classes ``(n,)`` and the fallback count, drawn from the
    synthetic-data pipeline's released class mixtures (``model``: ``weights (K,)``, ``comp_weights (K, M)``, ``means
    (K, M, f)``, ``covariances (K, M, f, f)``, in the released projection) restricted to the unit box: the mixture of
    every cell ``(class, component)`` with its Gaussian mapped to rows (``u = 1/2 + m + R f V``, the released mean
    ``m`` and components ``V (f, d)`` of ``pca``, the public ``radius`` R), conditioned on the row lying in the box
    (:func:`truncated_sample` with ``n``: a rejected row's cell is drawn again too). Post-processing; no row is
    clipped onto a bound. With every component kept (``f = d``, the table default) the rows' Gaussians are full rank
    (exact, with the Gibbs fallback); with fewer, rejection in the projection, and a row still outside after the
    rounds is clipped (counted in the fallback)."""
    from torchdpgmm.mixture import LabeledGMM

    K, M, f = model.means.shape
    V = pca.components.to(model.means.dtype)  # (f, d), orthonormal rows
    d = V.shape[1]
    flat = (model.weights.unsqueeze(-1) * model.comp_weights).reshape(K * M)
    shift, R = 0.5 + pca.mean.to(V.dtype), float(radius)
    means, covs = model.means.reshape(K * M, f), model.covariances.reshape(K * M, f, f)
    zero, one = np.zeros(d), np.ones(d)
    if f == d:
        cov = R ** 2 * V.mT @ covs @ V
        gmm = LabeledGMM(flat, shift + R * means @ V, 0.5 * (cov + cov.mT), validate_args=False)
        x, cell, fallback = truncated_sample(gmm, zero, one, generator, n=int(n))
    else:
        gmm = LabeledGMM(flat, means, covs, validate_args=False)
        x, cell, fallback = truncated_sample(gmm, zero, one, generator, n=int(n), to_box=lambda F: shift + R * F @ V)
    return x, cell // M, fallback


# ---------------------------------------------------------------- the release in the unit box
#: whether, with public bounds and the private centre, ``clip_bound=None`` releases a private clip radius
#: (:mod:`torchdpgmm.release.centring`) instead of the fixed ``Bounds.centred_clip_bound``: off, because on validation
#: splits no private-radius config beat the fixed radius 1/2 with the same consistent classifier
#: (``docs/results/radius-rule.json``, ``scripts/clip_rule_validation.py --radius``)
PRIVATE_RADIUS = False


def release_in_unit_box(X: torch.Tensor, y: torch.Tensor, num_classes: int, epsilon: float, delta: float, bounds: Any,
                        *, center: str | None = None, clip_bound: float | None = None,
                        generator: torch.Generator | None = None, mechanism: str = "kl", **options: Any):
    """The sound release of a table already mapped into the unit box of public ``bounds`` (the one path of
    ``DPGaussianMixture(bounds=...)`` and ``torchdpgmm release --bounds``).

    ``center="noisy-mean"`` (the default, :data:`torchdpgmm.bounds.DEFAULT_CENTER`): the two-stage release of
    :mod:`torchdpgmm.release.centring` (a private centre from the ball ``sqrt(d)/2`` that holds the box, then the
    mixture clipped to ``clip_bound`` about it, default :attr:`~torchdpgmm.bounds.Bounds.centred_clip_bound`).
    ``clip_bound=None`` with ``center="noisy-mean"`` releases a private radius instead (three stages,
    :mod:`torchdpgmm.release.centring`) when :data:`PRIVATE_RADIUS` is on (it is off: see there).
    ``center="box"``: one stage about the box's middle (default clip :attr:`~torchdpgmm.bounds.Bounds.release_clip_bound`).
    ``options`` go to the sound release (``adjacency``, ``covariance_type``, ...). Returns the ``Release`` in unit-box
    coordinates (map it back with :meth:`~torchdpgmm.bounds.Bounds.model_from_unit`)."""
    from torchdpgmm.release import release

    center = check_center(center)
    ball = bounds.unit_center.to(X.device)
    if center == "box":
        clip = float(bounds.clip_bound_for(center) if clip_bound is None else clip_bound)
        return release(X, y, num_classes, epsilon, delta, mechanism=mechanism, mode="sound", generator=generator,
                       clip_bound=clip, center=ball, **options)
    from torchdpgmm.release.centring import release_centred

    private = clip_bound is None and PRIVATE_RADIUS
    clip = None if private else float(bounds.clip_bound_for(center) if clip_bound is None else clip_bound)
    return release_centred(X, y, num_classes, epsilon, delta, clip_bound=clip, ball_center=ball,
                           ball_radius=float(bounds.unit_clip_bound), radius_floor=float(bounds.centred_clip_bound),
                           generator=generator, mechanism=mechanism, **options)
