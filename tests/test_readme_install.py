"""README's install instructions say what is true of the package, not of one machine: the torch requirement it
states is pyproject's, and no machine-specific cap or local wheel folder is presented as a general fact."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Quick start"):text.index("## Use it")]


def test_readme_states_pyprojects_torch_requirement():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = next(d for d in deps if re.match(r"torch\b(?!vision)", d)).replace(" ", "")
    assert f"`{torch_req}`" in _quick_start()
    if not re.search(r"[<=]=?\d|~=", torch_req.split(">=", 1)[-1]):   # no upper pin in pyproject
        assert "no upper pin" in _quick_start()


def test_readme_install_has_no_machine_folklore():
    qs = _quick_start()
    for folklore in ("capped", "local disk", "wheel folder", "this project's machines", "torch==2."):
        assert folklore not in qs, folklore
    # a torch version named outside a generated block must be one that a results JSON records
    prose = re.sub(r"<!-- generated: .*?<!-- /generated -->", " ", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    assert not re.search(r"torch \d+\.\d+", prose)
