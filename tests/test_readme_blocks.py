"""Every fenced ```python and ```bash block of README.md (and the ```python blocks of docs/usage.md, every
such block of the task pages docs/tables.md, docs/synthetic-data.md, docs/montecarlo.md, docs/audit.md and
docs/budget.md) runs verbatim, each in a fresh process in an empty folder, with the small sizes the pages
document beside the blocks (``TRIALS=3``, ``DRAWS=4000``, and ``IMAGES``: a small stand-in folder of random
28x28 images in MNIST's IDX layout, written here, for the image page). Fences without a language (long
commands whose page says they are long) are not run. The blocks are independent: they run two processes at a
time (each still a fresh process in its own empty folder), and each test asserts on its own block's result.

Two blocks are not run here, by rule: the install block (``python3 -m venv ...``; it needs the network
or a local wheel cache and minutes: set ``TORCHDPGMM_README_INSTALL=1`` to run it too; CI's ``.ci/run``
performs the same install) and the test command itself (``python -m pytest -q``, which is this suite).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # one fresh process per block (about 100 s of CPU in all, run two at a time)

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"TRIALS": "3", "DRAWS": "4000"}
PAGES = (("README.md", ("python", "bash")), ("docs/usage.md", ("python",)), ("docs/tables.md", ("python", "bash")),
         ("docs/synthetic-data.md", ("python", "bash")), ("docs/montecarlo.md", ("python", "bash")),
         ("docs/audit.md", ("python", "bash")), ("docs/budget.md", ("python", "bash")))


def fenced_blocks(path: Path, languages=("python", "bash")) -> list[tuple[str, str]]:
    text = path.read_text()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)
            if m.group(1) in languages]


def _blocks():
    out = []
    for page, langs in PAGES:
        for i, (lang, code) in enumerate(fenced_blocks(ROOT / page, langs)):
            out.append(pytest.param(lang, code, id=f"{page}:{i}:{lang}"))
    return out


def _stand_in_images(folder: Path) -> Path:
    """A small folder in MNIST's IDX layout (600 train, 200 test images of 10 noisy class prototypes)."""
    import torch

    from torchdpgmm.data import write_idx

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    proto = torch.rand(10, 28, 28, generator=g)
    for split, n in (("train", 600), ("t10k", 200)):
        y = torch.randint(0, 10, (n,), generator=g)
        x = (0.7 * proto[y] + 0.3 * torch.rand(n, 28, 28, generator=g)) * 255
        write_idx(folder / f"{split}-images-idx3-ubyte", x.to(torch.uint8))
        write_idx(folder / f"{split}-labels-idx1-ubyte", y.to(torch.uint8))
    return folder


def _env(folder: Path) -> dict[str, str]:
    """A shell in which ``torchdpgmm`` and ``import torchdpgmm`` are this checkout (its shim and the stand-in
    image folder are written under ``folder``, once per module: the blocks only read them)."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "torchdpgmm"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torchdpgmm.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env.update(SMALL)
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env["IMAGES"] = str(_stand_in_images(folder / "images"))
    return env


def _skip_reason(code: str) -> str | None:
    first = code.strip().splitlines()[0]
    if first.startswith("python3 -m venv") and os.environ.get("TORCHDPGMM_README_INSTALL") != "1":
        return "install block: set TORCHDPGMM_README_INSTALL=1 to run it (CI's .ci/run does the same install)"
    if code.strip().startswith("python -m pytest -q"):
        return "the test command is this suite itself"
    return None


def _run_block(lang: str, code: str, folder: Path, env: dict[str, str]):
    """Run one block verbatim in a fresh process, in the empty folder ``folder/clone``: the completed process, or
    the TimeoutExpired (so that only this block's test fails)."""
    work = folder / "clone"
    work.mkdir()
    (work / "torchdpgmm").symlink_to(ROOT / "torchdpgmm")  # the README's paths are relative to a clone's root
    if lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    try:
        return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return e


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Run the selected blocks, each in its own fresh process and empty folder, two processes at a time (the
    blocks are independent; most of each one's time is its processes importing torch): {test id: result}.
    Bash blocks (several processes each) go first, so that the two workers finish close together."""
    selected = {item.callspec.id for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    todo = [(p.id, *p.values) for p in _blocks() if p.id in selected and _skip_reason(p.values[1]) is None]
    todo.sort(key=lambda t: t[1] != "bash")
    env = _env(tmp_path_factory.mktemp("readme_env"))
    folders = {bid: tmp_path_factory.mktemp("block") for bid, _, _ in todo}
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {bid: pool.submit(_run_block, lang, code, folders[bid], env) for bid, lang, code in todo}
        return {bid: f.result() for bid, f in done.items()}


@pytest.mark.parametrize("lang, code", _blocks())
def test_readme_block_runs_verbatim(request, lang, code):
    reason = _skip_reason(code)
    if reason:
        pytest.skip(reason)
    r = request.getfixturevalue("results")[request.node.callspec.id]
    assert not isinstance(r, subprocess.TimeoutExpired), f"block ran past {r.timeout} s:\n{code}"
    assert r.returncode == 0, f"block failed (exit {r.returncode}):\n{code}\n--- stderr ---\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr


def test_every_task_page_block_is_collected():
    """The task pages hold runnable blocks, and none is written with a language this test would skip."""
    for page in ("docs/synthetic-data.md", "docs/montecarlo.md", "docs/audit.md", "docs/budget.md"):
        text = (ROOT / page).read_text()
        langs = re.findall(r"^```(\w+)\n", text, re.M)
        assert langs and set(langs) <= {"python", "bash"}, (page, langs)



def test_ci_runs_exactly_the_readme_test_command_and_its_timing_times_it():
    """README's test command (the block this file does not run), .ci/run's and the one scripts/readme_timings.py
    --suite times are the same line."""
    import importlib.util

    readme = [code.strip() for _, code in fenced_blocks(ROOT / "README.md", ("bash",))
              if code.strip().startswith("python -m pytest")]
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip().startswith("python -m pytest")]
    spec = importlib.util.spec_from_file_location("readme_timings", ROOT / "scripts" / "readme_timings.py")
    timings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timings)
    assert len(readme) == 1 and ci == readme and " ".join(["python", *timings.SUITE_ARGS]) == readme[0]
