"""torchdpgmm: differentially private release of labeled Gaussian mixture models, batched in PyTorch.

Data flows one way: data -> mixture (:mod:`torchdpgmm.mixture`) -> mechanism design
(:mod:`torchdpgmm.design`) -> noise (:mod:`torchdpgmm.mechanisms`) -> release -> evaluation
(:mod:`torchdpgmm.kl`). Privacy records, adjacency and accountants live in :mod:`torchdpgmm.privacy`.

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
    "mixture", "kl", "mechanisms", "privacy", "design", "release", "em", "bayes", "data",
    "pipelines", "montecarlo", "audit", "experiments", "estimator", "cli", "modelfile",
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
