"""Batched labeled Gaussian mixture models (Liu, Scaglione & Peisert 2025, Sec. II, eq. 2).

A *labeled* GMM is the joint law ``p(x, y) = pi_y N(x; mu_y, Sigma_y)`` of a feature vector and its
class label. :class:`LabeledGMM` follows the batching contract of ``torch.distributions``: parameters
carry arbitrary leading batch dimensions ``...`` and every method maps over them.

Shapes: ``weights (..., K)``, ``means (..., K, d)``, ``covariances (..., K, d, d)``,
``counts (..., K)`` (optional, the class histogram the model was fitted on or released with).
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes
from torchdpgmm._validation import as_float_tensor, check_finite, check_labels

__all__ = [
    "LabeledGMM", "fit_labeled", "class_moments", "moments_to_parameters", "class_counts", "histogram_counts",
    "one_hot", "COVARIANCE_TYPES",
]

_LOG_2PI = math.log(2.0 * math.pi)


class LabeledGMM:
    """A batch of labeled Gaussian mixtures ``p(x, y) = pi_y N(x; mu_y, Sigma_y)``.

    Args:
        weights: mixture weights ``pi`` of shape ``(..., K)``; each row on the simplex.
        means: class means ``mu_k`` of shape ``(..., K, d)``.
        covariances: class covariances ``Sigma_k`` of shape ``(..., K, d, d)``, symmetric positive definite.
        counts: optional class counts ``N_k`` of shape ``(..., K)``.
        validate_args: check shapes, finiteness, the simplex and positive definiteness (one host
            synchronisation; switch off inside hot loops once inputs are known to be valid).
    """

    def __init__(
        self,
        weights: torch.Tensor,
        means: torch.Tensor,
        covariances: torch.Tensor,
        counts: torch.Tensor | None = None,
        validate_args: bool = True,
    ) -> None:
        means = as_float_tensor(means, "means")
        weights = as_float_tensor(weights, "weights", dtype=means.dtype).to(means.device)
        covariances = as_float_tensor(covariances, "covariances", dtype=means.dtype).to(means.device)
        if means.dim() < 2:
            raise ValueError(f"means must have shape (..., K, d), got {tuple(means.shape)}")
        K, d = means.shape[-2:]
        if weights.shape[-1:] != (K,):
            raise ValueError(f"weights must have shape (..., {K}), got {tuple(weights.shape)}")
        if covariances.shape[-3:] != (K, d, d):
            raise ValueError(f"covariances must have shape (..., {K}, {d}, {d}), got {tuple(covariances.shape)}")
        try:
            batch = broadcast_shapes(weights.shape[:-1], means.shape[:-2], covariances.shape[:-3])
        except RuntimeError:
            raise ValueError(f"the batch shapes of weights {tuple(weights.shape[:-1])}, means "
                             f"{tuple(means.shape[:-2])} and covariances {tuple(covariances.shape[:-3])} "
                             "do not broadcast") from None
        self.weights = weights.expand(*batch, K)
        self.means = means.expand(*batch, K, d)
        self.covariances = covariances.expand(*batch, K, d, d)
        if counts is not None:
            counts = torch.as_tensor(counts, device=means.device)
            if counts.shape[-1:] != (K,):
                raise ValueError(f"counts must have shape (..., {K}), got {tuple(counts.shape)}")
            counts = counts.expand(*batch, K)
        self.counts = counts
        self._scale_tril: torch.Tensor | None = None
        if validate_args:
            self._validate()

    # ------------------------------------------------------------------ basic properties
    @property
    def batch_shape(self) -> torch.Size:
        return self.weights.shape[:-1]

    @property
    def num_classes(self) -> int:
        return self.means.shape[-2]

    @property
    def dim(self) -> int:
        return self.means.shape[-1]

    @property
    def dtype(self) -> torch.dtype:
        return self.means.dtype

    @property
    def device(self) -> torch.device:
        return self.means.device

    @property
    def scale_tril(self) -> torch.Tensor:
        """Cholesky factors ``L_k`` with ``Sigma_k = L_k L_k^T``, shape ``(..., K, d, d)``."""
        if self._scale_tril is None:
            self._scale_tril = torch.linalg.cholesky(self.covariances)
        return self._scale_tril

    def _validate(self) -> None:
        check_finite(self.weights, "weights")
        check_finite(self.means, "means")
        check_finite(self.covariances, "covariances")
        if bool((self.weights < 0).any()):
            raise ValueError("weights must be non-negative")
        s = self.weights.sum(-1)
        if not bool(torch.allclose(s, torch.ones_like(s), atol=1e-6)):
            raise ValueError("weights must sum to 1 over the last dimension")
        if not bool(torch.allclose(self.covariances, self.covariances.transpose(-1, -2), rtol=1e-6, atol=1e-8)):
            raise ValueError("covariances must be symmetric")
        L, info = torch.linalg.cholesky_ex(self.covariances)
        if bool((info != 0).any()):
            raise ValueError("covariances must be positive definite")
        self._scale_tril = L

    def __repr__(self) -> str:
        return (f"LabeledGMM(batch_shape={tuple(self.batch_shape)}, num_classes={self.num_classes}, "
                f"dim={self.dim}, dtype={self.dtype}, device={self.device})")

    # ------------------------------------------------------------------ conversions
    def to(self, *args: Any, **kwargs: Any) -> "LabeledGMM":
        """Move (and/or cast) the parameters, like ``torch.Tensor.to``; counts only change device."""
        means = self.means.to(*args, **kwargs)
        counts = None if self.counts is None else self.counts.to(means.device)
        return LabeledGMM(self.weights.to(means), means, self.covariances.to(means), counts, validate_args=False)

    def __getitem__(self, idx: Any) -> "LabeledGMM":
        """Index the batch dimensions (e.g. ``model[3]`` is trial 3)."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        counts = None if self.counts is None else self.counts[idx]
        return LabeledGMM(self.weights[idx], self.means[idx], self.covariances[idx], counts, validate_args=False)

    # ------------------------------------------------------------------ densities
    def class_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log pi_k + log N(x; mu_k, Sigma_k)`` for every class: ``x (..., n, d) -> (..., n, K)``."""
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        x = x.to(self.dtype)
        if x.dim() < 2 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (..., n, {self.dim}), got {tuple(x.shape)}")
        try:
            broadcast_shapes(x.shape[:-2], self.batch_shape)
        except RuntimeError:
            raise ValueError(f"x's batch shape {tuple(x.shape[:-2])} does not broadcast against the model's "
                             f"{tuple(self.batch_shape)}") from None
        L = self.scale_tril                                   # (..., K, d, d)
        diff = x.unsqueeze(-3) - self.means.unsqueeze(-2)     # (..., K, n, d)
        z = torch.linalg.solve_triangular(L, diff.transpose(-1, -2), upper=False)  # (..., K, d, n)
        maha = z.pow(2).sum(-2)                               # (..., K, n)
        logdet = 2.0 * torch.diagonal(L, dim1=-2, dim2=-1).log().sum(-1)  # (..., K)
        log_norm = -0.5 * (maha + logdet.unsqueeze(-1) + self.dim * _LOG_2PI)
        return (log_norm + self.weights.log().unsqueeze(-1)).transpose(-1, -2)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Marginal log-density ``log sum_k pi_k N(x; mu_k, Sigma_k)``: ``(..., n, d) -> (..., n)``."""
        return torch.logsumexp(self.class_log_prob(x), dim=-1)

    def joint_log_prob(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``log p(x, y) = log pi_y + log N(x; mu_y, Sigma_y)``: ``(..., n, d), (..., n) -> (..., n)``."""
        return self.class_log_prob(x).gather(-1, y.long().unsqueeze(-1)).squeeze(-1)

    def predict_proba(self, x: torch.Tensor) -> torch.Tensor:
        """Posterior class probabilities ``p(y = k | x)``: ``(..., n, d) -> (..., n, K)``."""
        return torch.softmax(self.class_log_prob(x), dim=-1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Maximum-posterior class (the Bayes classifier of the model): ``(..., n, d) -> (..., n)``."""
        return self.class_log_prob(x).argmax(-1)

    # ------------------------------------------------------------------ sampling
    def _draw_given_labels(self, y: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        B = int(math.prod(self.batch_shape))
        K, d = self.num_classes, self.dim
        n = y.shape[-1]
        yf = y.reshape(B, n)
        rows = torch.arange(B, device=self.device).unsqueeze(-1)
        mu = self.means.reshape(B, K, d)[rows, yf]                 # (B, n, d)
        L = self.scale_tril.reshape(B, K, d, d)[rows, yf]          # (B, n, d, d)
        z = torch.randn(B, n, d, 1, dtype=self.dtype, device=self.device, generator=generator)
        x = mu + (L @ z).squeeze(-1)
        return x.reshape(*self.batch_shape, n, d)

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``n`` i.i.d. pairs ``(x, y) ~ p(x, y)``; returns ``x (..., n, d)`` and ``y (..., n)``."""
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        n = int(n)
        B = int(math.prod(self.batch_shape))
        w = self.weights.reshape(B, self.num_classes)
        y = torch.multinomial(w, n, replacement=True, generator=generator)
        y = y.reshape(*self.batch_shape, n)
        return self._draw_given_labels(y, generator), y

    def sample_counts(
        self, counts: torch.Tensor | None = None, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Class-conditional sampling with given per-class counts (default: ``self.counts``).

        Returns ``x (..., n, d)``, ``y (..., n)`` and a boolean ``mask (..., n)``, where ``n`` is the
        largest total count in the batch; rows past a trial's own total are padding (``mask`` False).
        Labels come in class order (0...0, 1...1, ...).
        """
        if counts is None:
            if self.counts is None:
                raise ValueError("no counts given and the model carries none")
            counts = self.counts
        counts = torch.as_tensor(counts, device=self.device)
        if counts.dim() < 1 or counts.shape[-1] != self.num_classes:
            raise ValueError(f"counts must have shape (..., {self.num_classes}), got {tuple(counts.shape)}")
        cb, mb = tuple(counts.shape[:-1]), tuple(self.batch_shape)
        if len(cb) > len(mb) or any(c not in (1, m) for c, m in zip(reversed(cb), reversed(mb))):
            raise ValueError(f"counts' batch shape {cb} does not expand to the model's {mb}")
        if counts.dtype.is_floating_point:
            if not bool(torch.equal(counts, counts.round())):
                raise ValueError("counts must be whole numbers")
        counts = counts.long().expand(*self.batch_shape, self.num_classes)
        if bool((counts < 0).any()):
            raise ValueError("counts must be non-negative")
        totals = counts.sum(-1)
        n = int(totals.max())
        if n < 1:
            raise ValueError("counts sum to zero: nothing to sample")
        pos = torch.arange(n, device=self.device)
        cum = counts.cumsum(-1)                                            # (..., K)
        y = torch.searchsorted(cum.contiguous(), pos.expand(*self.batch_shape, n).contiguous(), right=True)
        y = y.clamp_max(self.num_classes - 1)
        mask = pos < totals.unsqueeze(-1)
        return self._draw_given_labels(y, generator), y, mask


def one_hot(labels: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """``labels (...)`` as one-hot rows ``(..., num_classes)`` of ``dtype`` by a comparison (a label outside
    ``[0, num_classes)`` gives a row of zeros). ``torch.nn.functional.one_hot`` reads the labels' minimum and
    maximum back to the host on a CPU (its range check): a read, and a possible refusal, of private labels."""
    return (labels.unsqueeze(-1) == torch.arange(num_classes, device=labels.device)).to(dtype)


def class_counts(y: torch.Tensor, num_classes: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Per-class counts ``N_k`` of integer labels ``y (..., N)`` (masked rows excluded; a label outside
    ``[0, num_classes)`` counts in the nearest class) -> ``(..., K)`` int64."""
    onehot = one_hot(y.long().clamp(0, num_classes - 1), num_classes, torch.int64)
    if mask is not None:
        onehot = onehot * mask.unsqueeze(-1).to(onehot.dtype)
    return onehot.sum(-2)


def histogram_counts(hist: torch.Tensor, n: int) -> torch.Tensor:
    """Integer class counts ``(..., K)`` summing to ``n`` closest to ``n * hist / hist.sum()`` (largest remainders).

    ``hist`` is a class histogram: weights or counts, batched over ``...``. The KL-optimal release draws
    ``pi~`` on the lattice ``{c / N}``, so ``N * pi~`` is already integral there; for other mechanisms
    (Laplace/Gaussian weights) this rounding keeps the released histogram. ``hist`` must be finite and
    non-negative with a positive sum in every row, and ``n >= 0`` (a released histogram: post-processing).
    """
    if not torch.is_tensor(hist):
        raise TypeError(f"hist must be a torch.Tensor, got {type(hist).__name__}")
    if not n >= 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    w = hist.to(torch.float64)
    if not bool((torch.isfinite(w) & (w >= 0)).all() & (w.sum(-1) > 0).all()):
        raise ValueError("hist must be finite and non-negative, with a positive sum in every row "
                         "(a zero, negative or NaN histogram has no counts)")
    target = w / w.sum(-1, keepdim=True) * n
    base = torch.floor(target)
    rem = target - base
    short = (n - base.sum(-1, keepdim=True)).round().to(torch.int64)  # (..., 1), in [0, K)
    order = torch.argsort(rem, dim=-1, descending=True)
    rank = torch.argsort(order, dim=-1)  # rank of each class by remainder
    extra = (rank < short).to(torch.float64)
    return (base + extra).to(torch.int64)


COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


def _check_covariance_type(covariance_type: str) -> None:
    if covariance_type not in COVARIANCE_TYPES:
        raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")


def _moments_by_feature(X: torch.Tensor, g: torch.Tensor, K: int, covariance_type: str):
    """Two-dimensional ``X (N, d)`` on the CPU: counts, sums and second moments by ``index_add_`` on the labels
    ``g`` (``K`` for dropped rows, a bucket cut off at the end). The full second moments are scattered one
    feature at a time (``d`` steps, a public number, each an ``(N, d)`` product): ``N d^2`` work instead of the
    per-class product's ``N K d^2`` and ``N d`` memory, in a number of steps that does not depend on N (the
    earlier scatter of row chunks was up to 3x faster at d = 64 but looped ceil(N / 512) times). ``index_add_`` is deterministic on the CPU (not on CUDA, which takes
    :func:`_moments_by_class`)."""
    N, d = X.shape
    counts = torch.zeros(K + 1, dtype=X.dtype, device=X.device).index_add_(
        0, g, torch.ones((), dtype=X.dtype, device=X.device).expand(N))[:K]
    sums = torch.zeros(K + 1, d, dtype=X.dtype, device=X.device).index_add_(0, g, X)[:K]
    if covariance_type == "full":
        rows = torch.zeros(d, K + 1, d, dtype=X.dtype, device=X.device)  # rows[i, k] = sum_{g=k} x_i x
        for i in range(d):  # public d
            rows[i].index_add_(0, g, X * X[:, i:i + 1])
        second = rows[:, :K].transpose(0, 1).contiguous()
    elif covariance_type == "diag":
        second = torch.zeros(K + 1, d, dtype=X.dtype, device=X.device).index_add_(0, g, X * X)[:K]
    elif covariance_type == "spherical":
        second = torch.zeros(K + 1, dtype=X.dtype, device=X.device).index_add_(0, g, (X * X).sum(-1))[:K]
    else:
        second = X.transpose(-1, -2) @ X
    return counts, sums, second


def _moments_by_class(X: torch.Tensor, yl: torch.Tensor, valid: torch.Tensor | None, K: int, covariance_type: str):
    """Batched ``X (..., N, d)`` (and CUDA): one masked product per class (``K`` steps, a public number), so the
    largest temporary is one ``(..., N, d)`` array, never an ``(..., N, K)`` one-hot or an ``(..., N, K, d)``
    product; every reduction is a sum or a matrix product (deterministic on CUDA too)."""
    counts, sums, second = [], [], []
    for k in range(K):  # public K
        w = (yl == k) if valid is None else (yl == k) & valid                      # (..., N) bool
        Xk = X * w.unsqueeze(-1)                                                  # (..., N, d)
        counts.append(w.sum(-1).to(X.dtype))
        sums.append(Xk.sum(-2))
        if covariance_type == "full":
            second.append(Xk.transpose(-1, -2) @ X)
        elif covariance_type == "diag":
            second.append((Xk * X).sum(-2))
        elif covariance_type == "spherical":
            second.append((Xk * X).sum((-2, -1)))
        del w, Xk
    out = torch.stack(counts, -1), torch.stack(sums, -2)
    if covariance_type == "tied":
        return out + (X.transpose(-1, -2) @ X,)
    return out + (torch.stack(second, -3 if covariance_type == "full" else -2 if covariance_type == "diag" else -1),)


def _moments(X: torch.Tensor, y: torch.Tensor, valid: torch.Tensor | None, K: int, covariance_type: str):
    """:func:`class_moments` of rows already zeroed where ``valid (..., N)`` is False (no copy of ``X``);
    ``valid=None``: every row is valid (labels in range)."""
    yl = y.long()
    if X.dim() == 2 and X.device.type == "cpu":
        g = yl if valid is None else torch.where(valid, yl, torch.full_like(yl, K))
        return _moments_by_feature(X, g, K, covariance_type)
    return _moments_by_class(X, yl, valid, K, covariance_type)


def class_moments(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    mask: torch.Tensor | None = None,
    covariance_type: str = "full",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-class sufficient statistics of eq. (2): counts ``N_k``, sums ``s_k`` and second moments ``Q``.

    Branch-free and batched: ``X (..., N, d)``, integer ``y (..., N)``, optional boolean ``mask (..., N)``.
    Rows that are masked out or whose label lies outside ``[0, num_classes)`` contribute nothing (no error,
    no host synchronisation; callers that must refuse such rows check them first). Masked-out rows may hold
    anything, even NaN. The second moments depend on ``covariance_type`` (scikit-learn's names):

    ==============  ==========================  ==================================
    type            second moments              shape
    ==============  ==========================  ==================================
    ``"full"``      ``Q_k = sum_{y=k} x x^T``   ``(..., K, d, d)``
    ``"diag"``      ``sum_{y=k} x * x``         ``(..., K, d)``
    ``"spherical"`` ``sum_{y=k} ||x||^2``       ``(..., K)``
    ``"tied"``      ``sum_n x x^T`` (pooled)    ``(..., d, d)``
    ==============  ==========================  ==================================

    The number of Python steps depends only on ``d`` (a single dataset on the CPU) or ``K`` (batches, CUDA),
    never on N or on the values; the largest temporary is one ``(..., N, d)`` array.
    Returns ``(counts (..., K), sums (..., K, d), second_moments)`` in ``X.dtype``.
    """
    _check_covariance_type(covariance_type)
    K = num_classes
    yl = y.long()
    valid = (yl >= 0) & (yl < K)
    if mask is not None:
        valid = valid & mask
    X = torch.where(valid.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
    return _moments(X, yl, valid, K, covariance_type)


def moments_to_parameters(
    counts: torch.Tensor,
    sums: torch.Tensor,
    second_moments: torch.Tensor,
    *,
    covariance_type: str = "full",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eq. (2a-c) from sufficient statistics (the one implementation of the empirical labeled GMM).

    ``pi_k = N_k / N``, ``mu_k = s_k / N_k``, ``Sigma_k = (Q_k - s_k s_k^T / N_k) / (N_k - 1)``; for
    ``"tied"`` the pooled within-class scatter ``(Q - sum_k s_k s_k^T / N_k) / (N - K)``, for ``"diag"``
    and ``"spherical"`` the diagonal / the average variance ``tr(.) / d``. Used on exact statistics by
    :func:`fit_labeled` and on noisy ones by the sound release (:mod:`torchdpgmm.release.sound`); the
    denominators are clamped at 1 so that tiny or noisy counts never divide by zero (branch-free).
    Returns ``(weights (..., K), means (..., K, d), covariances (..., K, d, d))`` (expanded).
    """
    _check_covariance_type(covariance_type)
    K, d = sums.shape[-2:]
    n = counts.unsqueeze(-1)                                                      # (..., K, 1)
    means = sums / n
    denom = torch.clamp(counts - 1, min=1.0)
    if covariance_type == "full":
        cov = (second_moments - sums.unsqueeze(-1) * means.unsqueeze(-2)) / denom[..., None, None]
    elif covariance_type == "tied":
        scatter = second_moments - (sums.unsqueeze(-1) * means.unsqueeze(-2)).sum(-3)
        tied = scatter / torch.clamp(counts.sum(-1) - K, min=1.0)[..., None, None]
        cov = tied.unsqueeze(-3).expand(*tied.shape[:-2], K, d, d)
    else:
        var = (second_moments - (sums * means if covariance_type == "diag" else (sums * means).sum(-1))) / (
            denom if covariance_type == "spherical" else denom.unsqueeze(-1))
        if covariance_type == "spherical":
            var = (var / d).unsqueeze(-1).expand(*var.shape, d)
        cov = torch.diag_embed(var)
    cov = 0.5 * (cov + cov.transpose(-1, -2))
    weights = counts / counts.sum(-1, keepdim=True)
    return weights, means, cov


def fit_labeled(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    mask: torch.Tensor | None = None,
    min_count: int = 2,
    covariance_type: str = "full",
) -> LabeledGMM:
    """Fit the empirical labeled GMM of eq. (2a-c) (Liu, Scaglione & Peisert 2025) to a batch of datasets.

    .. math::
        \\pi_k = N_k / N, \\quad \\mu_k = \\frac{1}{N_k}\\sum_{y_n = k} x_n, \\quad
        \\Sigma_k = \\frac{1}{N_k - 1}\\sum_{y_n = k}(x_n - \\mu_k)(x_n - \\mu_k)^T

    computed as :func:`moments_to_parameters` of :func:`class_moments` (the statistics the sound release
    perturbs), on the rows shifted by their overall mean (exact, and free of cancellation).

    Args:
        X: features ``(..., N, d)`` (integers are converted to float64).
        y: integer labels ``(..., N)`` in ``[0, num_classes)``.
        num_classes: ``K``.
        mask: optional boolean ``(..., N)``; False rows are padding and ignored (ragged trials).
        min_count: every class needs at least this many points (2 for a covariance). ``0`` accepts empty
            and single-record classes (their covariance is 0 and their mean 0 when empty): the
            evaluation of a sound release uses it (:func:`torchdpgmm.release.evaluation.evaluate`).
        covariance_type: ``"full"`` (eq. 2c), ``"tied"``, ``"diag"`` or ``"spherical"``.

    Raises:
        ValueError: non-finite features, labels out of range, mismatched shapes, or a class with
            fewer than ``min_count`` points (in any trial of the batch). This is the NON-private fit.
    """
    X = as_float_tensor(X, "X")
    if X.dim() < 2:
        raise ValueError(f"X must have shape (..., N, d), got {tuple(X.shape)}")
    if not torch.is_tensor(y):
        y = torch.as_tensor(y)
    y = y.to(X.device)
    if y.shape != X.shape[:-1]:
        raise ValueError(f"y must have shape {tuple(X.shape[:-1])} to match X, got {tuple(y.shape)}")
    if mask is not None:
        mask = torch.as_tensor(mask, device=X.device)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean, got {mask.dtype}")
        if mask.shape != y.shape:
            raise ValueError(f"mask must have shape {tuple(y.shape)}, got {tuple(mask.shape)}")
    check_labels(y, num_classes, mask)
    check_finite(X, "X", mask)
    _check_covariance_type(covariance_type)
    if mask is None:  # every row is checked: no copy beyond the centred rows
        shift = X.sum(-2, keepdim=True) / max(X.shape[-2], 1)
        counts, sums, second = _moments(X - shift, y, None, num_classes, covariance_type)
    else:
        Xz = torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
        shift = Xz.sum(-2, keepdim=True) / torch.clamp(mask.sum(-1), min=1).to(X.dtype)[..., None, None]
        counts, sums, second = class_moments(Xz - shift, y, num_classes, mask=mask, covariance_type=covariance_type)
    if bool((counts < min_count).any()):
        worst = int(counts.min())
        raise ValueError(
            f"every class needs at least {min_count} points for its covariance (eq. 2c divides by N_k - 1); "
            f"found a class with {worst}")
    weights, means, cov = moments_to_parameters(
        counts, sums, second, covariance_type=covariance_type)
    means = torch.where(counts.unsqueeze(-1) > 0, means + shift, torch.zeros_like(means))
    return LabeledGMM(weights, means, cov, counts.round().long(), validate_args=False)
