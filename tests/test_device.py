"""The device-agnostic contract: outputs live where inputs live; whole batches in one call."""
import pytest
import torch

import torchdpgmm as tdg
from torchdpgmm import mechanisms as M


def _pipeline(device, T=1000):
    g = torch.Generator(device=device).manual_seed(0)
    N, d, K = 60, 3, 3
    X = torch.randn(T, N, d, generator=g, device=device, dtype=torch.float64)
    y = (torch.arange(N, device=device) % K).expand(T, N)
    fit = tdg.fit_labeled(X, y, K)
    means = M.gaussian(fit.means, 0.1 * torch.eye(d, device=device, dtype=torch.float64), g)
    cov = fit.covariances + M.wishart(torch.full((T, K), 50.0, device=device, dtype=torch.float64), d, g)
    counts = M.random_mapping(fit.counts, 1.0, 1e-3, g)
    rel = tdg.LabeledGMM(counts / counts.sum(-1, keepdim=True), means, cov, counts)
    kl = tdg.kl_divergence(rel, fit)
    lap = M.laplace(fit.means, 0.1, g)
    r1 = M.r1smg(fit.means, 0.1, 1.0, 1e-5, g)
    return kl, lap, r1


def test_batch_of_1000_trials_on_cpu():
    kl, lap, r1 = _pipeline("cpu")
    assert kl.shape == (1000,) and torch.isfinite(kl).all() and (kl >= 0).all()
    assert lap.device.type == "cpu" and r1.shape == (1000, 3, 3)


@pytest.mark.cuda
def test_same_pipeline_on_cuda():
    kl, lap, r1 = _pipeline("cuda")
    assert kl.device.type == "cuda" and lap.device.type == "cuda" and r1.device.type == "cuda"
