"""Every registered study runs its quick mode with ``--device cuda`` (issue 36, item 1).

The parameter list IS the registry (:func:`torchdpgmm.experiments.available_studies`), so a new study is
covered without editing this file. Each run goes through the command line into ``tmp_path``; the image
studies read a tiny MNIST-format IDX folder that the test writes itself. Besides the exit status, the
written JSON is searched for the messages of a device error: several studies record a failing mechanism
as a note or a row (``FAILED: RuntimeError: ...``) instead of stopping, which would hide exactly this bug.

Needs a GPU (``-m cuda``); collects and runs without cvxpy, dp-accounting and opacus (the GPU image has
none of them): what needs dp-accounting (the DP-SGD grid of ``synthetic-classifier``) is switched off when
it is missing, and a mechanism that needs cvxpy is reported by the study as unavailable, not a device error.
"""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from torchdpgmm.experiments import available_studies

# the tiny MNIST-format folder of the CPU pipeline tests (tests/ is on sys.path: pytest's rootdir import mode)
from test_realdata import _write_idx_folder

#: substrings of PyTorch's device errors (a tensor or a generator on the wrong device, numpy of a CUDA tensor)
DEVICE_ERRORS = ("device type for generator", "Expected all tensors to be on the same device",
                 "to be on the same device", "found at least two devices", "can't convert cuda",
                 "Expected a 'cpu' device", "Expected a 'cuda' device")

#: study -> extra flags (after --quick): the quickest settings each study has, and its data
IMAGE_STUDIES = {"mnist", "mnist-mlp", "synthetic-classifier"}


def study_argv(name: str, device: str, tmp_path) -> list[str]:
    """``torchdpgmm experiment NAME --quick --device DEVICE ...`` with the quickest settings of the study."""
    argv = ["experiment", name, "--quick", "--device", device, "--out", str(tmp_path / "out")]
    if name in IMAGE_STUDIES:
        _write_idx_folder(tmp_path / "idx")
        argv += ["--dataset", "mnist", "--data-dir", str(tmp_path / "idx")]
    if name == "tabular":  # its quick mode runs all 12 tables; two cover its paths: exact rejection (wine) and the
        argv += ["--tables", "wine,digits", "--epsilons", "1"]  # Gibbs fallback of 64 columns (digits)
    if name == "synthetic-classifier" and importlib.util.find_spec("dp_accounting") is None:
        argv += ["--dpsgd", "off"]  # its DP-SGD grid is priced by dp-accounting's PLD accountant
    return argv


def run_study_on(name: str, device: str, tmp_path) -> dict:
    """Run the study through the command line; return its JSON after checking it holds no device error."""
    from torchdpgmm.cli import main

    assert main(study_argv(name, device, tmp_path)) == 0
    text = (tmp_path / "out" / f"{name}.json").read_text()
    found = [m for m in DEVICE_ERRORS if m in text]
    assert not found, f"{name} on {device}: device errors recorded in its output: {found}"
    return json.loads(text)


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(available_studies()))
def test_every_study_runs_its_quick_mode_on_cuda(name, tmp_path):
    d = run_study_on(name, "cuda", tmp_path)
    assert d["study"] == name and d["config"]["device"] == "cuda"


@pytest.mark.cuda
def test_synthetic_classifier_estimator_on_cuda():
    """``DPSyntheticClassifier(device="cuda")``: the release lives on the GPU, the methods return numpy."""
    import torch

    from torchdpgmm.estimator import DPSyntheticClassifier

    g = np.random.default_rng(0)
    y = np.arange(400) % 3
    X = g.normal(size=(400, 6)) + y[:, None]
    est = DPSyntheticClassifier(2.0, classes=[0, 1, 2], image_transform="none", n_components=4,
                                random_state=0, device="cuda").fit(X, y)
    assert est.model_.means.device.type == "cuda"
    assert isinstance(est.predict(X), np.ndarray) and est.predict_proba(X).shape == (400, 3)
    Xs, ys = est.sample(50)
    assert Xs.shape == (50, 4) and isinstance(ys, np.ndarray)
    assert torch.isfinite(torch.as_tensor(est.transform(X))).all()
