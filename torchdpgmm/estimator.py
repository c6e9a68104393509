"""A scikit-learn estimator: ``DPGaussianMixture(classes=[...], clip_bound=B).fit(X, y).sample(n)``.

:class:`DPGaussianMixture` follows the scikit-learn conventions (``BaseEstimator`` + ``ClassifierMixin``):
``__init__`` stores its arguments verbatim, ``fit`` validates them before touching the data or drawing
noise, and the fitted attributes are those of :class:`sklearn.mixture.GaussianMixture` (``weights_``,
``means_``, ``covariances_``, ``precisions_cholesky_``) plus ``classes_`` and ``privacy_``. It therefore
works in ``Pipeline``, ``cross_val_score`` and ``GridSearchCV`` (see docs/usage.md).

Privacy model (see docs/privacy.md):

* ``mode="sound"`` (the default) is record-level (epsilon, delta)-DP with clipping to ``clip_bound``
  (Liu, Scaglione & Peisert 2025 eq. (28), enforced; global sensitivities; Balle & Wang 2018 calibration).
  Every public fact comes from the user, never from the data: the class set ``classes`` and the bound
  ``clip_bound`` are required. A row whose label is not among ``classes`` is dropped by the release without a
  branch on it, exactly as if it were removed (an error would reveal that such a row exists); a typed ``y``
  (array, Series, tensor; a list has no dtype and is matched label by label) whose *dtype* cannot hold the classes (strings against numbers, or a float precision that merges or misses them) is
  refused as a schema error before any noise is drawn, naming neither the values nor the rows. Classes without
  records are legal: they are released from noise alone.
* ``mode="as-published"`` reproduces Liu, Scaglione & Peisert (2025) with label-level adjacency; its
  published analysis has known gaps, so it is *not* a valid DP guarantee. It must be asked for by name and
  warns (:class:`AsPublishedWarning`) at every ``fit``. Here the class set may come from ``y``.

After ``fit`` only the *released* model is kept (``model_``); the non-private fit is never stored.
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClassifierMixin, TransformerMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from torchdpgmm._validation import (AS_PUBLISHED_WARNING, AsPublishedWarning, _is_real_scalar, check_clip_bound,
                                    check_delta, check_epsilon, check_privacy_strength, check_sampler_delta,
                                    checks_budget)
from torchdpgmm.bounds import release_in_unit_box
from torchdpgmm.privacy.record import FIT_STREAM as _FIT_STREAM
from torchdpgmm.privacy.record import SAMPLE_STREAM as _SAMPLE_STREAM
from torchdpgmm.privacy.record import SEEDED_NOISE_NOTE, SeededNoiseWarning, child_seed, with_seeded_noise_note

__all__ = ["DPGaussianMixture", "DPSyntheticClassifier", "AsPublishedWarning", "check_clip_bound"]

_MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
_SOUND_MECHANISMS = ("kl", "gaussian", "colored", "laplace")
_MODES = ("sound", "as-published")
_ADJACENCIES = ("add-remove", "replace-one")
_COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


def _supported_covariance_types(mode: str) -> tuple[str, ...]:
    """What the release supports: every type in sound mode once ``torchdpgmm.release.sound`` has them, else full."""
    if mode != "sound":
        return ("full", "auto")  # as-published has one structure: "auto" resolves to it
    try:
        from torchdpgmm.release.sound import COVARIANCE_TYPES
    except ImportError:
        return ("full",)
    return tuple(COVARIANCE_TYPES)

def _numbers_or_nan(a: np.ndarray) -> np.ndarray:
    """An object / string array as float64, a cell that is not a number becoming NaN (no error, no echo). A boolean
    written as text (``True`` / ``true`` / ``TRUE``, ``False`` ...: the spellings pandas' ``read_csv`` reads as
    booleans) is 1 or 0, as a ``bool`` column is: pandas infers a column's dtype from all its cells, so one cell that is
    not a boolean must not change how the others are read."""
    from torchdpgmm.datafile import cell_number

    def one(v: Any) -> float:
        if isinstance(v, (complex, np.complexfloating)):  # real only where the imaginary part is 0 (no warning)
            return float(v.real) if v.imag == 0 else math.nan
        if isinstance(v, np.ndarray) and v.ndim > 0:  # an array in a cell is not a number (numpy's float() of a
            return math.nan  # size-1 array warns or succeeds by version)
        try:
            return cell_number(v.strip()) if isinstance(v, str) else float(v)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float range
            return math.nan
    with np.errstate(all="ignore"):  # a cell beyond float64 (a longdouble) becomes inf without a warning: a print
        return np.vectorize(one, otypes=[np.float64])(a) if a.size else a.astype(np.float64)  # on a private value


def _real_or_nan(a: np.ndarray) -> np.ndarray:
    """A complex array as float64: a cell with a nonzero imaginary part is not a real number and becomes NaN (its row
    is dropped), the others their real part. numpy and pandas make an array complex when one cell is, so refusing
    it would reveal such a cell."""
    a = np.asarray(a)
    return np.where(a.imag == 0, a.real, np.nan).astype(np.float64)


def _public_width(bounds: Any) -> int | None:
    """The number of columns that public ``bounds`` fix (a :class:`~torchdpgmm.bounds.Bounds`, a list of pairs, a
    ``(lower_array, upper_array)`` pair), or None (no bounds, one pair for every column, a dict of names)."""
    from torchdpgmm.bounds import Bounds

    if bounds is None or isinstance(bounds, dict):
        return None
    if isinstance(bounds, Bounds):
        return int(bounds.lower.size)
    try:
        return int(Bounds.parse(bounds).lower.size)
    except (ValueError, TypeError):
        return None


def _list_rows(X: list | tuple, d: int | None) -> np.ndarray:
    """A Python list of rows as a ``(N, d)`` object array, ``d`` the width the public ``bounds`` fix: a list has no
    dtype or shape of its own, and a width read from a record would let that record decide how the others are read
    (and the model's shape). Without a public width the list is refused by its type (pass a 2-D array, a DataFrame,
    or bounds for every column); with one, a row of another length (or one that is not a sequence) becomes a row of
    NaN, dropped by the release, and an empty list is a table without rows."""
    if d is None:
        raise ValueError("X is a Python list, whose width would be read from a record: pass a 2-D array "
                         "(numpy.asarray(X, dtype=float)) or a DataFrame, or bounds for every column")

    def fits(r: Any) -> bool:
        if isinstance(r, (np.ndarray, torch.Tensor)):
            return tuple(r.shape) == (d,)
        if isinstance(r, (str, bytes, dict, set, frozenset)) or not hasattr(r, "__len__"):
            return False
        return len(r) == d

    rows = list(X)
    out = np.full((len(rows), d), math.nan, dtype=object)
    for i, r in enumerate(rows):
        if fits(r):
            out[i] = list(r)
    return out


def _dataframe_numbers_or_nan(df: Any, discrete_hint: bool = False) -> Any:
    """A DataFrame with every column as float64, read cell by cell where its dtype is object or text (pandas'
    ``str`` / ``string``, pyarrow strings), all alike: a cell that is not a finite number becomes NaN, so its row is
    dropped. A text dtype is not refused: pandas infers it from the cells (one cell that is not a number turns a
    CSV's numeric column into ``str`` under pandas 3 and ``object`` under pandas 2), so a refusal would reveal that
    such a cell exists. A ``bool`` (or pandas ``boolean``) column is 0 / 1 (NA a missing cell) for the same reason:
    ``read_csv`` makes a column ``bool`` when every cell is one (``pandas.get_dummies`` makes its columns ``bool``). A
    column whose *dtype* is ``category`` (never inferred from cells) is public schema that is not a continuous
    number: refused in one line naming the column."""
    if len(df.columns) == 0:
        raise ValueError("X has 0 feature(s) (columns); at least one is required")
    if df.columns.duplicated().any():
        dup = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        raise ValueError(f"X has duplicate column names {dup}: every column needs its own name")
    out = {}
    for name, dtype in zip(df.columns, df.dtypes):
        kind = getattr(dtype, "kind", "O")
        if str(dtype) == "category":
            if discrete_hint:
                raise ValueError(f"column {name!r} has dtype {dtype}: one-hot encode it (e.g. pandas.get_dummies"
                                 "(df, dtype=int)) and list the new columns in discrete=, or use it as the class label")
            raise ValueError(f"column {name!r} has dtype {dtype}: every column is treated as continuous; one-hot "
                             "encode a categorical column (or drop it) before fitting")
        if kind in "mM":
            raise ValueError(f"column {name!r} has dtype {dtype}: only real numbers can be released; convert it "
                             "to a number (or drop it) before fitting")
        if kind == "c":  # inferred from the cells (one complex cell makes the column complex): read cell by cell
            out[name] = _real_or_nan(df[name].to_numpy())
            continue
        col = df[name].to_numpy(dtype=object) if kind not in "fiub" else df[name].to_numpy(dtype=np.float64,
                                                                                             na_value=np.nan)
        out[name] = _numbers_or_nan(col) if col.dtype == object else col
    return type(df)(out, columns=df.columns, index=df.index) if out else df


def _precheck_bounds(bounds: Any) -> None:
    """Refuse malformed public bounds in one line before any data is read (the number of columns is checked
    once ``X``'s shape, public, is known)."""
    from torchdpgmm.bounds import Bounds

    if bounds is None or isinstance(bounds, Bounds):
        return
    if isinstance(bounds, dict):
        for k, p in bounds.items():
            Bounds._pair(p, f"bounds of column {k!r}")
        return
    try:
        shape = np.shape(bounds)
    except ValueError:  # ragged: parsed pair by pair
        shape = ()
    n = 1 if shape == (2,) else (shape[1] if len(shape) == 2 and shape[0] == 2 and shape[1] != 2 else None)
    Bounds.parse(bounds, n_features=n)


def _precheck_discrete(discrete: Any, bounds: Any) -> None:
    """Refuse a malformed public ``discrete=`` in one line before any data is read: a list of column names or
    indices, or of one-hot groups (a tuple or list of columns), no column twice, and public bounds to round and
    clip into."""
    if discrete is None:
        return
    if isinstance(discrete, (str, bytes)) or not isinstance(discrete, (list, tuple, np.ndarray)):
        raise ValueError(f"discrete must be a list of column names or indices, got {type(discrete).__name__}")
    flat = [x for c in discrete for x in (c if isinstance(c, (list, tuple)) else [c])]
    for c in flat:
        if not (isinstance(c, str) or (isinstance(c, numbers.Integral) and not isinstance(c, (bool, np.bool_)))):
            raise ValueError(f"discrete entry {c!r} is neither a column name (str) nor a column index (int)")
    if len(set(flat)) != len(flat):
        raise ValueError("discrete lists a column more than once")
    if bounds is None:
        raise ValueError("discrete= needs public bounds=(lower, upper) with integer ends for those columns "
                         "(synthetic values are rounded and clipped into them)")


def _discrete_bounds(discrete: Any, b: Any, names: Any) -> Any:
    """``b`` with the public discrete columns recorded (:meth:`torchdpgmm.bounds.Bounds.discrete_columns`: names
    against the table's columns, indices against its width, integer bounds, one-hot groups); None without bounds."""
    if b is None:
        return None
    return b.discrete_columns(discrete, None if names is None else [str(n) for n in names])


def _check_discrete_schema(discrete: Any, bounds: Any, X: Any) -> None:
    """``discrete=`` against a table's column names and width (public schema), before a value is read."""
    if discrete is not None and (hasattr(X, "columns") or len(getattr(X, "shape", ())) == 2):
        cols = [str(c) for c in X.columns] if hasattr(X, "columns") else None
        width = len(cols) if cols is not None else int(X.shape[1])
        _discrete_bounds(discrete, _fit_bounds(bounds, width, cols), cols)


def _fit_bounds(bounds: Any, n_features: int, names: Any) -> Any:
    """The :class:`Bounds` of a fit (public: the user's bounds, ``X``'s width and column names), or None."""
    from torchdpgmm.bounds import Bounds

    if bounds is None:
        return None
    names = None if names is None else [str(n) for n in names]
    if isinstance(bounds, dict) and names is None:
        raise ValueError("bounds given as {column: (lower, upper)} need X with string column names (a DataFrame "
                         "whose columns are strings; scikit-learn keeps no other names)")
    return Bounds.parse(bounds, n_features=n_features, names=names)


#: the covariance types whose ``predict`` / ``predict_proba`` / ``score`` pull rows onto the release's clipping ball
#: first (:meth:`DPGaussianMixture._x_released`). On validation splits (``docs/results/pull-rule.json``,
#: ``scripts/clip_rule_validation.py --pull``) pulling costs ``"auto"`` a few tenths of a point on average against raw
#: rows, and is kept for it (the issue-37 held-out tables need it: raw rows there lost accuracy as epsilon grew), and
#: is far below them for ``"full"`` (whose
#: Gaussians of records on the ball's sphere collapse in the noise), so only ``"auto"`` pulls.
PULLED_COVARIANCE_TYPES = ("auto",)


def _pandas_out(sample: Any) -> Any:
    """Decorator of an estimator's ``sample``: pandas in, pandas out (scikit-learn's ``set_output`` convention).
    Fitted on a DataFrame (``feature_names_in_`` set), the rows come back as a DataFrame with the fit's column
    names (the ``discrete`` columns, whole numbers after rounding, as int64) and the labels as a Series; otherwise
    the numpy arrays as they are."""
    import functools

    @functools.wraps(sample)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        x, y = sample(self, *args, **kwargs)
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            return x, y
        import pandas as pd

        return _sample_frame(self, x, names), pd.Series(np.asarray(y))

    return wrapper


def _sample_frame(est: Any, x: Any, names: Any) -> Any:
    """Synthetic rows in the user's units as a DataFrame with the fit's column names; the columns that the rounding
    leaves whole (:attr:`torchdpgmm.bounds.Bounds.whole_number_columns`) as int64, as they came in."""
    import pandas as pd

    df = pd.DataFrame(np.asarray(x), columns=[str(n) for n in names])
    b = getattr(est, "bounds_", None) if getattr(est, "bounds", None) is not None else None
    for j in () if b is None else b.whole_number_columns:
        df[df.columns[j]] = df.iloc[:, j].astype(np.int64)
    return df


def _detached(a: Any) -> Any:
    """A torch tensor as a plain CPU array (one that requires grad too); anything else unchanged."""
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a


def _classes_in_dtype_of(public: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The public numeric classes as a numeric ``y``'s dtype holds them, for matching labels by value. Floats are
    compared in ``y``'s precision (a float32 label 0.1 is the class 0.1); a float ``y`` whose precision merges two
    classes is refused in one line (a declared dtype narrower than float64: ``read_csv`` never infers one)."""
    yk, ck = y.dtype.kind, public.dtype.kind
    numeric = "biuf"
    if yk == "f" and ck in numeric and y.dtype != np.float64:
        cast = public.astype(y.dtype)
        if len(np.unique(cast)) != len(public):
            raise ValueError(f"y's dtype {y.dtype} cannot tell the classes apart: pass y as float64")
        return cast
    return public


def _label_key(v: Any) -> tuple | None:
    """What a label or a class is matched by where either side is text (:func:`torchdpgmm.datafile.class_key`, as
    the command line matches ``--classes``): a number by its exact value, whatever its type (``1``, ``1.0``, ``"1"``,
    ``" 1.0 "``, ``Decimal("1")``; ``np.float32(0.1)`` and ``"0.1"``, a float by its shortest text in its own
    precision; ``True`` and ``"true"`` are 1), text (``bytes`` decoded as UTF-8) by its text; None (matching no class)
    for a NaN or an infinity (a missing value, as None and pandas' NA) and anything else. Never raises."""
    try:
        return _label_key_of(v)
    except Exception:  # an exotic type (numpy's timedelta64 claims to be an Integral): no class, never an error
        return None


def _label_key_of(v: Any) -> tuple | None:
    from torchdpgmm.datafile import class_key

    if isinstance(v, (np.datetime64, np.timedelta64)):
        return None
    if isinstance(v, (bytes, np.bytes_)):
        v = bytes(v).decode("utf-8", "replace")
    if isinstance(v, (str, np.str_)):
        return class_key(str(v).strip())
    if isinstance(v, (bool, np.bool_)):
        return ("number", Fraction(int(v)))
    if isinstance(v, numbers.Rational):  # ints of any size, numpy ints, Fraction: exact, no text
        return ("number", Fraction(int(v.numerator), int(v.denominator)))
    if isinstance(v, Decimal):
        return ("number", v) if v.is_finite() else None
    if isinstance(v, numbers.Real):
        f = float(v)
        return class_key(str(v)) if math.isfinite(f) else None  # equal values hash equal: Decimal, Fraction alike
    return None


def _rows_to_score(est: Any, X: Any) -> np.ndarray:
    """Rows given to a fitted estimator (``predict``, ``transform``, ...) checked as scikit-learn checks them, its
    refusal in one line: its message on a NaN goes on for five sentences about HistGradientBoosting and imputers."""
    try:
        return validate_data(est, _detached(X), reset=False, dtype=np.float64)
    except ValueError as exc:
        first = str(exc).strip().split("\n")[0]
        if first == str(exc).strip() or not ("NaN" in first or "infinity" in first):
            raise  # (scikit-learn's checks want its own text for the other refusals, e.g. "Reshape your data")
        raise ValueError(f"{first} (rows to score must be finite: drop or impute such rows first)") from None


class _PublicLabelsMixin:
    """What both estimators share: the public class set, label encoding against it, and the seeds of the
    fit and sample streams (``random_state``)."""

    def __sklearn_is_fitted__(self) -> bool:
        """Fitted once a release was kept (``model_``): a refused fit leaves ``n_features_in_`` and its other
        input attributes behind, but no model (scikit-learn's ``check_is_fitted`` asks this)."""
        return hasattr(self, "model_")

    def _check_budget(self) -> None:
        for name in ("epsilon", "delta"):
            v = getattr(self, name)
            if not _is_real_scalar(v):
                raise TypeError(f"{name} must be a real scalar (one release per fit), got {type(v).__name__}"
                                + (f" of shape {np.shape(v)}" if np.ndim(v) else ""))
        check_epsilon(self.epsilon)
        check_delta(self.delta)

    def _device(self) -> torch.device:
        """``device`` as a ``torch.device``; a wrong type or an unknown name is refused in one line (public)."""
        dev = self.device
        if not isinstance(dev, (str, torch.device)) or isinstance(dev, bool):
            raise TypeError(f"device must be a string such as 'cpu' or 'cuda', got {type(dev).__name__}")
        try:
            dev = torch.device(dev)
        except (RuntimeError, ValueError):
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {self.device!r}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' but no CUDA GPU is available; use device='cpu'")
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        return dev

    def _check_random_state(self) -> None:
        rs = self.random_state
        if not (rs is None or isinstance(rs, np.random.RandomState)
                or (isinstance(rs, numbers.Integral) and not isinstance(rs, bool))):
            raise TypeError(f"random_state must be an int, a numpy RandomState or None, got {type(rs).__name__}")
        if isinstance(rs, numbers.Integral) and rs < 0:
            raise ValueError(f"random_state must be >= 0, got {rs}")

    def _read_private_xy(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """``validate_data`` for private training data. Non-finite values pass and a cell that is not a
        number becomes NaN (the release drops such rows); the errors for malformed input name public facts
        (dimensions, dtype kinds), never a value or the number of rows (private under add/remove)."""
        import scipy.sparse

        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X, y = _detached(X), _detached(y)
        if hasattr(X, "iloc") and not hasattr(X, "columns"):  # a Series: one column or one row, which is unclear
            raise ValueError("Expected 2D array, got a 1-D Series: X must have one row per record (a DataFrame, or "
                             "series.to_frame() for one feature)")
        if hasattr(X, "iloc") and hasattr(X, "dtypes"):  # a DataFrame: its dtypes are public schema
            X = _dataframe_numbers_or_nan(X, discrete_hint=hasattr(self, "discrete"))
        if not hasattr(X, "iloc") and not scipy.sparse.issparse(X):  # DataFrames keep their column names
            if isinstance(X, (list, tuple)):  # no dtype or shape of its own: row by row at a public width
                Xa = _list_rows(X, _public_width(getattr(self, "bounds", None)))
            else:
                Xa = np.asarray(X) if hasattr(X, "dtype") else np.asarray(X, dtype=object)
            if Xa.ndim != 2:
                raise ValueError(f"Expected 2D array, got {Xa.ndim}-D: X must have one row per record")
            if Xa.shape[1] == 0:
                raise ValueError("X has 0 feature(s) (columns); at least one is required")
            if Xa.dtype.kind == "c":  # possibly inferred from one cell: read cell by cell
                X = Xa = _real_or_nan(Xa)
            if Xa.dtype.kind in "OUS":
                X = _numbers_or_nan(Xa)
        try:
            # ensure_min_samples=0: under add/remove N = 0 is a dataset like any other (released from noise)
            with np.errstate(all="ignore"):  # a longdouble beyond float64 casts to inf silently (no print on a value)
                X = validate_data(self, X, dtype=np.float64, ensure_min_samples=0, ensure_all_finite=False)
        except ValueError as exc:
            if "convert" in str(exc).lower():
                raise ValueError("X must hold numbers only (a value could not be converted to float)") from None
            raise
        try:  # a typed container's dtype is public schema; a list has none, and numpy would infer one from the
            # values (turning every number into a string when one label is a string): its labels stay objects,
            # each matched by value
            ya = np.asarray(y) if hasattr(y, "dtype") else np.asarray(y, dtype=object)
        except ValueError:  # ragged: numpy's message would quote the number of rows (private)
            raise ValueError("y must be a 1-D array of labels, one per row (got nested sequences of different "
                             "lengths)") from None
        if ya.ndim == 2 and ya.shape[1] != 1 or ya.ndim > 2:
            raise ValueError(f"y must be 1-D (one label per row), got {ya.ndim} dimension(s)")
        y = column_or_1d(ya, warn=True)
        if len(y) != X.shape[0]:
            raise ValueError("X and y must have the same number of rows")
        return X, y

    def _public_classes(self) -> np.ndarray | None:
        if self.classes is None:
            return None
        if isinstance(self.classes, (list, tuple)) and len({isinstance(v, (str, bytes)) for v in self.classes}) > 1:
            # np.asarray would turn the numbers into strings, and rows labelled with the numbers would be dropped
            raise TypeError("classes must be mutually comparable labels (all strings or all numbers)")
        try:
            c = np.asarray(self.classes)
        except Exception as exc:  # pragma: no cover - exotic input
            raise TypeError(f"classes must be a 1-D list of labels: {exc}") from None
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"classes must be a non-empty 1-D list of labels, got shape {c.shape}")
        if c.dtype.kind == "f" and not np.all(np.isfinite(c)):
            raise ValueError("classes must not contain NaN or inf")
        if c.dtype.kind == "O" and any(v is None or (isinstance(v, float) and math.isnan(v)) for v in c):
            raise ValueError("classes must not contain None or NaN")
        try:
            u = np.unique(c)
        except TypeError:
            raise TypeError("classes must be mutually comparable labels (all strings or all numbers)") from None
        if len(u) != len(c):
            raise ValueError("classes contains duplicates")
        keys: dict[Any, Any] = {}
        for v in u:  # labels are matched by value where text is involved: "1" and "1.0" are one class
            k = _label_key(v)
            if k is not None and keys.setdefault(k, v) != v:
                raise ValueError(f"classes name one class twice: {str(keys[k])!r} and {str(v)!r} are the same value")
        return u

    def _seed(self, stream: int = _FIT_STREAM) -> int:
        """A seed for ``stream`` (fit or sample): fresh OS entropy when ``random_state`` is None, else a
        child of ``random_state`` (so fit and sample never share noise, and a refit reproduces)."""
        rs = self.random_state
        if rs is None:  # fresh OS entropy
            return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] % 2**62)
        if isinstance(rs, np.random.RandomState):
            return int(rs.randint(0, 2**31 - 1))
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool):
            return child_seed(rs, stream)
        raise TypeError(f"random_state must be an int, a numpy RandomState or None, got {type(rs).__name__}")

    def _encode_labels(self, y: np.ndarray, public: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Class indices of ``y``: against the public classes (sound) or ``np.unique(y)`` (as-published)."""
        if public is None:
            classes, idx = np.unique(y, return_inverse=True)
            if len(classes) < 2:
                raise ValueError("y has a single class; the as-published release needs at least 2 "
                                 "(or pass classes=[...])")
            return classes, idx
        # labels outside the public set (NaN, unknown values, other types) get index -1; the sound release drops
        # such rows branch-free, and nothing is refused on a label: a dtype may be inferred from the private cells
        # (pandas' read_csv makes a numeric label column text when one cell is not a number)
        if y.dtype.kind in "biuf" and public.dtype.kind in "biuf":  # numbers: one vectorised search, no Python step
            cls = _classes_in_dtype_of(public, y)  # (nor exception) per label
            order = np.argsort(cls, kind="stable")
            pos = np.minimum(np.searchsorted(cls[order], y), len(cls) - 1)
            return public, np.where(cls[order][pos] == y, order[pos], -1).astype(np.int64)
        # text on either side: by the label key, the classes' own scalars (a float32 class keeps its precision)
        lookup = {_label_key(c): i for i, c in enumerate(public)}
        lookup.pop(None, None)
        if y.dtype.kind in "biufUS":  # typed: the key of each distinct label once
            uniq, inv = np.unique(y, return_inverse=True)
            return public, np.array([lookup.get(_label_key(u), -1) for u in uniq], np.int64)[inv.ravel()]
        seen: dict[Any, int] = {}  # objects: one key per distinct (type, value), hashable ones remembered

        def index(v: Any) -> int:
            try:
                return seen[(type(v), v)]
            except KeyError:
                out = seen[(type(v), v)] = lookup.get(_label_key(v), -1)
                return out
            except TypeError:  # unhashable (a list): no class
                return -1

        return public, np.fromiter((index(v) for v in y), dtype=np.int64, count=len(y))


class DPGaussianMixture(_PublicLabelsMixin, ClassifierMixin, BaseEstimator):
    """Differentially private class-conditional Gaussian mixture (one Gaussian per class).

    Parameters
    ----------
    epsilon, delta : float
        The privacy budget of the release (real scalars; ``0 < delta < 1``).
    classes : array-like of labels, default None
        The public class set. Required in ``mode="sound"`` (never read from ``y``): pass e.g.
        ``classes=["setosa", "versicolor", "virginica"]`` or ``classes=np.arange(10)``.
        Stored sorted in ``classes_``. Optional in as-published mode (then ``np.unique(y)``).
    clip_bound : float, default None
        Public per-record L2 bound ``B``; records are clipped to it. Required in sound mode unless ``bounds``
        is given (then it is optional and in unit-box units, default ``Bounds.clip_bound_for(center)``: about the
        private centre ``CENTRED_CLIP_RADIUS = 1/2`` (the ball inscribed in the box), about the box's middle ``CLIP_FRACTION * sqrt(d)/2``;
        records farther from the centre are pulled onto that sphere, for less noise than ``sqrt(d)/2``, which clips
        nothing inside the bounds about the box's middle; see :mod:`torchdpgmm.bounds`); refused in as-published
        mode (which does not clip).
    bounds : default None
        Public per-feature ranges (see :class:`torchdpgmm.bounds.Bounds`): one ``(lower, upper)`` pair for
        every column, a list of d pairs, ``(lower_array, upper_array)`` (diffprivlib's form; with two columns a
        2 x 2 form valid both ways is refused as ambiguous), a dict ``{column: (lower, upper)}`` for a DataFrame,
        or a ``Bounds``. Sound mode only. ``X`` is mapped affinely into the unit box (records outside the bounds are clipped
        into it), released there (about a private centre released first with a share of the budget, the default
        ``center="noisy-mean"``, or about the box's middle with ``center="box"``; see ``center``), and the released model is expressed in the user's
        units (``means_``, ``covariances_``; ``predict``, ``predict_proba`` and ``score`` take raw ``X`` and map it
        as the release mapped its records: into the box, then onto the clipping ball, see ``clip_radius_``);
        ``sample`` draws rows from the released model restricted to the bounds (never clipped onto them). Every column is treated as continuous: one-hot encode or drop categorical
        columns first (a DataFrame column of dtype ``category`` is refused, naming it; a ``bool`` column is 0 / 1).
    center : {"noisy-mean", "box"}, default None
        With ``bounds`` only (refused without them): where the records are clipped in the unit box. None or
        ``"noisy-mean"``: a private centre is released first with ``CENTRE_FRACTION`` of the budget (the noisy
        mean of the records, shrunk toward the box's middle by how noisy it is) and the mixture is clipped about
        it (:mod:`torchdpgmm.release.centring`; its blocks are in ``privacy_``). ``"box"``: one stage about the
        box's middle. Chosen on validation splits (``docs/results/centre-rule.json``).
    discrete : list of column names or indices, default None
        Public: the integer-valued columns (counts, ordinals, one-hot 0/1 columns, e.g. from
        ``pandas.get_dummies(df, dtype=int)``). Needs ``bounds`` with integer ends for them. The release
        treats them as continuous (a Gaussian model of an integer column); ``sample`` rounds them to the
        nearest integer and clips them into the bounds (post-processing), so synthetic rows carry the user's
        integer values. A one-hot group is an entry that is itself a tuple or list of columns, e.g.
        ``discrete=["kids", ("red", "green", "blue")]`` (bounds (0, 1) each): ``sample`` sets exactly one of
        them to 1, the largest (:meth:`torchdpgmm.bounds.Bounds.clip_rows`). Names or indices that are not
        columns of ``X`` are refused in one line.
    mechanism : {"kl", "gaussian", "colored", "laplace", "r1smg"}, default "kl"
        ``"kl"``: the KL-optimal budget split (Liu, Scaglione & Peisert 2025); the others are the
        baselines of that paper's Sec. V-A (``"r1smg"`` only as-published).
    mode : {"sound", "as-published"}, default "sound"
    adjacency : {"add-remove", "replace-one"}, default "add-remove"
        Neighbouring datasets in sound mode. As-published mode is label-flip only, whatever this says;
        it refuses ``"replace-one"`` so that the two are not confused.
    covariance_type : {"auto", "full", "tied", "diag", "spherical"}, default "auto"
        ``"auto"`` (:mod:`torchdpgmm.release.covariance_rule`) releases the per-class and the pooled second moments
        and shrinks full -> tied -> diagonal with weights computed from released values and the public noise
        scales only, so that one default serves many classes at small epsilon and few classes at large
        epsilon (validation splits only: ``docs/results/covariance-rule.json``); its fitted attributes have
        the ``"full"`` layout. The others as in :class:`sklearn.mixture.GaussianMixture` (sound mode;
        as-published releases ``"full"`` only, which ``"auto"`` resolves to there).
    variant : str, default None
        Design variant of ``mechanism="kl"`` in as-published mode (``"as-published"``, ``"global"``, ``"exact-kl"``).
    random_state : int, numpy RandomState or None
        ``fit`` seeds a fresh ``torch.Generator`` from it, so the same int gives the same model on every
        refit. ``sample`` seeds its own generator the same way (as ``GaussianMixture.sample``).
    device : str, default "cpu"
        Torch device of the release (``"cuda"`` needs a GPU).

    Attributes
    ----------
    weights_ (K,), means_ (K, d), covariances_, precisions_cholesky_
        The released model in the layout of ``sklearn.mixture.GaussianMixture`` for the chosen
        ``covariance_type``: (K, d, d) for ``"full"`` and ``"auto"``, (d, d) for ``"tied"``, (K, d) for
        ``"diag"``, (K,) for ``"spherical"``.
    classes_ (K,), n_features_in_, feature_names_in_ (when X has column names)
    model_ : :class:`torchdpgmm.mixture.LabeledGMM` the released model.
    privacy_ : :class:`torchdpgmm.privacy.PrivacyRecord` with float ``epsilon`` and ``delta``.
    center_ (d,)
        With ``bounds``: the centre the records were clipped about, in the user's units (the released private
        centre for ``center="noisy-mean"``, the box's middle for ``"box"``).
    clip_radius_ : float
        Sound mode: the radius the records were clipped to (with ``bounds`` in unit-box units about the centre,
        without them ``clip_bound`` about the origin). With ``covariance_type="auto"`` (the default,
        :data:`PULLED_COVARIANCE_TYPES`) ``predict``, ``predict_proba``, ``predict_log_proba`` and ``score``
        (accuracy) pull their input onto the same ball first: public post-processing, so that the released model and
        its input describe the same clipped records (issue 37). ``score_samples`` and ``score(X)`` (log-likelihood)
        evaluate the density at ``X`` as given.
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, *, classes: Any = None,
                 clip_bound: float | None = None, mechanism: str = "kl", mode: str = "sound",
                 adjacency: str = "add-remove", covariance_type: str = "auto", variant: str | None = None,
                 random_state: Any = None, device: str = "cpu", bounds: Any = None,
                 discrete: Any = None, center: str | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.classes = classes
        self.clip_bound = clip_bound
        self.bounds = bounds
        self.discrete = discrete
        self.center = center
        self.mechanism = mechanism
        self.mode = mode
        self.adjacency = adjacency
        self.covariance_type = covariance_type
        self.variant = variant
        self.random_state = random_state
        self.device = device

    # ------------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # predict / score refuse NaN; a sound fit drops non-finite training rows (a refusal would reveal them)
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        # a DP release at epsilon=1 on the few dozen rows of the common checks is noisy by design
        tags.classifier_tags.poor_score = True
        tags.classifier_tags.multi_label = False
        return tags

    # ------------------------------------------------------------------ parameter checks
    def _check_params(self) -> None:
        """Validate every constructor argument (public values only) before data or noise are touched."""
        self._check_budget()
        self._check_random_state()
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES} (as-published only by name), got {self.mode!r}")
        if self.mechanism not in _MECHANISMS:
            raise ValueError(f"mechanism must be one of {_MECHANISMS}, got {self.mechanism!r}")
        if self.adjacency not in _ADJACENCIES + ("label-flip",):
            raise ValueError(f"adjacency must be one of {_ADJACENCIES}, got {self.adjacency!r}")
        if self.covariance_type not in _COVARIANCE_TYPES + ("auto",):
            raise ValueError(f"covariance_type must be one of {_COVARIANCE_TYPES + ('auto',)}, "
                             f"got {self.covariance_type!r}")
        supported = _supported_covariance_types(self.mode)
        if self.covariance_type not in supported:
            raise ValueError(f"covariance_type={self.covariance_type!r} is not supported in mode={self.mode!r} "
                             f"by this build's release; use one of {supported}")
        self._device()
        if self.mode == "sound":
            self._check_sound_params()
        else:
            self._check_as_published_params()

    def _check_sound_params(self) -> None:
        if self.classes is None:
            raise ValueError(
                "mode='sound' needs the public class set: pass classes=[...] (e.g. "
                "DPGaussianMixture(classes=['a', 'b', 'c'], clip_bound=B)); it is never read from y, which "
                "would leak which classes occur")
        _precheck_bounds(self.bounds)
        _precheck_discrete(self.discrete, self.bounds)
        if self.clip_bound is None and self.bounds is None:
            raise ValueError("mode='sound' needs clip_bound=B, a public per-record L2 bound chosen without "
                             "looking at the data (records are clipped to it), or public bounds=(lower, upper)")
        if self.clip_bound is not None:
            check_clip_bound(self.clip_bound)
        if self.center is not None:
            from torchdpgmm.bounds import check_center

            check_center(self.center)
            if self.bounds is None:
                raise ValueError("center= applies with public bounds only (without them records are clipped about "
                                 "the origin to clip_bound)")
        if self.mechanism not in _SOUND_MECHANISMS:
            raise ValueError(f"mechanism {self.mechanism!r} has no sound mode; use one of {_SOUND_MECHANISMS}")
        if self.adjacency not in _ADJACENCIES:
            raise ValueError(f"adjacency in sound mode must be one of {_ADJACENCIES}, got {self.adjacency!r}")
        if self.variant is not None:
            raise ValueError("variant applies to mode='as-published' only (the sound 'kl' split is public)")

    def _check_as_published_params(self) -> None:
        if self.center is not None:
            raise ValueError("center applies to mode='sound' with bounds only")
        if self.bounds is not None:
            raise ValueError("bounds apply to mode='sound' only: the as-published mechanism does not clip")
        if self.discrete is not None:
            raise ValueError("discrete applies to mode='sound' only (it needs public bounds)")
        if self.clip_bound is not None:
            raise ValueError("clip_bound applies to mode='sound' only: the as-published mechanism does not clip")
        if self.adjacency == "replace-one":
            raise ValueError("mode='as-published' is label-flip (label-level) only; adjacency='replace-one' "
                             "needs mode='sound'")

    # ------------------------------------------------------------------ fit
    @checks_budget  # the one budget rule, first (refuse epsilon > 1e3 / delta >= 0.5, warn above 10 / 1e-3 once;
    # the wrapper is one more frame: fit's own warnings use stacklevel=3 to point at the caller's line)
    def fit(self, X: Any, y: Any) -> "DPGaussianMixture":
        """Release the class-conditional GMM of ``(X, y)`` (Liu, Scaglione & Peisert 2025 eq. (2) + noise).

        All checks of public things (parameters, shapes, dtypes) run before any noise is drawn. In sound
        mode rows whose features are not finite or whose label is not among ``classes`` are dropped by the
        release without a branch on them (an error would reveal that such a row exists; under add/remove a
        dropped row is a removal); ``torchdpgmm.release.evaluation.check_settings`` reports them to the data owner.
        The as-published mode refuses them. Returns ``self``; only the released model is kept.
        """
        self._check_params()
        _check_discrete_schema(self.discrete, self.bounds, X)  # public schema, before a value is read
        _forget_fit(self)
        public = self._public_classes()
        sound = self.mode == "sound"
        if sound:  # y is matched against the public classes, never checked value by value
            X, y = self._read_private_xy(X, y)
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=1, y_numeric=False)
            check_classification_targets(y)
        if self.mode == "as-published":
            warnings.warn(AS_PUBLISHED_WARNING, AsPublishedWarning, stacklevel=3)
        else:
            names = getattr(self, "feature_names_in_", None)
            self.bounds_ = _discrete_bounds(self.discrete, _fit_bounds(self.bounds, X.shape[1], names), names)
            self.discrete_ = np.asarray([] if self.bounds_ is None else self.bounds_.integer, dtype=np.int64)
            clip = self.clip_bound if self.clip_bound is not None else self.bounds_.clip_bound_for(self.center)
            check_clip_bound(clip, X.shape[1])
            if self.bounds_ is not None:  # public: d and the centring (a bound holding the whole box only adds noise)
                self.bounds_.check_clip_bound(clip, self.center)
            if self.bounds is not None:
                X = self.bounds_.to_unit(X)  # NaN kept: the release drops the row
        classes, idx = self._encode_labels(y, public)
        if not sound and (idx < 0).any():  # as-published is not private: its labels are checked
            raise ValueError("y has labels that are not among classes (mode='as-published' refuses them)")
        from torchdpgmm.release import release

        device = self._device()
        Xt = torch.tensor(np.ascontiguousarray(X), dtype=torch.float64, device=device)  # a copy: X may be read-only
        yt = torch.as_tensor(idx, dtype=torch.long, device=device)
        g = torch.Generator(device=device).manual_seed(self._seed())
        kw: dict[str, Any] = {}
        if self.mode == "sound":
            kw.update(clip_bound=float(clip), adjacency=self.adjacency)
            if self.covariance_type != "full":
                kw["covariance_type"] = self.covariance_type
        elif self.variant is not None:
            kw["variant"] = self.variant
        if self.bounds is not None:  # clip_bound None: the centre's default (a private radius about the private centre)
            rel = release_in_unit_box(Xt, yt, len(classes), float(self.epsilon), float(self.delta), self.bounds_,
                                      center=self.center, generator=g, mechanism=self.mechanism,
                                      **(kw | {"clip_bound": self.clip_bound}))
        else:
            rel = release(Xt, yt, len(classes), float(self.epsilon), float(self.delta), mechanism=self.mechanism,
                          mode=self.mode, generator=g, **kw)
        if self.mode == "sound":  # public values: the discrete samplers' share of delta; refused before it is kept
            check_sampler_delta(rel.privacy.epsilon, rel.privacy.delta, rel.privacy.delta_sampler, stacklevel=3)
        self.model_ = rel.model
        if self.bounds is not None:  # back to the user's units; the clipping centre (released, or the box's middle)
            self.model_ = self.bounds_.model_from_unit(rel.model)
            c = rel.extras.get("centre", self.bounds_.unit_center)
            self.center_ = np.asarray(self.bounds_.from_unit(c.detach().cpu().numpy(), clip=False), dtype=np.float64)
            self._clip_centre_unit = c.detach().cpu().numpy().astype(np.float64)
            self.clip_radius_ = float(rel.extras.get("clip_radius", rel.extras.get("clip_bound", clip)))
        elif self.mode == "sound":
            self.clip_radius_ = float(clip)
        self.privacy_ = _float_record(rel.privacy)
        if self.mode == "sound":  # from released values only (post-processing)
            from torchdpgmm.release.diagnostics import warn_sound_release

            d, B = rel.model.means.shape[-1], float(kw["clip_bound"])  # the means' public box: unit box or [-B, B]
            box = ([0.0] * d, [1.0] * d) if self.bounds is not None else ([-B] * d, [B] * d)
            warn_sound_release(rel, *box, getattr(self, "feature_names_in_", None), stacklevel=3)
        if self.mode == "sound" and self.random_state is not None:
            warnings.warn(SEEDED_NOISE_NOTE, SeededNoiseWarning, stacklevel=3)
            self.privacy_ = with_seeded_noise_note(self.privacy_)
        self.classes_ = classes
        self._set_gmm_attributes()
        return self

    def _set_gmm_attributes(self) -> None:
        """``covariances_`` / ``precisions_cholesky_`` in the layout of ``GaussianMixture(covariance_type=...)``:
        full (K, d, d), tied (d, d), diag (K, d), spherical (K,); precision = P P^T with P = (L^{-1})^T."""
        m = self.model_.to(torch.device("cpu")).to(torch.float64)
        self.weights_ = m.weights.numpy().copy()
        self.means_ = m.means.numpy().copy()
        cov = m.covariances
        eye = torch.eye(m.dim, dtype=torch.float64).expand_as(cov)
        prec_chol = torch.linalg.solve_triangular(m.scale_tril, eye, upper=False).transpose(-1, -2)
        var = torch.diagonal(cov, dim1=-2, dim2=-1)
        layout = {
            "full": (cov, prec_chol),
            "auto": (cov, prec_chol),  # a full covariance per class, shrunk toward the pooled one
            "tied": (cov[0], prec_chol[0]),
            "diag": (var, var.rsqrt()),
            "spherical": (var.mean(-1), var.mean(-1).rsqrt()),
        }[self.covariance_type]
        self.covariances_ = layout[0].numpy().copy()
        self.precisions_cholesky_ = layout[1].numpy().copy()

    # ------------------------------------------------------------------ inference
    def _x(self, X: Any) -> torch.Tensor:
        X = _rows_to_score(self, X)
        return torch.tensor(np.ascontiguousarray(X), dtype=torch.float64, device=self.model_.device)

    def _x_released(self, X: Any) -> torch.Tensor:
        """``X`` through the public map the sound release applied to its records (post-processing of released and
        public values): with bounds into the unit box, then pulled onto the ball of radius ``clip_radius_`` about the
        released centre, and back to the user's units; without bounds pulled onto the ball ``clip_bound`` about the
        origin. Only for the covariance types of :data:`PULLED_COVARIANCE_TYPES` (the default ``"auto"``); the others
        and as-published mode (which does not clip) take ``X`` as given."""
        from torchdpgmm.mechanisms import clip_records

        Xt = self._x(X)
        R = getattr(self, "clip_radius_", None)
        if self.mode != "sound" or R is None or self.covariance_type not in PULLED_COVARIANCE_TYPES:
            return Xt
        if getattr(self, "bounds_", None) is None or self.bounds is None:
            return clip_records(Xt, R)
        c = torch.as_tensor(self._clip_centre_unit, dtype=torch.float64, device=Xt.device)
        U = c + clip_records(self.bounds_.to_unit(Xt), R, center=c)
        return self.bounds_.from_unit(U, clip=False)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """``log p(y = k | x)`` under the released model, columns in ``classes_`` order; ``x`` first mapped as the
        release mapped its records (:meth:`_x_released`: in sound mode pulled onto the clipping ball)."""
        check_is_fitted(self, "model_")
        lp = self.model_.class_log_prob(self._x_released(X))
        return (lp - torch.logsumexp(lp, -1, keepdim=True)).cpu().numpy()

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior class probabilities ``p(y = k | x)`` (columns in ``classes_`` order)."""
        check_is_fitted(self, "model_")
        return self.model_.predict_proba(self._x_released(X)).cpu().numpy()

    def predict(self, X: Any) -> np.ndarray:
        """Maximum-posterior class under the released model (its Bayes classifier) at ``x`` mapped as the release
        mapped its records (:meth:`_x_released`), so that the model and its input describe the same clipped records."""
        check_is_fitted(self, "model_")
        return self.classes_[self.model_.predict(self._x_released(X)).cpu().numpy()]

    def score_samples(self, X: Any) -> np.ndarray:
        """Per-sample marginal log-density ``log p(x) = log sum_k pi_k N(x; mu_k, Sigma_k)``."""
        check_is_fitted(self, "model_")
        return self.model_.log_prob(self._x(X)).cpu().numpy()

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Accuracy of the released Bayes classifier when ``y`` is given (``ClassifierMixin``: what
        ``cross_val_score`` and ``GridSearchCV`` use); the mean log-likelihood ``mean log p(x)``
        (``GaussianMixture.score``) when ``y`` is None."""
        if y is None:
            if sample_weight is not None:
                raise ValueError("sample_weight needs y (accuracy); the log-likelihood score is unweighted")
            return float(self.score_samples(X).mean())
        return super().score(X, y, sample_weight=sample_weight)

    def accuracy(self, X: Any, y: Any) -> float:
        """Fraction of ``y`` predicted correctly by the released model's Bayes classifier."""
        y = column_or_1d(np.asarray(y), warn=True)  # a column (n, 1) compared with (n,) broadcast to n x n
        return float(np.mean(self.predict(X) == y))

    def _n_parameters(self) -> int:
        """Free parameters: covariances (by ``covariance_type``, as GaussianMixture), means, weights."""
        K, d = self.means_.shape
        cov = {"full": K * d * (d + 1) // 2, "auto": K * d * (d + 1) // 2, "tied": d * (d + 1) // 2, "diag": K * d, "spherical": K}
        return int(cov[self.covariance_type] + K * d + K - 1)

    def bic(self, X: Any) -> float:
        """Bayesian information criterion ``-2 n mean log p(x) + p ln n`` of the released model on ``X``.

        Only meaningful on data that did NOT go into the release (a public or held-out sample), to
        compare released models (e.g. different epsilons or clip bounds) on the same data: the released
        parameters are not maximum-likelihood estimates of ``X``, so the usual large-sample argument for
        BIC as a model-order criterion does not apply.
        """
        n = np.asarray(X).shape[0] if hasattr(X, "shape") else len(X)
        return float(-2 * self.score(X) * n + self._n_parameters() * np.log(n))

    def aic(self, X: Any) -> float:
        """Akaike information criterion ``-2 n mean log p(x) + 2 p``; same caveat as :meth:`bic`."""
        n = np.asarray(X).shape[0] if hasattr(X, "shape") else len(X)
        return float(-2 * self.score(X) * n + 2 * self._n_parameters())

    # ------------------------------------------------------------------ synthetic data
    @_pandas_out  # fitted on a DataFrame: (DataFrame with the fit's column names, Series); else numpy arrays
    def sample(self, n_samples: int = 1, *, preserve_histogram: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n_samples`` synthetic ``(X, y)`` from the released model (post-processing, no privacy cost).

        With ``bounds``: from the released model restricted to the bounds (:func:`torchdpgmm.bounds.truncated_sample`:
        exact rejection, a row outside is drawn again; a class whose Gaussian puts almost no mass inside falls back to
        Gibbs sweeps inside, with a warning), so no continuous cell sits on a bound; discrete columns then rounded.

        ``preserve_histogram=True`` (default) fixes the class counts to the released histogram rescaled to
        ``n_samples`` (largest remainders); labels come sorted by class, as in ``GaussianMixture.sample``.
        """
        check_is_fitted(self, "model_")
        if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool):
            raise TypeError(f"n_samples must be an integer, got {type(n_samples).__name__} {n_samples!r}")
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        _check_sample_size(n_samples)
        from torchdpgmm.mixture import histogram_counts

        g = torch.Generator(device=self.model_.device).manual_seed(self._seed(_SAMPLE_STREAM))
        counts = None
        if preserve_histogram:
            src = self.model_.counts if self.model_.counts is not None else self.model_.weights
            counts = histogram_counts(src.to(torch.float64), int(n_samples))
        if getattr(self, "bounds_", None) is not None and self.bounds is not None:
            from torchdpgmm.bounds import truncated_sample

            # the model restricted to the public bounds (rejection; torchdpgmm.bounds.truncated_sample), never
            # clipped onto them; then discrete columns rounded (one-hot: argmax)
            x, y, fallback = truncated_sample(self.model_, self.bounds_.lower, self.bounds_.upper, g, counts=counts,
                                              n=int(n_samples))
            if fallback:
                warnings.warn(f"{fallback} of {int(n_samples)} synthetic rows come from a class whose released Gaussian "
                              "puts almost no mass inside the bounds: drawn by Gibbs sweeps inside them (approximate)",
                              UserWarning, stacklevel=2)
            return self.bounds_.clip_rows(x.cpu().numpy()), self.classes_[y.cpu().numpy()]
        if counts is not None:
            x, y, _ = self.model_.sample_counts(counts, g)
        else:
            x, y = self.model_.sample(int(n_samples), g)
        return x.cpu().numpy(), self.classes_[y.cpu().numpy()]


class DPSyntheticClassifier(_PublicLabelsMixin, ClassifierMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                             BaseEstimator):
    """The accounted synthetic-data pipeline as a scikit-learn classifier (docs/realdata.md, issue #20).

    ``fit`` runs :func:`torchdpgmm.pipelines.synthetic_classifier.release_pipeline`: a fixed public transform
    ``image_transform`` (``"dct14"``: the 14x14 low-frequency DCT of 28x28 images, so ``X`` has 784 columns; ``"none"``: the raw
    columns), a noisy mean, DP PCA to ``n_components``, scaling by ``radius`` into the unit ball, and the sound
    release of ``components_per_class`` Gaussians per class (None: the public rule, one below eps = 1.5, eight
    from there). ``class_rule`` (``"auto"``, the default: the tabular noise-aware rule of
    :mod:`torchdpgmm.release.covariance_rule` with a pooled block, inside the same budget; or ``"legacy"``, the
    older shrinkage) is how the class covariances are estimated
    (:class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineConfig`; validated in
    ``docs/results/synth-validation-class-rule.json`` on Fashion-MNIST's validation split). Every step that reads the data is a Gaussian block of ONE privacy record (``privacy_``);
    record-level DP under ``adjacency``. The defaults were chosen on Fashion-MNIST's validation split; the
    clip bounds ``mean_clip`` / ``pca_clip`` (L2, after the transform) suit pixel values in [0, 1]. Without
    ``bounds``, a uint8 ``X`` (array, tensor, or a DataFrame of uint8 columns; the dtype is public) is read as pixels
    ``k / 255`` by ``fit``, :meth:`transform` and :meth:`predict`, as the IDX loaders and ``torchdpgmm synthesize``
    read it (:meth:`inverse_transform` then returns [0, 1] units); float ``X`` is taken as given, and with ``bounds``
    nothing is rescaled (the bounds are in the user's units).

    Rows with a non-finite value or a label outside ``classes`` are dropped without a branch. One release
    serves any number of models at no further privacy cost: :meth:`sample` draws synthetic training data in
    the released feature space, :meth:`transform` maps real data there, :meth:`predict` is the released
    model's Bayes rule.

    ``image_transform=None`` (the default) is ``"none"`` with ``bounds`` and ``"dct14"`` without; ``n_components=None``
    (the default) is 40 for ``"dct14"`` and the table's width d for ``"none"`` (the DP PCA then only rotates), so
    ``DPSyntheticClassifier(classes=..., bounds=...)`` fits a table with no further argument.
    Any numeric table works with ``image_transform="none"`` (``n_components`` <= its width; the DP PCA then
    only rotates and truncates). ``bounds`` (public per-column ranges, as for :class:`DPGaussianMixture`) maps
    the table affinely into the box ``[-1/2, 1/2]^d`` (records outside clipped into it) before the pipeline;
    ``mean_clip``, ``pca_clip`` and ``radius`` left at None then default to
    :func:`torchdpgmm.bounds.table_pipeline_clips`: ``sqrt(d)/2`` (the ball that holds that box) for the mean,
    ``CLIP_FRACTION * sqrt(d)/2`` for the PCA and the class stage (without bounds: 14, 10 and 5, which suit
    pixel values in [0, 1]). :meth:`transform`,
    :meth:`predict` take raw rows in the user's units; :meth:`sample` returns rows of the released feature
    space, or, with bounds, rows in the user's units drawn from the released model restricted to the bounds
    (:meth:`inverse_transform`: exact up to the clipping when ``n_components`` equals the width, else the
    projection on the released subspace). ``discrete`` (with ``bounds``; as for :class:`DPGaussianMixture`): integer columns and one-hot
    groups, modelled as continuous and rounded in :meth:`sample` (an integer column to the nearest integer
    inside its integer bounds; a one-hot group to exactly one 1 at its largest value). A DataFrame column of
    dtype ``category`` is refused in one line naming it (one-hot encode it first); a ``bool`` column is 0 / 1.

    ``epsilon``, ``delta``: the budget of the whole pipeline (real scalars, the package's budget rule).
    ``random_state``: None (fresh OS entropy, for a release you publish) or an int (reproducible noise; a
    :class:`SeededNoiseWarning` says what that gives away). ``covariance_type`` (``"full"``, ``"tied"``, ``"diag"``,
    ``"spherical"``; default ``"full"``): applied as post-processing of the full release (the class stage's own rule,
    ``class_rule``, already shrinks toward a pooled covariance; :class:`DPGaussianMixture`'s ``"auto"`` is that rule
    and is not offered here).

    ``device`` (default ``"cpu"``; ``"cuda"`` needs a GPU): the torch device of the release, with a generator
    on that device; the released model stays there, and every method returns numpy arrays.

    Attributes: ``release_`` (the :class:`~torchdpgmm.pipelines.synthetic_classifier.PipelineRelease`),
    ``model_`` (its :class:`~torchdpgmm.pipelines.class_mixture.ClassMixture`), ``privacy_``, ``classes_``,
    ``components_per_class_``, ``n_features_in_``.
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, *, classes: Any = None,
                 adjacency: str = "add-remove", components_per_class: int | None = None,
                 covariance_type: str = "full", class_rule: str = "auto", image_transform: str | None = None,
                 n_components: int | None = None, radius: float | None = None, mean_clip: float | None = None, pca_clip: float | None = None,
                 random_state: Any = None, bounds: Any = None, discrete: Any = None, device: str = "cpu") -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.classes = classes
        self.adjacency = adjacency
        self.components_per_class = components_per_class
        self.covariance_type = covariance_type
        self.class_rule = class_rule
        self.image_transform = image_transform
        self.n_components = n_components
        self.radius = radius
        self.mean_clip = mean_clip
        self.pca_clip = pca_clip
        self.random_state = random_state
        self.bounds = bounds
        self.discrete = discrete
        self.device = device

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.classifier_tags.poor_score = True
        tags.classifier_tags.multi_label = False
        return tags

    def _check_params(self, n_features: int | None = None) -> "Any":
        """Every argument is public: checked (all but the width, ``n_features=None``) before the data are read,
        then again with the data's width, which builds the pipeline's config."""
        from torchdpgmm.pipelines.class_mixture import check_class_rule
        from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

        self._check_budget()
        self._check_random_state()
        self._device()
        if self.classes is None:
            raise ValueError("DPSyntheticClassifier needs the public class set: pass classes=[...]; it is never "
                             "read from y, which would leak which classes occur")
        self._public_classes()
        if self.adjacency not in _ADJACENCIES:
            raise ValueError(f"adjacency must be one of {_ADJACENCIES}, got {self.adjacency!r}")
        if self.covariance_type not in _COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {_COVARIANCE_TYPES}, got {self.covariance_type!r}")
        check_class_rule(self.class_rule)
        m = self.components_per_class
        if m is not None and (not isinstance(m, numbers.Integral) or isinstance(m, bool) or m < 1):
            raise ValueError(f"components_per_class must be None or an int >= 1, got {m!r}")
        if self.image_transform not in (None, "dct14", "none"):
            raise ValueError(f"image_transform must be None, 'dct14' or 'none', got {self.image_transform!r}")
        _precheck_bounds(self.bounds)
        _precheck_discrete(self.discrete, self.bounds)
        # None: the table default with bounds (raw columns), the image default without (issue 37 item 5)
        transform = self.image_transform or ("none" if self.bounds is not None else "dct14")
        if self.bounds is not None and transform != "none":
            raise ValueError("bounds need image_transform='none' (a table of raw columns)")
        for name in ("radius", "mean_clip", "pca_clip"):
            v = getattr(self, name)
            if v is None:
                continue
            if not (_is_real_scalar(v) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number (public, not read off the data), got {v!r}")
        out = 196 if transform == "dct14" else n_features
        n = self.n_components
        if n is None:  # the public rule: 40 DCT components of an image, every column of a table (d, public)
            n = 40 if transform == "dct14" else out
        if n is not None and (not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1
                              or (out is not None and n > out)):
            raise ValueError(f"n_components must be an int in [1, {out}] (the transformed width), got {n!r}"
                             if out is not None else f"n_components must be an int >= 1, got {n!r}")
        if n_features is None:
            return None
        if transform == "dct14" and n_features != 784:
            raise ValueError(f"image_transform='dct14' needs 28x28 images flattened to 784 columns, got {n_features}")
        from torchdpgmm.bounds import table_pipeline_clips

        dflt = table_pipeline_clips(n_features) if self.bounds is not None else (14.0, 10.0, 5.0)
        mean_clip, pca_clip, radius = (v if v is not None else f for v, f in
                                       zip((self.mean_clip, self.pca_clip, self.radius), dflt))
        return PipelineConfig(transform=transform, mean_clip=float(mean_clip), pca_clip=float(pca_clip),
                              n_components=int(n), radius=float(radius), covariance_type=self.covariance_type,
                              class_rule=self.class_rule,
                              components_per_class=None if m is None else int(m))

    def _model_device(self) -> torch.device:
        return self.model_.means.device

    def fit(self, X: Any, y: Any) -> "DPSyntheticClassifier":
        """Release the pipeline on ``(X, y)`` (class docstring); returns ``self``."""
        check_privacy_strength(self.epsilon, self.delta, override=False, warn=False)  # refused before X is read
        self._check_params()
        _check_discrete_schema(self.discrete, self.bounds, X)  # public schema, before a value is read
        _forget_fit(self)
        pixels = self._uint8_pixels(X)  # the dtype is public schema, read before any value
        X, y = self._read_private_xy(X, y)
        X = X / 255.0 if pixels else X
        cfg = self._check_params(X.shape[1])
        names = getattr(self, "feature_names_in_", None)
        self.bounds_ = _discrete_bounds(self.discrete, _fit_bounds(self.bounds, X.shape[1], names), names)
        X = self._centred_box(X)
        classes, idx = self._encode_labels(y, self._public_classes())
        from torchdpgmm.pipelines.synthetic_classifier import release_pipeline

        dev = self._device()
        g = torch.Generator(device=dev).manual_seed(self._seed())  # the generator lives where the data do
        rel = release_pipeline(torch.tensor(np.ascontiguousarray(X), device=dev),
                               torch.as_tensor(idx, dtype=torch.int64, device=dev), num_classes=len(classes), epsilon=float(self.epsilon), delta=float(self.delta),
                               adjacency=self.adjacency, config=cfg, generator=g)
        self.release_, self.model_, self.privacy_ = rel, rel.model, rel.privacy  # continuous noise: no delta_sampler
        from torchdpgmm.release.diagnostics import pipeline_noise_reason, warn_mostly_noise

        reason = pipeline_noise_reason(rel)  # released values only (post-processing)
        if reason is not None:
            warn_mostly_noise(reason=reason, stacklevel=2)
        if self.random_state is not None:
            warnings.warn(SEEDED_NOISE_NOTE, SeededNoiseWarning, stacklevel=2)
            self.privacy_ = with_seeded_noise_note(self.privacy_)
        self.classes_ = classes
        self.components_per_class_ = rel.config.components_per_class
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Real data in the released feature space (public transform, released projection, unit ball); a DataFrame
        under ``set_output(transform="pandas")``."""
        return self._features(X)

    def _features(self, X: Any) -> np.ndarray:
        """:meth:`transform` as an array, whatever ``set_output`` says (predict's input)."""
        check_is_fitted(self, "model_")
        pixels = self._uint8_pixels(X)
        X = _rows_to_score(self, X)
        X = self._centred_box(X / 255.0 if pixels else X)
        Xt = torch.tensor(np.ascontiguousarray(X), device=self._model_device())
        return self.release_.features(Xt).cpu().numpy()

    @property
    def _n_features_out(self) -> int:
        """Columns of :meth:`transform` (the released feature space), for ``get_feature_names_out`` and
        ``set_output``: ``dpsyntheticclassifier0, ...``."""
        return int(self.release_.pca.components.shape[0])

    def inverse_transform(self, F: Any) -> np.ndarray:
        """Released features back to rows of the table: ``m + R F V`` (the released mean ``m``, components
        ``V`` and public radius ``R``), then, with bounds, the user's units clipped into them (post-processing).
        Needs ``image_transform="none"``."""
        check_is_fitted(self, "model_")
        if self.release_.config.transform != "none":
            raise ValueError("inverse_transform needs image_transform='none' (the DCT features are not rows)")
        pca = self.release_.pca
        F = np.asarray(_detached(F), dtype=np.float64)
        if not np.all(np.isfinite(F)):
            raise ValueError("features must be finite (no NaN or inf)")
        F = torch.as_tensor(F, device=pca.components.device)
        if F.ndim != 2 or F.shape[1] != pca.components.shape[0]:
            raise ValueError(f"features must have shape (n, {pca.components.shape[0]}), got {tuple(F.shape)}")
        X = (pca.mean + float(self.release_.config.radius) * F @ pca.components).cpu().numpy()
        b = getattr(self, "bounds_", None)
        return X if b is None else b.from_unit(X + 0.5)

    def _uint8_pixels(self, X: Any) -> bool:
        """Whether ``X`` holds uint8 pixels to read as ``k / 255`` (as the IDX loaders and ``synthesize`` read them):
        without ``bounds`` an array, tensor or DataFrame whose dtype (every column's) is uint8; with bounds never (they
        are in the user's units). The dtype is public schema; no value is read."""
        if self.bounds is not None:
            return False
        X = _detached(X)
        if hasattr(X, "dtypes") and hasattr(X, "columns"):  # a DataFrame: every column uint8
            return len(X.columns) > 0 and all(getattr(t, "type", None) is np.uint8 for t in X.dtypes)
        dt = getattr(X, "dtype", None)
        return isinstance(dt, np.dtype) and dt == np.uint8

    def _centred_box(self, X: np.ndarray) -> np.ndarray:
        """With bounds: ``X`` mapped into ``[-1/2, 1/2]^d`` (public affine map, clipped; NaN kept); else ``X``."""
        b = getattr(self, "bounds_", None)
        return X if b is None else b.to_unit(X) - 0.5

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """``log p(y = k | x)`` under the released class mixtures, columns in ``classes_`` order."""
        check_is_fitted(self, "model_")
        lj = self.model_.log_joint(torch.as_tensor(self._features(X), device=self._model_device()))
        return (lj - torch.logsumexp(lj, -1, keepdim=True)).cpu().numpy()

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The released model's Bayes rule."""
        check_is_fitted(self, "model_")
        Xt = torch.as_tensor(self._features(X), device=self._model_device())
        return self.classes_[self.model_.predict(Xt).cpu().numpy()]

    def sample(self, n_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``n_samples`` synthetic ``(features, labels)`` in the released feature space, or with bounds rows in
        the user's units drawn from the released model restricted to the bounds (never clipped onto a bound),
        discrete columns rounded (post-processing); fitted on a DataFrame with bounds: a DataFrame with its column
        names and the labels as a Series."""
        check_is_fitted(self, "model_")
        if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool):  # as DPGaussianMixture.sample
            raise TypeError(f"n_samples must be an integer, got {type(n_samples).__name__} {n_samples!r}")
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        _check_sample_size(n_samples)
        g = torch.Generator(device=self._model_device()).manual_seed(self._seed(_SAMPLE_STREAM))
        b = getattr(self, "bounds_", None)
        if b is None:
            x, y = self.model_.sample(int(n_samples), generator=g)
            return x.cpu().numpy(), self.classes_[y.cpu().numpy()]
        from torchdpgmm.bounds import pipeline_rows_in_box

        rel = self.release_
        x, y, fallback = pipeline_rows_in_box(self.model_, rel.pca, float(rel.config.radius), int(n_samples), g)
        if fallback:
            warnings.warn(f"{fallback} of {int(n_samples)} synthetic rows come from a component whose released Gaussian"
                          " puts almost no mass inside the bounds: drawn inside them approximately (Gibbs sweeps, or "
                          "clipped with fewer components than columns)", UserWarning, stacklevel=2)
        x, y = b.clip_rows(b.from_unit(x, clip=False)), self.classes_[y.cpu().numpy()]  # discrete columns rounded
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            return x, y
        import pandas as pd  # pandas in, pandas out (as DPGaussianMixture.sample)

        return _sample_frame(self, x, names), pd.Series(y)


def _forget_fit(est: Any) -> None:
    """Drop what an earlier ``fit`` set (fitted attributes and their private helpers), so that a refit with other
    parameters leaves no stale ``center_``, ``clip_radius_`` or ``bounds_`` behind."""
    for name in [n for n in vars(est) if (n.endswith("_") and not n.startswith("__")) or n == "_clip_centre_unit"]:
        delattr(est, name)


def _check_sample_size(n_samples: int) -> None:
    """Refuse, in one line and before any allocation, more rows than fit in memory (public value)."""
    from torchdpgmm.modelfile import MAX_SAMPLE_ROWS

    if n_samples > MAX_SAMPLE_ROWS:
        raise ValueError(f"n_samples must be <= {MAX_SAMPLE_ROWS:.0e} (the rows are drawn in memory), got "
                         f"{n_samples}; draw in several calls instead")


def _float_record(record: Any) -> Any:
    """The record with plain-float ``epsilon`` / ``delta`` (a single release is never batched)."""
    changes = {}
    for name in ("epsilon", "delta"):
        v = getattr(record, name)
        if v is not None:
            a = v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v, dtype=np.float64)
            changes[name] = float(a.reshape(-1)[0])
    return replace(record, **changes)
