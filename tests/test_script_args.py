"""Bad command-line arguments of the benchmarks and scripts: one line naming the flag, exit status 2, nothing written.

Each case runs the script as a user would (``python benchmarks/x.py ...`` from the repository root, a fresh
process) with one bad argument; ``$B`` is a fresh empty folder of the case. The refusal must come from the
argument checks (argparse's ``error``: exit status 2), its last line on stderr must name the offending flag or
value, there must be no traceback, and the folder must still be empty (no output file or folder made). The
processes of the review's list run two at a time (most import torch first, about a second each); the other checks
added with them run in this process (``main(argv)``), where torch is imported already.
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
GPU = torch.cuda.is_available()

#: (id, command line with $B for the case's empty folder, text the last line of stderr must hold)
CASES = [
    # the review's list
    ("c1", "benchmarks/bench_calibration.py --repeats 0 --quick --out $B/c1/o.json", "--repeats"),
    ("c2", "benchmarks/bench_calibration.py --repeats abc --out $B/c2/o.json", "--repeats"),
    ("c3", "benchmarks/bench_em.py --smoke --N -5 --out $B/c3/o.json", "--N"),
    ("c4", "scripts/trace_algorithm1.py --trials 0 --out $B/c4/o.json", "--trials"),
    ("c5", "scripts/mostly_noise_frequency.py --epsilons abc --draws 1 --out $B/c5/o.json", "--epsilons"),
    ("c6", "scripts/mostly_noise_frequency.py --tables nosuch --draws 1 --out $B/c6/o.json", "nosuch"),
    ("c7", "scripts/budget_composition.py --out /proc/nope/x.json", "--out"),
    ("c8", "benchmarks/bench_jacobi.py --dims abc --out $B/c8/o.json", "--dims"),
    ("c9", "benchmarks/bench_syncs.py --device cuda --quick --out $B/c9/o.json", "--device"),
    ("c10", "benchmarks/bench_discrete.py --device nosuch --quick --out $B/c10/o.json", "--device"),
    ("c11", "benchmarks/bench_fig2.py --trials 0 --out $B/c11/o.json", "--trials"),
    ("c12", "benchmarks/bench_sdp.py --quick --repeats 0 --out $B/c12/o.json", "--repeats"),
    ("c13", "benchmarks/bench_gibbs.py --repeats 0 --out $B/c13/o.json", "--repeats"),
    ("c14", "benchmarks/bench_startup.py --baseline nosuchrev --rounds 1 --out $B/c14/o.json", "--baseline"),
    ("c15", "benchmarks/bench_sweep_memory.py --quick --small 0 --out $B/c15/o.json", "--small"),
    ("c16", "benchmarks/bench_tabular_release.py --quick --repeats 0 --out $B/c16/o.json", "--repeats"),
    ("c17", "scripts/replot_synthetic.py --out $B/c17/png --studies fig9", "fig9"),
    ("c18", "scripts/privacy_doc.py --audit /nonexistent.json --doc $B/c18/x.md", "--audit"),
    ("c19", "benchmarks/bench_sweep_gpu.py --quick --device nosuch --out $B/c19/o.json", "--device"),
    ("c21", "benchmarks/bench_scale.py --quick --threads 0 --out $B/c21/o.json", "--threads"),
    ("c22", "scripts/split_stability.py --tables nosuch --splits 1 --draws 1 --out $B/c22/o.json", "--splits"),
    ("c23", "scripts/calibration_facts.py --out /dev/null/x", "--out"),
    ("c24", "scripts/sound_joint_factor.py --out /proc/nope/x.json", "--out"),
    ("c26", "benchmarks/bench_em.py --smoke --datasets nosuch --out $B/c26/o.json", "--datasets"),
    ("c27", "scripts/synth_release_timing.py --repeats 0 --out $B/c27/o", "--repeats"),
    ("c28", "scripts/tabular_tables.py --check --results /nonexistent", "--results"),
]
_NEEDS_NO_GPU = {"c9"}  # on a machine with a GPU these are valid runs


def _run(cmd: str, folder: Path) -> subprocess.CompletedProcess:
    argv = [a.replace("$B", str(folder)) for a in cmd.split()]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Run the selected cases, two processes at a time: {id: (completed process, its $B folder)}."""
    selected = {item.callspec.params["case"][0] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    todo = [(cid, cmd) for cid, cmd, _ in CASES if cid in selected and not (GPU and cid in _NEEDS_NO_GPU)]
    folders = {cid: tmp_path_factory.mktemp(cid) for cid, _ in todo}
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {cid: pool.submit(_run, cmd, folders[cid]) for cid, cmd in todo}
        return {cid: (f.result(), folders[cid]) for cid, f in done.items()}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_one_line_exit_2_nothing_written(case, results):
    cid, cmd, names = case
    if GPU and cid in _NEEDS_NO_GPU:
        pytest.skip("a CUDA device is present: --device cuda is valid here")
    done, folder = results[cid]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, f"{cmd}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines and names in lines[-1], f"{cmd}: last line {lines[-1:]!r} does not name {names!r}"
    assert " error: " in lines[-1], lines[-1]
    assert not list(folder.iterdir()), f"{cmd} left {sorted(p.name for p in folder.rglob('*'))}"
    assert done.stdout == "", f"{cmd} printed {done.stdout[:500]!r}"


#: (id, script, argv with $B, text the message must hold): the other checks, called in this process
IN_PROCESS = [
    ("tables", "scripts/split_stability.py", "--tables nosuch --splits 2 --draws 1 --out $B/o.json", "nosuch"),
    ("baseline", "benchmarks/bench_gibbs.py", "--baseline nosuchrev --repeats 1 --out $B/o.json", "--baseline"),
    ("no-gpu", "benchmarks/bench_sweep_gpu.py", "--quick --device cuda --out $B/o.json", "--device"),
    ("too-few-rows", "scripts/trace_algorithm1.py", "--trials 1 --N 5 --out $B/o.json", "--N"),
    ("sizes", "benchmarks/bench_sdp.py", "--quick --sizes 3x --out $B/o.json", "--sizes"),
    ("no-results", "scripts/replot_synthetic.py", "--out $B/png --results $B/none --studies fig2", "--results"),
    ("quick-default-out", "benchmarks/bench_fig2.py", "--quick", "--quick"),
    ("out-is-folder", "benchmarks/bench_em.py", "--smoke --out $B", "--out"),
    ("draws", "scripts/mostly_noise_frequency.py", "--draws 0 --out $B/o.json", "--draws"),
    ("out-folder-under-file", "scripts/synth_release_timing.py", "--out /dev/null/x", "--out"),
    ("doc", "scripts/tabular_tables.py", "--check --doc $B/none.md", "--doc"),
    ("dims", "benchmarks/bench_jacobi.py", "--dims 3,0 --out $B/o.json", "--dims"),
]


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c[0] for c in IN_PROCESS])
def test_other_checks_in_process(case, tmp_path, capsys, load_script):
    cid, script, cmd, names = case
    if GPU and cid == "no-gpu":
        pytest.skip("a CUDA device is present: --device cuda is valid here")
    mod = load_script(script)
    with pytest.raises(SystemExit) as e:
        mod.main([a.replace("$B", str(tmp_path)) for a in cmd.split()])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err and names in err[-1] and " error: " in err[-1], (e.value.code, err[-1:])
    assert not list(tmp_path.iterdir())


def test_quick_needs_its_own_out(tmp_path, monkeypatch, load_script):
    """benchmarks/_args.check_quick_out, the one rule of every --quick: refused at the parser's default --out (however
    spelled) or, where the default is None, without --out; any other path, or no --quick, passes."""
    import argparse

    args = load_script("benchmarks/_args.py")
    monkeypatch.chdir(tmp_path)
    for default, bad, good in ((Path("results/b.json"), ["results/b.json", "./results/../results/b.json"], "o.json"),
                               (None, [None], "o.json")):
        ap = argparse.ArgumentParser(prog="b")
        ap.add_argument("--out", default=default)
        for out in bad:
            with pytest.raises(SystemExit) as e:
                args.check_quick_out(ap, True, out)
            assert e.value.code == 2
        args.check_quick_out(ap, True, good)
        args.check_quick_out(ap, False, default)
