"""DPGMM of Wu et al. (2016): EM for GMMs with Laplace noise on the M-step output of every iteration.

Each iteration: E-step; MLE M-step (``pi = N_k/n``, ``mu_k = sum r x / N_k``, ``Sigma_k = sum r (x-mu)(x-mu)^T
/ N_k``); then ``pi + Lap(S(pi)/eps_pi)`` per entry, ``mu_k + Lap(S(mu)/eps_mu)`` per coordinate, ``Sigma_k +
Lap(S(Sigma)/eps_Sigma)`` on the upper triangle (mirrored); post-processing: weights normalised as in the
DP-MSNM paper (2021) (min-max, then ``(w + zeta) / (sum w + K zeta)``), covariances shifted ``Sigma + rho I`` to be PD.

L1 sensitivities (Wu et al., restated by the DP-MSNM paper (2021), Lemma 1, and the ``eta = 0`` case of
Lemmas 2-4), assuming ``||x||_1 <= R`` and ``N_k >= n/(2K)``:
``S(pi) = K/n``, ``S(mu) = 4KR/n``, ``S(Sigma) = (12 n K R^2 + 8 K^2 R^2)/n^2``.

Budget split (ours, documented; Wu et al.'s exact split is not in the papers we have): per iteration
``eps/T``; ``eps_pi = w_pi eps/T`` and, per component, ``eps_mu = w_mu eps/(T K)``, ``eps_Sigma = w_Sigma
eps/(T K)`` with default ``(w_pi, w_mu, w_Sigma) = (0.14, 0.26, 0.6)`` -- the DP-MSNM paper's split with its two
0.13 shares (xi, eta) merged into the mean. Sequential composition over the ``1 + 2K`` releases per
iteration and T iterations gives ``eps`` in total (pure DP, delta = 0).

Assumptions: ``R`` given -> rows are clipped to ``||x||_1 <= R`` (sound w.r.t. that assumption);
``R=None`` -> ``R = max_i ||x_i||_1`` from the data, as public re-implementations do, which leaks (the
record says so). ``N_k >= n/(2K)`` is enforced by using ``max(N_k, n/(2K))`` as the M-step denominator
when ``enforce_min_count`` (default), otherwise only reported.

Few records. The count is never checked, so every ``n`` (0 included) gives a model: the sensitivities, ``pi =
N_k/n`` and the floor ``n/(2K)`` use ``max(n, 1)``, which changes nothing for ``n >= 1`` and at ``n = 0`` releases
the noise of a one-record dataset around zero statistics (no branch on ``n``).

Labels (what the privacy record claims). The noise scales depend on ``n``, so only replace-one adjacency
(``n`` public) is claimed, never add/remove. ``mode="sound"`` and ``covered=True`` only when every step
that touches the data is inside epsilon: a public ``R``, ``enforce_min_count`` and a public start
(``init="random"``, which uses only ``R``, or caller-supplied ``init_params`` computed without the data).
The default k-means++ start on the raw data is not private: such fits are labelled ``"as-published"``
with ``covered=False`` and a note naming the uncovered step.
"""
from __future__ import annotations

import math

import torch

from torchdpgmm.em._common import (
    check_em_budget,
    check_init_params,
    check_iterations,
    check_number,
    check_shares,
    clip_rows_l1,
    make_record,
    noised_block,
    laplace,
    laplace_symmetric,
    normalise_weights_minmax,
    shift_pd,
)
from torchdpgmm.em.gmm import (
    GMMFit,
    e_step,
    init_from_centers,
    kmeans,
    kmeans_plusplus,
    mixture_log_likelihood,
    private_data,
)

__all__ = ["wu_sensitivities", "fit_dpgmm", "resolve_l1_bound"]


def wu_sensitivities(n, K: int, R):
    """``S(pi) = K/n``, ``S(mu) = 4KR/n``, ``S(Sigma) = (12 n K R^2 + 8 K^2 R^2) / n^2`` (tensors, broadcast)."""
    return K / n, 4.0 * K * R / n, (12.0 * n * K * R ** 2 + 8.0 * K ** 2 * R ** 2) / n ** 2


def resolve_l1_bound(X, mask, R):
    """Return ``(X_clipped, R_tensor (...), mode, notes)`` for a user bound ``R`` or ``None`` (from data)."""
    notes = []
    if R is None:
        l1 = X.abs().sum(-1).masked_fill(~mask, 0.0)
        R_t = torch.nn.functional.pad(l1, (0, 1)).amax(-1)  # a 0 appended: N may be 0
        mode = "as-published"
        notes.append("R = max_i ||x_i||_1 taken from the data (as re-implementations do): this leaks "
                     "privacy; pass R for the sound mode")
        return X, R_t, mode, notes
    if not (R > 0 and math.isfinite(R)):
        raise ValueError(f"R must be finite and > 0, got {R!r}")
    R_t = torch.full(X.shape[:-2], float(R), dtype=X.dtype, device=X.device)
    notes.append(f"rows clipped to ||x||_1 <= R = {R}")
    return clip_rows_l1(X, float(R)), R_t, "sound", notes


def _check_public(R, zeta, psd_floor) -> None:
    """One-line refusals of DPGMM's and DP-MSNM's public numbers before the data are read: ``R`` a finite number > 0
    (or None; a string failed in a comparison), ``zeta`` > 0 (0 or less gave weights 0/0 or below 0), ``psd_floor``
    > 0 (0, the paper's rho, leaves a singular covariance; -1 failed a Cholesky mid-fit)."""
    check_number("R", R, allow_none=True)
    check_number("zeta", zeta)
    check_number("psd_floor", psd_floor)


def _initial_gmm(X, mask, K, init, init_params, generator, R_t):
    batch, d = X.shape[:-2], X.shape[-1]
    if init_params is not None:
        w0, m0, c0 = (torch.as_tensor(t, dtype=X.dtype, device=X.device) for t in init_params)
        return w0.expand(*batch, K), m0.expand(*batch, K, d), c0.expand(*batch, K, d, d), \
            "initialisation supplied by the caller (covered only if it was computed without the data)"
    if init == "kmeans++":
        centres = kmeans(X, kmeans_plusplus(X, K, mask, generator), mask, 10)
        w, m, c = init_from_centers(X, centres, mask, 1e-6)
        return w, m, c, "k-means++ initialisation on the raw data is NOT private (the paper uses DP k-means)"
    if init == "random":
        half = (R_t / d)[..., None, None]
        means = (2.0 * torch.rand(*batch, K, d, dtype=X.dtype, device=X.device, generator=generator) - 1.0) * half
        # R = 0 (taken from data with no nonzero row): unit covariances, where 0 was not positive definite
        half_c = torch.where(half > 0, half, torch.full_like(half, 2.0))
        covs = torch.eye(d, dtype=X.dtype, device=X.device) * (half_c ** 2)[..., None] / 4.0
        w = torch.full((*batch, K), 1.0 / K, dtype=X.dtype, device=X.device)
        return w, means, covs.expand(*batch, K, d, d), "data-independent random initialisation (uses R only)"
    raise ValueError(f"init must be 'kmeans++' or 'random', got {init!r}")


def fit_dpgmm(
    X: torch.Tensor,
    num_components: int,
    epsilon: float,
    *,
    R: float | None = None,
    max_iter: int = 20,
    split: tuple[float, float, float] = (0.14, 0.26, 0.6),
    mask: torch.Tensor | None = None,
    init: str = "kmeans++",
    init_params=None,
    enforce_min_count: bool = True,
    zeta: float = 1e-3,
    psd_floor: float = 1e-6,
    generator: torch.Generator | None = None,
) -> GMMFit:
    """DPGMM (Wu et al. 2016), batched over the leading dims of ``X (..., N, d)``; pure epsilon-DP in total.

    Returns a :class:`GMMFit` with ``loglik`` on the given rows and a :class:`PrivacyRecord`; the ``extras`` of a
    fit that is not covered also hold ``min_count_violated (...)``: whether some iteration had ``N_k < n/(2K)``, from
    the noise-free ``N_k`` (a covered fit leaves it out: it is not noised, and one record changed it). Any number of
    unmasked rows, none included, gives a model (module docstring, "Few records").
    """
    check_em_budget(epsilon)
    check_shares("split", split, 3)  # finite and positive: a NaN share passed and dropped its block from the record
    if abs(sum(split) - 1.0) > 1e-9:
        raise ValueError(f"split must be three positive shares summing to 1, got {split!r}")
    check_iterations("max_iter", max_iter)
    _check_public(R, zeta, psd_floor)
    if init_params is None and init not in ("kmeans++", "random"):
        raise ValueError(f"init must be 'kmeans++' or 'random', got {init!r}")
    X, mask = private_data(X, num_components, mask)  # public facts only; a non-finite record read as the origin
    K, d = num_components, X.shape[-1]
    check_init_params(init_params, X.shape[:-2], ((K,), (K, d), (K, d, d)), ("weights", "means", "covariances"))
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))
    Xc, R_t, mode, notes = resolve_l1_bound(X, mask, R)
    n = mask.sum(-1).to(X.dtype)
    n1 = n.clamp(min=1.0)  # "Few records": equal to n unless there is no record
    T = max_iter
    eps_pi = split[0] * epsilon / T
    eps_mu = split[1] * epsilon / (T * K)
    eps_sig = split[2] * epsilon / (T * K)
    S_pi, S_mu, S_sig = wu_sensitivities(n1, K, R_t)
    weights, means, covs, init_note = _initial_gmm(Xc, mask, K, init, init_params, generator, R_t)
    notes.append(init_note)
    violated = torch.zeros(X.shape[:-2], dtype=torch.bool, device=X.device)
    floor = (n1 / (2.0 * K)).unsqueeze(-1)
    for _ in range(T):
        log_resp, _ = e_step(Xc, weights, means, covs, mask)
        resp = log_resp.exp()
        Nk = resp.sum(-2)
        violated = violated | (Nk < floor).any(-1)
        denom = torch.maximum(Nk, floor) if enforce_min_count else Nk.clamp(min=torch.finfo(X.dtype).tiny)
        pi = Nk / n1.unsqueeze(-1)
        mu = torch.einsum("...nk,...nd->...kd", resp, Xc) / denom.unsqueeze(-1)
        diff = Xc.unsqueeze(-3) - mu.unsqueeze(-2)
        rT = resp.transpose(-1, -2).unsqueeze(-1)
        sig = torch.matmul((rT * diff).transpose(-1, -2), diff) / denom[..., None, None]
        pi = laplace(pi, (S_pi / eps_pi).unsqueeze(-1), generator)
        mu = laplace(mu, (S_mu / eps_mu)[..., None, None], generator)
        sig = laplace_symmetric(sig, (S_sig / eps_sig)[..., None, None, None], generator)
        weights = normalise_weights_minmax(pi, zeta)
        means = mu
        covs = shift_pd(sig, psd_floor)  # floor relative to ||sig|| too: any data scale
    ll = mixture_log_likelihood(X, weights, means, covs, mask)
    if not enforce_min_count:
        notes.append("N_k >= n/(2K) was not enforced; see extras['min_count_violated']")
    notes.append("the returned .loglik is an evaluation on the raw data: it is not covered by this record "
                 "and must not be published with the model")
    public_init = init_params is not None or init == "random"
    covered = mode == "sound" and public_init and enforce_min_count
    if not covered:
        mode = "as-published"
        notes.append("not covered by epsilon: " + "; ".join(
            [m for m, bad in (("R taken from the data", R is None),
                              ("k-means++ start on the raw data", not public_init),
                              ("N_k >= n/(2K) not enforced", not enforce_min_count)) if bad]))
    notes.append("noise scales depend on n: replace-one adjacency only (n public), not add/remove")
    blocks = (noised_block("weights", "laplace", S_pi, S_pi / eps_pi, "l1", T),
              noised_block("means", "laplace", S_mu, S_mu / eps_mu, "l1", T * K),
              noised_block("covariances", "laplace", S_sig, S_sig / eps_sig, "l1", T * K))
    record = make_record(
        mechanism="DPGMM (Wu et al. 2016, Laplace)",
        epsilon=float(epsilon), delta=0.0, adjacency="replace-one",
        accountant="linear (sequential) composition", mode=mode,
        split={"pi": split[0], "mu": split[1], "Sigma": split[2], "iterations": T,
               "eps_pi_per_iteration": eps_pi, "eps_mu_per_component_iteration": eps_mu,
               "eps_Sigma_per_component_iteration": eps_sig,
               "sensitivities": "S(pi)=K/n, S(mu)=4KR/n, S(Sigma)=(12nKR^2+8K^2R^2)/n^2"},
        notes=notes, blocks=blocks, covered=covered)
    # the flag is read from the noise-free N_k: a covered fit returns only what its record covers (and .loglik, noted)
    extras = {"n": n, "R": R_t} if covered else {"n": n, "R": R_t, "min_count_violated": violated}
    return GMMFit(weights, means, covs, ll, n_iter=T, privacy=record, extras=extras)
