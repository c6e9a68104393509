"""Reproducible studies behind ``torchdpgmm experiment STUDY``.

Each module in this package that defines a module-level ``STUDIES`` dict (name -> :class:`Study`) is
discovered automatically, so a new study is one new file, with no central registry to edit.

A study receives an :class:`ExperimentConfig` and returns a :class:`StudyResult`; :func:`run_study`
writes ``DIR/STUDY.json`` as ``{"study": ..., "config": {...}, "rows": [...]}``, the same rows as
``DIR/STUDY.csv`` and, when the study supplies a plot function, ``DIR/STUDY.png``. Every number that a
figure shows is a row of that JSON: nothing is drawn that is not also written.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import json
import math
import pkgutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = [
    "ExperimentConfig",
    "StudyResult",
    "Study",
    "available_studies",
    "get_study",
    "run_study",
    "mean_ci",
]


@dataclass
class ExperimentConfig:
    """Options common to every study; ``options`` holds the study-specific ones."""

    out: Path
    trials: int | None = None
    seed: int = 0
    device: str = "cpu"
    backend: str = "local"
    quick: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    #: the flags the user gave (``"trials"`` and ``options`` keys); None: every option that is not None and
    #: ``trials`` when not None (a Python caller's dict holds only what it means). Fixed by :func:`run_study`
    #: before it fills the study's default trials.
    given: frozenset[str] | None = None

    def is_given(self, key: str) -> bool:
        """Whether the user gave ``key`` (``"trials"`` or an option) explicitly."""
        if self.given is not None:
            return key in self.given
        return (self.trials if key == "trials" else self.options.get(key)) is not None

    def pick(self, key: str, full: Any, quick: Any) -> Any:
        """The one place where ``--quick`` meets an explicit flag: a value the user gave always wins (also
        under ``--quick``); otherwise ``quick`` under ``--quick``, else ``full`` (the study's default)."""
        if self.is_given(key):
            return self.trials if key == "trials" else self.options[key]
        return quick if self.quick else full

    def generator(self, offset: int = 0) -> torch.Generator:
        """A generator on the study's device, seeded ``seed + offset``: for draws of tensors on that device
        (noise, synthetic data, device-side permutations). The generator rule: docs/architecture.md."""
        g = torch.Generator(device=self.device)
        g.manual_seed(int(self.seed) + int(offset))
        return g

    def host_generator(self, offset: int = 0) -> torch.Generator:
        """A CPU generator seeded ``seed + offset``, for host-side draws (a split or subsample of rows indexed
        on the host, a seed). On a CPU run it is the stream ``generator(offset)`` gives, so CPU results do not
        depend on which of the two a study uses; a study never uses both with the same offset."""
        g = torch.Generator()
        g.manual_seed(int(self.seed) + int(offset))
        return g

    def as_dict(self) -> dict[str, Any]:
        d = {
            "trials": self.trials,
            "seed": self.seed,
            "device": self.device,
            "backend": self.backend,
            "quick": self.quick,
        }
        d.update(self.options)
        return d


@dataclass
class StudyResult:
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plot: Callable[[list[dict[str, Any]], Path], None] | None = None


@dataclass
class Study:
    name: str
    run: Callable[[ExperimentConfig], StudyResult]
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    default_trials: int | None = None


def _discover() -> dict[str, Study]:
    studies: dict[str, Study] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for name, study in getattr(mod, "STUDIES", {}).items():
            if name in studies:
                raise RuntimeError(f"study {name!r} defined twice")
            studies[name] = study
    return studies


_REGISTRY: dict[str, Study] | None = None


def available_studies() -> dict[str, Study]:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _discover()
    return dict(sorted(_REGISTRY.items()))


def get_study(name: str) -> Study:
    studies = available_studies()
    if name not in studies:
        raise ValueError(f"unknown study {name!r}; available: {', '.join(studies)}")
    return studies[name]


def _jsonable(v: Any) -> Any:
    if torch.is_tensor(v):
        v = v.detach().cpu()
        return v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    if hasattr(v, "item") and callable(v.item):  # numpy scalars
        try:
            return v.item()
        except Exception:
            pass
    return v


def _check_common(config: ExperimentConfig) -> None:
    """The options every study shares, checked before its folder is made (one line each): the seed, and a
    ``threads`` option (0 leaves torch's setting; a negative count was accepted and ignored)."""
    from torchdpgmm._validation import check_seed

    check_seed(config.seed, "--seed")
    threads = config.options.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise ValueError(f"--threads must be a whole number >= 0 (0: leave torch's setting), got {threads!r}")


def run_study(name: str, config: ExperimentConfig) -> dict[str, Any]:
    """Run a study and write ``STUDY.json``, ``STUDY.csv`` (and ``STUDY.png``) into ``config.out``."""
    study = get_study(name)
    if config.given is None:  # what was explicit, before the default trials are filled in
        config.given = frozenset([k for k, v in config.options.items() if v is not None]
                                 + (["trials"] if config.trials is not None else []))
    if config.trials is None:
        config.trials = study.default_trials
    if config.trials is not None and config.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {config.trials}")
    _check_common(config)
    out = Path(config.out)
    made = [p for p in (out, *out.parents) if not p.exists()]  # the folders this run makes, deepest first
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        result = study.run(config)
    except BaseException:  # an error or Ctrl-C: the folders this run made go again while they are still empty
        for folder in made:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise
    elapsed = time.perf_counter() - t0
    for note in result.notes:  # a mechanism the study could not run: in the JSON's notes, and said on the way out
        if " FAILED" in note or " NOT RUN" in note:
            warnings.warn(f"{name}: {note}", UserWarning, stacklevel=2)
    cfg = config.as_dict()
    cfg.update(result.config)
    from torchdpgmm._provenance import environment

    payload = {
        "study": name,
        "config": _jsonable(cfg),
        "rows": _jsonable(result.rows),
        "notes": list(result.notes),
        "runtime_seconds": elapsed,
        "environment": environment(config.device),
    }
    import io

    from torchdpgmm.modelfile import atomic_path, atomic_write_text

    # every file through a temporary one renamed into place: never half written, never mixed from two runs (the
    # renames come last, together)
    rows = payload["rows"]
    text_csv = None
    if rows:
        keys: list[str] = []
        for r in rows:
            for k in r:
                if k not in keys:
                    keys.append(k)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\r\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in r.items()})
        text_csv = buf.getvalue()
    with contextlib.ExitStack() as stack:
        if result.plot is not None:
            import matplotlib

            matplotlib.use("Agg")
            png = stack.enter_context(atomic_path(out / f"{name}.png"))
            result.plot(rows, png)
        atomic_write_text(out / f"{name}.json", json.dumps(payload, indent=2))
        if text_csv is not None:
            atomic_write_text(out / f"{name}.csv", text_csv)
    (out / f"{name}.partial.json").unlink(missing_ok=True)  # a long study's checkpoint, superseded now
    return payload


def mean_ci(values: torch.Tensor, dim: int = 0, level: float = 0.95) -> dict[str, torch.Tensor]:
    """Mean and two-sided Student-t confidence interval over ``dim`` (NaNs are an error)."""
    from scipy import stats

    v = values.detach().to(torch.float64)
    n = v.shape[dim]
    mean = v.mean(dim)
    if n < 2:
        half = torch.full_like(mean, float("nan"))
    else:
        sem = v.std(dim, unbiased=True) / math.sqrt(n)
        half = sem * float(stats.t.ppf(0.5 + level / 2, n - 1))
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": n}
