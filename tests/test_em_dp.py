"""DP-EM, DPGMM, DP-MSNM: MAP M-step vs the supplement's formulas, sensitivities vs the papers, invariants
after post-processing, privacy records, input errors before any noise is drawn."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm.release import allow_weak_privacy

from torchdpgmm.em import (
    MAPPrior,
    fit_dp_em,
    fit_dp_msnm,
    fit_dpgmm,
    map_m_step,
    msnm_sensitivities,
    wu_sensitivities,
)
from torchdpgmm.em._common import clip_rows_l1, clip_rows_l2, normalise_weights_minmax, shift_psd



def _data(B=4, N=300, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    lab = torch.randint(0, 2, (B, N), generator=g)
    centres = torch.tensor([[0.2, 0.2], [0.7, 0.6]], dtype=torch.float64)[:, :d]
    return (centres[lab] + 0.08 * torch.randn(B, N, d, dtype=torch.float64, generator=g)).clamp(0, 1)


def test_map_m_step_matches_supplement_formulas():
    rng = np.random.default_rng(0)
    N, K, d = 50, 3, 2
    X = rng.normal(size=(N, d)) * 0.3
    R = rng.dirichlet(np.ones(K), size=N)
    Nk = R.sum(0)
    S1 = R.T @ X
    S2 = np.einsum("nk,nd,ne->kde", R, X, X)
    pr = MAPPrior()
    w, mu, cov = map_m_step(torch.tensor(Nk), torch.tensor(S1), torch.tensor(S2), torch.tensor(float(N)), pr, psd_floor=0.0)
    alpha, kappa0, nu0, S0 = 2.0, 1.0, d + 2.0, 0.1 * np.eye(d)
    for k in range(K):
        pi_mle = Nk[k] / N
        mu_mle = S1[k] / Nk[k]
        sig_mle = S2[k] / Nk[k] - np.outer(mu_mle, mu_mle)
        pi_map = (N * pi_mle + alpha - 1) / (N + K * alpha - K)
        mu_map = Nk[k] * mu_mle / (Nk[k] + kappa0)
        sig_map = (S0 + Nk[k] * sig_mle + kappa0 * Nk[k] / (kappa0 + Nk[k]) * np.outer(mu_mle, mu_mle)) / (nu0 + Nk[k] + d + 2)
        assert w[k].item() == pytest.approx(pi_map, rel=1e-12)
        np.testing.assert_allclose(mu[k].numpy(), mu_map, rtol=1e-12)
        np.testing.assert_allclose(cov[k].numpy(), sig_map, rtol=1e-10)


def test_sensitivity_formulas():
    n, K, R = 200.0, 3, 2.0
    s_pi, s_mu, s_sig = wu_sensitivities(n, K, R)
    assert (s_pi, s_mu) == pytest.approx((3 / 200, 4 * 3 * 2 / 200))
    assert s_sig == pytest.approx((12 * 200 * 3 * 4 + 8 * 9 * 4) / 200 ** 2)
    S = msnm_sensitivities(n, K, R, 3.0, 10.0, 1.0)
    assert S["pi"] == pytest.approx(3 / 200)
    assert S["xi"] == pytest.approx(4 * 3 * (2 - 1) / 200)
    assert S["eta"] == pytest.approx(2 * 3 * 2 * 3 / (200 * 10))
    assert S["Lambda"] == pytest.approx(2 * 3 * (4 + 4 * 2 * 3 * 1 + 4 * 10 * 1) / 200)


def test_post_processing_helpers():
    w = torch.tensor([[0.5, -0.2, 0.9], [0.3, 0.3, 0.3]], dtype=torch.float64)
    p = normalise_weights_minmax(w, 1e-3)
    lo, hi = -0.2, 0.9
    ref = (np.array([0.5, -0.2, 0.9]) - lo) / (hi - lo) + 1e-3
    np.testing.assert_allclose(p[0].numpy(), ref / ref.sum())
    np.testing.assert_allclose(p[1].numpy(), np.full(3, 1 / 3))
    S = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)  # eigenvalues -1, 3
    out = shift_psd(S, 0.0)
    np.testing.assert_allclose(out.numpy(), S.numpy() + np.eye(2))
    X = torch.tensor([[3.0, -4.0], [0.1, 0.1]], dtype=torch.float64)
    torch.testing.assert_close(clip_rows_l1(X, 1.0)[0].abs().sum(), torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(clip_rows_l1(X, 1.0)[1], X[1])
    torch.testing.assert_close(torch.linalg.vector_norm(clip_rows_l2(X, 1.0)[0]), torch.tensor(1.0, dtype=torch.float64))


@pytest.mark.parametrize("method", ["dp_em_llg", "dp_em_ggg", "dpgmm", "dp_msnm"])
def test_invariants_and_record(method):
    X = _data()
    g = torch.Generator().manual_seed(1)
    if method.startswith("dp_em"):
        fit = fit_dp_em(X, 2, 0.5, 1e-5, variant=method[-3:].upper(), data_bound=math.sqrt(2), max_iter=5, generator=g)
        covs = fit.covariances
    elif method == "dpgmm":
        fit = fit_dpgmm(X, 2, 0.5, R=2.0, max_iter=5, generator=g)
        covs = fit.covariances
    else:
        fit = fit_dp_msnm(X, 2, 0.5, R=2.0, max_iter=5, generator=g)
        covs = fit.Lambda
    w = fit.weights
    assert bool((w >= 0).all())
    torch.testing.assert_close(w.sum(-1), torch.ones(4, dtype=torch.float64))
    assert bool((torch.linalg.eigvalsh(covs) > 0).all())
    assert bool(torch.isfinite(fit.loglik).all())
    rec = fit.privacy.to_dict()
    # DPGMM starts from k-means++ on the raw data by default and DP-MSNM rests on unproven lemmas
    assert rec["epsilon"] == 0.5 and rec["mode"] == ("sound" if method.startswith("dp_em") else "as-published")
    assert rec["mechanism"]


def _covered(rec):
    d = rec.to_dict()
    return d["covered"] if "covered" in d else d["split"]["covered"]


def test_honest_labels_of_the_em_family():
    X = _data(B=1)
    km = fit_dpgmm(X, 2, 1.0, R=2.0, max_iter=2).privacy
    assert km.mode == "as-published" and not _covered(km)
    assert any("k-means++" in n and "not covered" in n for n in km.notes)
    pub = fit_dpgmm(X, 2, 1.0, R=2.0, max_iter=2, init="random", generator=torch.Generator().manual_seed(0)).privacy
    assert pub.mode == "sound" and _covered(pub)
    nomin = fit_dpgmm(X, 2, 1.0, R=2.0, max_iter=2, init="random", enforce_min_count=False).privacy
    assert nomin.mode == "as-published" and not _covered(nomin)
    for rec in (km, pub):
        assert str(getattr(rec.adjacency, "value", rec.adjacency)) == "replace-one"
    init = (torch.tensor([0.5, 0.5], dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64),
            torch.eye(2, dtype=torch.float64).expand(2, 2, 2), torch.full((2, 2), 0.1, dtype=torch.float64))
    ms = fit_dp_msnm(X, 2, 1.0, R=2.0, max_iter=2, init_params=init).privacy
    assert ms.mode == "as-published" and not _covered(ms)
    assert any("Lemmas 2-3" in n for n in ms.notes)
    assert str(getattr(ms.adjacency, "value", ms.adjacency)) == "replace-one"


def test_as_published_mode_is_flagged():
    X = _data(B=1)
    assert fit_dpgmm(X, 2, 1.0, max_iter=2).privacy.mode == "as-published"
    rec = fit_dp_msnm(X, 2, 1.0, max_iter=2).privacy
    assert rec.mode == "as-published" and any("leaks" in n for n in rec.notes)
    assert fit_dp_em(X, 2, 1.0, 1e-5, max_iter=2).privacy.mode == "as-published"


def test_budget_split_sums_to_epsilon():
    X = _data(B=1)
    rec = fit_dp_msnm(X, 3, 2.0, R=2.0, max_iter=4).privacy.split
    per_iter = rec["eps_pi_per_iteration"] + 3 * (rec["eps_Lambda_per_component_iteration"]
                                                  + rec["eps_xi_per_component_iteration"]
                                                  + rec["eps_eta_per_component_iteration"])
    assert per_iter * 4 == pytest.approx(2.0)
    assert rec["eps_Lambda_per_component_iteration"] == pytest.approx(0.6 * 2.0 / (4 * 3))
    rec = fit_dpgmm(X, 3, 2.0, R=2.0, max_iter=4).privacy.split
    per_iter = rec["eps_pi_per_iteration"] + 3 * (rec["eps_mu_per_component_iteration"]
                                                  + rec["eps_Sigma_per_component_iteration"])
    assert per_iter * 4 == pytest.approx(2.0)


def test_noise_shrinks_with_epsilon_and_is_reproducible():
    X = _data(B=8, N=2000)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    a = fit_dp_em(X, 2, 1.0, 1e-5, data_bound=math.sqrt(2), max_iter=5, generator=g())
    b = fit_dp_em(X, 2, 1.0, 1e-5, data_bound=math.sqrt(2), max_iter=5, generator=g())
    torch.testing.assert_close(a.means, b.means)
    with allow_weak_privacy():  # epsilon 1e4 as the low-noise limit (past the budget rule's refusal)
        hi = fit_dp_em(X, 2, 1e4, 1e-5, data_bound=math.sqrt(2), max_iter=5, generator=g())
    lo = fit_dp_em(X, 2, 0.05, 1e-5, data_bound=math.sqrt(2), max_iter=5, generator=g())
    assert hi.loglik.mean() > lo.loglik.mean()


def test_errors_before_noise():
    X = _data(B=1)
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    with pytest.raises(ValueError, match="epsilon"):
        fit_dpgmm(X, 2, 0.0, generator=g)
    with pytest.raises(ValueError, match="delta"):
        fit_dp_em(X, 2, 1.0, 1.5, generator=g)
    with pytest.raises(ValueError, match="R3"):
        fit_dp_msnm(X, 2, 1.0, R3_fraction=1.5, generator=g)
    with pytest.raises(ValueError, match="variant"):
        fit_dp_em(X, 2, 1.0, 1e-5, variant="XYZ", generator=g)
    with pytest.raises(TypeError, match="X"):  # (a non-finite value is private: read as the origin, since
        fit_dp_msnm(X.to(torch.int64), 2, 1.0, generator=g)  # 2026-12-02; tests/test_em_private_count.py)
    assert torch.equal(g.get_state(), state)


def test_clip_rows_l1_matches_numpy_and_per_dataset_bounds():
    """L1 clipping through the noise layer: rows scaled by min(1, R/||x||_1), computed here with numpy."""
    import numpy as np

    g = torch.Generator().manual_seed(2)
    X = torch.randn(3, 20, 4, generator=g, dtype=torch.float64) * 2
    R = torch.tensor([0.5, 3.0, 100.0], dtype=torch.float64)
    got = clip_rows_l1(X, R[:, None, None]).numpy()
    x = X.numpy()
    n1 = np.abs(x).sum(-1, keepdims=True)
    ref = x * np.minimum(1.0, R.numpy()[:, None, None] / n1)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("scale", [1e3, 1e5, 1e6, 1e8])
def test_dpgmm_and_dp_msnm_fit_data_at_any_scale(scale):
    """A probe (finding 3): X = scale * randn(500, 3), R = 10 scale, defaults otherwise: fit_dpgmm (sound, init
    'random') and fit_dp_msnm raised linalg.cholesky's error at every seed from scale 1e3 up. The noisy covariance is
    ~1e9 there and eigvalsh's rounding of lambda_min exceeded the absolute psd_floor 1e-6. The floor is now also
    relative to the noisy matrix's norm (em._common.shift_pd): finite models whose covariances factor."""
    X = scale * torch.randn(500, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        a = fit_dpgmm(X, 3, 1.0, R=10 * scale, init="random", generator=g)
        b = fit_dp_msnm(X, 2, 1.0, R=10 * scale, generator=torch.Generator().manual_seed(seed))
        for covs, fit in ((a.covariances, a), (b.Lambda, b)):
            assert bool(torch.isfinite(covs).all() & torch.isfinite(fit.weights).all())
            assert bool(torch.isfinite(fit.loglik).all())
            assert int(torch.linalg.cholesky_ex(covs)[1].abs().sum()) == 0


def test_the_relative_floor_leaves_unit_scale_shifts_unchanged():
    """shift_pd is shift_psd, bit for bit, wherever PD_RELATIVE_FLOOR ||S||_F is below the absolute floor (data at
    unit scale), and lifts lambda_min to that relative floor otherwise (checked against numpy's eigenvalues); the
    fits' outputs at unit scale are unchanged (docs/results/em/ais.json regenerated identically when this was made)."""
    from torchdpgmm.em._common import PD_RELATIVE_FLOOR, shift_pd

    g = torch.Generator().manual_seed(4)
    A = torch.randn(50, 3, 3, dtype=torch.float64, generator=g)
    S = A + A.transpose(-1, -2)
    assert torch.equal(shift_pd(S, 1e-6), shift_psd(S, 1e-6))
    big = 1e9 * S
    ev = np.linalg.eigvalsh(shift_pd(big, 1e-6).numpy())[:, 0]
    want = np.maximum(PD_RELATIVE_FLOOR * np.linalg.norm(big.numpy(), axis=(-2, -1)),
                      np.linalg.eigvalsh(big.numpy())[:, 0])  # a matrix already above the floor is not shifted
    np.testing.assert_allclose(ev, want, rtol=1e-3)


def test_a_covered_fit_returns_no_noise_free_value_beyond_its_record():
    """A probe (finding 5): a sound, covered DPGMM fit returned extras['min_count_violated'] from the noise-free N_k
    (6 rows, one replaced by (-3, -3): False became True, same seed), with no note; SAGMM under add/remove adjacency
    returned the exact count extras['n'], private there. A covered DPGMM fit leaves the flag out (an uncovered one keeps
    it); SAGMM returns n only under replace-one, and loglik_mean, which needs it, refuses in one line otherwise."""
    from torchdpgmm.em import fit_sagmm

    D = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    D2 = D.clone()
    D2[0] = torch.tensor([-3.0, -3.0], dtype=torch.float64)
    for X in (D, D2):
        fit = fit_dpgmm(X, 2, 1.0, R=4.0, init="random", max_iter=1, generator=torch.Generator().manual_seed(3))
        assert fit.privacy.covered and "min_count_violated" not in fit.extras
        assert set(fit.extras) == {"n", "R"}
    loose = fit_dpgmm(D2, 2, 1.0, R=4.0, init="random", max_iter=1, enforce_min_count=False,
                      generator=torch.Generator().manual_seed(3))
    assert not loose.privacy.covered and "min_count_violated" in loose.extras
    kw = dict(num_blocks=2, mean_bounds=(-4.0, 4.0), var_bounds=(0.01, 4.0), max_iter=3)
    ar = fit_sagmm(D, 2, 1.0, 1e-5, generator=torch.Generator().manual_seed(1), **kw)
    assert ar.privacy.covered and "n" not in ar.extras
    with pytest.raises(ValueError, match="number of records"):
        ar.loglik_mean
    ro = fit_sagmm(D, 2, 1.0, 1e-5, adjacency="replace-one", generator=torch.Generator().manual_seed(1), **kw)
    assert float(ro.extras["n"]) == 6.0 and torch.equal(ro.loglik_mean, ro.loglik / 6.0)


def _refused(fn, exc, match):
    """``fn`` raises ``exc`` with a one-line message matching ``match``, drawing nothing from its generator."""
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    with pytest.raises(exc, match=match) as info:
        fn(g)
    assert "\n" not in str(info.value) and torch.equal(g.get_state(), state)


def test_bad_public_settings_are_refused_in_one_line_before_the_data():
    """A probe (finding 4): MAPPrior(kappa0=0) and psd_floor 0 or -1 failed a Cholesky mid-loop; kappa0=-1, s0=-5,
    alpha=nan, zeta <= 0 and max_iter=True were accepted; a NaN share of DPGMM's split dropped the weights block from
    a covered record; R1=inf or a NaN DP-MSNM share failed mid-fit; data_bound='3' and R='4' gave a bare TypeError
    about '>'; init_params of the wrong shape a raw expand RuntimeError. All are refused up front, in one line."""
    X = _data(B=1, N=50)
    nan, inf = float("nan"), float("inf")
    for kw, match in ((dict(kappa0=0.0), "kappa0"), (dict(kappa0=-1.0), "kappa0"), (dict(s0=-5.0), "s0"),
                      (dict(alpha=nan), "alpha"), (dict(alpha=0.5), "alpha"), (dict(nu0_offset=-1.0), "nu0_offset")):
        with pytest.raises(ValueError, match=match):
            MAPPrior(**kw)
    em = lambda g, **kw: fit_dp_em(X, 2, 1.0, 1e-5, **{"data_bound": 2.0, "generator": g, **kw})  # noqa: E731
    gm = lambda g, **kw: fit_dpgmm(X, 2, 1.0, **{"R": 2.0, "init": "random", "generator": g, **kw})  # noqa: E731
    ms = lambda g, **kw: fit_dp_msnm(X, 2, 1.0, **{"R": 2.0, "generator": g, **kw})  # noqa: E731
    bad_init = (torch.ones(3) / 3, torch.zeros(3, 2), torch.eye(2).expand(3, 2, 2))  # K = 3 for a K = 2 fit
    cases = [(em, dict(psd_floor=0.0), ValueError, "psd_floor"), (em, dict(psd_floor=-1.0), ValueError, "psd_floor"),
             (em, dict(max_iter=True), ValueError, "max_iter"), (em, dict(data_bound="3"), TypeError, "data_bound"),
             (em, dict(prior={"alpha": 2.0}), TypeError, "MAPPrior"),
             (em, dict(init_params=bad_init), ValueError, "init_params' weights must have shape \\(2,\\)"),
             (gm, dict(psd_floor=-1.0), ValueError, "psd_floor"), (gm, dict(zeta=0.0), ValueError, "zeta"),
             (gm, dict(zeta=-1.0), ValueError, "zeta"), (gm, dict(split=(nan, 0.5, 0.5)), ValueError, "split"),
             (gm, dict(split=(inf, 0.5, 0.5)), ValueError, "split"), (gm, dict(max_iter=True), ValueError, "max_iter"),
             (gm, dict(R="4"), TypeError, "R must be a real number"), (gm, dict(init="bogus"), ValueError, "init"),
             (gm, dict(init_params=bad_init), ValueError, "init_params' weights"),
             (ms, dict(R1=inf), ValueError, "R1"), (ms, dict(R2=nan), ValueError, "R2"),
             (ms, dict(split=(0.6, nan, 0.13)), ValueError, "split"), (ms, dict(max_iter=True), ValueError, "max_iter"),
             (ms, dict(zeta=0.0), ValueError, "zeta"), (ms, dict(psd_floor=0.0), ValueError, "psd_floor"),
             (ms, dict(init_params=bad_init + (torch.zeros(3, 2),)), ValueError, "init_params' weights")]
    for fit, kw, exc, match in cases:
        _refused(lambda g: fit(g, **kw), exc, match)
    # the same settings, valid, still fit (a tensor R and numpy numbers are numbers)
    gm(None, R=torch.tensor(2.0), zeta=np.float64(1e-3), max_iter=2)
    em(None, init_params=tuple(t[:2] for t in bad_init), max_iter=2)


def test_a_ragged_batch_records_every_block_at_its_worst_case():
    """A probe (finding 6): fit_dpgmm on a batch whose datasets have 60 and 100 records gave a sound, covered record
    with blocks=() (the n-dependent sensitivity differed across the batch and the block was dropped); fit_dp_msnm
    too. Each block is now the pair (sensitivity, noise scale) of the dataset with the largest ratio, the worst case:
    Laplace blocks compose by the sum of count * sensitivity / scale, which gives back epsilon."""
    from torchdpgmm.em._common import noised_block

    X = torch.randn(2, 100, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 100, dtype=torch.bool)
    mask[1, 60:] = False
    T, K, eps = 3, 2, 1.0
    fit = fit_dpgmm(X, K, eps, R=4.0, init="random", mask=mask, max_iter=T, generator=torch.Generator().manual_seed(1))
    rec = fit.privacy
    assert rec.covered and [b.name for b in rec.blocks] == ["weights", "means", "covariances"]
    for b, share, per in zip(rec.blocks, (0.14, 0.26, 0.6), (T, T * K, T * K)):
        assert b.count == per and b.sensitivity / b.noise_scale == pytest.approx(share * eps / per, rel=1e-12)
        assert any(b.sensitivity == pytest.approx(float(s), rel=1e-12)
                   for s in wu_sensitivities(torch.tensor([60.0, 100.0], dtype=torch.float64), K, 4.0)[
                       ("weights", "means", "covariances").index(b.name)])
    assert sum(b.count * b.sensitivity / b.noise_scale for b in rec.blocks) == pytest.approx(eps, rel=1e-12)
    ms = fit_dp_msnm(X, K, eps, R=4.0, mask=mask, max_iter=T, generator=torch.Generator().manual_seed(1)).privacy
    assert len(ms.blocks) == 4
    assert sum(b.count * b.sensitivity / b.noise_scale for b in ms.blocks) == pytest.approx(eps, rel=1e-12)
    # the rule itself: the pair with the largest sensitivity / scale
    blk = noised_block("x", "laplace", torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 4.0, 6.0]), "l1")
    assert (blk["sensitivity"], blk["noise_scale"]) == (1.0, 0.5)
    assert noised_block("x", "laplace", torch.tensor([1.0, 2.0]), 1.0, "l1")["sensitivity"] == 2.0


def test_a_dp_fit_on_float32_rows_is_evaluated_on_those_rows():
    """The DP fits compute in float64 whatever X's dtype (65a258a); mixture_log_likelihood and a skew-normal fit's
    log_prob then raised torch's dtype mismatch on the caller's float32 X. They evaluate in the wider dtype: the same
    value as on the float64 copy of the rows."""
    from torchdpgmm.em import fit_dp_msnm, fit_sagmm
    from torchdpgmm.em.gmm import mixture_log_likelihood

    X = torch.rand(300, 2, generator=torch.Generator().manual_seed(0)).float()
    f = fit_sagmm(X, 2, 1.0, 1e-5, num_blocks=5, mean_bounds=(0.0, 1.0), var_bounds=(1e-3, 0.25),
                  generator=torch.Generator().manual_seed(1))
    a = mixture_log_likelihood(X, f.weights, f.means, f.covariances)
    assert a.dtype == torch.float64 and torch.equal(a, mixture_log_likelihood(X.double(), f.weights, f.means,
                                                                              f.covariances))
    g = fit_dp_msnm(X, 2, 1.0, R=2.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(g.log_prob(X), g.log_prob(X.double()))
