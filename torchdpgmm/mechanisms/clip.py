"""Record clipping, the one implementation (Abadi et al. 2016 per-example clipping; Liu, Scaglione &
Peisert 2025, eq. (28) enforced rather than assumed).

Records are cast to **float64 before clipping**: in float32 a norm just above ``B`` can round so that
the clipped record still exceeds ``B`` by an ulp, the scale ``min(1, B/||x||)`` can round above 1, and
the sums over N records that follow under-count a single record's influence once N is large (float32
has 24 bits, so adding ``B`` to a sum above ``2^24 B`` changes it by 0 or 2B). A sensitivity that is
exact on paper is only exact in float64 arithmetic.
"""
from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["clip_records"]


def row_abs_max(X: torch.Tensor) -> torch.Tensor:
    """``max_i |x_i|`` of each row of ``X (..., N, d)`` as ``(..., N, 1)``, NaN for a row holding a NaN: one
    ``aminmax`` pass and no ``(..., N, d)`` temporary (``vector_norm(ord=inf)`` is 20x slower on the CPU and
    ``abs().amax()`` copies the rows)."""
    lo, hi = torch.aminmax(X, dim=-1, keepdim=True)
    return torch.maximum(hi, lo.neg_())


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
    if torch.is_tensor(clip_bound):  # a tensor of public bounds (one per trial): read on the host once
        B = clip_bound.to(dtype=torch.float64, device=X.device)
        if not bool(torch.isfinite(B).all()) or not bool((B > 0).all()):
            raise ValueError(f"clip_bound must be finite and > 0, got {clip_bound!r}")
        B = B.reshape(B.shape + (1, 1)) if B.dim() else B
    else:  # a public number: checked in Python, no tensor read
        try:
            B = float(clip_bound)
        except (TypeError, ValueError):
            raise ValueError(f"clip_bound must be finite and > 0, got {clip_bound!r}") from None
        if not (math.isfinite(B) and B > 0):
            raise ValueError(f"clip_bound must be finite and > 0, got {clip_bound!r}")
    if center is not None:
        c = torch.as_tensor(center, dtype=torch.float64, device=X.device)
        X = X - c.unsqueeze(-2)
    # Scale before the norm: a finite record with a coordinate of ~1e154 or more has ||x||^2 = inf in float64,
    # which would map it to the centre. Each row is divided by a power of two m2 <= max_i |x_i| < 2 m2 (exact),
    # so ||u|| lies in [1, 2 sqrt(d)) and never overflows; z = u min(m2, B / ||u||) = x min(1, B / ||x||)
    # (unclipped rows come back bit for bit). A non-finite row gives a non-finite z (callers drop it).
    # (The per-row temporaries are reused in place: a sweep block holds many rows.)
    m2 = row_abs_max(X)
    e = torch.frexp(m2).exponent.sub_(1)
    m2 = torch.ldexp(m2.fill_(1.0), e)
    del e
    U = X / m2
    n_u = torch.linalg.vector_norm(U, ord=1 if norm == "l1" else 2, dim=-1, keepdim=True)
    factor = torch.minimum(n_u.reciprocal_().mul_(B), m2, out=m2)  # B / n_u, as torch computes it, in place
    del n_u
    return U.mul_(factor)
