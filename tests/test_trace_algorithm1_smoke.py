"""Smoke test of scripts/trace_algorithm1.py, and the closed form of the printed Algorithm 1's fixed point."""
import json
from pathlib import Path

import numpy as np
import torch

from torchdpgmm.design import design_mechanism


def test_trace_script_quick(tmp_path, load_script):
    mod = load_script("scripts/trace_algorithm1.py")
    out = tmp_path / "t.json"
    mod.main(["--trials", "2", "--N", "80", "--K", "3", "--d", "2", "--eps", "0.5", "2.0", "--out", str(out)])
    text = out.read_text()
    assert str(tmp_path) not in text  # no absolute paths in the output
    rows = json.loads(text)["rows"]
    assert [r["epsilon"] for r in rows] == [0.5, 2.0]
    for r in rows:
        assert r["as_published_iterations"] == [2]
        assert abs(r["trace"][-1]["eps0_over_eps_min"] - 1 / 3) < 1e-12


def test_trace_script_needs_out(tmp_path):
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "scripts" / "trace_algorithm1.py"
    r = subprocess.run([sys.executable, str(path), "--trials", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "--out" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_as_published_fixed_point_closed_form():
    # eps0 = eps/3, gamma_k = min((d+1) tr(Sigma_k^-1)/d, 2 N_k eps/9), eps_k = 2 eps/3 - 3 gamma_k/(2 N_k)
    g = torch.Generator().manual_seed(3)
    N, K, d, eps = 90, 3, 2, 0.7
    y = torch.arange(N).remainder(K)
    X = torch.randn(N, d, generator=g, dtype=torch.float64) * torch.tensor([1.0, 0.05], dtype=torch.float64)
    D = design_mechanism(X, y, K, eps, 1e-5)
    Xn, yn = X.numpy(), y.numpy()
    for k in range(K):
        S = np.cov(Xn[yn == k].T, ddof=1)
        Nk = (yn == k).sum()
        gam = min((d + 1) / d * np.trace(np.linalg.inv(S)), 2 * Nk * eps / 9)
        assert np.isclose(D.gamma[k].item(), gam, rtol=1e-12)
        assert np.isclose(D.eps_k[k].item(), 2 * eps / 3 - 3 * gam / (2 * Nk), rtol=1e-12)
    assert np.isclose(D.eps0.item(), eps / 3, rtol=1e-14)
    assert int(D.iterations) == 2
