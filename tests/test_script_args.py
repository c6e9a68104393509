"""Bad command-line arguments of the benchmarks and scripts: one line naming the flag, exit status 2, nothing written.

Each case runs the script as a user would run ``python benchmarks/x.py ...`` from the repository root, with one bad
argument; ``$B`` is a fresh empty folder of the case. The refusal must come from the argument checks (argparse's
``error``: exit status 2), its last line on stderr must name the offending flag or value, there must be no traceback,
and the folder must still be empty (no output file or folder made).

The scripts run in this process (``runpy.run_path(..., run_name="__main__")``, so the ``if __name__ == "__main__"``
path is the one taken), not in a fresh ``python`` each (most of that cost was importing torch again; none of the
checks is about a fresh process): ``sys.argv`` is the command line, ``sys.path`` the one a fresh ``python
benchmarks/x.py`` would have (the script's folder first, no ``tests/``), the scripts' own helper modules (``_args``)
are imported afresh, the working folder is the repository root, stdout and stderr are captured at the file
descriptors, and a ``SystemExit`` or an exception becomes the exit status a process would have had (an exception:
1, with its traceback on stderr). Whatever the script changes of this process is put back afterwards (sys.argv,
sys.path, sys.modules' script helpers, the environment, the working folder, warnings filters, torch's default dtype,
thread count and random states, numpy's and ``random``'s). An audit hook guards the file system while a script runs:
it refuses to overwrite, remove or rename an existing file outside the case folder (``__pycache__`` aside), and any
file or folder a script makes outside the case folder is removed afterwards and fails the case, so a run cannot
leave anything behind there. A script that does not refuse its argument is stopped after 120 s, as the subprocesses
were (and then fails).
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import runpy
import shutil
import signal
import stat
import subprocess
import sys
import threading
import traceback
import warnings
from pathlib import Path

import numpy as np
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


# --- the file-system guard --------------------------------------------------------------------------------
class _Guard:
    """What a running script did to the file system outside its case folder (``__pycache__`` aside) from its own
    thread (what a subprocess of it writes is not seen): ``made``, the paths it asked to create that did not exist
    (removed afterwards if they do), and ``refused``, the existing files it tried to overwrite, remove or rename
    (refused with PermissionError before they are touched; in what it made itself it may do anything)."""

    def __init__(self, folder: Path):
        self.folder = os.path.realpath(folder)
        self.thread = threading.get_ident()  # the script's thread: Ray's or anyone else's are not watched
        self.made: list[str] = []
        self.refused: list[str] = []

    def _outside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return (os.path.commonpath([real, self.folder]) != self.folder
                and "__pycache__" not in Path(real).parts)

    def create(self, path: str) -> None:
        if not self._outside(path) or self._made_here(path):
            return
        try:
            st = os.lstat(path)
        except OSError:
            self.made.append(os.path.abspath(path))  # new: may be made (the OS decides), removed afterwards
            return
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            self.refused.append(path)  # an existing file (a device such as /dev/null, or a folder, is no file)
            raise PermissionError(13, "refused by the test's file-system guard", path)

    def _made_here(self, path: str) -> bool:
        """``path`` is, or lies in, one this run made (a temporary folder, with whatever its subprocesses wrote)."""
        path = os.path.abspath(path)
        return any(path == m or path.startswith(m + os.sep) for m in self.made)

    def change(self, path: str) -> None:
        if self._outside(path) and not self._made_here(path) and os.path.lexists(path):
            self.refused.append(path)
            raise PermissionError(13, "refused by the test's file-system guard", path)


_GUARD: _Guard | None = None
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: audit event -> ((argument index of a path, argument index of its dir_fd or None, create?), ...)
_EVENTS = {
    "os.mkdir": ((0, 2, True),), "os.symlink": ((1, 2, True),), "os.link": ((1, 3, True),),
    "os.rename": ((0, 2, False), (1, 3, True)), "os.remove": ((0, 1, False),), "os.rmdir": ((0, 1, False),),
    "os.truncate": ((0, None, False),), "os.chmod": ((0, 2, False),), "os.utime": ((0, 3, False),),
    "shutil.rmtree": ((0, 1, False),),
}


def _path(args: tuple, i: int, fd_at: int | None) -> str | None:
    p = args[i]
    if isinstance(p, int) or p is None:
        return None  # a file descriptor: its file was opened (and checked) before
    p = os.fsdecode(p)
    fd = args[fd_at] if fd_at is not None and fd_at < len(args) else None
    if isinstance(fd, int) and fd >= 0 and not os.path.isabs(p):  # -1 or AT_FDCWD: no dir_fd
        p = os.path.join(os.readlink(f"/proc/self/fd/{fd}"), p)
    return p


def _audit(event: str, args: tuple) -> None:
    guard = _GUARD
    if guard is None or threading.get_ident() != guard.thread:
        return
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writes and (p := _path(args, 0, None)) is not None:
            guard.create(p)
    for i, fd_at, create in _EVENTS.get(event, ()):
        if (p := _path(args, i, fd_at)) is not None:
            (guard.create if create else guard.change)(p)



# --- running a script as a process would, in this one --------------------------------------------------------
def _is_helper(module) -> bool:
    """A module of the scripts' own folders (``_args``): imported afresh by each script, as in a fresh process."""
    file = getattr(module, "__file__", None)
    return bool(file) and Path(file).resolve().parent in (ROOT / "benchmarks", ROOT / "scripts")


@pytest.fixture(scope="module")
def fresh_path():
    """``sys.path`` of a fresh ``python`` started as a user (or the old subprocesses) would, with PYTHONPATH = the
    repository root, less its first entry (the script's own folder, set per script); installs the guard's hook."""
    global _HOOKED
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True)
    if not _HOOKED:
        sys.addaudithook(_audit)  # a hook stays for the life of the process: it acts only while _GUARD is set
        _HOOKED = True
    return json.loads(out.stdout)[1:]


_HOOKED = False


@contextlib.contextmanager
def _as_a_process(argv: list[str], fresh_path: list[str]):
    """``argv`` (the script first) as ``sys.argv`` and a fresh process's ``sys.path``, environment and working
    folder; everything the script may change of this process is put back afterwards."""
    script = ROOT / argv[0]
    saved_argv, saved_path, saved_env, saved_cwd = sys.argv, sys.path[:], dict(os.environ), os.getcwd()
    helpers = {n: m for n, m in list(sys.modules.items()) if _is_helper(m)}
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    rng = torch.random.get_rng_state(), np.random.get_state(), random.getstate()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    for n in helpers:
        del sys.modules[n]
    sys.argv = [str(script), *argv[1:]]
    sys.path[:] = [str(script.parent), *fresh_path]
    os.environ.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    os.chdir(ROOT)
    try:
        with warnings.catch_warnings():
            yield script
    finally:
        os.chdir(saved_cwd)
        for k in set(os.environ) - set(saved_env):
            del os.environ[k]
        os.environ.update(saved_env)
        sys.argv, sys.path[:] = saved_argv, saved_path
        for n in [n for n, m in list(sys.modules.items()) if _is_helper(m)]:
            del sys.modules[n]
        sys.modules.update(helpers)
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)


class _TimedOut(Exception):
    pass


def _timed_out(signum, frame):
    raise _TimedOut(f"still running after {TIMEOUT} s: the argument was not refused before the work")


TIMEOUT = 120  # s, as the subprocesses had: a script that does not refuse may start its whole run


def _run(cmd: str, folder: Path, fresh_path: list[str], capfd) -> subprocess.CompletedProcess:
    """``python cmd`` (``$B``: ``folder``), run in this process: its exit status, stdout and stderr."""
    global _GUARD
    argv = [a.replace("$B", str(folder)) for a in cmd.split()]
    capfd.readouterr()
    code, tb = 0, ""
    with _as_a_process(argv, fresh_path) as script:
        guard = _GUARD = _Guard(folder)
        alarm = signal.signal(signal.SIGALRM, _timed_out)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:  # as the interpreter turns it into an exit status
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            tb = "" if e.code is None or isinstance(e.code, int) else f"{e.code}\n"
        except Exception:
            code, tb = 1, traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
            _GUARD = None
    out, err = capfd.readouterr()
    left = [p for p in reversed(guard.made) if os.path.lexists(p)]
    for p in left:  # nothing stays outside the case folder, and the case fails
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    assert not left and not guard.refused, f"{cmd}: made {left}, tried to change {guard.refused} outside {folder}"
    return subprocess.CompletedProcess(argv, code, out, err + tb)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_one_line_exit_2_nothing_written(case, tmp_path, fresh_path, capfd):
    cid, cmd, names = case
    if GPU and cid in _NEEDS_NO_GPU:
        pytest.skip("a CUDA device is present: --device cuda is valid here")
    folder = tmp_path / cid
    folder.mkdir()
    done = _run(cmd, folder, fresh_path, capfd)
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
