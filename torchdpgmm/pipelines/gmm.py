"""Uses of a released labeled GMM (Liu, Scaglione & Peisert 2025, Sec. V-D): classifier and synthetic-data source.

* Classifier (Figs 10-11): ``y_hat = argmax_k log pi_k + log N(x | mu_k, Sigma_k)`` (``LabeledGMM.predict``),
  i.e. the maximum a posteriori class of the released model; accuracy on the full test split.
* Synthetic data (Fig. 12): ``N`` points drawn class by class with the *released* class histogram
  ``round(N * pi~)`` (``LabeledGMM.sample_counts``). By post-processing the synthetic set has the
  release's guarantee.
"""
from __future__ import annotations

import torch

from torchdpgmm.mixture import histogram_counts

__all__ = ["gmm_accuracy", "histogram_counts", "synthesize"]


def gmm_accuracy(model, X: torch.Tensor, y: torch.Tensor, chunk: int = 5000) -> torch.Tensor:
    """Accuracy ``model.batch_shape`` of ``model.predict`` on a shared test set ``X (n, d)``, ``y (n,)``.

    The test set is processed in chunks so that many releases x 10,000 points x K classes stay small.
    """
    correct = None
    for s in range(0, X.shape[0], chunk):
        pred = model.predict(X[s : s + chunk].to(model.means.dtype))  # (..., n_chunk)
        c = (pred == y[s : s + chunk].to(pred.device)).sum(-1).to(torch.float64)
        correct = c if correct is None else correct + c
    return correct / X.shape[0]


def synthesize(model, n: int, generator: torch.Generator | None = None):
    """``n`` synthetic points per release, class-conditionally with the released histogram.

    Returns ``(X (..., n, d), y (..., n), mask (..., n))`` as :meth:`LabeledGMM.sample_counts` (the
    counts sum to ``n`` in every trial, so ``mask`` is all True).
    """
    counts = histogram_counts(model.weights, n)
    return model.sample_counts(counts, generator=generator)
