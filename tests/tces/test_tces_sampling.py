"""Sampler statistics: PDWS against Eq. 3 (goodness of fit), its limits, sampling without replacement, and the
DiscreteZOO gradient against a hand computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from medfuzz.samplers.sampling import (
    CandidatePool,
    PDWSSampler,
    RandomSampler,
    cosine_distances,
    gumbel_top_k,
    nearest_available,
    pdws_probabilities,
    pdws_tiers,
    zoo_gradient,
    zoo_step_target,
)

DRAWS = 100_000


@pytest.fixture
def toy() -> tuple[np.ndarray, np.ndarray]:
    """A key and 10 entity vectors in 8 dimensions, with well spread cosine distances."""
    rng = np.random.default_rng(7)
    key = rng.normal(size=8)
    vectors = rng.normal(size=(10, 8)) + np.linspace(0, 1.5, 10)[:, None] * key
    return key, vectors


def first_draws(sampler, distances: np.ndarray, excluded: tuple[int, ...] = (), seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([sampler.draw(CandidatePool(len(distances), excluded), distances, rng) for _ in range(DRAWS)])


def eq3(distances: np.ndarray, n: float) -> np.ndarray:
    weights = distances ** n  # Eq. 3 written out literally (fine for these moderate n)
    return weights / weights.sum()


@pytest.mark.parametrize("n", [-8.0, -1.0, 3.0, 8.0])
def test_pdws_frequencies_match_eq3(toy, n: float) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)
    expected = eq3(distances, n)
    assert np.allclose(pdws_probabilities(distances, n), expected, rtol=1e-12)
    counts = np.bincount(first_draws(PDWSSampler(n), distances), minlength=len(distances))
    assert chisquare(counts, expected * DRAWS).pvalue > 1e-3
    # the same counts are far from the other regime's law: the test can tell them apart
    assert chisquare(counts, eq3(distances, -n) * DRAWS).pvalue < 1e-6


def test_excluded_entries_are_never_drawn_and_the_rest_renormalise(toy) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)
    excluded = (0, 4)
    counts = np.bincount(first_draws(PDWSSampler(-4.0), distances, excluded), minlength=len(distances))
    assert counts[list(excluded)].sum() == 0
    keep = [i for i in range(len(distances)) if i not in excluded]
    assert chisquare(counts[keep], eq3(distances[keep], -4.0) * DRAWS).pvalue > 1e-3


def test_n_zero_is_uniform_and_matches_rands(toy) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)
    assert np.array_equal(pdws_probabilities(distances, 0.0), np.full(10, 0.1))
    for sampler in (PDWSSampler(0.0), RandomSampler()):
        counts = np.bincount(first_draws(sampler, distances), minlength=10)
        assert chisquare(counts).pvalue > 1e-3


def test_large_n_limits(toy) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)
    far, near = int(np.argmax(distances)), int(np.argmin(distances))
    for n, expected in ((1e6, far), (1e12, far), (-1e6, near)):
        probabilities = pdws_probabilities(distances, n)
        assert np.isfinite(probabilities).all()
        assert probabilities[expected] == pytest.approx(1.0)
        rng = np.random.default_rng(1)
        assert all(PDWSSampler(n).draw(CandidatePool(10), distances, rng) == expected for _ in range(50))
    # with the farthest entry used up, the limit moves to the next farthest
    pool = CandidatePool(10, excluded=[far])
    assert PDWSSampler(1e6).draw(pool, distances, np.random.default_rng(0)) == int(np.argsort(distances)[-2])


def test_zero_distances() -> None:
    distances = np.array([0.0, 0.0, 0.5, 1.0])
    assert np.array_equal(pdws_probabilities(distances, -3.0), [0.5, 0.5, 0.0, 0.0])  # n<0: the limit point(s)
    positive = pdws_probabilities(distances, 2.0)
    assert positive[:2].tolist() == [0.0, 0.0] and positive[2:] == pytest.approx([0.2, 0.8])
    assert pdws_probabilities(np.zeros(3), 5.0) == pytest.approx([1 / 3] * 3)  # all at the key: uniform
    assert pdws_probabilities(distances, 0.0) == pytest.approx([0.25] * 4)


def test_without_replacement_second_draw_renormalises() -> None:
    distances = np.array([0.1, 0.3, 0.6, 1.2])
    n = -1.5
    p = eq3(distances, n)
    rng = np.random.default_rng(3)
    sampler = PDWSSampler(n)
    pairs = []
    for _ in range(DRAWS):
        pool = CandidatePool(4)
        pairs.append((sampler.draw(pool, distances, rng), sampler.draw(pool, distances, rng)))
    cells = list(itertools.permutations(range(4), 2))
    flat = np.bincount([4 * first + second for first, second in pairs], minlength=16)
    counts = np.array([flat[4 * i + j] for i, j in cells])
    assert counts.sum() == DRAWS  # the second draw never repeats the first
    expected = np.array([p[i] * p[j] / (1 - p[i]) for i, j in cells]) * DRAWS
    assert chisquare(counts, expected).pvalue > 1e-3


def test_drawing_everything_is_a_permutation_then_the_pool_is_empty(toy) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)
    for sampler in (PDWSSampler(-20.0), PDWSSampler(20.0), RandomSampler()):
        pool = CandidatePool(10, excluded=[3])
        drawn = [sampler.draw(pool, distances, np.random.default_rng(5)) for _ in range(9)]
        assert sorted(drawn) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
        with pytest.raises(ValueError, match="empty"):
            sampler.draw(pool, distances, np.random.default_rng(5))


def test_same_seed_same_draws(toy) -> None:
    key, vectors = toy
    distances = cosine_distances(key, vectors)

    def run(seed: int) -> list[int]:
        pool, rng = CandidatePool(10), np.random.default_rng(seed)
        return [PDWSSampler(-2.0).draw(pool, distances, rng) for _ in range(5)]

    assert run(11) == run(11)
    assert any(run(11) != run(s) for s in range(12, 20))


def test_zoo_gradient_matches_hand_computation() -> None:
    # anchor e0 = (1, 0, 0), f(e0) = 0.9; two neighbours:
    #   e1 = (0, 1, 0), f = 0.5: (0.5-0.9) * (-1, 1, 0) / 2   = (0.2, -0.2, 0)
    #   e2 = (1, 0, 2), f = 0.7: (0.7-0.9) * ( 0, 0, 2) / 4   = (0, 0, -0.1)
    # mean over M = 2: (0.1, -0.1, -0.05)
    anchor = np.array([1.0, 0.0, 0.0])
    points = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0]])
    gradient = zoo_gradient(anchor, 0.9, points, np.array([0.5, 0.7]))
    assert gradient == pytest.approx([0.1, -0.1, -0.05])
    target = zoo_step_target(anchor, gradient, step=2.0)
    assert target == pytest.approx([0.8, 0.2, 0.1])
    # Eq. 7: the nearest available entry to the target (cosine), skipping used ones
    vocabulary = np.array([[0.0, 0.0, 1.0], [0.8, 0.25, 0.1], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert nearest_available(target, vocabulary, CandidatePool(4)) == 1
    assert nearest_available(target, vocabulary, CandidatePool(4, excluded=[1])) == 2


def test_zoo_gradient_edge_cases() -> None:
    anchor = np.array([0.0, 1.0])
    assert np.array_equal(zoo_gradient(anchor, 1.0, np.zeros((0, 2)), np.zeros(0)), [0.0, 0.0])
    # a point on the anchor adds nothing but still counts in M; equal scores give a zero gradient
    assert zoo_gradient(anchor, 1.0, np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([0.0, 0.0])) == pytest.approx(
        [-0.5, 0.0])
    assert zoo_gradient(anchor, 1.0, np.array([[1.0, 0.0]]), np.array([1.0])) == pytest.approx([0.0, 0.0])


def test_gumbel_top_k_draws_a_whole_budget_with_the_order_statistics_of_sequential_draws() -> None:
    """One ``draw_many`` call = successive Eq. 3 draws without replacement: the ordered triples of one k = 3 call
    follow p_i · p_j/(1-p_i) · p_l/(1-p_i-p_j) (Plackett-Luce), and the first draw does not depend on k."""
    distances = np.array([0.1, 0.3, 0.6, 1.2])
    n = -1.5
    p = eq3(distances, n)
    sampler = PDWSSampler(n)
    rng = np.random.default_rng(9)
    triples = np.array([sampler.draw_many(CandidatePool(4), distances, 3, rng) for _ in range(DRAWS // 2)])
    assert all(len(set(t)) == 3 for t in triples[:1000])
    cells = list(itertools.permutations(range(4), 3))
    flat = np.bincount(16 * triples[:, 0] + 4 * triples[:, 1] + triples[:, 2], minlength=64)
    counts = np.array([flat[16 * i + 4 * j + k] for i, j, k in cells])
    expected = np.array([p[i] * p[j] / (1 - p[i]) * p[k] / (1 - p[i] - p[j]) for i, j, k in cells])
    assert chisquare(counts, expected * len(triples)).pvalue > 1e-3
    assert chisquare(counts, np.full(len(cells), len(triples) / len(cells))).pvalue < 1e-6  # not uniform
    for k in (1, 2, 4, 10):  # same seed: the first draw is the same whatever the budget
        assert sampler.draw_many(CandidatePool(4), distances, k, np.random.default_rng(3))[0] == \
            sampler.draw_many(CandidatePool(4), distances, 1, np.random.default_rng(3))[0]
    pool = CandidatePool(4, excluded=[2])
    assert sorted(sampler.draw_many(pool, distances, 10, rng).tolist()) == [0, 1, 3] and len(pool) == 0


def test_zero_distance_tiers_are_kept_without_replacement() -> None:
    """n < 0: the zero-distance entries come first (uniformly), then Eq. 3 over the rest; n > 0: last."""
    distances = np.array([0.0, 0.2, 0.0, 0.9])
    rng = np.random.default_rng(0)
    firsts = [PDWSSampler(-2.0).draw_many(CandidatePool(4), distances, 4, rng).tolist() for _ in range(400)]
    assert all(set(order[:2]) == {0, 2} for order in firsts)
    assert 100 < sum(order[0] == 0 for order in firsts) < 300
    assert all(set(PDWSSampler(2.0).draw_many(CandidatePool(4), distances, 4, rng)[2:].tolist()) == {0, 2}
               for _ in range(50))


def _reference_pdws_draws(n: float, pool: CandidatePool, distances: np.ndarray, k: int,
                          rng: np.random.Generator) -> np.ndarray:
    """Eq. 3 draws the general way: every tier explicit (``pdws_tiers``), checked removal."""
    candidates = pool.indices()
    tiers, logs = pdws_tiers(distances[candidates], n)
    chosen = candidates[gumbel_top_k(tiers, logs, k, rng)]
    pool.remove(chosen)
    return chosen


@pytest.mark.parametrize("n", [-20.0, -5.0, -1.0, 0.0, 0.5, 2.0, 20.0])
def test_the_one_tier_fast_path_draws_exactly_what_the_general_path_draws(n: float) -> None:
    """``PDWSSampler.draw_many`` skips the tiers when no distance is 0 (the usual case, issue 28's speed): the same
    entries in the same order and the same pool after, for every budget, with zero distances and ties, over a first
    and a second draw from one pool."""
    generator = np.random.default_rng(int(abs(n) * 10))
    size = 300
    for trial in range(60):
        distances = generator.uniform(0, 2, size) if trial % 2 else np.round(generator.uniform(0, 2, size), 1)
        if trial % 3 == 0:
            distances[generator.integers(0, size, 4)] = 0.0
        excluded = generator.integers(0, size, 5)
        fast, general = CandidatePool(size, excluded), CandidatePool(size, excluded)
        for k in (1, 8, 50, size):
            if not len(general):
                break
            seed = trial * 1000 + k
            drawn = PDWSSampler(n).draw_many(fast, distances, k, np.random.default_rng(seed))
            expected = _reference_pdws_draws(n, general, distances, k, np.random.default_rng(seed))
            assert np.array_equal(drawn, expected), (n, trial, k)
            assert np.array_equal(fast.available, general.available)
