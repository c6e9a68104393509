"""Every fenced ```python and ```bash block of README.md (and the ```python blocks of docs/usage.md, every
block of docs/tables.md) runs verbatim, each in a fresh process in an empty folder, with the small sizes the README documents beside
the blocks (``TRIALS``).

Two blocks are not run here, by rule: the install block (``python3 -m venv ...``; it needs the network
or a local wheel cache and minutes: set ``TORCHDPGMM_README_INSTALL=1`` to run it too; CI's ``.ci/run``
performs the same install) and the test command itself (``python -m pytest -q``, which is this suite).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # one fresh process per block (about 15 s of CPU in all)

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"TRIALS": "3"}


def fenced_blocks(path: Path, languages=("python", "bash")) -> list[tuple[str, str]]:
    text = path.read_text()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)
            if m.group(1) in languages]


def _blocks():
    out = []
    pages = (("README.md", ("python", "bash")), ("docs/usage.md", ("python",)), ("docs/tables.md", ("python", "bash")))
    for page, langs in pages:
        for i, (lang, code) in enumerate(fenced_blocks(ROOT / page, langs)):
            out.append(pytest.param(lang, code, id=f"{page}:{i}:{lang}"))
    return out


def _env(tmp_path: Path) -> dict[str, str]:
    """A shell in which ``torchdpgmm`` and ``import torchdpgmm`` are this checkout."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "torchdpgmm"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torchdpgmm.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env.update(SMALL)
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.parametrize("lang, code", _blocks())
def test_readme_block_runs_verbatim(tmp_path, lang, code):
    first = code.strip().splitlines()[0]
    if first.startswith("python3 -m venv") and os.environ.get("TORCHDPGMM_README_INSTALL") != "1":
        pytest.skip("install block: set TORCHDPGMM_README_INSTALL=1 to run it (CI's .ci/run does the same install)")
    if code.strip() == "python -m pytest -q":
        pytest.skip("the test command is this suite itself")
    work = tmp_path / "clone"
    work.mkdir()
    (work / "torchdpgmm").symlink_to(ROOT / "torchdpgmm")  # the README's paths are relative to a clone's root
    env = _env(tmp_path)
    if lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"block failed (exit {r.returncode}):\n{code}\n--- stderr ---\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr

