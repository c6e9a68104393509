"""Benchmark: start-up of the ``torchdpgmm`` command (issue 38 item 6: ``--version`` took 2.15 s where
``python -c "import numpy"`` took 0.11 s, because building the parser imported every study and torch).

Each command is run in a fresh process (``python -m torchdpgmm.cli ...``), interleaved round by round with the
same command on a BASELINE tree (``git archive REV torchdpgmm`` unpacked into a temporary folder, imported
through ``PYTHONPATH``) and with ``python -c "import numpy"`` as a yardstick, so that the machine's load (it is
shared) hits all three alike; the 1-minute load average is recorded before and after. Also recorded: whether
the command imported torch (``-X importtime``).

    PYTHONPATH=. python benchmarks/bench_startup.py --baseline a2505e8 --out benchmarks/results/bench_startup.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402  (the command-line checks shared by the benchmarks and scripts)

COMMANDS = {"--version": ["--version"], "--help": ["--help"], "release --help": ["release", "--help"]}


def _run(argv: list[str], root: Path | None) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if root is not None:
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()  # cwd: the tree itself ("python -m" puts the working folder first on sys.path)
    subprocess.run([sys.executable, *argv], env=env, cwd=root or ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def _imports_torch(args: list[str], root: Path) -> bool:
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "torchdpgmm.cli", *args], env=env, cwd=root,
                       capture_output=True, text=True)
    mods = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    where = subprocess.run([sys.executable, "-c", "import torchdpgmm.cli as c; print(c.__file__)"], env=env, cwd=root,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(Path(root).resolve()):
        raise RuntimeError(f"{root}: its torchdpgmm.cli was not the one imported ({where})")
    return "torch" in mods


def _baseline_tree(rev: str, into: Path) -> Path:
    tar = into / "base.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "torchdpgmm"], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / "tree")
    return into / "tree"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="a2505e8", help="git revision to compare with (default a2505e8)")
    ap.add_argument("--rounds", type=_args.whole(1), default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_startup.json")
    args = ap.parse_args(argv)
    _args.check_git_ref(ap, "--baseline", args.baseline)
    _args.check_out(ap, args.out)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    base_rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline], capture_output=True,
                              text=True, check=True).stdout.strip()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        base = _baseline_tree(args.baseline, Path(tmp))
        times: dict[str, list[float]] = {"python -c 'import numpy'": []}
        for name in COMMANDS:
            times[f"{name} (this tree)"], times[f"{name} (baseline)"] = [], []
        for _ in range(args.rounds):
            times["python -c 'import numpy'"].append(_run(["-c", "import numpy"], None))  # a yardstick
            for name, argv in COMMANDS.items():
                times[f"{name} (this tree)"].append(_run(["-m", "torchdpgmm.cli", *argv], ROOT))
                times[f"{name} (baseline)"].append(_run(["-m", "torchdpgmm.cli", *argv], base))
        torch = {f"{name} ({which})": _imports_torch(argv, tree) for name, argv in COMMANDS.items()
                 for which, tree in (("this tree", ROOT), ("baseline", base))}
    payload = {
        "benchmark": "bench_startup", "script": "benchmarks/bench_startup.py", "tree": rev, "baseline": base_rev,
        "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "cpus": os.cpu_count(),
        "rounds": args.rounds, "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
        "median_seconds": {k: statistics.median(v) for k, v in times.items()},
        "min_seconds": {k: min(v) for k, v in times.items()}, "imports_torch": torch,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(json.dumps(payload["median_seconds"], indent=1))


if __name__ == "__main__":
    main()
