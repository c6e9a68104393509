"""DP-MSNM (the DP-MSNM paper (2021)): EM for skew-normal mixtures with Laplace noise on every M-step, "as published".

Each iteration: E-step (r0, r1, r2); M-step eqs. (8)-(10); noise (the DP-MSNM paper (2021), "Noise adding step"):
``pi + Lap(S(pi)/eps_pi)``, ``xi_k + Lap(S(xi)/eps_xi)``, ``Lambda_k + Lap(S(Lambda)/eps_Lambda)`` (upper
triangle, mirrored), ``eta_k + Lap(S(eta)/eps_eta)``; post-processing: min-max normalisation of ``pi``
with smoothing ``zeta`` and ``Lambda + rho I`` (eq. 11).

Sensitivities, Lemmas 1-4, under ``||x_i||_1 <= R``, ``N_k >= n/(2G)``, ``r1 <= R1``, ``r2 <= R2``,
``||eta_k||_1 <= R3``:
``S(pi) = G/n``; ``S(xi) = 4G(R - R3)/n``; ``S(eta) = 2 G R R1 / (n R2)``;
``S(Lambda) = 2G(R^2 + 4 R R1 R3 + 4 R2 R3^2)/n``.

Budget (the DP-MSNM paper (2021), after Lemma 4): ``eps_Lambda = 0.6 eps/(TG)``, ``eps_xi = eps_eta = 0.13 eps/(TG)``; the
remaining ``0.14 eps/T`` goes to ``pi`` so that one iteration costs ``eps_pi + G(eps_xi + eps_Lambda +
eps_eta) = eps/T`` and T iterations ``eps`` (sequential composition, pure DP).

Assumptions are enforced by clipping where possible: rows to ``||x||_1 <= R`` (when R is given), ``r1``
to ``[0, R1]``, ``r2`` to ``[0, R2]``, ``eta_k`` (before noise) into the L1 ball of radius ``R3``, and
``max(N_k, n/(2G))`` as the M-step denominator. Known problems of the published analysis, recorded in the
privacy notes: Lemma 2's bound decreases in R3 (the triangle inequality gives ``R + R3``; we require
``R3 < R``); Lemma 3 divides by R2, an *upper* bound on r2, so it is not a valid worst case in general;
R from the data (``R=None``) leaks.

Few records. The count is never checked, so every ``n`` (0 included) gives a model: the sensitivities, ``pi =
N_k/n`` and the floor ``n/(2G)`` use ``max(n, 1)`` (nothing changes for ``n >= 1``; at ``n = 0`` the release is
the noise of a one-record dataset around zero statistics), and the k-means++ start (on the clipped raw data, not
private) repeats centres when there are fewer than ``G`` records and uses zero centres when there are none; a
cluster without a record starts from the masked mean (0 with no record) with covariance ``reg I`` and a weight near 0
(uniform weights when no cluster has a record).

Labels: because Lemmas 2-3 are not proven worst cases, no DP-MSNM fit is labelled ``mode="sound"``: the
record is ``"as-published"`` with ``covered=False``, and since the noise scales depend on ``n`` it claims
replace-one adjacency only (the paper states removal of one record).
"""
from __future__ import annotations


import torch

from torchdpgmm.em._common import (
    check_em_budget,
    check_init_params,
    check_iterations,
    check_number,
    check_shares,
    laplace,
    make_record,
    noised_block,
    laplace_symmetric,
    normalise_weights_minmax,
    project_l1_ball,
    shift_pd,
)
from torchdpgmm.em.dpgmm import _check_public, resolve_l1_bound
from torchdpgmm.em.gmm import _nearest, kmeans, kmeans_plusplus, private_data
from torchdpgmm.em.skew_normal import (
    SkewNormalMixtureFit,
    init_skew_normal_params,
    msnm_e_step,
)
from torchdpgmm.mixture import one_hot

__all__ = ["msnm_sensitivities", "fit_dp_msnm"]


def msnm_sensitivities(n, G: int, R, R1: float, R2: float, R3):
    """Lemmas 1-4 of the DP-MSNM paper (2021) (as published)."""
    return {
        "pi": G / n,
        "xi": 4.0 * G * (R - R3) / n,
        "eta": 2.0 * G * R * R1 / (n * R2),
        "Lambda": 2.0 * G * (R ** 2 + 4.0 * R * R1 * R3 + 4.0 * R2 * R3 ** 2) / n,
    }


def _msnm_start(Xc, mask, G: int, init_params, generator):
    """Caller-supplied ``(weights, xi, Lambda, eta)`` or the moment start from k-means++ / Lloyd clusters on
    the (clipped) data, which is not private; returns the four tensors and a note for the record."""
    batch, d = Xc.shape[:-2], Xc.shape[-1]
    if init_params is not None:
        weights, xi, Lam, eta = (torch.as_tensor(t, dtype=Xc.dtype, device=Xc.device) for t in init_params)
        return (weights.expand(*batch, G), xi.expand(*batch, G, d), Lam.expand(*batch, G, d, d),
                eta.expand(*batch, G, d), "initialisation supplied by the caller")
    centres = kmeans(Xc, kmeans_plusplus(Xc, G, mask, generator), mask, 10)
    resp = one_hot(_nearest(Xc, centres), G, Xc.dtype)
    return (*init_skew_normal_params(Xc, resp, mask),
            "k-means++ initialisation on the raw data is NOT private (the paper uses DP k-means)")


def _clipped_m_step(Xc, r0, r1, r2, eta, denom, R3_t):
    """Eqs. (8)-(10) of the DP-MSNM paper with the paper's denominators ``max(N_k, n/(2G))`` and ``eta``
    clipped into the L1 ball of radius ``R3`` before ``Lambda`` is formed; returns ``(xi, eta, Lambda)``."""
    tiny = torch.finfo(Xc.dtype).tiny
    w1 = r0 * r1
    w2 = (r0 * r2).sum(-2).clamp(min=tiny)
    xi_new = (torch.einsum("...nk,...nd->...kd", r0, Xc) - eta * w1.sum(-2).unsqueeze(-1)) / denom.unsqueeze(-1)
    diff = Xc.unsqueeze(-3) - xi_new.unsqueeze(-2)
    s = torch.einsum("...nk,...knd->...kd", w1, diff)
    eta_new = project_l1_ball(s / w2.unsqueeze(-1), R3_t[..., None, None])
    rT = r0.transpose(-1, -2).unsqueeze(-1)
    Sxx = torch.matmul((rT * diff).transpose(-1, -2), diff)
    es = eta_new.unsqueeze(-1) * s.unsqueeze(-2)
    Lam_new = (Sxx - es - es.transpose(-1, -2)
               + w2[..., None, None] * eta_new.unsqueeze(-1) * eta_new.unsqueeze(-2)) / denom[..., None, None]
    return xi_new, eta_new, 0.5 * (Lam_new + Lam_new.transpose(-1, -2))


def fit_dp_msnm(
    X: torch.Tensor,
    num_components: int,
    epsilon: float,
    *,
    R: float | None = None,
    R1: float = 3.0,
    R2: float = 10.0,
    R3_fraction: float = 0.5,
    max_iter: int = 20,
    split: tuple[float, float, float] = (0.6, 0.13, 0.13),
    mask: torch.Tensor | None = None,
    init: str = "kmeans++",
    init_params=None,
    zeta: float = 1e-3,
    psd_floor: float = 1e-6,
    generator: torch.Generator | None = None,
) -> SkewNormalMixtureFit:
    """DP-MSNM (the DP-MSNM paper (2021) Algorithm 2), batched over the leading dims of ``X (..., N, d)``.

    Args:
        R: public bound on ``||x||_1`` (rows clipped); ``None`` takes it from the data (as published, leaks).
        R1, R2: clipping bounds of ``r1`` and ``r2``; ``R3 = R3_fraction * R`` bounds ``||eta_k||_1``.
        split: ``(Lambda, xi, eta)`` shares of ``eps/(T G)``; ``pi`` gets ``(1 - G * ...)``, i.e. the rest
            ``(1 - sum(split)) eps / T``.
        init: ``"kmeans++"`` (moment start from k-means++ / Lloyd clusters, not private) or
            ``init_params = (weights, xi, Lambda, eta)``.

    Any number of unmasked rows, none included, gives a model (module docstring, "Few records").
    """
    check_em_budget(epsilon)
    check_iterations("max_iter", max_iter)
    check_shares("split", split, 3)  # finite and positive: a NaN share passed and failed a Cholesky mid-fit
    if sum(split) >= 1.0:
        raise ValueError(f"split must be three positive shares (Lambda, xi, eta) summing to < 1, got {split!r}")
    check_number("R3_fraction", R3_fraction)
    if not (0.0 < R3_fraction < 1.0):
        raise ValueError(f"R3_fraction must lie in (0, 1) (Lemma 2 needs R3 < R), got {R3_fraction!r}")
    check_number("R1", R1)  # finite: R1 = inf failed a Cholesky mid-fit
    check_number("R2", R2)
    _check_public(R, zeta, psd_floor)
    if init not in ("kmeans++",) and init_params is None:
        raise ValueError(f"init must be 'kmeans++' (or pass init_params), got {init!r}")
    X, mask = private_data(X, num_components, mask)  # public facts only; a non-finite record read as the origin
    G, d = num_components, X.shape[-1]
    check_init_params(init_params, X.shape[:-2], ((G,), (G, d), (G, d, d), (G, d)), ("weights", "xi", "Lambda", "eta"))
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))
    Xc, R_t, mode, notes = resolve_l1_bound(X, mask, R)
    n = mask.sum(-1).to(X.dtype)
    n1 = n.clamp(min=1.0)  # "Few records": equal to n unless there is no record
    T = max_iter
    R3_t = R3_fraction * R_t
    eps_L, eps_xi, eps_eta = (s * epsilon / (T * G) for s in split)
    eps_pi = (1.0 - sum(split)) * epsilon / T
    S = msnm_sensitivities(n1, G, R_t, R1, R2, R3_t)
    weights, xi, Lam, eta, init_note = _msnm_start(Xc, mask, G, init_params, generator)
    notes.append(init_note)
    notes.append("Lemma 3 divides by R2 (an upper bound on r2): not a valid worst case in general")
    notes.append("Lemma 2's S(xi) = 4G(R-R3)/n decreases in R3; the triangle inequality gives 4G(R+R3)/n")
    floor = (n1 / (2.0 * G)).unsqueeze(-1)
    violated = torch.zeros(X.shape[:-2], dtype=torch.bool, device=X.device)
    for _ in range(T):
        r0, r1, r2, _ = msnm_e_step(Xc, weights, xi, Lam, eta, mask)
        r1 = r1.clamp(0.0, R1)
        r2 = r2.clamp(0.0, R2)
        Nk = r0.sum(-2)
        violated = violated | (Nk < floor).any(-1)
        pi = Nk / n1.unsqueeze(-1)
        xi_new, eta_new, Lam_new = _clipped_m_step(Xc, r0, r1, r2, eta, torch.maximum(Nk, floor), R3_t)
        # noise adding step
        pi = laplace(pi, (S["pi"] / eps_pi).unsqueeze(-1), generator)
        xi_new = laplace(xi_new, (S["xi"] / eps_xi)[..., None, None], generator)
        eta_new = laplace(eta_new, (S["eta"] / eps_eta)[..., None, None], generator)
        Lam_new = laplace_symmetric(Lam_new, (S["Lambda"] / eps_L)[..., None, None, None], generator)
        # post-processing step
        weights = normalise_weights_minmax(pi, zeta)
        Lam = shift_pd(Lam_new, psd_floor)  # floor relative to ||Lambda|| too: any data scale
        xi, eta = xi_new, eta_new
    ll = msnm_e_step(X, weights, xi, Lam, eta, mask)[3]
    notes.append("the returned .loglik is an evaluation on the raw data: it is not covered by this record "
                 "and must not be published with the model")
    notes.append("not covered by epsilon: Lemmas 2-3 of the DP-MSNM paper are not valid worst cases, so the "
                 "stated sensitivities are not proven" + ("; k-means++ start on the raw data" if init_params is None
                                                         else "") + ("; R taken from the data" if R is None else ""))
    notes.append("noise scales depend on n: replace-one adjacency only (n public); the paper states removal")
    blocks = (noised_block("weights", "laplace", S["pi"], S["pi"] / eps_pi, "l1", T),
              noised_block("xi", "laplace", S["xi"], S["xi"] / eps_xi, "l1", T * G),
              noised_block("eta", "laplace", S["eta"], S["eta"] / eps_eta, "l1", T * G),
              noised_block("Lambda", "laplace", S["Lambda"], S["Lambda"] / eps_L, "l1", T * G))
    record = make_record(
        mechanism="DP-MSNM (DP-MSNM paper 2021, Laplace)",
        epsilon=float(epsilon), delta=0.0, adjacency="replace-one",
        accountant="linear (sequential) composition", mode="as-published",
        split={"Lambda": split[0], "xi": split[1], "eta": split[2], "pi": 1.0 - sum(split), "iterations": T,
               "eps_pi_per_iteration": eps_pi, "eps_Lambda_per_component_iteration": eps_L,
               "eps_xi_per_component_iteration": eps_xi, "eps_eta_per_component_iteration": eps_eta,
               "R1": R1, "R2": R2, "R3_fraction": R3_fraction},
        notes=notes, blocks=blocks, covered=False)
    return SkewNormalMixtureFit(weights, xi, Lam, eta, ll, n, n_iter=T, privacy=record,
                                extras={"R": R_t, "min_count_violated": violated, "sensitivities": S})
