"""torchdpgmm: differentially private release of labeled Gaussian mixture models, batched in PyTorch.

Data flows one way, and the folders are the layers of docs/architecture.md: data (:mod:`torchdpgmm.data`)
-> mixture (:mod:`torchdpgmm.mixture`, :mod:`torchdpgmm.kl`) -> mechanism design (:mod:`torchdpgmm.design`)
-> noise (:mod:`torchdpgmm.mechanisms`) -> release (:mod:`torchdpgmm.release`) -> evaluation
(:mod:`torchdpgmm.audit`, :mod:`torchdpgmm.bayes`, :mod:`torchdpgmm.em`, :mod:`torchdpgmm.pipelines`).
Privacy records, adjacency, calibrations and accountants live in :mod:`torchdpgmm.privacy`; the front doors
are :mod:`torchdpgmm.estimator`, :mod:`torchdpgmm.cli` and :mod:`torchdpgmm.experiments`.

Every function maps over leading batch dimensions (a Monte Carlo study is one call) and keeps
its tensors on the device of its inputs; randomness comes only from an explicit ``torch.Generator``.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (imported lazily so `import torchdpgmm` stays cheap)
_LAZY = {
    "LabeledGMM": "torchdpgmm.mixture",
    "fit_labeled": "torchdpgmm.mixture",
    "gaussian_kl": "torchdpgmm.kl",
    "kl_divergence": "torchdpgmm.kl",
    "PrivacyRecord": "torchdpgmm.privacy",
    "Adjacency": "torchdpgmm.privacy",
    "design_mechanism": "torchdpgmm.design",
    "release": "torchdpgmm.release",
    "Release": "torchdpgmm.release",
    "DPGaussianMixture": "torchdpgmm.estimator",
    "DPSyntheticClassifier": "torchdpgmm.estimator",
}
_SUBMODULES = {
    "data", "montecarlo", "mixture", "kl", "design", "mechanisms", "privacy", "release", "audit", "bayes", "em",
    "pipelines", "estimator", "cli", "modelfile", "datafile", "bounds", "sweep", "experiments",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"torchdpgmm.{name}")
    raise AttributeError(f"module 'torchdpgmm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | _SUBMODULES)
