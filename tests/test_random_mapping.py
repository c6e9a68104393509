import itertools
import math

import numpy as np
import pytest
import torch
from scipy.special import comb

from torchdpgmm.mechanisms import mapping as rm


def _compositions(n, K):
    """Brute-force enumeration of S (compositions of n into K positive parts)."""
    for cuts in itertools.combinations(range(1, n), K - 1):
        edges = (0,) + cuts + (n,)
        yield tuple(edges[i + 1] - edges[i] for i in range(K))


def test_neighbours_are_label_flips():
    c = torch.tensor([3, 4, 5])
    nb = rm.neighbour_counts(c)
    assert nb.shape == (6, 3)
    assert len({tuple(r) for r in nb.tolist()}) == 6
    diff = nb - c
    assert torch.all(diff.abs().sum(-1) == 2) and torch.all((diff != 0).sum(-1) == 2)
    assert torch.all(nb.sum(-1) == 12)


@pytest.mark.parametrize("n,K,eps0,lam", [(8, 3, 0.7, 1e-3), (7, 2, 2.0, 0.1), (9, 4, 0.3, 0.5)])
def test_full_pmf_sums_to_one_over_enumerated_S(n, K, eps0, lam):
    S = list(_compositions(n, K))
    assert len(S) == comb(n - 1, K - 1, exact=True)
    counts = torch.tensor([2] * (K - 1) + [n - 2 * (K - 1)])
    released = torch.tensor(S)
    logp = rm.log_pmf(released, counts, eps0, lam)
    assert math.isclose(logp.exp().sum().item(), 1.0, rel_tol=1e-12)
    # ratio of the favoured entry to a neighbour is exactly e^eps0 inside the f' part
    probs = rm.mapping_pmf(counts, eps0)
    assert math.isclose(probs.sum().item(), 1.0, rel_tol=1e-12)
    assert math.isclose((probs[0] / probs[1]).item(), math.exp(eps0), rel_tol=1e-12)


def test_uniform_composition_is_uniform(gen):
    n, K = 7, 3
    S = list(_compositions(n, K))
    draws = rm.uniform_composition(torch.full((60000,), n), K, gen)
    assert torch.all(draws >= 1) and torch.all(draws.sum(-1) == n)
    keys = [tuple(r) for r in draws.tolist()]
    freq = np.array([keys.count(s) for s in S]) / len(keys)
    expected = 1 / len(S)
    assert np.all(np.abs(freq - expected) < 5 * math.sqrt(expected / len(keys)))


def test_uniform_composition_ragged_batch(gen):
    n = torch.tensor([5, 1000, 37])
    out = rm.uniform_composition(n.expand(200, 3), 4, gen)
    assert torch.all(out.sum(-1) == n) and torch.all(out >= 1)


def test_random_mapping_outputs_lie_in_S_and_follow_pmf(gen):
    counts = torch.tensor([20, 30, 50])
    T = 50000
    out = rm.random_mapping(counts.expand(T, 3), 1.0, lam=0.2, generator=gen)
    assert torch.all(out >= 1) and torch.all(out.sum(-1) == 100)
    support = rm.mapping_support(counts)
    hit_true = (out == counts).all(-1).double().mean().item()
    # P(out = pi) = (1-lam) f'(pi|pi) + lam/|S|
    expected = 0.8 * rm.mapping_pmf(counts, 1.0)[0].item() + 0.2 / comb(99, 2)
    assert abs(hit_true - expected) < 5 * math.sqrt(expected * (1 - expected) / T)
    in_block = (out.unsqueeze(-2) == support).all(-1).any(-1).double().mean().item()
    p_block = 0.8 + 0.2 * 7 / comb(99, 2)
    assert abs(in_block - p_block) < 5 * math.sqrt(p_block * (1 - p_block) / T)


def test_random_mapping_validates():
    with pytest.raises(ValueError, match=">= 2"):
        rm.random_mapping(torch.tensor([1, 5]), 1.0)
    with pytest.raises(ValueError, match="eps0"):
        rm.random_mapping(torch.tensor([3, 5]), 0.0)
    with pytest.raises(TypeError):
        rm.random_mapping(torch.tensor([3.0, 5.0]), 1.0)
