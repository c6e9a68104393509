"""A scikit-learn style front end: ``DPGaussianMixture(...).fit(X, y).sample(n)``.

Parameters are validated in ``__init__``-time style at ``fit`` (as scikit-learn does), before any data is
touched or noise drawn. After ``fit`` the estimator holds only the *released* model (``model_``) and
its privacy record (``privacy_``); the non-private fit is discarded so it cannot be published by
accident.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchdpgmm._validation import check_privacy_params

__all__ = ["DPGaussianMixture"]

_MECHANISMS = ("kl", "laplace", "gaussian", "colored", "r1smg")
_MODES = ("as-published", "sound")


class DPGaussianMixture:
    """Differentially private class-conditional Gaussian mixture.

    Args:
        epsilon, delta: the privacy budget of the release.
        mechanism: ``"kl"`` (KL-optimal, paper 000) or a baseline (``"laplace"``, ``"gaussian"``,
            ``"colored"``, ``"r1smg"``).
        mode: ``"as-published"`` (label-level adjacency, reproduces the paper, see its caveats) or
            ``"sound"`` (record-level adjacency with clipping to ``clip_bound``).
        variant: design variant of the ``kl`` mechanism (``"as-published"``, ``"global"``, ``"exact-kl"``).
        clip_bound: per-record L2 bound ``B`` (required in sound mode).
        random_state: int seed or ``torch.Generator``; ``None`` draws fresh OS entropy.
        **release_kwargs: passed on to :func:`torchdpgmm.release.release`.

    Attributes (after ``fit``): ``model_`` (:class:`LabeledGMM`), ``privacy_`` (:class:`PrivacyRecord`),
    ``classes_`` (the label values, sorted), ``n_features_in_``.
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, mechanism: str = "kl",
                 mode: str = "as-published", variant: str | None = None, clip_bound: float | None = None,
                 random_state: int | torch.Generator | None = None, **release_kwargs: Any) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.mode = mode
        self.variant = variant
        self.clip_bound = clip_bound
        self.random_state = random_state
        self.release_kwargs = release_kwargs

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "mechanism": self.mechanism, "mode": self.mode,
                "variant": self.variant, "clip_bound": self.clip_bound, "random_state": self.random_state,
                **self.release_kwargs}

    def set_params(self, **params: Any) -> "DPGaussianMixture":
        for k, v in params.items():
            if k in ("epsilon", "delta", "mechanism", "mode", "variant", "clip_bound", "random_state"):
                setattr(self, k, v)
            else:
                self.release_kwargs[k] = v
        return self

    def _generator(self) -> torch.Generator:
        if isinstance(self.random_state, torch.Generator):
            return self.random_state
        if not hasattr(self, "_gen"):
            g = torch.Generator()
            if self.random_state is None:
                g.seed()
            else:
                g.manual_seed(int(self.random_state))
            self._gen = g
        return self._gen

    def _check_params(self) -> None:
        check_privacy_params(self.epsilon, self.delta)
        if self.mechanism not in _MECHANISMS:
            raise ValueError(f"mechanism must be one of {_MECHANISMS}, got {self.mechanism!r}")
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {self.mode!r}")
        if self.mode == "sound" and self.clip_bound is None:
            raise ValueError("mode='sound' needs clip_bound (a per-record L2 bound chosen without looking at the data)")
        if self.clip_bound is not None and not (float(self.clip_bound) > 0 and np.isfinite(self.clip_bound)):
            raise ValueError("clip_bound must be a positive finite number")

    def fit(self, X: Any, y: Any) -> "DPGaussianMixture":
        """Fit the labeled GMM of eq. (2) and release it; keeps only the released model."""
        self._check_params()
        Xt = torch.as_tensor(np.asarray(X, dtype=np.float64)) if not torch.is_tensor(X) else X.to(torch.float64)
        if Xt.dim() != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(Xt.shape)}")
        y_np = np.asarray(y.cpu() if torch.is_tensor(y) else y)
        if y_np.ndim != 1 or len(y_np) != Xt.shape[0]:
            raise ValueError("y must be 1-D with one label per row of X")
        classes, y_idx = np.unique(y_np, return_inverse=True)
        if len(classes) < 2:
            raise ValueError("y has a single class; a mixture release needs at least 2")
        from torchdpgmm.release import release

        kw = dict(self.release_kwargs)
        if self.variant is not None:
            kw["variant"] = self.variant
        if self.clip_bound is not None:
            kw["clip_bound"] = self.clip_bound
        rel = release(Xt, torch.as_tensor(y_idx, dtype=torch.long, device=Xt.device), len(classes), self.epsilon,
                      self.delta, mechanism=self.mechanism, mode=self.mode, generator=self._generator(), **kw)
        self.model_ = rel.model
        self.privacy_ = rel.privacy
        self.classes_ = classes
        self.n_features_in_ = Xt.shape[1]
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise RuntimeError("this DPGaussianMixture is not fitted yet: call fit(X, y) first")

    def _as_x(self, X: Any) -> torch.Tensor:
        Xt = torch.as_tensor(np.asarray(X, dtype=np.float64)) if not torch.is_tensor(X) else X.to(torch.float64)
        if Xt.dim() != 2 or Xt.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {tuple(Xt.shape)}")
        return Xt.to(self.model_.device)

    def sample(self, n_samples: int = 1, preserve_histogram: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Draw synthetic ``(X, y)`` from the released model (class histogram preserved by default)."""
        self._check_fitted()
        from torchdpgmm.mixture import histogram_counts

        g = self._generator()
        if preserve_histogram:
            src = self.model_.counts if self.model_.counts is not None else self.model_.weights
            x, y, _ = self.model_.sample_counts(histogram_counts(src, n_samples), g)
        else:
            x, y = self.model_.sample(n_samples, g)
        return x.cpu().numpy(), self.classes_[y.cpu().numpy()]

    def predict_proba(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict_proba(self._as_x(X)).cpu().numpy()

    def predict(self, X: Any) -> np.ndarray:
        """Maximum-posterior class under the released model."""
        self._check_fitted()
        return self.classes_[self.model_.predict(self._as_x(X)).cpu().numpy()]

    def score_samples(self, X: Any) -> np.ndarray:
        """Per-sample marginal log-density ``log p(x)`` under the released model."""
        self._check_fitted()
        return self.model_.log_prob(self._as_x(X)).cpu().numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood ``mean log p(x)`` (as ``sklearn.mixture.GaussianMixture.score``; ``y`` ignored).

        For classification accuracy use :meth:`accuracy`.
        """
        return float(self.score_samples(X).mean())

    def accuracy(self, X: Any, y: Any) -> float:
        """Fraction of ``y`` predicted correctly by the released model's Bayes classifier."""
        return float(np.mean(self.predict(X) == np.asarray(y)))
