"""Real-data pipeline on tiny data: features -> GMM classifier / synthesis -> MLP; record-level release; study smoke runs."""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
import struct

import numpy as np
import pytest
import torch

from torchdpgmm.mixture import fit_labeled
from torchdpgmm.pipelines.features import prepare_features
from torchdpgmm.pipelines.gmm import gmm_accuracy, histogram_counts, synthesize
from torchdpgmm.pipelines.mlp import train_mlps
from torchdpgmm.pipelines.record import clip_records, record_level_release



def _toy_images(n, seed):
    """28x28 'images' whose class shifts a block of pixels: separable after PCA."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 10
    rng.shuffle(y)
    img = rng.uniform(0, 0.3, size=(n, 28, 28))
    for k in range(10):
        r, c = divmod(k, 4)
        img[y == k, 7 * r : 7 * r + 7, 7 * c : 7 * c + 7] += 0.7
    return (img * 255).clip(0, 255).astype(np.uint8), y.astype(np.uint8)


def _write_idx_folder(folder, n_train=600, n_test=200):
    folder.mkdir(parents=True, exist_ok=True)
    for stem, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        imgs, labs = _toy_images(n, seed)
        for name, arr in ((f"{stem}-images-idx3-ubyte.gz", imgs), (f"{stem}-labels-idx1-ubyte.gz", labs)):
            head = bytes([0, 0, 8, arr.ndim]) + b"".join(struct.pack(">I", s) for s in arr.shape)
            with gzip.open(folder / name, "wb") as fh:
                fh.write(head + arr.tobytes())


def test_tiny_pipeline_classifier_synthesis_mlp():
    Xi, yi = _toy_images(700, 3)
    Xt, yt = _toy_images(300, 4)
    g = torch.Generator().manual_seed(0)
    F = prepare_features(torch.from_numpy(Xi).float() / 255, torch.from_numpy(yi).long(),
                         torch.from_numpy(Xt).float() / 255, torch.from_numpy(yt).long(),
                         n_train=400, n_components=5, pca_fit="public", n_public=200, generator=g)
    assert F.X_train.shape == (400, 5) and F.X_test.shape == (300, 5)
    assert len(set(F.train_index.tolist())) == 400 and "disjoint" in F.note
    fitted = fit_labeled(F.X_train, F.y_train, 10)
    acc = float(gmm_accuracy(fitted, F.X_test, F.y_test, chunk=77))
    # independent reference: scipy Gaussian class-conditional MAP classifier
    from scipy.stats import multivariate_normal as mvn

    Z, y, Zt = F.X_train.numpy(), F.y_train.numpy(), F.X_test.numpy()
    ll = np.stack([np.log((y == k).mean()) + mvn(Z[y == k].mean(0), np.cov(Z[y == k].T)).logpdf(Zt) for k in range(10)], 1)
    assert acc == pytest.approx(float((ll.argmax(1) == F.y_test.numpy()).mean()), abs=1e-12)
    assert acc > 0.9
    # synthesis keeps the histogram exactly
    Xs, ys, mask = synthesize(fitted, 400, generator=g)
    assert Xs.shape == (400, 5) and bool(mask.all())
    assert torch.bincount(ys, minlength=10).tolist() == fitted.counts.tolist()
    # a batch of releases-like models: counts per trial follow each model's own weights
    w = torch.tensor([[0.5] + [0.5 / 9] * 9, [0.1] * 10], dtype=torch.float64)
    c = histogram_counts(w, 400)
    assert c.sum(-1).tolist() == [400, 400] and c[1].tolist() == [40] * 10
    res = train_mlps(torch.stack([Xs, F.X_train]), torch.stack([ys, F.y_train]), F.X_test, F.y_test,
                     epochs=10, lr=0.1, eval_every=4, generator=g)
    assert res.accuracy.shape[0] == 2 and res.iterations[-1] == 10 * math.ceil(400 / 128)
    assert bool((res.accuracy[:, -1] > 0.5).all()), res.accuracy[:, -1]


def test_record_level_release_budget_and_noise():
    g = torch.Generator().manual_seed(5)
    T, N, K, d = 400, 120, 3, 2
    y = torch.arange(N).remainder(K).expand(T, N)
    X = torch.randn(T, N, d, generator=g, dtype=torch.float64) * 2 + y.unsqueeze(-1) * 3.0
    eps, delta, B = 1.5, 1e-5, 4.0
    rel, fit_c, info = record_level_release(X, y, K, eps, delta, B, generator=g)
    ref_fit = fit_labeled(clip_records(X, B), y, K)
    torch.testing.assert_close(fit_c.means, ref_fit.means)
    # weights are released exactly under change-one-record adjacency
    torch.testing.assert_close(rel.weights, fit_c.weights)
    Nk = fit_c.counts.to(torch.float64)
    ek, gk, ck = info["epsilon_k"], info["gamma_k"], info["mean_noise_variance"]
    # budget (20b) with eps_0 = 0, and the (31) variance with B squared
    assert bool((ek + 3 * gk / (2 * Nk) <= eps * (1 + 1e-9)).all())
    torch.testing.assert_close(ck, 8 * B**2 * math.log(2 / delta) / (Nk**2 * ek**2))
    # empirical mean noise matches N(0, c_k I): standardised residuals have variance ~1
    z = (rel.means - fit_c.means) / ck.sqrt().unsqueeze(-1)
    assert abs(float(z.var()) - 1.0) < 0.1 and abs(float(z.mean())) < 0.05
    # the design is a per-class optimum of objective (12) on its grid: compare to a fine numpy search
    tr = torch.diagonal(torch.linalg.inv(fit_c.covariances[0]), dim1=-2, dim2=-1).sum(-1).numpy()
    for k in range(K):
        e = np.linspace(1e-4, eps - 1e-4, 20001)
        gam = np.minimum((d + 1) / d * tr[k], 2 * Nk[0, k].item() * (eps - e) / 3)
        f = d * np.log(gam) + (d + 1) * tr[k] / gam + tr[k] * 8 * B**2 * math.log(2 / delta) / (Nk[0, k].item() ** 2 * e**2)
        fk = d * math.log(gk[0, k]) + (d + 1) * tr[k] / gk[0, k] + tr[k] * ck[0, k]
        assert fk <= f.min() * (1 + 2e-3) + 1e-9
    with pytest.raises(ValueError, match="epsilon"):
        record_level_release(X, y, K, -1.0, delta, B)


def _cli(args):
    from torchdpgmm.cli import main

    return main(args)


needs_release = pytest.mark.skipif(importlib.util.find_spec("torchdpgmm.release") is None,
                                   reason="torchdpgmm.release not merged yet")
needs_montecarlo = pytest.mark.skipif(importlib.util.find_spec("torchdpgmm.montecarlo") is None,
                                      reason="torchdpgmm.montecarlo not merged yet")


@needs_release
def test_iris_study_quick(tmp_path):
    assert _cli(["experiment", "iris", "--out", str(tmp_path), "--quick", "--mechanisms", "kl,gaussian"]) == 0
    d = json.loads((tmp_path / "iris.json").read_text())
    kl = [r for r in d["rows"] if r["kind"] == "kl"]
    assert {r["mechanism"] for r in kl} <= {"kl", "gaussian"} and kl
    assert all(r["kl"] > 0 for r in kl)
    assert any(r["kind"] == "density" and r["source"] == "non-private" for r in d["rows"])
    assert (tmp_path / "iris.png").exists()


@needs_release
def test_mnist_studies_quick_on_idx_folder(tmp_path, capsys, load_script):
    _write_idx_folder(tmp_path / "idx")
    out = tmp_path / "out"
    assert _cli(["experiment", "mnist", "--out", str(out), "--quick", "--dataset", "mnist",
                 "--data-dir", str(tmp_path / "idx")]) == 0
    d = json.loads((out / "mnist.json").read_text())
    rows = [r for r in d["rows"] if r["epsilon"] is not None]
    assert rows and all({"epsilon", "mechanism", "kl", "gmm_accuracy"} <= set(r) for r in rows)
    assert any("NOT privacy-accounted" in n for n in d["notes"])
    assert _cli(["experiment", "mnist-mlp", "--out", str(out), "--quick", "--dataset", "mnist",
                 "--data-dir", str(tmp_path / "idx"), "--dpsgd", "off"]) == 0
    d = json.loads((out / "mnist-mlp.json").read_text())
    mlp = [r for r in d["rows"] if r.get("kind") == "mlp"]
    assert {"real-data", "non-private-gmm"} <= {r["mechanism"] for r in mlp}
    assert all({"epsilon", "mechanism", "iteration", "accuracy"} <= set(r) for r in mlp)
    assert any("DP-SGD rows switched off" in n for n in d["notes"])  # DP-SGD itself: test_train_dpsgd_*
    assert any("LABELS" in n for n in d["notes"])
    assert (out / "mnist-mlp.md").exists()
    # the docs' table script reads these outputs
    tables = load_script("scripts/realdata_tables.py")
    tables.main([str(out)])
    printed = capsys.readouterr().out
    assert "### mnist\n" in printed and "### mnist-mlp" in printed and "non-private Gaussian classifier" in printed


@needs_montecarlo
def test_record_level_study_quick(tmp_path):
    assert _cli(["experiment", "record-level", "--out", str(tmp_path), "--quick"]) == 0
    d = json.loads((tmp_path / "record-level.json").read_text())
    rows = [r for r in d["rows"] if r["mechanism"].startswith("kl-record")]
    assert [r["clip_bound"] for r in rows] == [2.0, 20.0]
    assert all(r["kl"] > 0 and math.isfinite(r["kl"]) for r in rows)


def test_dpsgd_rows_say_when_opacus_is_missing(monkeypatch, tmp_path):
    import torchdpgmm.pipelines.dpsgd as dpsgd
    from torchdpgmm.experiments import ExperimentConfig
    from torchdpgmm.experiments.realdata import _dpsgd_rows

    monkeypatch.setattr(dpsgd, "opacus_available", lambda: False)
    notes: list[str] = []
    rows = _dpsgd_rows(ExperimentConfig(out=tmp_path, quick=True), None, [1.0], 1e-5, notes)
    assert rows == [{"kind": "dpsgd", "mechanism": "dp-sgd", "status": "opacus not installed"}]
    assert any("DP-SGD NOT RUN" in n and "opacus" in n for n in notes)


@pytest.mark.slow  # importing opacus alone takes seconds
def test_train_dpsgd_spends_at_most_target():
    pytest.importorskip("opacus")
    from torchdpgmm.pipelines.dpsgd import train_dpsgd

    g = torch.Generator().manual_seed(2)
    y = torch.randint(0, 3, (300,), generator=g)
    X = torch.randn(300, 4, generator=g) + y.unsqueeze(-1).float()
    r = train_dpsgd(X, y, X[:100], y[:100], epsilon=2.0, delta=1e-5, epochs=2, lr=0.2, batch_size=64,
                    hidden=(16, 8), num_classes=3, seed=1, eval_every=2, n_public=300.0)
    assert 0 < r["epsilon_spent"] <= 2.0 + 1e-6 and r["noise_multiplier"] > 0
    assert r["iterations"][0] == 0 and r["iterations"][-1] == r["steps"] and len(r["accuracy"]) == len(r["iterations"])
    with pytest.raises(ValueError, match="epsilon"):
        train_dpsgd(X, y, X, y, epsilon=0.0, delta=1e-5)


def test_sound_rows_of_the_image_studies_carry_their_kl_and_a_failed_mechanism_is_said(tmp_path, capsys, monkeypatch):
    """kl-sound (record-level) rows: the KL to the non-private fit of the raw records is computed by the study (the
    sound release keeps no non-private value); it was silently missing (a FAILED note only) until 2026-11-27."""
    from torchdpgmm.cli import main
    from torchdpgmm.experiments import realdata

    assert main(["experiment", "mnist", "--quick", "--dataset", "digits", "--out", str(tmp_path / "a"),
                 "--mechanisms", "kl,kl-sound"]) == 0
    payload = json.loads((tmp_path / "a" / "mnist.json").read_text())
    sound = [r for r in payload["rows"] if r["mechanism"] == "kl-sound"]
    assert sound and all(math.isfinite(r["kl"]) and r["kl"] > 0 and 0 < r["gmm_accuracy"] <= 1 for r in sound)
    assert not [n for n in payload["notes"] if "FAILED" in n]
    assert "warning" not in capsys.readouterr().err

    def boom(*a, **k):
        raise RuntimeError("broken on purpose")
    monkeypatch.setattr(realdata, "_release", boom)
    assert main(["experiment", "mnist", "--quick", "--dataset", "digits", "--out", str(tmp_path / "b"),
                 "--mechanisms", "kl"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert any("warning" in ln and "'kl' FAILED" in ln and "broken on purpose" in ln for ln in err), err
    assert any("FAILED" in n for n in json.loads((tmp_path / "b" / "mnist.json").read_text())["notes"])
