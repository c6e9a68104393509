"""Noise and release mechanisms, each batched over leading dims and seeded by a ``torch.Generator``.

- :func:`gaussian` — i.i.d. / colored Gaussian (eq. 5)
- :func:`laplace` / :func:`laplace_noise` — Laplace (the one continuous Laplace sampler, float64)
- :func:`normal_noise`, :func:`symmetric_noise` — Gaussian vectors, symmetric-matrix noise
- :func:`clip_records` — the one record-clipping function (float64)
- :mod:`~torchdpgmm.mechanisms.discrete` — exact discrete Gaussian / Laplace (Canonne, Kamath & Steinke
  2020), :func:`add_noise` with ``noise="continuous" | "discrete"``, :func:`discrete_sensitivity`
- :func:`wishart` — Wishart ``W_d(I/gamma, d+1)`` (eq. 6)
- :func:`r1smg` — rank-one singular multivariate Gaussian (Ji & Li 2024)
- :func:`random_mapping` — the weights' random mapping (eqs. 14-15, 25-27)
- :mod:`~torchdpgmm.mechanisms.psd` — PSD repairs
"""
from torchdpgmm.mechanisms import psd
from torchdpgmm.mechanisms.gaussian import gaussian, gaussian_noise, psd_sqrt
from torchdpgmm.mechanisms.clip import clip_records
from torchdpgmm.mechanisms import discrete
from torchdpgmm.mechanisms.discrete import (
    add_noise,
    bernoulli_exp_neg,
    discrete_gaussian_noise,
    discrete_laplace_noise,
    discrete_sensitivity,
)
from torchdpgmm.mechanisms.laplace import laplace, laplace_noise
from torchdpgmm.mechanisms.noise import normal_noise, symmetric_noise
from torchdpgmm.mechanisms.r1smg import r1smg, r1smg_sigma
from torchdpgmm.mechanisms import mapping
from torchdpgmm.mechanisms.mapping import random_mapping
from torchdpgmm.mechanisms.wishart import wishart, wishart_noise

__all__ = [
    "gaussian", "gaussian_noise", "psd_sqrt", "laplace", "laplace_noise", "wishart", "wishart_noise",
    "r1smg", "r1smg_sigma", "random_mapping", "mapping", "psd", "clip_records", "normal_noise", "symmetric_noise",
    "discrete", "add_noise", "bernoulli_exp_neg", "discrete_gaussian_noise", "discrete_laplace_noise",
    "discrete_sensitivity",
]
