"""torchdpgmm._shapes.broadcast_shapes against torch.broadcast_shapes (the reference), and the start-up it saves."""
from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch

from torchdpgmm._shapes import broadcast_shapes


def test_equals_torch_on_every_small_case():
    sizes = [(), (1,), (3,), (1, 1), (2, 1), (1, 3), (2, 3), (4, 2, 3), (4, 1, 1), (0,), (0, 3), (1, 0)]
    checked = 0
    for a, b, c in itertools.product(sizes, repeat=3):
        try:
            want = torch.broadcast_shapes(a, b, c)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="cannot be broadcast"):
                broadcast_shapes(a, b, c)
            continue
        got = broadcast_shapes(a, b, c)
        assert got == want and isinstance(got, torch.Size), (a, b, c)
        checked += 1
    assert checked > 300 and broadcast_shapes() == torch.broadcast_shapes() == torch.Size([])


def test_a_release_does_not_import_sympy():
    """torch.broadcast_shapes imports sympy on its first call (0.3 s here, 2.7 s on a fresh GPU machine); a
    sound release, the sweep's work, no longer does."""
    code = ("import sys, torch\n"
            "import torchdpgmm.release\n"
            "X = torch.randn(4, 50, 2, dtype=torch.float64); y = torch.arange(50).repeat(4, 1) % 2\n"
            "r = torchdpgmm.release.release(X, y, 2, 1.0, 1e-5, mechanism='kl', mode='sound', clip_bound=5.0,\n"
            "                               generator=torch.Generator().manual_seed(0))\n"
            "print('sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
