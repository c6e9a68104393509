"""The sweep engine: deterministic chunk seeds, resumable storage, identical local and Ray results."""
import json

import pytest
import torch

from torchdpgmm.sweep import SweepSpec, load_results, plan_chunks, run_sweep


def fake_trials(spec, chunk):
    """A stand-in for a release: rows derived only from the chunk's seeds (module level so Ray can ship it)."""
    g = torch.Generator().manual_seed(chunk.noise_seed)
    gd = torch.Generator().manual_seed(chunk.data_seed)
    v = torch.rand(chunk.num_trials, generator=g, dtype=torch.float64) + torch.rand(chunk.num_trials, generator=gd, dtype=torch.float64)
    return [{"mechanism": chunk.mechanism, "epsilon": chunk.epsilon, "N": chunk.N, "K": chunk.K, "d": chunk.d,
             "seed": spec.seed, "chunk": chunk.index, "trial": chunk.first_trial + i, "kl": float(x) / chunk.epsilon}
            for i, x in enumerate(v)]


class Killed(Exception):
    pass


def _spec(**kw):
    base = dict(mechanisms=["kl", "gaussian"], epsilons=[0.5, 1.0], Ns=[50], Ks=[2], ds=[2], trials=7, chunk_size=3)
    base.update(kw)
    return SweepSpec(**base)


def test_plan_is_content_seeded():
    a = plan_chunks(_spec())
    assert len(a) == 2 * 2 * 3
    assert sum(c.num_trials for c in a) == 2 * 2 * 7
    # data seeds are shared across mechanisms and epsilons (common random numbers), noise seeds are not
    by_id = {(c.mechanism, c.epsilon, c.index): c for c in a}
    assert by_id[("kl", 0.5, 1)].data_seed == by_id[("gaussian", 1.0, 1)].data_seed
    assert by_id[("kl", 0.5, 1)].noise_seed != by_id[("gaussian", 0.5, 1)].noise_seed
    # adding a grid value does not change the seeds of existing chunks
    b = {(c.mechanism, c.epsilon, c.index): c for c in plan_chunks(_spec(epsilons=[0.5, 1.0, 2.0]))}
    assert all(b[k] == v for k, v in by_id.items())


def test_resume_skips_finished_chunks(tmp_path):
    spec = _spec()
    run_sweep(spec, tmp_path / "full", trial_fn=fake_trials, progress=False)
    calls = []

    kill = [True]

    def counting(spec, chunk):
        calls.append(chunk.id)
        if kill[0] and len(calls) == 5:
            raise Killed("simulated kill after 4 finished chunks")
        return fake_trials(spec, chunk)

    with pytest.raises(Killed):
        run_sweep(spec, tmp_path / "part", trial_fn=counting, progress=False)
    assert len(list((tmp_path / "part" / "chunks").glob("*.csv"))) == 4
    with pytest.raises(ValueError, match="--resume"):
        run_sweep(spec, tmp_path / "part", trial_fn=fake_trials, progress=False)
    calls.clear()
    kill[0] = False
    res = run_sweep(spec, tmp_path / "part", trial_fn=counting, resume=True, progress=False)
    assert res["skipped"] == 4 and len(calls) == 12 - 4
    assert (tmp_path / "part" / "results.csv").read_text() == (tmp_path / "full" / "results.csv").read_text()
    assert len(load_results(tmp_path / "part")) == 28
    summary = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert len(summary["points"]) == 4 and all(p["trials"] == 7 for p in summary["points"])
    assert (tmp_path / "part" / "sweep.png").stat().st_size > 0


def test_refuses_a_different_sweep_in_the_same_folder(tmp_path):
    run_sweep(_spec(), tmp_path, trial_fn=fake_trials, progress=False)
    with pytest.raises(ValueError, match="different sweep"):
        run_sweep(_spec(trials=8), tmp_path, trial_fn=fake_trials, resume=True, progress=False)


@pytest.mark.parametrize("bad", [dict(epsilons=[0.0]), dict(Ks=[1]), dict(trials=0), dict(delta=1.0), dict(mechanisms=[])])
def test_spec_validation(bad, tmp_path):
    with pytest.raises(ValueError):
        run_sweep(_spec(**bad), tmp_path, trial_fn=fake_trials, progress=False)


def test_ray_backend_matches_local(tmp_path):
    ray = pytest.importorskip("ray")
    import sys

    # this test module is not importable on Ray's workers: ship fake_trials by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spec = _spec(mechanisms=["kl"], epsilons=[1.0], trials=6, chunk_size=2)
    run_sweep(spec, tmp_path / "local", trial_fn=fake_trials, progress=False)
    run_sweep(spec, tmp_path / "ray", backend="ray", trial_fn=fake_trials, progress=False)
    assert (tmp_path / "ray" / "results.csv").read_text() == (tmp_path / "local" / "results.csv").read_text()
