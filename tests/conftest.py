import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

# One intra-op thread for every test: the batched ops here are small, and on a 2-core machine that is
# shared (CI, or a developer running other jobs) extra threads slow them down by up to ~100x.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Restore the single-thread setting after tests (or the code they call) change it."""
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def load_script():
    """``load_script("scripts/x.py")``: a committed script or benchmark, imported by path (they are not a
    package); a fresh module on every call."""
    def load(relpath: str):
        path = ROOT / relpath
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load


@pytest.fixture
def gen():
    g = torch.Generator()
    g.manual_seed(1234)
    return g


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device present")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
