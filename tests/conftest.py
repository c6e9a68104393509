import pytest
import torch

torch.set_num_threads(min(2, torch.get_num_threads()))


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
