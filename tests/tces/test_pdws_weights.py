"""PDWS from a key's precomputed weights (``PDWSSampler.weights``, issue 28): the same draws, in the same order,
from the same generator state, as the per-call path, whatever the exponent, the pool and the budget."""

from __future__ import annotations

import numpy as np
import pytest

from medfuzz.samplers import sampling
from medfuzz.samplers.sampling import CandidatePool, PDWSSampler, pdws_weights, unit_cosine_distances, unit_rows


def _both(sampler: PDWSSampler, distances: np.ndarray, size: int, excluded: list[int], k: int,
          seed: int, draws: int = 1) -> None:
    """``draws`` successive draws of ``k`` from one pool each way: identical entries and generator states."""
    weights = sampler.weights(distances)
    per_call_pool, weights_pool = CandidatePool(size, excluded), CandidatePool(size, excluded)
    per_call_rng, weights_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(draws):
        expected = sampler.draw_many(per_call_pool, distances, k, per_call_rng)
        got = sampler.draw_many(weights_pool, weights, k, weights_rng)
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(weights_pool.available, per_call_pool.available)
    assert weights_rng.random() == per_call_rng.random()  # the same generator consumption


@pytest.mark.parametrize("n", [-20.0, -3.0, -0.5, 0.0, 0.5, 3.0, 20.0])
def test_same_draws_as_the_per_call_path(n: float, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(int(n * 10) + 500)
    unit = unit_rows(rng.normal(size=(3000, 16)).astype(np.float32), np.float32)
    fast = []
    filtered = sampling._filtered_top_k

    def counting(*args: object) -> np.ndarray | None:
        result = filtered(*args)
        fast.append(result is not None)
        return result

    monkeypatch.setattr(sampling, "_filtered_top_k", counting)
    sampler = PDWSSampler(n)
    for key in range(4):
        distances = unit_cosine_distances(rng.normal(size=16), unit)
        for seed, k in enumerate((1, 2, 8, 8, 30)):
            _both(sampler, distances, len(unit), [key, key + 1, 2999], k, seed + 10 * key)
        _both(sampler, distances, len(unit), [key], 8, key, draws=40)  # a long sweep: the heaviest used up
    assert any(fast)  # the filtered path was taken, not only the fallback


def test_zero_distances_ties_and_small_pools_fall_back_to_the_same_draws() -> None:
    rng = np.random.default_rng(7)
    distances = rng.random(2000) * 2
    distances[[3, 50, 900]] = 0.0  # zero distances: tiers 0 (n < 0) or 2 (n > 0)
    for n in (-4.0, 4.0):
        assert not pdws_weights(distances, n).filterable
        _both(PDWSSampler(n), distances, len(distances), [1], 8, 1)
    tied = np.repeat(rng.random(40) + 0.5, 50)  # ties in the weights; equal keys need equal noise too
    _both(PDWSSampler(-2.0), tied, len(tied), [], 8, 2)
    small = rng.random(30) + 0.1  # a pool too small to gain: the per-call path with the same noise
    _both(PDWSSampler(-2.0), small, len(small), [0], 8, 3)
    _both(PDWSSampler(-2.0), small, len(small), [0], 100, 4)  # more than the pool: all of it, in order


def test_weights_of_another_exponent_are_refused() -> None:
    weights = PDWSSampler(2.0).weights(np.linspace(0.1, 1.0, 10))
    with pytest.raises(ValueError, match=r"n=2\.0 given to a PDWS sampler with n=-2\.0"):
        PDWSSampler(-2.0).draw_many(CandidatePool(10), weights, 1, np.random.default_rng(0))
