import importlib.util
import os
import shutil
import tempfile
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


# --- Ray leaves no state behind -------------------------------------------------------------------------
# A new local Ray cluster (Ray >= 2.5x) turns on token auth and writes ~/.ray/auth_token, after which a
# user's own `ray start --head` runs with token auth; its session files go to /tmp/ray. For the whole test
# session Ray gets its own temporary folder and token auth off (subprocesses inherit both), and the session
# fails if ~/.ray/auth_token appeared anyway.
_RAY_ENV = ("RAY_TMPDIR", "RAY_AUTH_MODE")
_ray_state: dict = {}


def _auth_token() -> Path:
    return Path(os.path.expanduser("~")) / ".ray" / "auth_token"


def pytest_sessionstart(session):
    _ray_state["token_before"] = _auth_token().exists()
    _ray_state["env"] = {k: os.environ.get(k) for k in _RAY_ENV}
    _ray_state["tmp"] = tempfile.mkdtemp(prefix="ray")   # short: Ray's socket paths must stay < ~107 bytes
    os.environ["RAY_TMPDIR"] = _ray_state["tmp"]
    os.environ["RAY_AUTH_MODE"] = "disabled"


def pytest_sessionfinish(session, exitstatus):
    if "env" not in _ray_state:
        return
    for k, v in _ray_state["env"].items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(_ray_state["tmp"], ignore_errors=True)
    if not _ray_state["token_before"] and _auth_token().exists():
        print(f"\nERROR: the tests left {_auth_token()} (Ray token auth state outside the tmp folders)")
        session.exitstatus = 1


@pytest.fixture
def ray_sandbox(monkeypatch):
    """Ray in a throw-away HOME (where Ray writes ``~/.ray/auth_token``) and RAY_TMPDIR, token auth off;
    removed afterwards."""
    root = tempfile.mkdtemp(prefix="ray")
    monkeypatch.setenv("HOME", root)
    monkeypatch.setenv("RAY_TMPDIR", root)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    yield root
    shutil.rmtree(root, ignore_errors=True)
