"""Moments accountant (Park et al. 2017, supplement): MGFs against numerical integration and dp-accounting's RDP."""
import math

import numpy as np
import pytest
from scipy import integrate

from torchdpgmm.privacy.moments import (
    DEFAULT_LAMBDAS,
    MomentsAccountant,
    calibrate_noise_multiplier,
    gaussian_log_moment,
    laplace_log_moment,
    linear_composition,
)
from torchdpgmm.em.dp_em import calibrate_dp_em, dp_em_epsilon


def _laplace_mgf_numeric(lam, b, delta=1.0):
    # E_p[exp(lam * log(p/q))], p = Lap(0, b), q = Lap(delta, b): direct integral of the privacy loss
    def f(t):
        logp = -abs(t) / b
        logq = -abs(t - delta) / b
        return math.exp(logp + lam * (logp - logq)) / (2 * b)
    val = integrate.quad(f, -np.inf, 0.0)[0] + integrate.quad(f, 0.0, delta)[0] + integrate.quad(f, delta, np.inf)[0]
    return math.log(val)


def _gauss_mgf_numeric(lam, s):
    def f(x):
        logp = -x * x / (2 * s * s)
        logq = -(x - 1.0) ** 2 / (2 * s * s)
        return math.exp(logp + lam * (logp - logq)) / (s * math.sqrt(2 * math.pi))
    return math.log(integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-12)[0])


@pytest.mark.parametrize("lam", [0.5, 1.0, 4.0, 16.0])
@pytest.mark.parametrize("b", [0.7, 2.0, 10.0])
def test_laplace_log_moment_matches_integral(lam, b):
    assert laplace_log_moment(lam, 1.0 / b) == pytest.approx(_laplace_mgf_numeric(lam, b), rel=1e-8)


@pytest.mark.parametrize("lam", [0.5, 2.0, 8.0])
@pytest.mark.parametrize("s", [1.0, 3.0])
def test_gaussian_log_moment_matches_integral(lam, s):
    assert gaussian_log_moment(lam, s) == pytest.approx(_gauss_mgf_numeric(lam, s), rel=1e-8)


def test_log_space_survives_large_orders():
    # exp(lambda eps) overflows float64 for lambda * eps > 709; the log-space form must not
    v = laplace_log_moment(1023.0, 5.0)
    assert math.isfinite(v) and v == pytest.approx(1023.0 * 5.0 + math.log(1024 / 2047), rel=1e-12)


@pytest.mark.parametrize("T", [1, 10, 50])
def test_cross_check_with_dp_accounting_rdp(T):
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    lams = np.asarray(DEFAULT_LAMBDAS)
    ref = RdpAccountant(orders=list(lams + 1.0))
    per_iter = dp_event.ComposedDpEvent([
        dp_event.LaplaceDpEvent(3.0), dp_event.LaplaceDpEvent(7.0), dp_event.GaussianDpEvent(5.0)])
    ref.compose(per_iter, T)
    ours = MomentsAccountant().compose_laplace(1 / 3.0, T).compose_laplace(1 / 7.0, T).compose_gaussian(5.0, T)
    np.testing.assert_allclose(ours.rdp, ref.rdp, rtol=1e-8)
    for delta in (1e-5, 1e-8):
        # dp-accounting converts with the improved bound; same formula here
        assert ours.get_epsilon(delta, "improved") == pytest.approx(ref.get_epsilon(delta), rel=1e-8)
        # classic tail bound computed independently from dp-accounting's RDP curve
        classic = np.min(ref.rdp + math.log(1 / delta) / lams)
        assert ours.get_epsilon(delta, "classic") == pytest.approx(classic, rel=1e-8)


def test_get_delta_is_inverse_of_get_epsilon():
    acc = MomentsAccountant().compose_gaussian(4.0, 30)
    eps = acc.get_epsilon(1e-6)
    assert acc.get_delta(eps) == pytest.approx(1e-6, rel=1e-6)


def test_linear_composition_and_comparison():
    assert linear_composition([0.1] * 10, [1e-6] * 10) == pytest.approx((1.0, 1e-5))
    # for many small Laplace steps the moments accountant beats linear composition
    acc = MomentsAccountant().compose_laplace(0.05, 400)
    assert acc.get_epsilon(1e-5) < 0.05 * 400


def test_calibration_meets_target():
    for variant in ("LLG", "GGG"):
        for accountant in ("moments", "linear"):
            m = calibrate_dp_em(variant, 1.0, 1e-5, 20, accountant)
            assert dp_em_epsilon(variant, m, 20, 1e-5, accountant) <= 1.0 + 1e-12
            assert dp_em_epsilon(variant, m * 0.99, 20, 1e-5, accountant) > 1.0
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(lambda m: 10.0, 1.0)


def test_bad_parameters():
    with pytest.raises(ValueError):
        MomentsAccountant(lambdas=[0.0, 1.0])
    with pytest.raises(ValueError):
        MomentsAccountant().get_epsilon(1.5)
    with pytest.raises(ValueError):
        MomentsAccountant().compose_gaussian(-1.0)


def test_linear_accountant_never_prices_a_gaussian_step_outside_the_classical_formulas_range():
    """An audit's finding: the linear accountant charged each Gaussian step eps = sqrt(2 ln(1.25/delta')) / m, a
    bound valid only for eps <= 1 (Dwork & Roth, Thm A.1), at any m; at a target of 30 (LLG, one iteration) the
    record's own blocks compose, by dp-accounting's PLD accountant, to more than that (checked here). A multiplier
    charging a step above 1 is now priced at inf, so the calibration keeps every step inside the range (closed
    form), and its blocks compose to at most the target."""
    import math

    from torchdpgmm.em.dp_em import calibrate_dp_em, dp_em_epsilon

    delta = 1e-5
    for variant, n_gauss, f in (("LLG", 1, math.sqrt(2)), ("GGG", 3, 1.0)):  # sigma / Delta = f m (the supplement)
        c = math.sqrt(2 * math.log(1.25 * n_gauss / delta)) / f  # the multiplier at which a step costs 1
        assert dp_em_epsilon(variant, 0.999 * c, 1, delta, accountant="linear") == math.inf
        assert math.isfinite(dp_em_epsilon(variant, 1.001 * c, 1, delta, accountant="linear"))
        for target in (5.0, 30.0, 80.0):
            m = calibrate_dp_em(variant, target, delta, 1, accountant="linear")
            assert c / m <= 1.0 + 1e-9 and dp_em_epsilon(variant, m, 1, delta, accountant="linear") <= target
            assert _pld_epsilon(variant, m, delta) <= target * (1 + 1e-6)
    c = math.sqrt(2 * math.log(1.25 / delta)) / math.sqrt(2)
    m_old = (2 + c) / 30.0  # LLG, one iteration: the uncapped linear charge 1/m + 1/m + c/m = 30
    assert _pld_epsilon("LLG", m_old, delta) > 30.0  # the claim the old calibration made was false


def _pld_epsilon(variant: str, m: float, delta: float) -> float:
    """One DP-EM iteration's blocks (module docstring of dp_em: Laplace b / Delta = m, Gaussian sigma / Delta =
    sqrt(2) m for LLG; three Gaussians sigma / Delta = m for GGG) composed by dp-accounting's PLD accountant."""
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    events = ([dp_event.LaplaceDpEvent(m)] * 2 + [dp_event.GaussianDpEvent(math.sqrt(2) * m)] if variant == "LLG"
              else [dp_event.GaussianDpEvent(m)] * 3)
    acc = PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.ComposedDpEvent(events))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("entry", ["fit_dp_em", "fit_dpgmm", "fit_sagmm", "fit_dp_msnm"])
def test_the_em_entry_points_follow_the_budget_rule(entry):
    """An audit's finding: the EM entry points released epsilon 5000 (delta 0.6) as sound and covered, where
    release() and the command line refuse above 1e3 (or delta >= 0.5) and warn above 10. The refusal offers no
    argument these functions lack, and the warning points at the caller's line (a review)."""
    import torch

    from torchdpgmm._validation import WeakPrivacyWarning
    from torchdpgmm.em import dp_em, dp_msnm, dpgmm, sagmm

    X = torch.rand(40, 2, dtype=torch.float64)
    call = {"fit_dp_em": lambda e, d: dp_em.fit_dp_em(X, 2, e, d, data_bound=2.0, max_iter=1,
                                                       generator=torch.Generator().manual_seed(0)),
            "fit_dpgmm": lambda e, d: dpgmm.fit_dpgmm(X, 2, e, R=2.0, init="random", max_iter=1,
                                                       generator=torch.Generator().manual_seed(0)),
            "fit_sagmm": lambda e, d: sagmm.fit_sagmm(X, 2, e, d, num_blocks=2, mean_bounds=(0.0, 1.0),
                                                       var_bounds=(1e-3, 1.0), max_iter=2,
                                                       generator=torch.Generator().manual_seed(0)),
            "fit_dp_msnm": lambda e, d: dp_msnm.fit_dp_msnm(X, 2, e, R=2.0, max_iter=1,
                                                           generator=torch.Generator().manual_seed(0))}[entry]
    with pytest.raises(ValueError, match="required for a meaningful guarantee") as e:
        call(5000.0, 1e-5)
    assert "allow_weak_privacy=True" not in str(e.value)  # no such argument here (the scope works)
    with pytest.warns(WeakPrivacyWarning, match="protects little") as w:
        call(20.0, 1e-5)
    assert any(x.filename == __file__ for x in w)  # pointing at the caller's line


@pytest.mark.parametrize("entry", ["fit_dp_em", "fit_dpgmm", "fit_sagmm", "fit_dp_msnm"])
def test_the_em_entry_points_want_one_epsilon(entry):
    """A review (2026-12-01): a tensor epsilon of several entries ended in torch's 'only one element tensors can be
    converted to Python scalars'; a batch of datasets shares one budget, so it is refused naming that."""
    import torch

    from torchdpgmm.em import dp_em, dp_msnm, dpgmm, sagmm

    X = torch.rand(40, 2, dtype=torch.float64)
    e = torch.tensor([1.0, 2.0])
    call = {"fit_dp_em": lambda: dp_em.fit_dp_em(X, 2, e, 1e-5, data_bound=2.0, max_iter=1),
            "fit_dpgmm": lambda: dpgmm.fit_dpgmm(X, 2, e, R=2.0, init="random", max_iter=1),
            "fit_sagmm": lambda: sagmm.fit_sagmm(X, 2, e, 1e-5, num_blocks=2, mean_bounds=(0.0, 1.0),
                                                  var_bounds=(1e-3, 1.0), max_iter=2),
            "fit_dp_msnm": lambda: dp_msnm.fit_dp_msnm(X, 2, e, R=2.0, max_iter=1)}[entry]
    with pytest.raises(ValueError, match="epsilon must be one number here"):
        call()
