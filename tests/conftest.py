import pytest
import torch

# One intra-op thread for every test: the batched ops here are small, and on a 2-core machine that is
# shared (CI, or a developer running other jobs) extra threads slow them down by up to ~100x.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Restore the single-thread setting after tests (or the code they call) change it."""
    yield
    torch.set_num_threads(1)


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
