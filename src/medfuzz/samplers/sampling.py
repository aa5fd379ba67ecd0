"""Samplers over a vocabulary's embedding: random (RandS), powerscaled distance-weighted (PDWS, Eq. 3) and the
pieces of DiscreteZOO (Eq. 5-7). All draws are without replacement from a ``CandidatePool`` and take a seeded
``numpy.random.Generator``.

Vectorised (issue 13 §3): the vocabulary matrix is normalised once (``unit_rows``), so the distances of a key are
one matrix-vector product (``unit_cosine_distances``); PDWS weights live in log space, and ``draw_many`` draws a
whole budget without replacement in one call by the Gumbel-top-k trick: with ``g_j`` i.i.d. standard Gumbel,
the indices of ``log w_j + g_j`` sorted in decreasing order are distributed exactly as successive draws without
replacement with probabilities ∝ ``w_j`` renormalised over what is left (Kool, van Hoof & Welling 2019, "Stochastic
Beams and Where to Find Them", §3; Vieira 2014). numpy has no weighted sampling without replacement that draws
sequentially in this sense (``Generator.choice(replace=False, p=...)`` is documented for it but is O(n) per
draw), hence the few lines here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

SAMPLERS = ("rands", "pdws", "zoo")


def unit_rows(vectors: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as ``dtype``. Do it once per vocabulary."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=dtype))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def unit_cosine_distances(anchor: np.ndarray, unit_vectors: np.ndarray) -> np.ndarray:
    """``h(k, e_j) = 1 - cos(k, e_j)`` against rows that are already unit length (``unit_rows``): one
    matrix-vector product in the matrix's dtype, clipped to ``[0, 2]`` (round-off), returned as float64."""
    unit_anchor = unit_rows(anchor, unit_vectors.dtype if unit_vectors.dtype.kind == "f" else np.float64)[0]
    similarity = unit_vectors @ unit_anchor
    return np.clip(1.0 - similarity.astype(np.float64), 0.0, 2.0)


def cosine_distances(anchor: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``h(k, e_j) = 1 - cos(k, e_j)`` for every row ``e_j`` of any (not necessarily unit) matrix. Callers with a
    fixed vocabulary normalise it once and use ``unit_cosine_distances``."""
    vectors = np.atleast_2d(np.asarray(vectors))
    return unit_cosine_distances(anchor, unit_rows(vectors, vectors.dtype if vectors.dtype.kind == "f" else np.float64))


def pdws_tiers(distances: np.ndarray, n: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 3's weights ``h_j^n`` as (tier, ``log h_j^n``), the limits made explicit so that sampling without
    replacement stays exact: tier 0 holds zero-distance entries when ``n < 0`` (infinite weight: they come first,
    uniformly among themselves — the limit point), tier 1 the entries with a finite positive weight, tier 2
    zero-distance entries when ``n > 0`` (weight 0: drawn only when nothing else is left, uniformly)."""
    distances = np.asarray(distances, dtype=np.float64)
    tiers = np.ones(len(distances), dtype=np.int8)
    if n == 0:
        return tiers, np.zeros_like(distances)
    zero = distances <= 0.0
    with np.errstate(divide="ignore"):
        logs = n * np.log(np.where(zero, 1.0, distances))
    if zero.any():
        tiers[zero] = 0 if n < 0 else 2
        logs[zero] = 0.0
    return tiers, logs


def pdws_log_weights(distances: np.ndarray, n: float) -> np.ndarray:
    """``log h_j^n = n log h_j`` for the first draw: a zero distance has weight 0 for ``n > 0`` and infinite
    weight for ``n < 0`` (then only the zero-distance entries can be drawn, uniformly)."""
    tiers, logs = pdws_tiers(distances, n)
    if len(tiers) == 0:
        return logs
    return np.where(tiers == tiers.min(), logs, -np.inf)


def pdws_probabilities(distances: np.ndarray, n: float) -> np.ndarray:
    """Eq. 3, ``p_j = h_j^n / sum_j h_j^n``, computed in log space (a softmax of ``n log h``) so large ``|n|``
    neither overflows nor underflows: as ``n → +inf`` all mass goes to the farthest entry (ties share it). When
    every entry has weight 0 (all at distance 0 with ``n > 0``) the draw is uniform."""
    weights = pdws_log_weights(distances, n)
    if len(weights) == 0:
        return weights
    weights = weights - weights.max()  # the lowest tier present is finite
    probabilities = np.exp(weights)  # exp(-inf) = 0
    return probabilities / probabilities.sum()


def gumbel_top_k(tiers: np.ndarray | None, log_weights: np.ndarray | None, k: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Positions of ``k`` draws without replacement, in draw order: lower tier first, and within a tier by
    ``log w + G`` decreasing, ``G`` standard Gumbel (Gumbel-top-k). ``G`` is drawn as ``-log E`` with ``E``
    standard exponential (the same law; numpy's exponential sampler is several times faster than its Gumbel one).
    ``log_weights=None``: all weights equal (a uniform order, ``E`` alone decides). The noise vector has one value
    per entry whatever ``k`` is, so the first ``k`` draws do not depend on how many more are asked for (a
    budget-B attack's first query is the single draw of the lm-eval transform with the same seed)."""
    size = len(log_weights) if log_weights is not None else len(tiers) if tiers is not None else 0
    k = min(int(k), size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    keys = rng.standard_exponential(size)
    if log_weights is not None:  # ascending sort keys: -(log w + G) = log E - log w, in place (no temporaries)
        np.log(keys, out=keys)
        keys -= log_weights
    if tiers is not None and (tiers != 1).any():  # rare: some zero distance; sort by (tier, key)
        return np.lexsort((keys, tiers))[:k]
    if k < size:
        top = np.argpartition(keys, k - 1)[:k]
        return top[np.argsort(keys[top], kind="stable")]
    return np.argsort(keys, kind="stable")


class CandidatePool:
    """Vocabulary entries an attack may still use: the key's and the options' entities are excluded, and every
    drawn entry is removed (sampling without replacement, Algorithm 1)."""

    def __init__(self, size: int, excluded: Iterable[int] = ()) -> None:
        self.available = np.ones(size, dtype=bool)
        excluded = np.fromiter(excluded, dtype=np.int64)
        self.available[excluded] = False

    def __len__(self) -> int:
        return int(np.count_nonzero(self.available))

    def indices(self) -> np.ndarray:
        return np.flatnonzero(self.available)

    def remove(self, index: int | np.ndarray) -> None:
        index = np.atleast_1d(np.asarray(index, dtype=np.int64))
        if not self.available[index].all() or len(np.unique(index)) != len(index):
            raise ValueError(f"candidate(s) {index.tolist()} already used or excluded")
        self.available[index] = False

    def take(self, drawn: np.ndarray) -> np.ndarray:
        """Remove ``drawn`` — distinct positions of ``indices()`` chosen by a sampler, so available and distinct
        by construction (``remove`` checks that; here it would cost a tenth of a draw) — and return them."""
        self.available[drawn] = False
        return drawn


@dataclass(frozen=True)
class RandomSampler:
    """RandS: every available entry equally likely (uniform order; the distances are not read)."""

    name: str = "rands"

    def draw_many(self, pool: CandidatePool, distances: np.ndarray | None, k: int,
                  rng: np.random.Generator) -> np.ndarray:
        """Up to ``k`` distinct entries in draw order (fewer when the pool is smaller), removed from the pool."""
        candidates = pool.indices()
        if len(candidates) == 0:
            raise ValueError("the candidate pool is empty")
        return pool.take(candidates[gumbel_top_k(np.ones(len(candidates), dtype=np.int8), None, k, rng)])

    def draw(self, pool: CandidatePool, distances: np.ndarray | None, rng: np.random.Generator) -> int:
        return int(self.draw_many(pool, distances, 1, rng)[0])


@dataclass(frozen=True)
class PDWSSampler:
    """PDWS: draw ``e_j`` with probability ∝ ``h(k, e_j)^n`` among the available entries (Eq. 3); ``n < 0``
    favours entries near the key, ``n > 0`` far ones, ``n = 0`` is uniform."""

    n: float
    name: str = "pdws"

    def probabilities(self, pool: CandidatePool, distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        candidates = pool.indices()
        return candidates, pdws_probabilities(np.asarray(distances)[candidates], self.n)

    def draw_many(self, pool: CandidatePool, distances: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """Up to ``k`` distinct entries in draw order, exactly as ``k`` successive Eq. 3 draws without replacement
        (Gumbel-top-k), removed from the pool: the whole budget in one vectorised call."""
        candidates = pool.indices()
        if len(candidates) == 0:
            raise ValueError("the candidate pool is empty")
        available = np.asarray(distances)[pool.available]  # the same entries, in the same order
        if self.n != 0 and available.min() > 0.0:  # the usual case: one tier, log h^n = n log h as pdws_tiers has it
            logs = np.log(available)
            logs *= self.n
            return pool.take(candidates[gumbel_top_k(None, logs, k, rng)])
        tiers, logs = pdws_tiers(available, self.n)
        return pool.take(candidates[gumbel_top_k(tiers, logs, k, rng)])

    def draw(self, pool: CandidatePool, distances: np.ndarray, rng: np.random.Generator) -> int:
        return int(self.draw_many(pool, distances, 1, rng)[0])


# ------------------------------------------------------------------------------------------ DiscreteZOO


def zoo_gradient(anchor: np.ndarray, anchor_score: float, points: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Eq. 6: ``1/M Σ_i (f(e_i) - f(e_0)) (e_i - e_0) / ||e_i - e_0||²`` over the ``M`` queried points ``e_i``.

    ``f`` is the target's score for the correct answer; a point equal to the anchor contributes nothing.
    """
    anchor = np.asarray(anchor, dtype=np.float64)
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    scores = np.asarray(scores, dtype=np.float64)
    if len(points) == 0:
        return np.zeros_like(anchor)
    differences = points - anchor
    squared = np.einsum("ij,ij->i", differences, differences)
    safe = np.where(squared > 0, squared, 1.0)
    terms = ((scores - anchor_score) / safe)[:, None] * differences
    terms[squared <= 0] = 0.0
    return terms.sum(axis=0) / len(points)


def zoo_step_target(anchor: np.ndarray, gradient: np.ndarray, step: float) -> np.ndarray:
    """Eq. 5: ``e' = e_0 - λ ∇̂`` (descending the score of the correct answer)."""
    return np.asarray(anchor, dtype=np.float64) - step * np.asarray(gradient, dtype=np.float64)


def _distances(anchor: np.ndarray, rows: np.ndarray, unit: bool) -> np.ndarray:
    return unit_cosine_distances(anchor, rows) if unit else cosine_distances(anchor, rows)


def neighbourhood(anchor: np.ndarray, vectors: np.ndarray, pool: CandidatePool, size: int,
                  unit: bool = False) -> np.ndarray:
    """The ``size`` available entries nearest ``anchor`` by cosine (nearest first; lowest index on ties): where
    DiscreteZOO draws its gradient points (paper App. E: "in its neighborhood in the embedding space"; the
    authors' code takes the nearest ``1 + 5·M`` names, the first being the entity itself, which our pool
    already excludes). ``unit``: the rows are already unit length (``unit_rows``), so they are not normalised
    again at every step (the same distances, bit for bit, as normalising ``vectors[candidates]`` here)."""
    candidates = pool.indices()
    distances = _distances(anchor, vectors[candidates], unit)
    size = min(int(size), len(candidates))
    if size <= 0:
        return np.zeros(0, dtype=np.int64)
    return candidates[np.argsort(distances, kind="stable")[:size]]


def nearest_available(target: np.ndarray, vectors: np.ndarray, pool: CandidatePool, unit: bool = False) -> int:
    """Eq. 7: the available entry with the smallest cosine distance to ``target`` (lowest index on ties);
    ``unit`` as in ``neighbourhood``."""
    candidates = pool.indices()
    if len(candidates) == 0:
        raise ValueError("the candidate pool is empty")
    distances = _distances(target, vectors[candidates], unit)
    return int(candidates[int(np.argmin(distances))])
