"""Issue 27 item 14: no wall time of work on private data travels on anything released or returned by a
trainer (a timing is a side channel on the data); the studies time their own calls."""
from __future__ import annotations

import json
import re

import pytest
import torch

TIMING = re.compile(r"(^|_)(seconds|secs|time|times|elapsed|duration|wall)(_|$)", re.IGNORECASE)  # not second_moments


def _keys(obj, prefix=""):
    """Every key of a nested dict / list (dotted), for a search by name."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{prefix}{k}"
            yield from _keys(v, f"{prefix}{k}.")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _keys(v, prefix)


def _timing_keys(obj):
    return [k for k in _keys(obj) if TIMING.search(k.rsplit(".", 1)[-1])]


def _data(n=300, d=4, K=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, d, generator=g, dtype=torch.float64) - 0.5, torch.randint(0, K, (n,), generator=g)


def test_train_dpsgd_returns_no_timing():
    pytest.importorskip("opacus")
    from torchdpgmm.pipelines.dpsgd import train_dpsgd

    X, y = _data()
    out = train_dpsgd(X.float(), y, X[:20].float(), y[:20], 2.0, 1e-5, epochs=1, lr=0.1, batch_size=64,
                      num_classes=3, seed=0, n_public=300.0)
    assert "final_accuracy" in out and _timing_keys(out) == []


def test_dpsgd_fast_returns_no_timing():
    from torchdpgmm.pipelines.dpsgd_fast import train_dpsgd_fast

    X, y = _data()
    out = train_dpsgd_fast(X.float(), y, num_classes=3, noise_multiplier=1.0, sampling_rate=0.2, steps=2, lr=1e-3,
                           generator=torch.Generator().manual_seed(0), n_public=300.0)
    assert _timing_keys({k: None for k in out}) == []


def test_released_objects_carry_no_timing(tmp_path):
    from torchdpgmm.modelfile import model_to_dict
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline
    from torchdpgmm.release import release

    X, y = _data()
    rel = release(X, y, 3, 1.0, 1e-5, mode="sound", clip_bound=1.0, generator=torch.Generator().manual_seed(0))
    assert _timing_keys(rel.extras) == [] and _timing_keys(rel.privacy.to_dict()) == []
    assert _timing_keys(json.loads(json.dumps(model_to_dict(rel.model, rel.privacy, ["a", "b", "c"],
                                                            ["w", "x", "y", "z"], None), default=float))) == []
    cfg = PipelineConfig(transform="none", n_components=3, mean_clip=1.0, pca_clip=1.0, radius=1.0)
    pr = release_pipeline(X, y, num_classes=3, epsilon=1.0, delta=1e-5, config=cfg,
                          generator=torch.Generator().manual_seed(0))
    assert _timing_keys(pr.extras) == [] and _timing_keys(pr.privacy.to_dict()) == []
    assert _timing_keys({k: None for k in pr.model.extras}) == []
