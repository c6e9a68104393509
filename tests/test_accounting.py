"""The Gaussian calibration rules of ``torchdpgmm.privacy.gaussian_sigma`` against closed forms and dp-accounting."""
import math

import numpy as np
import pytest
import torch

from torchdpgmm import privacy as A


def test_paper_and_classical_rules_closed_form():
    assert math.isclose(A.gaussian_sigma(1.0, 1e-5, rule="paper"), math.sqrt(2 * math.log(2e5)), rel_tol=1e-14)
    assert math.isclose(A.gaussian_sigma(0.5, 1e-5, 2.0, rule="classical"),
                        2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5, rel_tol=1e-14)


def test_analytic_sigma_matches_dp_accounting():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    for eps, delta in [(1.0, 1e-5), (0.3, 1e-6), (4.0, 1e-3)]:
        ours = A.gaussian_sigma(eps, delta, rule="analytic")
        # dp-accounting's exact Gaussian PLD gives delta(eps) for a given sigma; it must equal delta at ours. At a
        # value interval of 1e-4 (each eps here a multiple of it) its delta is within 1e-8 of the one at 1e-5 (relative),
        # and a sigma off by 1e-4 (relative) moves delta by 1.3-1.8e-3, beyond the tolerance
        p = pld.from_gaussian_mechanism(
            ours, sensitivity=1.0, value_discretization_interval=1e-4, use_connect_dots=True)
        d_lib = p.get_delta_for_epsilon(eps)
        assert math.isclose(d_lib, delta, rel_tol=1e-3)
    assert abs(A.gaussian_sigma(1.0, 1e-5, rule="analytic") - 3.731) < 1e-3


def test_analytic_delta_formula_against_dp_accounting_closed_form():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss
    for sigma, eps in [(3.0, 1.0), (1.0, 0.5), (10.0, 0.1)]:
        ref = GaussianPrivacyLoss(sigma, sensitivity=1.0).get_delta_for_epsilon(eps)
        assert math.isclose(A.gaussian_delta(sigma, eps), ref, rel_tol=1e-9)


def test_sigma_vectorised_and_tensor_in_tensor_out():
    eps = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    s = A.gaussian_sigma(eps, 1e-5, rule="analytic")
    assert torch.is_tensor(s) and s.shape == (3,)
    assert torch.all(s[:-1] > s[1:])


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-5), (-1.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (float("nan"), 1e-5)])
def test_bad_privacy_parameters(eps, delta):
    with pytest.raises(ValueError):
        A.gaussian_sigma(eps, delta, rule="paper")


def test_laplace_charge_and_unknown_rule():
    assert A.laplace_scale(2.0, 3.0) == 1.5
    with pytest.raises(ValueError, match="rule"):
        A.gaussian_sigma(1.0, 1e-5, rule="nope")
    with pytest.raises(TypeError):
        A.gaussian_sigma(1.0, 1e-5)  # no default rule: the paper's is not DP for large eps


def test_tensor_epsilon_keeps_its_dtype():
    eps = torch.tensor([0.5, 2.0], dtype=torch.float32)
    s = A.gaussian_sigma(eps, 1e-5, rule="classical")
    assert s.dtype == torch.float32
    np.testing.assert_allclose(s.numpy(), [math.sqrt(2 * math.log(1.25e5)) / e for e in (0.5, 2.0)], rtol=1e-6)


def test_privacy_record_roundtrip():
    from torchdpgmm.release import AS_PUBLISHED_CAVEATS

    r = A.PrivacyRecord(1.0, 1e-5, "label-flip", "basic", "as-published", "kl",
                        split={"eps0": torch.tensor(0.2)}, notes=list(AS_PUBLISHED_CAVEATS))
    d = r.to_dict()
    assert d["split"]["eps0"] == pytest.approx(0.2)
    assert A.PrivacyRecord.from_dict(d).epsilon == 1.0
