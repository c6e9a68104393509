"""UCI Parkinsons: loader checks, near-singular class covariances against an independent reference, and a
small run of the ``xi-parkinson`` study through the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from torchdpgmm.bayes import GaussianClasses, class_statistics, gaussian_class_log_prob, sample_classes, xi_repair
from torchdpgmm.cli import main
from torchdpgmm.data import load_parkinsons
from torchdpgmm.data.parkinsons import PARKINSONS_FEATURES


@pytest.fixture(scope="module")
def data():
    return load_parkinsons()


def test_loader_shape_labels_names(data):
    X, y, names = data
    assert X.shape == (195, 22) and X.dtype == torch.float64 and y.dtype == torch.int64
    assert names == PARKINSONS_FEATURES and "name" not in names and "status" not in names
    # majority-class error 48/195 = 0.2462, the figure Xi et al. (2011) quote
    assert int((y == 0).sum()) == 48 and int((y == 1).sum()) == 147
    assert round(48 / 195, 4) == 0.2462
    # first row of the UCI file, typed by hand
    assert X[0, 0].item() == 119.992 and X[0, -1].item() == 0.284654 and y[0].item() == 1


def test_loader_refuses_bad_copies(tmp_path):
    from importlib import resources

    raw = resources.files("torchdpgmm.data").joinpath("parkinsons.csv").read_bytes()
    lf = tmp_path / "lf.csv"
    lf.write_bytes(raw.replace(b"\r\n", b"\n"))  # line endings alone do not matter
    assert load_parkinsons(lf)[0].shape == (195, 22)
    altered = tmp_path / "altered.csv"
    altered.write_bytes(raw.replace(b"119.99200", b"119.99300", 1))
    with pytest.raises(ValueError, match="checksum"):
        load_parkinsons(altered)
    assert load_parkinsons(altered, verify=False)[0][0, 0].item() == 119.993
    short = tmp_path / "short.csv"
    short.write_bytes(b"\n".join(raw.splitlines()[:50]))
    with pytest.raises(ValueError, match="expected 195 data rows"):
        load_parkinsons(short, verify=False)
    renamed = tmp_path / "renamed.csv"
    renamed.write_bytes(raw.replace(b"status", b"label", 1))
    with pytest.raises(ValueError, match="header"):
        load_parkinsons(renamed, verify=False)
    text = tmp_path / "text.csv"
    text.write_bytes(raw.replace(b"119.99200", b"abc", 1))
    with pytest.raises(ValueError, match="non-numeric"):
        load_parkinsons(text, verify=False)
    with pytest.raises(ValueError, match="not a file"):
        load_parkinsons(tmp_path / "missing.csv")


def _rotation(names):
    """Unimodular map replacing DDP by DDP - 3 RAP and DDA by DDA - 3 APQ3 (the two near-dependencies)."""
    A = np.eye(22)
    A[names.index("Jitter:DDP"), names.index("MDVP:RAP")] = -3.0
    A[names.index("Shimmer:DDA"), names.index("Shimmer:APQ3")] = -3.0
    return A


def test_near_singular_densities_match_a_well_conditioned_reference(data):
    X, y, names = data
    counts, mu, cov = class_statistics(X, y, 2)
    w = counts / counts.sum()
    assert float(torch.linalg.cond(cov).min()) > 1e14  # the near-singular case
    g = torch.Generator().manual_seed(3)
    x, _ = sample_classes(GaussianClasses(w, mu, cov), 4000, g)
    ours = gaussian_class_log_prob(x, w, mu, cov).numpy()
    # independent reference: scipy in the basis T = D^-1 A (condition ~1e4), plus log|det T|
    A = _rotation(names)
    ref = []
    for k in range(2):
        C = A @ cov[k].numpy() @ A.T
        T = np.diag(1 / np.sqrt(np.diag(C))) @ A
        Ct = T @ cov[k].numpy() @ T.T
        assert np.linalg.cond(Ct) < 1e6
        lp = multivariate_normal(T @ mu[k].numpy(), Ct).logpdf(x.numpy() @ T.T)
        ref.append(math.log(w[k]) + lp + np.linalg.slogdet(T)[1])
    ref = np.stack(ref, -1)
    np.testing.assert_allclose(ours, ref, rtol=1e-7, atol=1e-5)
    # a pseudo-inverse with its default cut-off drops the small directions and is far off
    P = torch.linalg.pinv(cov, hermitian=True)
    diff = x.unsqueeze(-2) - mu
    maha_pinv = torch.einsum("nki,kij,nkj->nk", diff, P, diff).numpy()
    maha_ref = -2 * (ref - np.log(w.numpy())) - np.linalg.slogdet(cov.numpy())[1] - 22 * math.log(2 * math.pi)
    assert np.abs(maha_pinv - maha_ref).max() > 1.0


def test_near_singular_sampling_keeps_the_small_directions(data):
    X, y, names = data
    counts, mu, cov = class_statistics(X, y, 2)
    g = torch.Generator().manual_seed(4)
    x, lab = sample_classes(GaussianClasses(counts / counts.sum(), mu, cov), 40_000, g)
    a = np.zeros(22)
    a[names.index("Jitter:DDP")], a[names.index("MDVP:RAP")] = 1.0, -3.0
    for k in range(2):
        v = x[lab == k].numpy() @ a
        want = a @ cov[k].numpy() @ a  # variance ~5e-11 against a largest eigenvalue ~1e4
        # sample variance of m normals: relative sd sqrt(2/m) < 1.3%; allow 5 sd
        assert abs(v.var() / want - 1) < 5 * math.sqrt(2 / len(v))


def test_pd_repair_near_singular(data):
    X, y, _ = data
    _, _, cov = class_statistics(X, y, 2)
    s = cov.diagonal(dim1=-2, dim2=-1).sqrt()
    R = cov / (s.unsqueeze(-1) * s.unsqueeze(-2))  # normalised units, smallest eigenvalue ~1e-8
    R = 0.5 * (R + R.transpose(-1, -2))
    assert float(torch.linalg.eigvalsh(R).min()) > 0
    np.testing.assert_allclose(xi_repair(R).numpy(), R.numpy(), rtol=0, atol=1e-14)  # PD: left as it is
    E = torch.zeros(22, 22, dtype=torch.float64)
    E[0, 0] = -1e-3  # one negative direction
    S = R + E
    rep = xi_repair(S)
    ev_rep = np.linalg.eigvalsh(rep.numpy()[0])
    ev_s = np.linalg.eigvalsh(S.numpy()[0])
    assert ev_rep.min() > 0
    # step 3(b): negative eigenvalues replaced by the smallest positive one, the rest unchanged
    pos = ev_s[ev_s > 0]
    want = np.sort(np.where(ev_s > 0, ev_s, pos.min()))
    np.testing.assert_allclose(ev_rep, want, rtol=1e-6, atol=1e-12)


def test_study_small_run(tmp_path):
    assert main(["experiment", "xi-parkinson", "--out", str(tmp_path), "--quick", "--trials", "3",
                 "--num-test", "2000"]) == 0
    payload = json.loads((tmp_path / "xi-parkinson.json").read_text())
    rows = payload["rows"]
    methods = {"xi2011-laplace", "xi2011-laplace-common-box", "xi2011-laplace-public-box", "sound-gaussian",
               "sound-gaussian-oracle-box",
               "nonprivate"}
    assert {r["method"] for r in rows} == methods
    assert {r["panel"] for r in rows} == {"size", "epsilon"}
    size_rows = [r for r in rows if r["panel"] == "size"]
    assert sorted({r["n"] for r in size_rows}) == [500, 1000] and {r["epsilon"] for r in size_rows} == {0.1}
    for r in rows:
        assert {"method", "n", "epsilon", "bayes_error", "bayes_error_ci_low", "bayes_error_ci_high"} <= set(r)
        assert 0.0 <= r["bayes_error"] <= 1.0
        assert r["majority_error"] == pytest.approx(48 / 195)
        if r["method"] == "nonprivate":
            assert r["bayes_error"] < 0.01  # the paper: below 0.01 without noise
    assert (tmp_path / "xi-parkinson.png").exists() and (tmp_path / "xi-parkinson.csv").exists()


def test_study_one_trial(tmp_path):
    """One trial: no t-interval (None in the rows); the figure leaves the band out instead of refusing."""
    assert main(["experiment", "xi-parkinson", "--out", str(tmp_path), "--quick", "--trials", "1",
                 "--num-test", "500"]) == 0
    rows = json.loads((tmp_path / "xi-parkinson.json").read_text())["rows"]
    assert all(r["bayes_error_ci_low"] is None for r in rows)
    assert (tmp_path / "xi-parkinson.png").exists()
