"""The released-model file: a documented, validated JSON schema.

A model file holds exactly one released labeled GMM (no batch dimension) and the privacy record it
was released under. Schema (``format_version`` 1)::

    {
      "format": "torchdpgmm.model",
      "format_version": 1,
      "library_version": "0.1.0",
      "num_classes": K, "dim": d,
      "class_names": [K strings],          # label values of the input data, in class-index order
      "feature_names": [d strings],
      "weights": [K floats],               # on the simplex
      "means": [[d floats] x K],
      "covariances": [[[d floats] x d] x K],   # symmetric positive definite
      "counts": [K ints] | null,           # the released class histogram (when the mechanism releases one)
      "privacy": {epsilon, delta, adjacency, accountant, mode, mechanism, split, notes, blocks, covered,
                  [seeded], [sampler_tv, sampler_draws]},   # PrivacyRecord.to_dict(); [..] only where they apply
      "bounds": {"lower": [d], "upper": [d], "names": [d], [integer], [onehot]} | null   # optional: public bounds
    }

``privacy.blocks`` lists every noised statistic (name, mechanism, sensitivity, noise_scale, norm, ...);
``seeded`` is written when the noise came from a user-given seed, ``sampler_tv`` / ``sampler_draws`` for the
exact discrete samplers. ``bounds.integer`` / ``bounds.onehot`` (with ``--discrete``) are the integer columns and
the one-hot groups (column indices) that ``sample`` rounds.

Bounds. A release made with public bounds (``torchdpgmm release --bounds``) ran in the unit box they map to;
the file stores the model MAPPED BACK into the user's units (means ``lower + (upper - lower) mu``, covariances
``diag(s) Sigma diag(s)``, exact for the affine map), so the means and covariances a user reads are in the
units of the data, and ``bounds`` records the box that ``torchdpgmm sample`` clips synthetic rows into.
A file without the field (older files) is read as having no bounds.

Only released (noisy) models can be written: :func:`save_model` requires a privacy record with a
positive finite epsilon. Loading validates every field and raises ``ValueError`` naming the problem:
the format, shapes, weights on the simplex, finite means and covariances with every entry within
``1e300`` in absolute value, symmetric positive definite covariances, unique class and feature names,
``privacy.mode`` one of ``"sound"`` / ``"as-published"``, epsilon and delta, and the bounds.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from torchdpgmm.privacy import PrivacyRecord
from torchdpgmm.bounds import Bounds
from torchdpgmm.mixture import LabeledGMM

__all__ = ["ModelFile", "atomic_write_text", "atomic_path", "save_model", "load_model", "model_to_dict", "model_from_dict", "FORMAT", "FORMAT_VERSION"]

FORMAT = "torchdpgmm.model"
FORMAT_VERSION = 1
MODEL_MODES = ("sound", "as-published")
_HUGE = 1e300  # a parameter beyond this cannot be sampled from or evaluated in float64
#: the most synthetic rows drawn in one call (``torchdpgmm sample -n``, ``DPGaussianMixture.sample``,
#: ``DPSyntheticClassifier.sample``): n rows of d float64 features plus labels must fit in memory; 10^8 rows of a
#: few features is a few GB, and more is refused in one line (draw in several calls instead)
MAX_SAMPLE_ROWS = 10 ** 8


class ModelFile:
    """A loaded model file: the model, its privacy record and the names of classes and features."""

    def __init__(self, model: LabeledGMM, privacy: PrivacyRecord, class_names: list[str], feature_names: list[str],
                 library_version: str = "", bounds: Bounds | None = None) -> None:
        self.bounds = bounds
        self.model = model
        self.privacy = privacy
        self.class_names = class_names
        self.feature_names = feature_names
        self.library_version = library_version

    def __repr__(self) -> str:
        return (f"ModelFile(K={self.model.num_classes}, d={self.model.dim}, epsilon={self.privacy.epsilon}, "
                f"delta={self.privacy.delta}, mode={self.privacy.mode!r})")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str, mode: int | None = None, *, prefix: str | None = None) -> None:
    """Write ``text`` to ``path`` atomically (temporary file + rename: never half a file), with the
    permissions of an ordinary new file (``0666 & ~umask``, i.e. 0644 usually; ``mkstemp`` alone gives 0600), or
    ``mode`` when given (the sweep's shared results: 0644 whatever the umask). ``prefix``: as
    :func:`atomic_path`'s."""
    with atomic_path(path, mode, prefix=prefix) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def atomic_path(path: str | Path, mode: int | None = None, *, prefix: str | None = None) -> Iterator[Path]:
    """``with atomic_path(out / "fig.png") as tmp: fig.savefig(tmp)``: a temporary file beside ``path`` with the same
    suffix (writers infer the format from it), renamed onto ``path`` when the block ends without an error and removed
    otherwise (Ctrl-C included), so ``path`` is never half written and never mixed from two runs. Permissions as
    :func:`atomic_write_text`'s. ``prefix``: the temporary file's name starts with it (default ``.<stem>.``; the
    sweep gives its one prefix, so that a killed run's leftovers are found by one pattern)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}." if prefix is None else prefix,
                               suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def model_to_dict(model: LabeledGMM, privacy: PrivacyRecord, class_names: Sequence[str] | None = None,
                  feature_names: Sequence[str] | None = None, bounds: Bounds | None = None) -> dict[str, Any]:
    """The model-file dict; ``bounds``: the public bounds of a release made in their unit box (the model
    given here is already in the user's units)."""
    from torchdpgmm import __version__

    if tuple(model.batch_shape) != ():
        raise ValueError(f"a model file holds one model; got batch_shape {tuple(model.batch_shape)} "
                         "(index the batch first, e.g. release.model[0])")
    if not isinstance(privacy, PrivacyRecord):
        raise TypeError("privacy must be a PrivacyRecord: only released models can be saved")
    record = privacy.to_dict()
    eps = record.get("epsilon")
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError("refusing to save a model whose privacy record has no positive finite epsilon "
                         f"(got {eps!r}; a batched record must be indexed to one release first)")
    K, d = model.num_classes, model.dim
    class_names = [str(c) for c in (class_names if class_names is not None else range(K))]
    feature_names = [str(f) for f in (feature_names if feature_names is not None else [f"x{i}" for i in range(d)])]
    if len(class_names) != K:
        raise ValueError(f"class_names has {len(class_names)} entries for {K} classes")
    if len(feature_names) != d:
        raise ValueError(f"feature_names has {len(feature_names)} entries for {d} features")
    if bounds is not None and (not isinstance(bounds, Bounds) or bounds.dim != d):
        raise ValueError(f"bounds must be a Bounds over the model's {d} features")
    m = model.to(torch.device("cpu")).to(torch.float64)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "num_classes": K,
        "dim": d,
        "class_names": class_names,
        "feature_names": feature_names,
        "weights": m.weights.tolist(),
        "means": m.means.tolist(),
        "covariances": m.covariances.tolist(),
        "counts": None if m.counts is None else [int(c) for c in m.counts.tolist()],
        "privacy": record,
        "bounds": None if bounds is None else bounds.to_dict(),
    }


def save_model(path: str | Path, model: LabeledGMM, privacy: PrivacyRecord, class_names: Sequence[str] | None = None,
               feature_names: Sequence[str] | None = None, bounds: Bounds | None = None) -> Path:
    """Write a released model to ``path`` as JSON (atomically: a crash never leaves half a file)."""
    payload = model_to_dict(model, privacy, class_names, feature_names, bounds)
    atomic_write_text(Path(path), json.dumps(payload, indent=2))
    return Path(path)


def _require(d: dict[str, Any], key: str) -> Any:
    if key not in d:
        raise ValueError(f"model file is missing the field {key!r}")
    return d[key]


def _privacy_record(d: Any) -> PrivacyRecord:
    """The file's ``privacy`` object as a record; a malformed one is refused naming what is wrong."""
    from dataclasses import MISSING, fields

    if not isinstance(d, dict):
        raise ValueError("the model file's privacy field must be a JSON object (the release's privacy record)")
    required = [f.name for f in fields(PrivacyRecord) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in d]
    if missing:
        raise ValueError(f"the model file's privacy record lacks {', '.join(missing)}")
    try:
        return PrivacyRecord.from_dict(d)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"the model file's privacy record is malformed: {exc}") from None


def model_from_dict(d: dict[str, Any]) -> ModelFile:
    """Validate a model-file dict and build the :class:`ModelFile` (raises ``ValueError`` on any problem)."""
    if not isinstance(d, dict):
        raise ValueError("model file must hold a JSON object")
    if d.get("format") != FORMAT:
        raise ValueError(f"not a torchdpgmm model file (format is {d.get('format')!r}, expected {FORMAT!r})")
    version = _require(d, "format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"unsupported format_version {version!r} (this library reads {FORMAT_VERSION})")
    K, dim = _require(d, "num_classes"), _require(d, "dim")
    if not (isinstance(K, int) and K >= 1 and isinstance(dim, int) and dim >= 1):
        raise ValueError("num_classes and dim must be positive integers")
    try:
        w = torch.tensor(_require(d, "weights"), dtype=torch.float64)
        mu = torch.tensor(_require(d, "means"), dtype=torch.float64)
        cov = torch.tensor(_require(d, "covariances"), dtype=torch.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model parameters are not numeric arrays: {exc}") from None
    if w.shape != (K,) or mu.shape != (K, dim) or cov.shape != (K, dim, dim):
        raise ValueError(f"parameter shapes {tuple(w.shape)}, {tuple(mu.shape)}, {tuple(cov.shape)} do not match "
                         f"num_classes={K}, dim={dim}")
    for name, t in (("means", mu), ("covariances", cov)):
        if not bool(torch.isfinite(t).all()) or bool((t.abs() > _HUGE).any()):
            raise ValueError(f"{name} must be finite numbers within 1e300 in absolute value")
    if not bool(torch.isfinite(w).all()):
        raise ValueError("weights must be finite numbers")
    if not torch.allclose(cov, cov.transpose(-1, -2), rtol=1e-9, atol=0.0) \
            or not bool((torch.linalg.cholesky_ex(cov).info == 0).all()):
        raise ValueError("covariances must be symmetric positive definite")
    counts = d.get("counts")
    if counts is not None:
        counts = torch.tensor(counts)
        if counts.shape != (K,) or counts.dtype.is_floating_point or bool((counts < 0).any()):
            raise ValueError("counts must be K non-negative integers")
        if int(counts.sum()) == 0:
            raise ValueError("counts must not all be zero (they are the class histogram that samples keep)")
    model = LabeledGMM(w, mu, cov, counts, validate_args=True)
    class_names = [str(c) for c in _require(d, "class_names")]
    feature_names = [str(f) for f in _require(d, "feature_names")]
    if len(class_names) != K or len(feature_names) != dim:
        raise ValueError("class_names / feature_names lengths do not match num_classes / dim")
    if len(set(class_names)) != K:
        raise ValueError("class_names must not repeat a class")
    if len(set(feature_names)) != dim:
        raise ValueError("feature_names must not repeat a column")
    bounds = d.get("bounds")
    if bounds is not None:
        bounds = Bounds.from_dict(bounds)
        if bounds.dim != dim:
            raise ValueError(f"bounds cover {bounds.dim} features, the model has {dim}")
        if bounds.names is not None and list(bounds.names) != feature_names:
            raise ValueError("bounds name other columns than feature_names (or in another order)")
    privacy = _privacy_record(_require(d, "privacy"))
    if not (isinstance(privacy.epsilon, (int, float)) and math.isfinite(privacy.epsilon) and privacy.epsilon > 0):
        raise ValueError("privacy.epsilon must be a positive finite number")
    if not (isinstance(privacy.delta, (int, float)) and 0 <= privacy.delta < 1):
        raise ValueError("privacy.delta must lie in [0, 1)")
    if privacy.mode not in MODEL_MODES:
        raise ValueError(f"privacy.mode must be one of {', '.join(MODEL_MODES)}")
    return ModelFile(model, privacy, class_names, feature_names, str(d.get("library_version", "")), bounds)


def load_model(path: str | Path) -> ModelFile:
    """Read and validate a model file written by :func:`save_model`."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no such model file: {path}")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a model file (not UTF-8 text)") from None
    return model_from_dict(d)
