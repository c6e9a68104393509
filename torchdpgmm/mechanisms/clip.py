"""Record clipping, the one implementation (Abadi et al. 2016 per-example clipping; Liu, Scaglione &
Peisert 2025, eq. (28) enforced rather than assumed).

Records are cast to **float64 before clipping**: in float32 a norm just above ``B`` can round so that
the clipped record still exceeds ``B`` by an ulp, the scale ``min(1, B/||x||)`` can round above 1, and
the sums over N records that follow under-count a single record's influence once N is large (float32
has 24 bits, so adding ``B`` to a sum above ``2^24 B`` changes it by 0 or 2B). A sensitivity that is
exact on paper is only exact in float64 arithmetic.
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["clip_records"]


def clip_records(X: torch.Tensor, clip_bound: Any, *, center: torch.Tensor | None = None,
                 norm: str = "l2") -> torch.Tensor:
    """``z = (x - center) * min(1, B / ||x - center||)`` for the rows of ``X (..., N, d)``, in float64;
    ``norm`` ``"l2"`` (default) or ``"l1"`` (the L1-bounded records of DPGMM and DP-MSNM).

    Args:
        X: records; any real or integer dtype (cast to float64 first, see module docstring).
        clip_bound: ``B > 0``, a number or a tensor broadcasting against ``X.shape[:-2]`` (one per trial).
        center: optional public center, shape ``(..., d)`` broadcasting against ``X.shape[:-2] + (d,)``.

    Returns the clipped, centred float64 records (same shape as ``X``). ``ValueError`` for a bound that is
    not finite and positive (a public value, checked before anything else).
    """
    if not torch.is_tensor(X):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if norm not in ("l1", "l2"):
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
    X = X.to(torch.float64)
    B = torch.as_tensor(clip_bound, dtype=torch.float64, device=X.device) if not torch.is_tensor(clip_bound) \
        else clip_bound.to(dtype=torch.float64, device=X.device)
    if not bool(torch.isfinite(B).all()) or not bool((B > 0).all()):
        raise ValueError(f"clip_bound must be finite and > 0, got {clip_bound!r}")
    if center is not None:
        c = torch.as_tensor(center, dtype=torch.float64, device=X.device)
        X = X - c.unsqueeze(-2)
    norms = torch.linalg.vector_norm(X, ord=1 if norm == "l1" else 2, dim=-1, keepdim=True)
    Bb = B.reshape(B.shape + (1, 1)) if B.dim() else B
    return X * torch.clamp(Bb / torch.clamp(norms, min=torch.finfo(torch.float64).tiny), max=1.0)
