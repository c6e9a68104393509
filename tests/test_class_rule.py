"""The class stage's covariance rule of the image pipeline (issue #26 item 3): ``class_rule="auto"`` releases the
pooled second moment beside the class blocks inside the stage's budget and applies the tabular rule;
``class_rule="legacy"`` is today's release bit for bit; a bad value is refused in one line."""
from __future__ import annotations

import importlib.util
import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# main before the option existed: the legacy rule must reproduce its releases bit for bit
PRE_OPTION_COMMIT = "f60ba0e8742f5520010c212fda6fca5477467992"


def _ball(n=3000, d=4, K=3, seed=5):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(n, d, dtype=torch.float64, generator=g)
    U = U / (1 + U.norm(dim=-1, keepdim=True))
    return U, torch.randint(0, K, (n,), generator=g)


def _tiny_images(n=600, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    X = 0.1 * torch.rand(n, 28, 28, generator=g, dtype=torch.float64)
    for k in range(3):
        X[y == k, 4 + 7 * k: 11 + 7 * k, 6:20] += 0.8
    return X.reshape(n, 784), y


def _auto_fractions(class_to_pooled=0.3):
    """The auto split of the stage's moment split, written out (counts .02, sums .18, class block
    class_to_pooled x .8, pooled .8, renormalised; then the counts raised to the rule's floor of 5% when below
    it, the other three scaled down together): fractions of the stage's mu^2."""
    raw = np.array([0.02, 0.18, class_to_pooled * 0.8, 0.8])
    f = raw / raw.sum()
    if f[0] < 0.05:
        f = np.concatenate([[0.05], f[1:] * (1 - 0.05) / (1 - f[0])])
    return dict(zip(("counts", "sums", "second-moments", "pooled-second-moment"), f))


def test_auto_class_stage_blocks_and_mu_match_an_independent_computation():
    """Add/remove, one component per class: four class blocks (the pooled one included) of sensitivity 1 (unit
    ball) with noise ``1 / (mu sqrt(w_b))`` for the auto split ``w``; they compose to the stage's mu."""
    from torchdpgmm.pipelines._privacy import composed_mu
    from torchdpgmm.pipelines.class_mixture import release_class_mixture

    U, y = _ball()
    mu = 1.3
    _, blocks = release_class_mixture(U, y, 3, mu=mu, delta=1e-5, class_rule="auto",
                                      generator=torch.Generator().manual_seed(0))
    # the rule's ratio at the stage's epsilon, by hand: mu-GDP's epsilon at delta 1e-5 (scipy root of the GDP delta
    # curve, Dong, Roth & Su 2022), then max(0.3, 0.1 K min(1, 16/d) max(1, min(eps, 5)/2)) with K = 3, d = 4
    from scipy.optimize import brentq
    from scipy.stats import norm

    eps = brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - 1e-5, 0, 50)
    assert eps > 2  # the stage's epsilon is where the ratio grows
    w = _auto_fractions(max(0.3, 0.1 * 3 * max(1.0, min(eps, 5.0) / 2)))
    assert [b.name for b in blocks] == [f"class-{k}" for k in w]
    for b in blocks:
        assert b.mechanism == "gaussian" and b.sensitivity == pytest.approx(1.0, rel=1e-12)
        assert b.noise_scale == pytest.approx(1.0 / (mu * math.sqrt(w[b.name[len("class-"):]])), rel=1e-9)
    assert math.sqrt(sum((b.sensitivity / b.noise_scale) ** 2 for b in blocks)) == pytest.approx(mu, rel=1e-9)
    assert composed_mu(blocks) == pytest.approx(mu, rel=1e-9)


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_class_to_pooled_sets_the_class_blocks_precision_over_the_pooled_blocks(ratio):
    """``class_to_pooled=r``: the class blocks' noise scales follow the auto split with the class block at r x the
    pooled block's share (so ``sigma_P^2 / sigma_F^2 = r``), composing to the stage's mu; the pipeline passes it."""
    from torchdpgmm.pipelines._privacy import composed_mu
    from torchdpgmm.pipelines.class_mixture import release_class_mixture
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    U, y = _ball()
    mu = 1.3
    _, blocks = release_class_mixture(U, y, 3, mu=mu, delta=1e-5, class_rule="auto", class_to_pooled=ratio,
                                      generator=torch.Generator().manual_seed(0))
    w = _auto_fractions(ratio)
    sig = {b.name[len("class-"):]: b.noise_scale for b in blocks}
    for k, v in w.items():
        assert sig[k] == pytest.approx(1.0 / (mu * math.sqrt(v)), rel=1e-9)
    assert (sig["pooled-second-moment"] / sig["second-moments"]) ** 2 == pytest.approx(ratio, rel=1e-9)
    assert composed_mu(blocks) == pytest.approx(mu, rel=1e-9)
    X, yi = _tiny_images(300)
    rel = release_pipeline(X, yi, num_classes=3, epsilon=4.0, delta=1e-5, generator=torch.Generator().manual_seed(0),
                           config=PipelineConfig(n_components=4, class_rule="auto", class_to_pooled=ratio,
                                                 components_per_class=1))
    b = {x.name: x.noise_scale for x in rel.privacy.blocks}
    assert (b["class-pooled-second-moment"] / b["class-second-moments"]) ** 2 == pytest.approx(ratio, rel=1e-9)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), "1", True])
def test_a_bad_class_to_pooled_is_refused_in_one_line(bad):
    from torchdpgmm.pipelines.class_mixture import release_class_mixture
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

    U, y = _ball(300)
    g = torch.Generator().manual_seed(0)
    before = g.get_state()
    with pytest.raises(ValueError, match=r"^class_to_pooled must be None or a finite number > 0, got [^\n]*$"):
        release_class_mixture(U, y, 3, mu=1.0, delta=1e-5, class_rule="auto", class_to_pooled=bad, generator=g)
    assert torch.equal(g.get_state(), before)
    with pytest.raises(ValueError, match=r"^class_to_pooled must be None or a finite number > 0"):
        PipelineConfig(class_to_pooled=bad).check()


def _worst_whitened_change(sigma):
    """Brute force over replace-one neighbours of the class stage's statistics (counts, per-class sums, per-class
    second moments, pooled second moment) of records in the unit ball: the largest ``sum_b ||Delta_b||^2 /
    sigma_b^2``. The replaced record ``z = r e1`` and its replacement ``z' = s (cos t e1 + sin t e2)``, in the
    same class or another one, on a grid of (r, s, t)."""
    d, K = 4, 3
    best = 0.0
    for r, s, t in itertools.product(np.linspace(0, 1, 11), np.linspace(0, 1, 11), np.linspace(0, np.pi, 361)):
        z, z2 = np.zeros(d), np.zeros(d)
        z[0], z2[0], z2[1] = r, s * np.cos(t), s * np.sin(t)
        for a, b in ((0, 0), (0, 1)):
            n, S, Q = np.zeros(K), np.zeros((K, d)), np.zeros((K, d, d))
            n[a] -= 1; S[a] -= z; Q[a] -= np.outer(z, z)  # noqa: E702
            n[b] += 1; S[b] += z2; Q[b] += np.outer(z2, z2)  # noqa: E702
            P = Q.sum(0)
            v = (np.sum(n ** 2) / sigma["counts"] ** 2 + np.sum(S ** 2) / sigma["sums"] ** 2
                 + np.sum(Q ** 2) / sigma["second-moments"] ** 2 + np.sum(P ** 2) / sigma["pooled-second-moment"] ** 2)
            best = max(best, v)
    return best


def test_auto_class_stage_under_replace_one_is_the_joint_worst_case_by_brute_force():
    """Replace-one: the noise actually drawn (the blocks' noise scales) makes the worst neighbour's whitened change,
    found by brute force, equal to the stage's mu^2 (never above: sound; not far below: no wasted budget)."""
    from torchdpgmm.pipelines._privacy import composed_mu
    from torchdpgmm.pipelines.class_mixture import release_class_mixture

    U, y = _ball()
    mu = 1.3
    _, blocks = release_class_mixture(U, y, 3, mu=mu, delta=1e-5, class_rule="auto", adjacency="replace-one",
                                      generator=torch.Generator().manual_seed(0))
    sigma = {b.name[len("class-"):]: b.noise_scale for b in blocks}
    worst = _worst_whitened_change(sigma)
    assert worst <= mu * mu * (1 + 1e-9)
    assert worst >= 0.995 * mu * mu
    assert composed_mu(blocks) == pytest.approx(mu, rel=1e-9)


def test_pipeline_with_the_auto_class_rule_composes_to_the_target_epsilon():
    """The whole pipeline's record lists the pooled block, and an independent PLD composition of its Gaussian
    blocks (dp-accounting) gives the target epsilon; one and several components per class."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    X, y = _tiny_images()
    for m in (1, 2):
        cfg = PipelineConfig(n_components=5, components_per_class=m, lloyd_steps=1, class_rule="auto")
        rel = release_pipeline(X, y, num_classes=3, epsilon=2.0, delta=1e-5, config=cfg,
                               generator=torch.Generator().manual_seed(1))
        names = [b.name for b in rel.privacy.blocks]
        assert len(names) == len(set(names)) and "class-pooled-second-moment" in names
        assert ("cells-second-moments" in names) == (m > 1)
        assert any("covariance_rule" in n for n in rel.privacy.notes)
        acc = PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
        for b in rel.privacy.blocks:
            if b.sensitivity > 0:
                acc.compose(dp_accounting.GaussianDpEvent(b.noise_scale / b.sensitivity), count=b.count)
        assert rel.privacy.epsilon <= 2.0 + 1e-12 and abs(acc.get_epsilon(1e-5) - 2.0) < 0.01
        assert rel.model.means.shape == (3, m, 5)
        assert bool((torch.linalg.eigvalsh(rel.model.covariances) > 0).all())


def test_auto_class_stage_without_noise_is_the_empirical_class_model():
    """With negligible noise the rule shrinks nothing: weights, means and covariances are each class's empirical
    ones (numpy, ddof 1)."""
    from torchdpgmm.pipelines.class_mixture import release_class_mixture

    U, y = _ball(n=900)
    model, _ = release_class_mixture(U, y, 3, mu=1e9, delta=1e-5, class_rule="auto",
                                     generator=torch.Generator().manual_seed(0))
    Un, yn = U.numpy(), y.numpy()
    for k in range(3):
        np.testing.assert_allclose(model.means[k, 0].numpy(), Un[yn == k].mean(0), atol=1e-6)
        np.testing.assert_allclose(model.covariances[k, 0].numpy(), np.cov(Un[yn == k].T, ddof=1), atol=1e-6)
        assert float(model.weights[k]) == pytest.approx(np.mean(yn == k), abs=1e-6)


def _pre_option_module(name, tmp_path, monkeypatch):
    """``torchdpgmm/pipelines/NAME.py`` as it was at :data:`PRE_OPTION_COMMIT`, imported inside the package (its
    relative imports resolve to today's siblings)."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{PRE_OPTION_COMMIT}:torchdpgmm/pipelines/{name}.py"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the git history (the pre-option commit) to rebuild the old release")
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    full = f"torchdpgmm.pipelines._pre_option_{name}"
    spec = importlib.util.spec_from_file_location(full, path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, full, mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("adjacency", ["add-remove", "replace-one"])
def test_legacy_rule_reproduces_the_pre_option_release_bit_for_bit(tmp_path, monkeypatch, adjacency):
    """``class_rule="legacy"`` gives exactly the release of the code before the option existed (same seed): the
    class mixture alone and the whole pipeline, so the study numbers computed before stay valid."""
    from torchdpgmm.pipelines.class_mixture import release_class_mixture
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    old_cm = _pre_option_module("class_mixture", tmp_path, monkeypatch)
    old_sc = _pre_option_module("synthetic_classifier", tmp_path, monkeypatch)
    old_sc.release_class_mixture = old_cm.release_class_mixture  # the old pipeline on the old mixture stage
    U, y = _ball()
    for m in (1, 3):
        kw = dict(mu=1.3, delta=1e-5, components_per_class=m, adjacency=adjacency, shrink=2.0)
        a, ba = old_cm.release_class_mixture(U, y, 3, generator=torch.Generator().manual_seed(7), **kw)
        b, bb = release_class_mixture(U, y, 3, class_rule="legacy", generator=torch.Generator().manual_seed(7), **kw)
        for f in ("weights", "comp_weights", "means", "covariances"):
            assert torch.equal(getattr(a, f), getattr(b, f)), (m, f)
        assert ba == bb
    X, yi = _tiny_images()
    for m in (1, 2):
        common = dict(n_components=5, components_per_class=m, lloyd_steps=1)
        ra = old_sc.release_pipeline(X, yi, num_classes=3, epsilon=2.0, delta=1e-5, adjacency=adjacency,
                                     config=old_sc.PipelineConfig(**common), generator=torch.Generator().manual_seed(3))
        rb = release_pipeline(X, yi, num_classes=3, epsilon=2.0, delta=1e-5, adjacency=adjacency,
                              config=PipelineConfig(class_rule="legacy", **common),
                              generator=torch.Generator().manual_seed(3))
        for f in ("weights", "comp_weights", "means", "covariances"):
            assert torch.equal(getattr(ra.model, f), getattr(rb.model, f)), (m, f)
        assert torch.equal(ra.pca.components, rb.pca.components)
        assert ra.privacy.blocks == rb.privacy.blocks and ra.privacy.epsilon == rb.privacy.epsilon


def test_a_bad_class_rule_is_refused_in_one_line_before_any_noise(tmp_path, capsys):
    from torchdpgmm.cli import main
    from torchdpgmm.estimator import DPSyntheticClassifier
    from torchdpgmm.pipelines.class_mixture import release_class_mixture
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig, release_pipeline

    U, y = _ball(n=60)
    for bad in ("tabular", None, "AUTO"):
        g = torch.Generator().manual_seed(0)
        before = g.get_state()
        with pytest.raises(ValueError, match=r"^class_rule must be one of \('auto', 'legacy'\), got [^\n]*$"):
            release_class_mixture(U, y, 3, mu=1.0, delta=1e-5, class_rule=bad, generator=g)
        X, yi = _tiny_images(60)
        with pytest.raises(ValueError, match=r"^class_rule must be one of [^\n]*$"):
            release_pipeline(X, yi, num_classes=3, epsilon=1.0, delta=1e-5, config=PipelineConfig(class_rule=bad),
                             generator=g)
        assert torch.equal(g.get_state(), before)
        with pytest.raises(ValueError, match=r"^class_rule must be one of [^\n]*$"):
            DPSyntheticClassifier(classes=[0, 1, 2], class_rule=bad).fit(X.numpy(), yi.numpy())
    out = tmp_path / "rel"
    assert main(["synthesize", "--data", str(tmp_path / "missing"), "--classes", "0,1,2", "--epsilon", "1",
                 "--delta", "1e-5", "--class-rule", "tabular", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--class-rule" in err[-1] and "tabular" in err[-1] and not out.exists()


def test_the_estimator_and_the_command_line_pass_the_class_rule_through(tmp_path, capsys):
    """``DPSyntheticClassifier(class_rule="auto")`` and ``synthesize --class-rule auto`` release the pooled block;
    their default is the pipeline's default rule."""
    import inspect
    import json

    from torchdpgmm.cli import main
    from torchdpgmm.data.idx import write_idx
    from torchdpgmm.estimator import DPSyntheticClassifier
    from torchdpgmm.pipelines.class_mixture import DEFAULT_CLASS_RULE
    from torchdpgmm.pipelines.synthetic_classifier import PipelineConfig

    assert inspect.signature(DPSyntheticClassifier).parameters["class_rule"].default == DEFAULT_CLASS_RULE
    assert PipelineConfig().class_rule == DEFAULT_CLASS_RULE
    X, y = _tiny_images(300)
    names = {}
    for rule in ("auto", "legacy"):
        est = DPSyntheticClassifier(4.0, classes=[0, 1, 2], n_components=4, class_rule=rule).fit(X.numpy(), y.numpy())
        names[rule] = {b.name for b in est.privacy_.blocks}
        assert est.release_.config.class_rule == rule
    assert "class-pooled-second-moment" in names["auto"] - names["legacy"]
    (tmp_path / "idx").mkdir()
    write_idx(tmp_path / "idx" / "train-images-idx3-ubyte.gz", (X.reshape(300, 28, 28) * 255).to(torch.uint8))
    write_idx(tmp_path / "idx" / "train-labels-idx1-ubyte.gz", y.to(torch.uint8))
    out = tmp_path / "rel"
    assert main(["synthesize", "--data", str(tmp_path / "idx"), "--classes", "0,1,2", "--epsilon", "4",
                 "--delta", "1e-5", "--n-components", "4", "--class-rule", "auto", "--out", str(out)]) == 0
    rel = json.loads((out / "release.json").read_text())
    assert rel["config"]["class_rule"] == "auto"
    assert "class-pooled-second-moment" in {b["name"] for b in rel["privacy"]["blocks"]}


def test_image_pipeline_class_stage_keeps_the_scalar_class_weight(monkeypatch):
    """The tables' release shrinks each class per eigen-direction (covariance_rule.PER_DIRECTION); the image
    pipeline's class stage passes class_weight="mean", the scalar form it was validated with: its release does not
    change with the flag, while the tables' sound release does."""
    from torchdpgmm.pipelines.class_mixture import release_class_mixture
    from torchdpgmm.release import covariance_rule
    from torchdpgmm.release.sound import release_sound

    U, y = _ball()
    out = {}
    for flag in (True, False):
        monkeypatch.setattr(covariance_rule, "PER_DIRECTION", flag)
        mix, _ = release_class_mixture(U, y, 3, mu=1.3, delta=1e-5, class_rule="auto",
                                       generator=torch.Generator().manual_seed(0))
        rel = release_sound(U[:, :6] * 0.1, y, 3, 2.0, 1e-5, clip_bound=1.0, covariance_type="auto",
                            generator=torch.Generator().manual_seed(0))
        out[flag] = (mix, rel.model.covariances)
    assert torch.equal(out[True][0].covariances, out[False][0].covariances)
    assert not torch.allclose(out[True][1], out[False][1])
    with pytest.raises(ValueError, match="class_weight must be one of"):
        release_sound(U[:, :6] * 0.1, y, 3, 2.0, 1e-5, clip_bound=1.0, covariance_type="auto", class_weight="x")
