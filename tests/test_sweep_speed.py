"""The KL sweep's fast path (issue 27 item 8) against literal references.

* The barrier solver's Newton direction (:func:`torchdpgmm.design.sdp._barrier_newton_dir`, rewritten with
  unrolled short reductions and ``index_select`` products) equals the Newton step of the literal KKT system
  of ``max tr M(p)^{1/2} + mu sum log p`` on the simplex, whose Hessian is taken by central differences of
  the gradient ``0.5 w^T M^{-1/2} w`` computed in numpy (no code under test involved).
* Sweep rows do not depend on the number of worker processes, and equal a direct per-block ``release()``
  call with the block's own generators (the literal per-block algorithm).
"""
import numpy as np
import pytest
import torch

from torchdpgmm.design import sdp
from torchdpgmm.sweep import SweepSpec, block_seed, load_results, run_sweep, torch_threads


def _grad_sqrt_trace(W, p):
    """numpy: gradient of tr M(p)^{1/2}, M = sum_i p_i w_i w_i^T: 0.5 w_i^T M^{-1/2} w_i."""
    e, U = np.linalg.eigh((W * p[:, None]).T @ W)
    Minvh = (U / np.sqrt(e)) @ U.T
    return 0.5 * np.einsum("id,de,ie->i", W, Minvh, W)


@pytest.mark.parametrize("d,k", [(3, 10), (2, 6), (4, 14)])
def test_barrier_newton_direction_matches_literal_kkt(d, k):
    g = torch.Generator().manual_seed(d)
    B = 3
    Ws = torch.randn(B, k, d, dtype=torch.float64, generator=g)
    p = torch.rand(B, k, dtype=torch.float64, generator=g) + 0.2
    p = p / p.sum(-1, keepdim=True)
    sm = torch.ones(B, k, dtype=torch.bool)
    mu = torch.tensor([1e-2, 1e-3, 1e-4], dtype=torch.float64)
    f, F, rmax, dp, dec2, nu, pt = sdp._barrier_newton_dir(Ws, sm, p, mu)
    for b in range(B):
        W, pb, m = Ws[b].numpy(), p[b].numpy(), float(mu[b])
        grad = _grad_sqrt_trace(W, pb) + m / pb
        h = 1e-6
        H = np.empty((k, k))
        for j in range(k):
            e = np.zeros(k)
            e[j] = h
            H[:, j] = (_grad_sqrt_trace(W, pb + e) - _grad_sqrt_trace(W, pb - e)) / (2 * h)
        H -= np.diag(m / pb ** 2)
        kkt = np.block([[H, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
        ref = np.linalg.solve(kkt, np.concatenate([-grad, [0.0]]))[:k]
        np.testing.assert_allclose(dp[b].numpy(), ref, rtol=1e-5, atol=1e-7 * np.abs(ref).max())
        e_ = np.linalg.eigvalsh((W * pb[:, None]).T @ W)
        assert abs(float(f[b]) - np.sqrt(e_).sum()) <= 1e-12 * np.sqrt(e_).sum()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_sum_last_equals_numpy_sum(n):
    x = torch.randn(5, 7, n, dtype=torch.float64)
    np.testing.assert_allclose(sdp._sum_last(x).numpy(), x.numpy().sum(-1), rtol=1e-14, atol=1e-14)


def _spec(**kw):
    base = dict(mechanisms=["kl"], epsilons=[0.5, 2.0], Ns=[40], Ks=[2], ds=[2], trials=4, block_size=2,
                chunk_size=2)
    base.update(kw)
    return SweepSpec(**base)


def test_workers_give_identical_rows_equal_to_direct_release(tmp_path):
    from torchdpgmm.montecarlo import synthetic_data
    from torchdpgmm.release import release

    run_sweep(_spec(), tmp_path / "one", progress=False)
    run_sweep(_spec(), tmp_path / "two", progress=False, workers=2)
    one = (tmp_path / "one" / "results.csv").read_text()
    assert one == (tmp_path / "two" / "results.csv").read_text()
    got = {(r["epsilon"], r["trial"]): r["kl"] for r in load_results(tmp_path / "one")}
    eps = torch.tensor([0.5, 2.0], dtype=torch.float64)[:, None]
    for b in range(2):   # the literal per-block computation, one release() per block
        gd = torch.Generator().manual_seed(block_seed(0, "data", 40, 2, 2, b))
        data = synthetic_data(2, 40, 2, 2, generator=gd)
        g = torch.Generator().manual_seed(block_seed(0, "noise", "kl", 40, 2, 2, b))
        with torch_threads(1):
            kl = release(data.X, data.y, 2, eps, 1e-5, mechanism="kl", mode="as-published", generator=g).kl
        for j, e in enumerate([0.5, 2.0]):
            for t in range(2):
                assert got[(e, 2 * b + t)] == float(kl[j, t])


def test_torch_threads_restores_the_thread_count():
    torch.set_num_threads(2)
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("name,bad", [("workers", 0), ("workers", -1), ("workers", 1.5), ("workers", True),
                                      ("workers", None), ("threads", 0), ("threads", True)])
def test_workers_and_threads_validation(name, bad, tmp_path):
    with pytest.raises(ValueError, match=name):
        run_sweep(_spec(), tmp_path, progress=False, **{name: bad})


@pytest.mark.parametrize("flags,msg", [(["--workers", "0"], "--workers must be >= 1"),
                                       (["--workers", "2", "--backend", "ray"], "--workers applies to --backend local")])
def test_cli_workers_bad_values_one_line_exit_2(flags, msg, tmp_path, capsys):
    from torchdpgmm.cli import main

    out = tmp_path / "sw"
    code = main(["sweep", "--mode", "as-published", "--mechanisms", "kl", "--trials", "2", "--no-progress",
                 "--out", str(out)] + flags)
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning" not in ln.lower()]
    assert code == 2 and len(err) == 1 and msg in err[0], err
    assert not out.exists()


def _csv_reference(cols):
    """The rows through the standard library's ``csv.writer``, one row at a time (the literal format)."""
    import csv
    import io

    from torchdpgmm.sweep import RESULT_FIELDS
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(RESULT_FIELDS)
    for row in zip(*(cols[k].tolist() for k in RESULT_FIELDS)):
        w.writerow(row)
    return buf.getvalue()


def _csv_cases():
    rng = np.random.default_rng(0)
    n = 3000
    mech = np.array(rng.choice(["kl", "gaussian", "we,ird", 'q"uote', "sp ace", "br{ace}", "{0}"], n), dtype=object)
    mech.sort()     # runs of one mechanism, some split again by epsilon and K
    kl = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    kl[::97], kl[::101], kl[::103], kl[::107], kl[::109] = np.nan, np.inf, -np.inf, -0.0, 0.0
    yield {"mechanism": mech, "epsilon": np.tile(np.repeat([0.1, 1 / 3, 5.0], 500), 2),
           "N": np.full(n, 1000), "K": np.repeat([2, 5, 2], 1000), "d": np.full(n, 3), "seed": np.full(n, 7),
           "trial": np.arange(n) % 777, "kl": kl}
    # the same grid point in two runs (two blocks of one chunk), then one row, then none
    yield {"mechanism": np.array(["kl"] * 4 + ["gaussian"] * 2 + ["kl"] * 2, dtype=object),
           "epsilon": np.array([0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]), "N": np.full(8, 10), "K": np.full(8, 2),
           "d": np.full(8, 1), "seed": np.full(8, 3), "trial": np.array([0, 1, 0, 1, 0, 1, 2, 3]),
           "kl": np.array([1.5, 2.25, 1e-320, 3.0, 0.1 + 0.2, 7.0, 1e300, -2.5])}
    yield {k: np.asarray(v) for k, v in zip(["mechanism", "epsilon", "N", "K", "d", "seed", "trial", "kl"],
                                            [["kl"], [0.5], [10], [2], [1], [0], [3], [1.5]])}
    yield {"mechanism": np.array([], dtype=object), "epsilon": np.array([]), "N": np.array([], dtype=np.int64),
           "K": np.array([], dtype=np.int64), "d": np.array([], dtype=np.int64), "seed": np.array([], dtype=np.int64),
           "trial": np.array([], dtype=np.int64), "kl": np.array([])}
    # a custom trial function's columns of other types take the row-by-row path
    yield {"mechanism": np.array(["kl", "kl"], dtype=object), "epsilon": np.array([1.0, 1.0]), "N": np.array([5, 5]),
           "K": np.array([2, 2]), "d": np.array([1, 1]), "seed": np.array([0, 0]), "trial": np.array([0, 1]),
           "kl": np.array([1, 2])}


@pytest.mark.parametrize("case", range(5))
def test_chunk_csv_is_byte_for_byte_what_csv_writer_writes(case):
    """The chunk writer formats each run's shared fields once; its bytes equal csv.writer's row by row, quoting,
    non-finite values, subnormals and float text included."""
    import io

    from torchdpgmm.sweep import _write_csv
    cols = list(_csv_cases())[case]
    buf = io.StringIO(newline="")
    _write_csv(buf, cols)
    assert buf.getvalue() == _csv_reference(cols)


def test_results_csv_is_the_header_then_each_chunk_body(tmp_path):
    """results.csv is one header followed by every chunk file's rows in plan order, byte for byte."""
    spec = SweepSpec(mechanisms=["kl"], epsilons=[0.5, 2.0], Ns=[40], Ks=[2], ds=[2], trials=12, block_size=4,
                     chunk_size=2, mode="sound", clip_bound=5.0, seed=1)
    out = tmp_path / "s"
    run_sweep(spec, out, progress=False)
    chunks = sorted((out / "chunks").glob("*.csv"))
    assert len(chunks) >= 2
    body = b"".join(p.read_bytes().split(b"\r\n", 1)[1] for p in chunks)
    header = chunks[0].read_bytes().split(b"\r\n", 1)[0] + b"\r\n"
    assert (out / "results.csv").read_bytes() == header + body
