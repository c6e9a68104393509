"""release(): the default mode is the record-level sound mode (issue 27 item 5), and public epsilon / delta
that void the guarantee are refused or warned about at release time (issue 27 item 6)."""

import inspect
import warnings

import pytest
import torch

from torchdpgmm.release import WeakPrivacyWarning, release


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    y = torch.arange(60) % 2
    return X, y


def test_default_mode_is_sound():
    assert inspect.signature(release).parameters["mode"].default == "sound"
    X, y = _data()
    r = release(X, y, 2, 1.0, 1e-5, clip_bound=3.0, generator=torch.Generator().manual_seed(1))
    assert r.privacy.mode == "sound"
    with pytest.raises(ValueError, match="clip_bound"):  # no silent fallback to the label-level release
        release(X, y, 2, 1.0, 1e-5, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("eps, delta", [(1e9, 1e-5), (1.0, 0.5), (1e4, 0.6)])
@pytest.mark.parametrize("mode", ["sound", "as-published"])
def test_void_settings_refused_before_noise(mode, eps, delta):
    X, y = _data()
    g = torch.Generator().manual_seed(2)
    state = g.get_state().clone()
    kw = {"clip_bound": 3.0} if mode == "sound" else {"mechanism": "gaussian"}
    with pytest.raises(ValueError, match="allow_weak_privacy"):
        release(X, y, 2, eps, delta, mode=mode, generator=g, **kw)
    assert torch.equal(g.get_state(), state)


@pytest.mark.parametrize("eps, delta, match", [(50.0, 1e-5, "epsilon"), (1.0, 1e-2, "delta")])
def test_weak_settings_warn(eps, delta, match):
    X, y = _data()
    with pytest.warns(WeakPrivacyWarning, match=match):
        release(X, y, 2, eps, delta, clip_bound=3.0, generator=torch.Generator().manual_seed(3))


def test_allow_weak_privacy_releases_with_a_warning_and_ordinary_settings_are_quiet():
    X, y = _data()
    with pytest.warns(WeakPrivacyWarning):
        release(X, y, 2, 1e9, 1e-5, mode="as-published", mechanism="gaussian", allow_weak_privacy=True,
                generator=torch.Generator().manual_seed(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakPrivacyWarning)
        release(X, y, 2, 1.0, 1e-6, clip_bound=3.0, generator=torch.Generator().manual_seed(4))
        # a batch of settings is judged by its largest entry
        with pytest.raises(ValueError, match="allow_weak_privacy"):
            release(X, y, 2, torch.tensor([[1.0], [2e3]], dtype=torch.float64), 1e-5, mode="as-published",
                    mechanism="gaussian", generator=torch.Generator().manual_seed(4))
