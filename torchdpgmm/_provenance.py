"""Where a result came from: the one home of the ``environment`` record that result JSON files carry (the studies,
the sweep's summary, the benchmarks and the scripts that write committed numbers).

``environment()`` names the library and torch versions, Python, the machine, the torch device when given, and the
commit of the checkout the package runs from (``git rev-parse --short HEAD``, with ``+dirty`` when tracked files
differ from it: a number from a dirty tree is not reproducible from its commit alone), or None outside a git
checkout (an installed wheel)."""
from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["commit", "environment"]

_ROOT = Path(__file__).resolve().parents[1]


def commit(root: str | Path | None = None) -> str | None:
    """The short hash of the checkout at ``root`` (default: the package's own), ``+dirty`` when tracked files differ
    from it; None outside git or without a git executable."""
    where = Path(root) if root is not None else _ROOT
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or not head.stdout.strip():
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment(device: Any = None) -> dict[str, Any]:
    """``{"torchdpgmm", "torch", "python", "machine", "commit"}`` and ``"device"`` when one is given (a CUDA device is
    named by its card: ``"cuda:0 (NVIDIA H100 ...)"``)."""
    import torch

    from torchdpgmm import __version__

    env: dict[str, Any] = {"torchdpgmm": __version__, "torch": torch.__version__,
                           "python": platform.python_version(), "machine": platform.machine(), "commit": commit()}
    if device is not None:
        dev = torch.device(device)
        name = str(dev)
        if dev.type == "cuda":
            try:
                name += f" ({torch.cuda.get_device_name(dev)})"
            except (RuntimeError, AssertionError, ValueError):  # no driver (a test's fake CUDA): the name alone
                pass
        env["device"] = name
    return env
