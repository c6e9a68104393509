"""DP-EM for Gaussian mixtures (Park, Foulds, Chaudhuri & Welling, AISTATS 2017, and its supplement).

Each iteration runs a non-private E-step, then perturbs the *expected sufficient statistics* of the M-step
("moment perturbation") and computes the MAP M-step of supplement Sec. 1 from the noisy moments:

* ``N_k = sum_i r_ik``  (vector over k),  ``S1_k = sum_i r_ik x_i``,  ``S2_k = sum_i r_ik x_i x_i^T``;
* MAP (supplement Sec. 1, Dirichlet(alpha) and NIW(0, kappa0, nu0, S0) priors):
  ``pi_k = (N_k + alpha_k - 1) / (N + sum alpha - K)``,  ``mu_k = S1_k / (N_k + kappa0)``
  (= ``N_k mu_k^MLE / (N_k + kappa0)``),
  ``Sigma_k = (S0 + N_k Sigma^MLE + kappa0 N_k/(kappa0 + N_k) mu^MLE mu^MLE^T) / (nu0 + N_k + d + 2)``
  which simplifies to ``(S0 + S2_k - S1_k S1_k^T / (N_k + kappa0)) / (nu0 + N_k + d + 2)``.

Sensitivities (replace-one adjacency, rows scaled into the unit L2 ball, responsibilities on the simplex;
our derivation, the supplement does not state them): for the changed record only its own terms move, so
``N``: L1 2, L2 sqrt(2); ``S1``: L1 2 sqrt(d), L2 2; ``S2`` (upper triangle with diagonal): L1 d + 1
(``sum_{i<=j} |x_i x_j| <= (||x||_1^2 + ||x||_2^2)/2 <= (d+1)/2`` per record), L2 2.

Variants: ``"LLG"`` = Laplace on ``N`` and ``S1``, Gaussian on ``S2``; ``"GGG"`` = Gaussian on all three.
All perturbations share one noise multiplier ``m`` (Laplace scale ``m * Delta_1``; Gaussian std
``sqrt(2) m Delta_2`` in LLG, so that both have variance ``2 m^2 Delta^2``; ``m Delta_2`` in GGG), found
by bisection so that the T-fold composition meets the target (epsilon, delta) under the chosen accountant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from torchdpgmm.privacy.moments import MomentsAccountant, calibrate_noise_multiplier
from torchdpgmm.em._common import (
    check_em_budget,
    check_init_params,
    check_iterations,
    check_number,
    clip_rows_l2,
    make_record,
    noised_block,
    gaussian_noise,
    gaussian_symmetric,
    laplace,
    shift_psd,
)
from torchdpgmm.em.gmm import GMMFit, e_step, mixture_log_likelihood, private_data, weighted_moments

__all__ = ["MAPPrior", "dp_em_sensitivities", "dp_em_epsilon", "calibrate_dp_em", "map_m_step", "fit_dp_em"]


@dataclass(frozen=True)
class MAPPrior:
    """Priors of supplement Sec. 1: Dirichlet(alpha), NIW(0, kappa0, nu0 = d + nu0_offset, s0 * I)."""

    alpha: float = 2.0
    kappa0: float = 1.0
    nu0_offset: float = 2.0
    s0: float = 0.1

    def __post_init__(self) -> None:
        """One-line refusals at construction (public values): ``alpha >= 1`` (the MAP weights ``N_k + alpha - 1`` go
        negative below), ``kappa0 > 0`` (0 divided a noisy count clamped to 0 into ``S1``), ``nu0_offset > -1``
        (``nu0 > d - 1``), ``s0 > 0``, all finite (NaN, -1 and -5 were accepted)."""
        check_number("MAPPrior.alpha", self.alpha, above=1.0, or_equal=True)
        check_number("MAPPrior.kappa0", self.kappa0)
        check_number("MAPPrior.nu0_offset", self.nu0_offset, above=-1.0)
        check_number("MAPPrior.s0", self.s0)


def dp_em_sensitivities(d: int) -> dict[str, dict[str, float]]:
    """L1 / L2 sensitivities of (N, S1, S2) for unit-ball rows under replace-one adjacency."""
    return {
        "counts": {"l1": 2.0, "l2": math.sqrt(2.0)},
        "first_moments": {"l1": 2.0 * math.sqrt(d), "l2": 2.0},
        "second_moments": {"l1": float(d + 1), "l2": 2.0},
    }


def _mechanisms(variant: str, m: float) -> list[tuple[str, float]]:
    """Per-iteration list of (kind, parameter): laplace -> Delta/b = 1/m; gaussian -> sigma/Delta."""
    if variant == "LLG":
        return [("laplace", 1.0 / m), ("laplace", 1.0 / m), ("gaussian", math.sqrt(2.0) * m)]
    if variant == "GGG":
        return [("gaussian", m), ("gaussian", m), ("gaussian", m)]
    raise ValueError(f"variant must be 'LLG' or 'GGG', got {variant!r}")


def dp_em_epsilon(variant: str, noise_multiplier: float, iterations: int, delta: float,
                  accountant: str = "moments", conversion: str = "classic") -> float:
    """Total epsilon of ``iterations`` DP-EM iterations at a given noise multiplier.

    ``accountant="moments"``: log moments of the supplement summed over all 3T mechanisms, then the tail
    bound. ``"linear"``: sum of per-mechanism epsilons; each Gaussian mechanism is charged the classical
    ``eps = sqrt(2 ln(1.25/delta')) / (sigma/Delta)`` with ``delta' = delta / (number of Gaussian
    mechanisms)``. That formula is only valid for ``eps <= 1``: a multiplier that would charge a Gaussian step more is
    priced at ``inf``, so the calibration adds noise until every step is inside it (without the check, at large
    epsilon it claimed less than the record's own blocks compose to by the PLD accountant; an independent audit)."""
    mech = _mechanisms(variant, noise_multiplier)
    if accountant == "moments":
        acc = MomentsAccountant()
        for kind, p in mech:
            if kind == "laplace":
                acc.compose_laplace(p, iterations)
            else:
                acc.compose_gaussian(p, iterations)
        return acc.get_epsilon(delta, conversion)
    if accountant == "linear":
        n_gauss = sum(1 for k, _ in mech if k == "gaussian") * iterations
        total = 0.0
        for kind, p in mech:
            if kind == "laplace":
                total += iterations * p
            else:
                step = math.sqrt(2.0 * math.log(1.25 * n_gauss / delta)) / p
                if step > 1.0:  # outside the classical formula's range: no bound from it
                    return math.inf
                total += iterations * step
        return total
    raise ValueError(f"accountant must be 'moments' or 'linear', got {accountant!r}")


def calibrate_dp_em(variant: str, epsilon: float, delta: float, iterations: int,
                    accountant: str = "moments", conversion: str = "classic") -> float:
    """Smallest noise multiplier whose T-fold composition has epsilon <= target."""
    return calibrate_noise_multiplier(
        lambda m: dp_em_epsilon(variant, m, iterations, delta, accountant, conversion), epsilon)


def map_m_step(Nk, S1, S2, n, prior: MAPPrior = MAPPrior(), psd_floor: float = 1e-6):
    """MAP M-step of supplement Sec. 1 from (possibly noisy) moments; noisy counts are clamped at 0 and
    the covariance is made positive definite by ``shift_psd`` (post-processing).

    Post-processing also keeps the weights a distribution at every count: the normaliser ``n + K alpha - K``
    (it cancels in the renormalisation) is used only where positive, and weights whose numerators are all 0
    (``alpha = 1`` and every noisy count clamped to 0: likely with few or no records) become uniform."""
    d = S1.shape[-1]
    K = Nk.shape[-1]
    Nk = Nk.clamp(min=0.0)
    n = torch.as_tensor(n, dtype=S1.dtype, device=S1.device)
    den = n.unsqueeze(-1) + K * prior.alpha - K
    weights = (Nk + prior.alpha - 1.0) / torch.where(den > 0, den, torch.ones_like(den))
    tot = weights.sum(-1, keepdim=True)  # noisy counts need not sum to n
    weights = torch.where(tot > 0, weights / torch.where(tot > 0, tot, torch.ones_like(tot)),
                          torch.full_like(weights, 1.0 / K))
    means = S1 / (Nk + prior.kappa0).unsqueeze(-1)
    eye = torch.eye(d, dtype=S1.dtype, device=S1.device)
    S2 = 0.5 * (S2 + S2.transpose(-1, -2))
    scatter = S2 - S1.unsqueeze(-1) * S1.unsqueeze(-2) / (Nk + prior.kappa0)[..., None, None]
    nu0 = d + prior.nu0_offset
    cov = (prior.s0 * eye + scatter) / (nu0 + Nk + d + 2.0)[..., None, None]
    cov = shift_psd(cov, psd_floor)
    return weights, means, cov


def _dp_em_start(init_params, batch, K: int, d: int, scale, dtype, device, generator):
    """Start of DP-EM in scaled units: data-independent (uniform weights, means ``N(0, I/(4d))``,
    covariances ``I/(2d)``) or the caller's public ``init_params`` divided by the scale."""
    if init_params is None:
        weights = torch.full((*batch, K), 1.0 / K, dtype=dtype, device=device)
        means = torch.randn(*batch, K, d, dtype=dtype, device=device, generator=generator) / (2.0 * math.sqrt(d))
        covs = torch.eye(d, dtype=dtype, device=device).expand(*batch, K, d, d) / (2.0 * d)
        return weights, means, covs
    w0, m0, c0 = (torch.as_tensor(t, dtype=dtype, device=device) for t in init_params)
    return (w0.expand(*batch, K), m0.expand(*batch, K, d) / scale[..., None, None],
            c0.expand(*batch, K, d, d) / (scale ** 2)[..., None, None, None])


def _dp_em_blocks(variant: str, sens: dict, max_iter: int, scales: dict):
    """The three noised blocks of one DP-EM run (each released ``max_iter`` times) for the record."""
    kinds = {"counts": "laplace", "first_moments": "laplace", "second_moments": "gaussian"} if variant == "LLG" \
        else dict.fromkeys(("counts", "first_moments", "second_moments"), "gaussian")
    return tuple(noised_block(k, kind, sens[k]["l1" if kind == "laplace" else "l2"], scales[k],
                              "l1" if kind == "laplace" else "l2", max_iter) for k, kind in kinds.items())


def _check_dp_em_args(epsilon, delta, variant, max_iter, data_bound, prior, psd_floor) -> None:
    """One-line ValueErrors (TypeErrors for wrong kinds) for bad settings, before anything touches the data; the
    package's one budget rule. ``psd_floor`` must be > 0: 0 (the paper's rho) leaves a singular covariance."""
    check_em_budget(epsilon, delta, needs_delta=True, stacklevel=4)  # a Gaussian step: delta required
    if variant not in ("LLG", "GGG"):
        raise ValueError(f"variant must be 'LLG' or 'GGG', got {variant!r}")
    check_iterations("max_iter", max_iter)
    check_number("data_bound", data_bound, allow_none=True)
    if not isinstance(prior, MAPPrior):
        raise TypeError(f"prior must be a MAPPrior, got {type(prior).__name__}")
    check_number("psd_floor", psd_floor)


def fit_dp_em(
    X: torch.Tensor,
    num_components: int,
    epsilon: float,
    delta: float,
    *,
    variant: str = "LLG",
    max_iter: int = 20,
    data_bound: float | None = None,
    mask: torch.Tensor | None = None,
    prior: MAPPrior = MAPPrior(),
    accountant: str = "moments",
    conversion: str = "classic",
    init_params: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    psd_floor: float = 1e-6,
    generator: torch.Generator | None = None,
) -> GMMFit:
    """DP-EM (Park et al. 2017) for full-covariance GMMs, batched over the leading dims of ``X (..., N, d)``.

    Args:
        epsilon, delta: total budget over all ``max_iter`` iterations.
        variant: ``"LLG"`` or ``"GGG"`` (see module doc).
        data_bound: public bound B on ``||x||_2``; rows are clipped to it and divided by it ("sound"
            mode). ``None`` scales by the data's own maximum norm ("as-published": the paper scales the
            data into the unit ball; a data-dependent scale is not private, the record says so).
        accountant: ``"moments"`` (supplement MGFs) or ``"linear"`` (basic composition).
        init_params: start ``(weights, means, covariances)`` in the *original* data units; default is a
            data-independent random start in the unit ball (means ``N(0, I/(4d))``, weights uniform,
            covariances ``I/(2d)``), drawn from ``generator``.

    Any number of unmasked rows, none included, gives a model: the count (public under this replace-one record)
    is never checked (the start is data-independent; with few rows the noisy moments are mostly noise and the prior
    rules).

    Returns:
        :class:`GMMFit` in original units, ``loglik`` on the given (unclipped) rows, ``privacy`` a
        :class:`PrivacyRecord`.
    """
    _check_dp_em_args(epsilon, delta, variant, max_iter, data_bound, prior, psd_floor)
    X, mask = private_data(X, num_components, mask)  # public facts only; a non-finite record read as the origin
    K, d = num_components, X.shape[-1]
    batch = X.shape[:-2]
    check_init_params(init_params, batch, ((K,), (K, d), (K, d, d)), ("weights", "means", "covariances"))
    X = torch.where(mask.unsqueeze(-1), X, torch.zeros_like(X))
    m = calibrate_dp_em(variant, float(epsilon), float(delta), max_iter, accountant, conversion)
    sens = dp_em_sensitivities(d)
    notes: list[str] = []
    if data_bound is None:
        mode = "as-published"
        raw = torch.nn.functional.pad(torch.linalg.vector_norm(X, dim=-1), (0, 1)).amax(-1)  # a 0 appended: N may be 0
        # no nonzero row (no record at all, say): scale 1, where the tiny floor gave covariances that underflow to 0
        scale = torch.where(raw > 0, raw.clamp(min=torch.finfo(X.dtype).tiny), torch.ones_like(raw))
        notes.append("rows scaled by the data's own maximum L2 norm: this scale is data-dependent and "
                     "not protected (pass data_bound for the sound mode)")
        Xs = X / scale[..., None, None]
    else:
        mode = "sound"
        scale = torch.full(batch, float(data_bound), dtype=X.dtype, device=X.device)
        Xs = clip_rows_l2(X, data_bound) / data_bound
    n = mask.sum(-1).to(X.dtype)
    weights, means, covs = _dp_em_start(init_params, batch, K, d, scale, X.dtype, X.device, generator)
    if variant == "LLG":
        b_counts, b_first = m * sens["counts"]["l1"], m * sens["first_moments"]["l1"]
        s_second = math.sqrt(2.0) * m * sens["second_moments"]["l2"]
    else:
        s_counts, s_first = m * sens["counts"]["l2"], m * sens["first_moments"]["l2"]
        s_second = m * sens["second_moments"]["l2"]
    for _ in range(max_iter):
        log_resp, _ = e_step(Xs, weights, means, covs, mask)
        resp = log_resp.exp()
        Nk, S1, S2 = weighted_moments(Xs, resp)
        if variant == "LLG":
            Nk = laplace(Nk, b_counts, generator)
            S1 = laplace(S1, b_first, generator)
        else:
            Nk = gaussian_noise(Nk, s_counts, generator)
            S1 = gaussian_noise(S1, s_first, generator)
        S2 = gaussian_symmetric(S2, s_second, generator)
        weights, means, covs = map_m_step(Nk, S1, S2, n, prior, psd_floor)
    means_o = means * scale[..., None, None]
    covs_o = covs * (scale ** 2)[..., None, None, None]
    ll = mixture_log_likelihood(X, weights, means_o, covs_o, mask)
    scales = ({"counts": b_counts, "first_moments": b_first, "second_moments": s_second} if variant == "LLG"
              else {"counts": s_counts, "first_moments": s_first, "second_moments": s_second})
    kinds = ("Laplace(b", "Laplace(b", "Gaussian(sigma") if variant == "LLG" else ("Gaussian(sigma",) * 3
    split = {"variant": variant, "noise_multiplier": m, "iterations": max_iter, "sensitivities": sens,
             "per_iteration_mechanisms": {k: f"{kind} = {scales[k]:.6g})" for k, kind in zip(scales, kinds)}}
    notes.append("initialisation is data-independent (random) unless init_params were given; "
                 "init_params computed from the data are not covered by this record")
    notes.append("the returned .loglik is an evaluation on the raw data: it is not covered by this record "
                 "and must not be published with the model")
    covered = mode == "sound"  # init_params are the caller's public start (the notes say so)
    blocks = _dp_em_blocks(variant, sens, max_iter, scales)
    record = make_record(
        mechanism=f"DP-EM ({variant}, Park et al. 2017)",
        epsilon=float(epsilon), delta=float(delta), adjacency="replace-one",
        accountant=("moments accountant (Park et al. 2017 supplement MGFs, " + conversion + " tail bound)")
        if accountant == "moments" else "linear composition",
        mode=mode, split=split, notes=notes, blocks=blocks, covered=covered)
    return GMMFit(weights, means_o, covs_o, ll, n_iter=max_iter, privacy=record, extras={"n": n})
