"""Baseline mechanisms of Liu, Scaglione & Peisert (2025), Sec. V-A, batched and charged under the same accountant.

Four baselines perturb the non-private labeled GMM of eq. (2):

``"laplace"``  i.i.d. Laplace noise on weights, means and covariances with the L1 sensitivities of
               Wu et al. (2016) (restated in the DP-MSNM paper (2021), Lemma 1 and the eta = 0 case of Lemmas 2-4):
               ``S(pi) = K/n``, ``S(mu) = 4KR/n``, ``S(Sigma) = (12 n K R^2 + 8 K^2 R^2)/n^2`` with
               ``||x||_1 <= R``; then projection to the feasible set (weights onto the simplex with
               entries ``>= 1/n``, covariances onto ``{S : S >= floor I}``). Pure ``(eps, 0)``-DP parts.
``"gaussian"`` i.i.d. Gaussian noise on the same three parts; L2 sensitivity bounded by the L1
               sensitivity above; standard deviation by the paper's rule ``sigma = S sqrt(2 ln(2/delta_i))
               / eps_i`` (condition (10) with ``Gamma = I / sigma^2``); same projections.
``"colored"``  Ravi et al.: colored Gaussian noise on each class mean with the covariance that minimises
               the noise MSE ``tr(Gamma^{-1})`` subject to condition (10) over the N label-flip difference
               vectors of that class -- the covering SDP of Algorithm 1 with ``A = I``; covariances and
               weights as in ``"gaussian"``.
``"r1smg"``    Ji & Li (2024) rank-1 singular multivariate Gaussian noise on each class mean (L2
               sensitivity ``4KR/n``); covariances and weights as in ``"gaussian"``.

Accounting (the same as Theorem 1 of Liu, Scaglione & Peisert 2025): the total budget is split into a weight part
``eps_w``, a mean part ``eps_m`` and a covariance part ``eps_c`` (default one third each, the
initialisation of Algorithm 1). The per-class sensitivities above are per class, so the classes
compose in parallel as in (9): ``eps = max_k (eps_m + eps_c) + eps_w``. Parts that are Gaussian each
get an equal share of ``delta`` (basic composition of ``(eps_i, delta_i)`` parts); Laplace parts need
none. The mechanisms and their caveats are described in ``docs/release.md``.

The data bound ``R``. Wu et al.'s sensitivities assume ``||x||_1 <= R`` and ``N_k >= n / (2K)``. With
``data_bound=None`` ("as published", as public re-implementations do) R is taken from the data,
``R = max_n ||x_n||_1``, which itself leaks information: the privacy record says so. With a number
``R``, every row is clipped to the L1 ball of radius R before fitting (``x <- x min(1, R/||x||_1)``),
which enforces the bound. ``N_k >= n/(2K)`` is reported per trial, never assumed silently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from torchdpgmm._shapes import broadcast_shapes

__all__ = [
    "BASELINES",
    "BudgetSplit",
    "wu_sensitivities",
    "data_bound_l1",
    "clip_l1",
    "project_simplex",
    "project_psd",
    "colored_mean_noise_cov",
    "baseline_release",
]

BASELINES = ("laplace", "gaussian", "colored", "r1smg")

# which parts of each baseline are Gaussian-type (they need a share of delta)
_GAUSSIAN_PARTS = {
    "laplace": (),
    "gaussian": ("weights", "means", "covariances"),
    "colored": ("weights", "means", "covariances"),
    "r1smg": ("weights", "means", "covariances"),
}


@dataclass
class BudgetSplit:
    """Fractions of ``epsilon`` given to weights, means and covariances (must sum to 1)."""

    weights: float = 1.0 / 3.0
    means: float = 1.0 / 3.0
    covariances: float = 1.0 / 3.0

    def __post_init__(self) -> None:
        parts = (self.weights, self.means, self.covariances)
        if any((not math.isfinite(p)) or p <= 0 for p in parts):
            raise ValueError(f"split fractions must be finite and > 0, got {parts}")
        if abs(sum(parts) - 1.0) > 1e-9:
            raise ValueError(f"split fractions must sum to 1, got {sum(parts)}")

    def as_dict(self) -> dict[str, float]:
        return {"weights": self.weights, "means": self.means, "covariances": self.covariances}


def wu_sensitivities(n: Any, num_classes: int, data_bound: Any) -> dict[str, torch.Tensor]:
    """Wu et al. (2016) L1 sensitivities for a K-class GMM with ``||x||_1 <= R`` and ``N_k >= n/(2K)``.

    Returns ``{"weights": K/n, "means": 4KR/n, "covariances": (12 n K R^2 + 8 K^2 R^2)/n^2}``
    (the DP-MSNM paper (2021), Lemma 1 and Lemmas 2-4 at eta = 0), broadcast over ``n`` and ``R``.
    """
    R = torch.as_tensor(data_bound, dtype=torch.float64) if not torch.is_tensor(data_bound) else data_bound
    n_t = torch.as_tensor(n, dtype=R.dtype, device=R.device)
    K = float(num_classes)
    return {
        "weights": K / n_t + torch.zeros_like(R),
        "means": 4.0 * K * R / n_t,
        "covariances": (12.0 * n_t * K * R**2 + 8.0 * K**2 * R**2) / n_t**2,
    }


def data_bound_l1(X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``max_n ||x_n||_1`` over the (unmasked) rows, shape ``X.shape[:-2]``. Reading R off the data leaks."""
    r = X.abs().sum(-1)
    if mask is not None:
        r = torch.where(mask, r, torch.zeros_like(r))
    return r.amax(-1)


def clip_l1(X: torch.Tensor, bound: Any) -> torch.Tensor:
    """Scale every row into the L1 ball of radius ``bound``: ``x <- x * min(1, R / ||x||_1)``."""
    R = torch.as_tensor(bound, dtype=X.dtype, device=X.device)
    while R.dim() and R.dim() < X.dim() - 1:
        R = R.unsqueeze(-1)
    norm = X.abs().sum(-1)
    scale = torch.clamp(R / norm.clamp_min(torch.finfo(X.dtype).tiny), max=1.0)
    return X * scale.unsqueeze(-1)


def project_simplex(v: torch.Tensor, floor: Any = 0.0) -> torch.Tensor:
    """Euclidean projection of each row ``v (..., K)`` onto ``{p : sum p = 1, p_k >= floor}``.

    Sort-based algorithm (Held et al. 1974; Duchi et al. 2008) applied to ``(v - floor)`` with total
    mass ``1 - K floor``. Requires ``K * floor < 1``.
    """
    K = v.shape[-1]
    f = torch.as_tensor(floor, dtype=v.dtype, device=v.device)
    while f.dim() and f.dim() < v.dim():
        f = f.unsqueeze(-1)
    mass = 1.0 - K * f
    w = v - f
    u, _ = torch.sort(w, dim=-1, descending=True)
    css = u.cumsum(-1) - mass
    ks = torch.arange(1, K + 1, dtype=v.dtype, device=v.device)
    cond = u - css / ks > 0
    rho = (cond * ks).amax(-1, keepdim=True)  # largest k with the condition (always >= 1)
    theta = torch.gather(css, -1, (rho - 1).long()) / rho
    return torch.clamp(w - theta, min=0.0) + f


def project_psd(S: torch.Tensor, floor: Any = 1e-6, rel_floor: float = 1e-10) -> torch.Tensor:
    """Frobenius-nearest matrix to ``sym(S)`` with every eigenvalue ``>= max(floor, rel_floor * lambda_max)``.

    The relative part keeps the condition number below ``1 / rel_floor`` so that the released covariance
    stays numerically positive definite (Cholesky, log-determinants) even under huge noise. Both floors
    are functions of the noisy matrix and public constants only, i.e. post-processing.
    """
    from torchdpgmm.mechanisms.psd import eigenvalue_floor

    S = 0.5 * (S + S.transpose(-1, -2))
    lmax = torch.linalg.matrix_norm(S, ord=2)  # spectral norm >= lambda_max
    f = torch.clamp(rel_floor * lmax, min=float(floor))
    return eigenvalue_floor(S, f)


def _triu_mask(d: int, device, dtype=torch.bool) -> torch.Tensor:
    return torch.ones(d, d, device=device, dtype=torch.bool).triu()


def _broadcast_param(p: Any, batch_shape, dtype, device) -> torch.Tensor:
    t = torch.as_tensor(p, dtype=dtype, device=device) if not torch.is_tensor(p) else p.to(dtype=dtype, device=device)
    return torch.broadcast_to(t, broadcast_shapes(t.shape, batch_shape))


def colored_mean_noise_cov(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon_means: torch.Tensor,
    delta_means: torch.Tensor,
    mask: torch.Tensor | None = None,
    **solver_kw: Any,
):
    """Ravi et al.'s minimum-MSE colored noise covariance for every class mean.

    Solves the covering SDP of (23) with ``A = I``: ``min tr(Z) s.t. Z >= v_m v_m^T`` over the N
    label-flip difference vectors of each class mean (:func:`torchdpgmm.design.solve_covering_sdp`), and
    scales it to condition (10): ``Gamma_k^{-1} = (2 ln(2/delta) / eps^2) Z*``. The SDP depends on the
    data only, so it is solved once per dataset even when ``epsilon_means`` (shape broadcastable to
    ``X.shape[:-2] + (K,)``) carries extra leading dims. Returns ``(noise_cov (..., K, d, d), sdp result)``.
    """
    from torchdpgmm.design import label_flip_differences, solve_covering_sdp

    if mask is not None:  # padding rows may hold anything (even NaN): zero them before any arithmetic
        X = torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
        y = torch.where(mask, y, torch.zeros((), dtype=y.dtype, device=y.device))
    V, vmask, _, _ = label_flip_differences(X, y, num_classes, mask)
    d = X.shape[-1]
    eye = torch.eye(d, dtype=X.dtype, device=X.device)
    res = solve_covering_sdp(V, eye, vmask, **solver_kw)
    L = 2.0 * torch.log(2.0 / delta_means)
    scale = (L / epsilon_means**2)[..., None, None]
    return scale * res.X, res


def check_classical_domain(epsilon: Any, split: "BudgetSplit | None", mechanism: str, calibration: str) -> None:
    """With ``calibration="classical"`` the rule ``sigma = S sqrt(2 ln(1.25/delta_part)) / eps_part`` (Dwork & Roth
    2014, Thm A.1) holds for ``eps_part <= 1`` only (the record's accountant says so), so a part it would calibrate
    above 1 is refused in one line before any noise is drawn, as the linear accountant of
    :func:`torchdpgmm.em.dp_em.dp_em_epsilon` takes no bound from it there; ``"analytic"`` holds for every epsilon.
    Only the parts the rule calibrates: every part of ``"gaussian"``, the weights and covariances of ``"colored"`` and
    ``"r1smg"`` (their means keep their own calibration); none of ``"laplace"``. ``epsilon`` is the caller's public
    budget (a number or a tensor of them), read on the host once."""
    used = {"gaussian": ("weights", "means", "covariances"), "colored": ("weights", "covariances"),
            "r1smg": ("weights", "covariances")}.get(mechanism, ())
    if calibration != "classical" or not used:
        return
    split = split or BudgetSplit()
    top = float(torch.as_tensor(epsilon, dtype=torch.float64).detach().cpu().max())
    k, v = max(((k, top * getattr(split, k)) for k in used), key=lambda kv: kv[1])
    if v > 1.0:
        raise ValueError(f"calibration='classical' holds for a per-part epsilon <= 1 only (Dwork & Roth 2014, Thm "
                         f"A.1), but the {k} part gets epsilon {v:.4g}: use calibration='analytic' (Balle & Wang "
                         "2018, every epsilon) or a smaller epsilon")


def baseline_release(
    X: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    epsilon: torch.Tensor,
    delta: torch.Tensor,
    mechanism: str,
    fitted,
    *,
    data_bound: torch.Tensor,
    n: torch.Tensor,
    generator: torch.Generator | None = None,
    mask: torch.Tensor | None = None,
    split: BudgetSplit | None = None,
    cov_floor: float = 1e-6,
    weight_floor: torch.Tensor | None = None,
    calibration: str = "paper",
    solver_kw: dict[str, Any] | None = None,
    delta_scalar: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Perturb ``fitted`` (the eq. 2 fit of ``X, y``) with a baseline mechanism; inputs already validated.

    ``epsilon``, ``delta``, ``data_bound`` and ``n`` are tensors broadcastable to the batch shape of
    ``fitted``; ``X, y, mask`` may have a smaller batch shape that broadcasts to it (e.g. one dataset per
    trial, an epsilon grid in front).
    Returns ``(released LabeledGMM, info)`` where ``info`` holds the per-part budgets, the noise scales
    and the sensitivities that were used (all tensors, batch-shaped).
    """
    from torchdpgmm.privacy import gaussian_sigma
    from torchdpgmm.mechanisms import laplace_noise, normal_noise, symmetric_noise
    from torchdpgmm.mixture import LabeledGMM

    if mechanism not in BASELINES:
        raise ValueError(f"mechanism must be one of {BASELINES}, got {mechanism!r}")
    split = split or BudgetSplit()
    dtype, device = fitted.means.dtype, fitted.means.device
    batch = fitted.means.shape[:-2]
    K, d = num_classes, fitted.means.shape[-1]
    eps = _broadcast_param(epsilon, batch, dtype, device)
    dlt = _broadcast_param(delta, batch, dtype, device)
    R = _broadcast_param(data_bound, batch, dtype, device)
    n_t = _broadcast_param(n, batch, dtype, device)
    sens = wu_sensitivities(n_t, K, R)
    eps_w, eps_m, eps_c = eps * split.weights, eps * split.means, eps * split.covariances
    gparts = _GAUSSIAN_PARTS[mechanism]
    dpart = dlt / max(len(gparts), 1)
    info: dict[str, Any] = {
        "sensitivities": sens,
        "epsilon_parts": {"weights": eps_w, "means": eps_m, "covariances": eps_c},
        "delta_parts": {p: (dpart if p in gparts else torch.zeros_like(dlt)) for p in ("weights", "means", "covariances")},
        "data_bound": R,
    }
    wfloor = (1.0 / n_t) if weight_floor is None else _broadcast_param(weight_floor, batch, dtype, device)

    if mechanism == "laplace":
        bw, bm, bc = sens["weights"] / eps_w, sens["means"] / eps_m, sens["covariances"] / eps_c
        w_noisy = fitted.weights + laplace_noise((*batch, K), bw[..., None], generator, dtype=dtype, device=device)
        mu = fitted.means + laplace_noise((*batch, K, d), bm[..., None, None], generator, dtype=dtype, device=device)
        cov = fitted.covariances + symmetric_noise((*batch, K), d, bc[..., None], kind="laplace", generator=generator,
                                                   dtype=dtype, device=device)
        info["noise_scale"] = {"weights": bw, "means": bm, "covariances": bc, "kind": "laplace b"}
    else:
        sw = gaussian_sigma(eps_w, dpart, sens["weights"], rule=calibration)
        sc = gaussian_sigma(eps_c, dpart, sens["covariances"], rule=calibration)
        w_noisy = fitted.weights + normal_noise((*batch, K), sw[..., None], generator, dtype=dtype, device=device)
        if mechanism == "gaussian":
            sm = gaussian_sigma(eps_m, dpart, sens["means"], rule=calibration)
            mu = fitted.means + normal_noise((*batch, K, d), sm[..., None, None], generator, dtype=dtype, device=device)
            info["noise_scale"] = {"weights": sw, "means": sm, "covariances": sc, "kind": "gaussian std"}
        elif mechanism == "colored":
            from torchdpgmm.mechanisms import gaussian as gaussian_noise

            ncov, res = colored_mean_noise_cov(
                X, y, K, eps_m.unsqueeze(-1), dpart.unsqueeze(-1), mask, **(solver_kw or {})
            )
            mu = gaussian_noise(fitted.means, ncov, generator=generator)
            info["mean_noise_cov"] = ncov
            info["sdp_opt"] = res.opt
            info["sdp_gap"] = res.gap
            info["noise_scale"] = {"weights": sw, "means_mse": torch.diagonal(ncov, dim1=-2, dim2=-1).sum(-1),
                                   "covariances": sc, "kind": "gaussian std (means: trace of covariance)"}
        else:  # r1smg
            from torchdpgmm.mechanisms import r1smg

            # the core's R1SMG takes one scalar delta
            dsc = delta_scalar if delta_scalar is not None else delta
            if torch.is_tensor(dsc):
                if dsc.numel() != 1:
                    raise ValueError("mechanism='r1smg' needs a scalar delta")
                dsc = float(dsc)
            sens_m = sens["means"][..., None].expand(*batch, K)
            mu = r1smg(fitted.means, sens_m, eps_m[..., None], float(dsc) / len(gparts), generator=generator)
            info["noise_scale"] = {"weights": sw, "means_l2_sensitivity": sens["means"], "covariances": sc,
                                   "kind": "gaussian std (means: R1SMG)"}
        cov = fitted.covariances + symmetric_noise((*batch, K), d, sc[..., None], kind="gaussian", generator=generator,
                                                   dtype=dtype, device=device)
    weights = project_simplex(w_noisy, wfloor)
    covariances = project_psd(cov, cov_floor)
    model = LabeledGMM(weights, mu, covariances, validate_args=False)
    return model, info
