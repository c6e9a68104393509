"""Device contract (issue 16, item 5): hot paths run on the input's device without host syncs.

* ``meta`` tensors carry shapes but no values, so any host synchronisation (``.item()``, ``bool(t)``,
  ``.tolist()``, numpy) raises on them: the per-iteration pieces of the design's SDP solver and the EM's
  E/M steps are run on ``meta`` to prove they are sync-free. (The mechanisms validate their inputs with one
  host check per call before drawing noise, so they cannot run on ``meta``; they and the whole pipeline
  run on CPU through the code path CUDA uses: nothing branches on the device type.)
* On CPU every output of ``release`` (every as-published mechanism), of the design and of the EM is on
  the input's device.
* ``cuda``-marked tests (skipped without a GPU) compare CPU and CUDA: the design is deterministic and must
  agree to the SDP tolerance; the released KL is random, and CPU / CUDA generators give different streams,
  so the two samples are compared in distribution (two-sample Kolmogorov-Smirnov test, scipy).
"""
import pytest
import torch

from torchdpgmm.design import design_mechanism
from torchdpgmm.design.sdp import _certificate, _multiplicative_step, covering_violation, label_flip_differences
from torchdpgmm.em import e_step, fit_gmm, m_step
from torchdpgmm.montecarlo import synthetic_data
from torchdpgmm.release import MECHANISMS, release

META = torch.device("meta")


def _m(*shape, dtype=torch.float64):
    return torch.empty(*shape, dtype=dtype, device=META)


def test_sdp_iteration_pieces_are_sync_free_on_meta():
    X, y = _m(4, 50, 3), torch.empty(4, 50, dtype=torch.long, device=META)
    V, vmask, counts, means = label_flip_differences(X, y, 3)
    assert V.device == META and V.shape == (4, 3, 50, 3) and counts.shape == (4, 3)
    assert covering_violation(V, _m(4, 3, 3, 3), vmask).shape == (4, 3)
    W, mask, p = _m(12, 50, 3), torch.ones(12, 50, dtype=torch.bool, device=META), _m(12, 50)
    lower, upper, Y, r, tr = _certificate(W, mask, p)
    assert Y.shape == (12, 3, 3) and lower.device == META
    out = _multiplicative_step(W, mask, p, p, p, _m(12), _m(12))
    assert out[0].shape == (12, 50) and all(t.device == META for t in out)


def test_em_steps_are_sync_free_on_meta():
    X = _m(4, 50, 3)
    log_resp, ll = e_step(X, _m(4, 2), _m(4, 2, 3), _m(4, 2, 3, 3))
    w, mu, cov = m_step(X, log_resp.exp())
    assert w.shape == (4, 2) and mu.shape == (4, 2, 3) and cov.shape == (4, 2, 3, 3)
    assert all(t.device == META for t in (log_resp, ll, w, mu, cov))


def _tensors(obj, seen=None):
    """Every tensor reachable from a result object (dataclass fields, dicts, lists)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v, seen)
    elif hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            yield from _tensors(v, seen)


def _data(device, T=3, N=60):
    g = torch.Generator().manual_seed(0)
    d = synthetic_data(T, N, 2, 3, generator=g)      # drawn on the CPU: identical data on every device
    return d.X.to(device), d.y.to(device)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_release_outputs_stay_on_the_input_device(mechanism):
    X, y = _data("cpu")
    eps = torch.tensor([0.5, 2.0], dtype=torch.float64)[:, None]
    r = release(X, y, 2, eps, 1e-5, mechanism=mechanism, mode="as-published",
                generator=torch.Generator().manual_seed(1))
    ts = list(_tensors(r))
    assert ts and all(t.device == X.device for t in ts)
    assert r.model.means.shape == (2, 3, 2, 3)


def test_design_and_em_outputs_stay_on_the_input_device():
    X, y = _data("cpu")
    des = design_mechanism(X, y, 2, 1.0, 1e-5)
    assert all(t.device == X.device for t in _tensors(des))
    fit = fit_gmm(X, 2, generator=torch.Generator().manual_seed(0))
    assert all(t.device == X.device for t in _tensors(fit))


@pytest.mark.cuda
def test_design_cpu_and_cuda_agree():
    Xc, yc = _data("cpu", T=4, N=200)
    a = design_mechanism(Xc, yc, 2, 1.0, 1e-5)
    b = design_mechanism(Xc.cuda(), yc.cuda(), 2, 1.0, 1e-5)
    assert b.mean_noise_cov.device.type == "cuda"
    torch.testing.assert_close(b.mean_noise_cov.cpu(), a.mean_noise_cov, rtol=1e-5, atol=0)
    torch.testing.assert_close(b.gamma.cpu(), a.gamma, rtol=1e-5, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("mechanism", ["kl", "gaussian"])
def test_released_kl_cpu_and_cuda_equal_in_distribution(mechanism):
    from scipy import stats

    X, y = _data("cpu", T=1, N=200)
    X, y = X.expand(2000, -1, -1), y.expand(2000, -1)      # one dataset, 2000 independent noise draws
    kl = {}
    for dev in ("cpu", "cuda"):
        g = torch.Generator(device=dev).manual_seed(0)
        kl[dev] = release(X.to(dev), y.to(dev), 2, 1.0, 1e-5, mechanism=mechanism, mode="as-published",
                          generator=g).kl.cpu()
    assert not torch.equal(kl["cpu"], kl["cuda"])           # different streams ...
    assert stats.ks_2samp(kl["cpu"].numpy(), kl["cuda"].numpy()).pvalue > 1e-3   # ... same law


# --- the generator rule (docs/architecture.md, "Devices and generators"; issue 36 item 1) -----------------

class _GeneratorOn:
    """Stands in for a generator of another device (a CUDA one cannot be made without a GPU): only its
    ``device`` is read before anything is drawn."""

    def __init__(self, device):
        self.device = torch.device(device)


def test_a_trainer_refuses_a_generator_of_another_device_before_drawing():
    from torchdpgmm.pipelines.dpsgd_fast import train_dpsgd_fast
    from torchdpgmm.pipelines.trainer import train_on_sampler

    def sampler(n, generator=None):  # pragma: no cover - never reached
        raise AssertionError("drew before the generator check")

    with pytest.raises(ValueError, match="generator lives on cuda:0 but draws tensors on cpu"):
        train_on_sampler(sampler, d=2, num_classes=2, n_per_epoch=8, generator=_GeneratorOn("cuda:0"), device="cpu")
    X, y = torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)
    with pytest.raises(ValueError, match="generator lives on cuda:0"):
        train_dpsgd_fast(X, y, num_classes=2, noise_multiplier=1.0, sampling_rate=0.5, steps=1,
                         generator=_GeneratorOn("cuda:0"), device="cpu", n_public=8)


def test_host_only_helpers_refuse_a_device_generator():
    from torchdpgmm.audit import outlier_label_flip
    from torchdpgmm.pipelines.features import prepare_features

    with pytest.raises(ValueError, match="draws tensors on cpu"):
        outlier_label_flip(num_per_class=5, dim=3, generator=_GeneratorOn("cuda"))
    imgs, labels = torch.zeros(20, 28, 28), torch.zeros(20, dtype=torch.long)
    with pytest.raises(ValueError, match="draws tensors on cpu"):
        prepare_features(imgs, labels, imgs, labels, n_train=10, generator=_GeneratorOn("cuda"))


def test_draw_seed_and_host_generator_follow_the_generator():
    from torchdpgmm.experiments import ExperimentConfig
    from torchdpgmm.pipelines.generators import check_generator_device, derive_host_generator, draw_seed

    # draw_seed is one randint on the generator's own device: the same value as drawing it by hand
    ref = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(5)))
    assert draw_seed(torch.Generator().manual_seed(5)) == ref
    g = torch.Generator().manual_seed(5)
    a, b = derive_host_generator(g), derive_host_generator(g)  # successive derivations differ
    assert a.device.type == "cpu" and a.initial_seed() == ref and b.initial_seed() != ref
    cfg = ExperimentConfig(out=".", seed=3, device="cpu")
    h = cfg.host_generator(4)
    assert h.device.type == "cpu" and h.initial_seed() == 7 == cfg.generator(4).initial_seed()
    check_generator_device(None, "cuda")  # the default generators: nothing to check
    check_generator_device(torch.Generator(), torch.device("cpu"))


def test_neighbour_pair_moves_to_a_device_whole():
    from torchdpgmm.audit import worst_case_add_remove

    P = worst_case_add_remove(num_per_class=5, dim=3, clip_bound=2.0, generator=torch.Generator().manual_seed(0))
    Q = P.to("meta")
    moved = [getattr(Q, f) for f in ("X0", "y0", "X1", "y1", "mask0", "mask1") if getattr(Q, f) is not None]
    assert moved and all(t.device.type == "meta" for t in moved) and Q.relation == P.relation
    assert P.X0.device.type == "cpu"  # the original is untouched


def test_synthetic_classifier_estimator_takes_a_device():
    import numpy as np

    from torchdpgmm.estimator import DPSyntheticClassifier

    assert DPSyntheticClassifier().get_params()["device"] == "cpu"
    X, y = np.random.default_rng(0).normal(size=(60, 4)), np.arange(60) % 2
    for bad, exc in (("gpu", ValueError), (3, TypeError), ("meta", ValueError)):
        with pytest.raises(exc, match="device"):
            DPSyntheticClassifier(1.0, classes=[0, 1], image_transform="none", n_components=2, device=bad).fit(X, y)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            DPSyntheticClassifier(1.0, classes=[0, 1], image_transform="none", n_components=2, device="cuda").fit(X, y)
    # device="cpu" is the default's release: the same seed gives the same model
    kw = dict(classes=[0, 1], image_transform="none", n_components=2, random_state=0)
    a = DPSyntheticClassifier(1.0, **kw).fit(X, y)
    b = DPSyntheticClassifier(1.0, device=torch.device("cpu"), **kw).fit(X, y)
    assert torch.equal(a.model_.means, b.model_.means) and a.model_.means.device.type == "cpu"


def test_dpsgd_needs_the_public_record_count():
    """Issue 38 item 8: DP-SGD's sampling rate, steps and normaliser come from a public (or released) N;
    without one it is refused, never read off the private rows."""
    from torchdpgmm.pipelines.dpsgd_fast import train_dpsgd_fast

    X, y = torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)
    with pytest.raises(ValueError, match="n_public is required"):
        train_dpsgd_fast(X, y, num_classes=2, noise_multiplier=1.0, sampling_rate=0.5, steps=1,
                         generator=torch.Generator().manual_seed(0))


def test_opacus_dpsgd_needs_the_public_record_count():
    pytest.importorskip("opacus")
    from torchdpgmm.pipelines.dpsgd import train_dpsgd

    X, y = torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)
    with pytest.raises(ValueError, match="n_public is required"):
        train_dpsgd(X, y, X, y, 1.0, 1e-5, num_classes=2)


def test_every_factory_draw_with_a_generator_names_its_device():
    """The generator rule, statically: ``torch.rand/randn/randint/randperm(..., generator=g)`` without
    ``device=`` draws on the CPU whatever ``g`` is, which is the CUDA crash of issue 36 (a CUDA generator in a
    CPU op) or a CPU draw later moved to the GPU. Every such call in the package names its device: the data's
    (with a generator of that device), or ``"cpu"`` for a host-side draw with a CPU generator."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "torchdpgmm"
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                    and node.func.attr in ("rand", "randn", "randint", "randperm")):
                kws = {k.arg for k in node.keywords}
                if "generator" in kws and "device" not in kws:
                    bad.append(f"{path.relative_to(root.parent)}:{node.lineno} torch.{node.func.attr}")
    assert not bad, "draws with a generator but no device=: " + ", ".join(bad)
