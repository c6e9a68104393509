"""docs/privacy.md describes every release the defaults run, as the code runs it: the two-stage default with
public bounds (its blocks, split keys, constants, shrinkage formula and composition) is checked here against
what a default release records and against the code's own functions, so that the page cannot drift."""
from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "privacy.md").read_text()


def _default_table_release(**kw):
    from torchdpgmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 3, 200), rng.uniform(5, 10, 200)])  # records in one corner of the box
    y = rng.choice(["a", "b"], 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DPGaussianMixture(classes=["a", "b"], bounds=(0, 10), random_state=0, **kw).fit(X, y)


@pytest.mark.parametrize("kw, composition", [({}, "zCDP"), ({"mechanism": "laplace"}, "basic composition")])
def test_every_block_and_split_key_of_the_default_release_is_described(kw, composition):
    rec = _default_table_release(**kw).privacy_
    names = [b.name for b in rec.blocks]
    assert names[:3] == ["centre_counts", "centre_sums", "centre_second_moments"]   # the order the page gives
    for name in names:
        assert f"`{name}`" in PAGE, name
    for key in rec.split:
        assert f"`{key}`" in PAGE or (key.startswith("mixture_") and "`mixture_*`" in PAGE), key
    assert rec.accountant.startswith(composition) or composition in rec.accountant.split(";")[0]
    assert composition in PAGE


def test_documented_constants_are_the_code_constants():
    from torchdpgmm import bounds
    from torchdpgmm.release import centring

    assert "`CENTRE_FRACTION = 0.1`" in PAGE and centring.CENTRE_FRACTION == 0.1
    assert "`CENTRED_CLIP_RADIUS = 1/2`" in PAGE and bounds.CENTRED_CLIP_RADIUS == 0.5
    assert "`(1, sqrt(d), 0.01 sqrt(d))`" in PAGE and centring._SECOND_MOMENT_SHARE == 0.01
    # the composition the page states, per noise kind: shares 0.1 / 0.9 of rho, of mu^2, of epsilon
    from torchdpgmm.privacy.calibration import gdp_mu, zcdp_rho

    e1, e2 = centring.stage_epsilons(1.0, 1e-5, 0.1, mechanism="laplace")
    assert (e1, e2) == pytest.approx((0.1, 0.9), rel=1e-12)
    e1, e2 = centring.stage_epsilons(1.0, 1e-5, 0.1)
    rho = float(zcdp_rho(1.0, 1e-5))
    assert float(zcdp_rho(e1, 1e-5)) == pytest.approx(0.1 * rho, rel=1e-5)
    assert float(zcdp_rho(e2, 1e-5)) == pytest.approx(0.9 * rho, rel=1e-5)
    assert float(zcdp_rho(e1, 1e-5)) + float(zcdp_rho(e2, 1e-5)) <= rho
    e1, e2 = centring.stage_epsilons(1.0, 1e-5, 0.1, noise="continuous")
    mu = float(gdp_mu(1.0, 1e-5))
    assert float(gdp_mu(e1, 1e-5)) ** 2 == pytest.approx(0.1 * mu * mu, rel=1e-5)
    assert float(gdp_mu(e1, 1e-5)) ** 2 + float(gdp_mu(e2, 1e-5)) ** 2 <= mu * mu * (1 + 1e-9)
    for words in ("zCDP (Bun & Steinke 2016)", "Gaussian DP (Dong, Roth & Su 2019)", "basic composition"):
        assert words in PAGE


def _page_centre(o, n, sigma_s, m, radius):
    """The shrinkage exactly as docs/privacy.md writes it, in numpy."""
    d = o.shape[-1]
    v = (sigma_s / n) ** 2
    w = min(1.0, max(0.0, 1.0 - d * v / float(o @ o)))
    c = m + w * o
    off = c - m
    norm = float(np.sqrt(off @ off))
    if norm > radius:
        c = m + off * (radius / norm)
    return c, w


def test_page_shrinkage_formula_is_the_code():
    from torchdpgmm.release.centring import shrunk_centre

    assert "`w = min(1, max(0, 1 − d v / ‖o‖²))`" in PAGE and "`c = m + w o`" in PAGE
    rng = np.random.default_rng(1)
    for d in (1, 2, 5):
        m = np.full(d, 0.5)
        radius = math.sqrt(d) / 2
        for scale in (0.01, 0.3, 3.0):          # offsets below, at and beyond their noise, and off the ball
            o = rng.normal(size=d) * scale
            n, sigma_s = float(rng.uniform(5, 200)), float(rng.uniform(1, 30))
            c_ref, w_ref = _page_centre(o, n, sigma_s, m, radius)
            c, w = shrunk_centre(torch.tensor(o), torch.tensor(n, dtype=torch.float64), sigma_s,
                                 torch.tensor(m), radius)
            assert float(w) == pytest.approx(w_ref, abs=1e-12)
            assert np.allclose(c.numpy(), c_ref, rtol=0, atol=1e-12)


def test_front_door_table_names_the_defaults_the_code_has():
    import inspect

    from torchdpgmm import DPGaussianMixture
    from torchdpgmm.bounds import DEFAULT_CENTER
    from torchdpgmm.release.sound import sound_settings

    table = PAGE[PAGE.index("### Which release each front door runs by default"):]
    table = table[:table.index("**The default covariance structure**")]
    sig = inspect.signature(DPGaussianMixture.__init__).parameters
    assert sig["mechanism"].default == "kl" and sig["adjacency"].default == "add-remove"
    assert sig["covariance_type"].default == "auto"
    assert DEFAULT_CENTER == "noisy-mean" and 'center="box"' in table
    assert inspect.signature(sound_settings).parameters["covariance_type"].default == "full"
    assert re.search(r'`mechanism="kl"`, `adjacency="add-remove"`, exact discrete noise and\s+`covariance_type="auto"`',
                     table)
