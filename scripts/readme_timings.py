"""Time README's main study and its test command as a user runs them, and write each timing with the
machine's load beside it.

    python scripts/readme_timings.py            # time the fig2 study (about a minute), write the JSON, README
    python scripts/readme_timings.py --suite    # time README's test command once (minutes), JSON, README
    python scripts/readme_timings.py --render   # rewrite README's blocks from the committed JSON, no timing
    python scripts/readme_timings.py --check    # exit 1 if README's blocks differ from the JSON (tests)

``--suite`` refuses to time when the 1-minute load average is above ``--max-load`` (default: the number of
usable cores), since the time would then mostly measure other jobs; the JSON keeps the other timing as it
was. A suite that fails is not recorded.

The timed command is README's Quick-start command at README's default size, in a fresh process:
``torchdpgmm experiment fig2 --trials 100 --out TMP`` (``python -m torchdpgmm.cli ...``), so the time
includes start-up and imports, as a user sees it. On a small shared machine the wall time depends on what
else runs, so the JSON records, beside it, the 1/5/15-minute load averages before and after, the number of
cores (``os.cpu_count()`` and the cores this process may use), torch's thread count, the CPU time of the
child process and the versions. README quotes the wall time together with the core count and the load.

The JSON goes to ``benchmarks/results/readme-timings.json`` (README's sources for quoted numbers are the
files under ``benchmarks/results/``, see ``tests/test_docs_numbers.py``); README's text between
``<!-- generated: readme-timings -->`` and ``<!-- /generated -->`` is rendered from it by :func:`render`, the text
of ``<!-- generated: readme-timings-suite -->`` (below README's test command) from its ``test_suite`` record by
:func:`render_suite` (a sentence saying how to measure it while there is none).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JSON_PATH = ROOT / "benchmarks" / "results" / "readme-timings.json"
README = ROOT / "README.md"
BLOCK = "readme-timings"
SUITE_BLOCK = "readme-timings-suite"
#: README's test command (and .ci/run's), after ``python``
SUITE_ARGS = ["-m", "pytest", "-q", "-n", "2", "--dist", "loadfile"]
SUITE_COMMAND = [sys.executable, *SUITE_ARGS]
#: README's Quick-start default (the study's default trials)
README_TRIALS = 100


def _load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return None


def time_fig2(trials: int = README_TRIALS, quick: bool = False) -> dict:
    """Run README's fig2 command once in a fresh process and return the timing record (no file written)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torchdpgmm.cli", "experiment", "fig2", "--trials", str(trials), "--out", tmp]
        if quick:
            cmd.append("--quick")
        load_before = _load_average()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                              text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = _load_average()
        if proc.returncode != 0:
            raise SystemExit(f"the timed command failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        study = json.loads((Path(tmp) / "fig2.json").read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    c = study["config"]
    return {
        "command": f"torchdpgmm experiment fig2 --trials {trials} --out results" + (" --quick" if quick else ""),
        "trials": trials,
        "quick": quick,
        # what the timed study ran, read from its own JSON (the seed and device are the command's defaults)
        "study_config": {k: c.get(k) for k in ("seed", "device", "backend", "trials", "epsilons", "mechanisms", "n",
                                               "k", "d", "delta")},
        "commit": _commit(),
        # the thread setting the timed process inherited (unset: torch's default, one thread per core)
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "wall_seconds": round(wall, 1),
        "child_cpu_seconds": round(cpu, 1),
        "study_runtime_seconds": round(float(study["runtime_seconds"]), 1),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "cpu_count": os.cpu_count(),
        "usable_cores": _usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "measured_at_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _commit() -> str | None:
    """The short hash of the checked-out commit (with ``+dirty`` when tracked files differ), or None outside git:
    :func:`torchdpgmm._provenance.commit` of this checkout."""
    from torchdpgmm._provenance import commit

    return commit(ROOT)


def time_suite(root: Path = ROOT) -> dict:
    """Run README's test command once in ``root`` (a fresh process) and return its timing record."""
    load_before = _load_average()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(SUITE_COMMAND, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = _load_average()
    tail = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
    summary = tail[-1].strip("= ") if tail else ""
    if proc.returncode != 0:
        raise SystemExit(f"the test suite failed (exit {proc.returncode}), not recorded: {summary}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": " ".join(["python", *SUITE_ARGS]), "summary": summary, "wall_seconds": round(wall, 1),
            "child_cpu_seconds": round(cpu, 1), "load_average_before": load_before,
            "load_average_after": load_after, "cpu_count": os.cpu_count(), "usable_cores": _usable_cores(),
            "python": platform.python_version(), "machine": platform.machine(), "torch": _torch_version(),
            "commit": _commit(),
            "measured_at_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _torch_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - a missing distribution: the record says so
        return None


def _load_text(rec: dict) -> str:
    lb, la = rec.get("load_average_before"), rec.get("load_average_after")
    return "unknown load" if not lb else (
        f"1-minute load average {lb[0]:.2f} before and {la[0]:.2f} after" if la else
        f"1-minute load average {lb[0]:.2f}")


def _when_where(rec: dict) -> str:
    """``2026-11-26 04:25 UTC, commit abc1234, on 2 CPU cores (x86_64, Python 3.11.7, torch 2.15.0)``."""
    when = rec["measured_at_utc"].replace("T", " ")[:16] + " UTC"
    cores = rec.get("usable_cores") or rec.get("cpu_count")
    soft = ", ".join(s for s in (rec.get("machine"), rec.get("python") and f"Python {rec['python']}",
                                 rec.get("torch") and f"torch {rec['torch']}") if s)
    commit = f", commit {rec['commit']}" if rec.get("commit") else ""
    return f"{when}{commit}, on {cores} CPU cores" + (f" ({soft})" if soft else "")


def render_suite(rec: dict | None) -> str:
    """README's text below the test command, from the ``test_suite`` record (or how to make one)."""
    if not rec:
        return ("The suite's time is not measured yet: `python scripts/readme_timings.py --suite` runs the "
                "command above once, on a machine whose load is below its core count, and writes the time "
                "here with the load beside it. Expect many minutes on 2 cores.")
    return (f"Measured by `python scripts/readme_timings.py --suite` (written to "
            f"benchmarks/results/readme-timings.json) at {_when_where(rec)}: `{rec['command']}` gave "
            f"\"{rec['summary']}\" and took {rec['wall_seconds']:.0f} s wall ({rec['child_cpu_seconds']:.0f} s of "
            f"CPU) at {_load_text(rec)} (the load counts every process on those cores, ours and other jobs'). "
            f"It grows with the load.")


def _what_ran(c: dict) -> str:
    """``seed 0, device cpu: 100 trials x 7 epsilons (0.1 to 8) x 7 mechanisms, N=1000, K=5, d=3, delta=1e-05``."""
    eps = c["epsilons"]
    return (f"seed {c['seed']}, device {c['device']}: {c['trials']} trials x {len(eps)} epsilons ({min(eps):g} to "
            f"{max(eps):g}) x {len(c['mechanisms'])} mechanisms ({', '.join(c['mechanisms'])}), N={c['n']}, "
            f"K={c['k']}, d={c['d']}, delta={c['delta']:g}")


def render(rec: dict) -> str:
    """README's block (markdown) from one timing record."""
    if "study_config" not in rec:
        raise ValueError("the timing record names no seed, device or grid (written by an older script): "
                         "run python scripts/readme_timings.py")
    return (f"Measured by `python scripts/readme_timings.py` (written to benchmarks/results/readme-timings.json) "
            f"at {_when_where(rec)}: `{rec['command']}` ran {_what_ran(rec['study_config'])}"
            + (f" with OMP_NUM_THREADS={rec['omp_num_threads']}" if rec.get("omp_num_threads") else "")
            + ", and took "
            f"{rec['wall_seconds']:.1f} s wall ({rec['child_cpu_seconds']:.1f} s of CPU) at {_load_text(rec)}. "
            f"The wall time grows with the load (other processes competing for the same cores).")


def rewrite(text: str, name: str, body: str) -> str:
    """Replace the body of ``<!-- generated: name -->`` ... ``<!-- /generated -->`` in ``text`` with
    ``benchmarks/docs_tables.py``'s ``rewrite`` (the one home of that marker format); a missing block is an
    error here (README must carry it)."""
    import importlib.util

    if f"<!-- generated: {name} -->\n" not in text:
        raise ValueError(f"no '<!-- generated: {name} -->' block")
    spec = importlib.util.spec_from_file_location("_docs_tables", ROOT / "benchmarks" / "docs_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.rewrite(text, re.escape(name), body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 if README's block differs from the JSON")
    g.add_argument("--render", action="store_true", help="rewrite README's block from the JSON, no timing")
    p.add_argument("--trials", type=int, default=README_TRIALS, help="trials of the timed study (default 100)")
    p.add_argument("--quick", action="store_true", help="time the --quick study (a smoke run; not for README)")
    p.add_argument("--suite", action="store_true", help="time README's test command instead of the study")
    p.add_argument("--max-load", type=float, default=None,
                   help="with --suite: refuse to time above this 1-minute load (default: usable cores)")
    p.add_argument("--json", type=Path, default=JSON_PATH, help="timing record (default benchmarks/results/...)")
    p.add_argument("--readme", type=Path, default=README)
    a = p.parse_args(argv)
    if a.trials < 1:
        p.error("--trials must be >= 1")
    if a.suite and (a.check or a.render):
        p.error("--suite times the suite; it does not go with --check or --render")
    if not (a.check or a.render):
        old_rec = json.loads(a.json.read_text()) if a.json.exists() else {}
        if a.suite:
            limit = a.max_load if a.max_load is not None else float(_usable_cores() or os.cpu_count() or 1)
            load = _load_average()
            if load and load[0] > limit:
                print(f"1-minute load average {load[0]:.2f} is above {limit:g}: not timing the suite "
                      f"(the time would mostly measure other jobs)", file=sys.stderr)
                return 3
            rec = dict(old_rec, test_suite=time_suite())
        else:
            rec = time_fig2(a.trials, a.quick)
            if "test_suite" in old_rec:
                rec["test_suite"] = old_rec["test_suite"]
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(rec, indent=2) + "\n")
        print(json.dumps(rec, indent=2))
    rec = json.loads(a.json.read_text())
    old = a.readme.read_text()
    new = rewrite(old, BLOCK, render(rec))
    if f"<!-- generated: {SUITE_BLOCK} -->\n" in old or a.readme == README:
        new = rewrite(new, SUITE_BLOCK, render_suite(rec.get("test_suite")))
    if a.check:
        if new != old:
            print(f"{a.readme}: the {BLOCK} block is stale; run: python scripts/readme_timings.py --render",
                  file=sys.stderr)
            return 1
        return 0
    if new != old:
        a.readme.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
