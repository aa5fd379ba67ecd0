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
draw), hence the few lines here. A key drawn from more than once can have its weights computed once
(``PDWSWeights``, issue 28): each draw then takes logarithms only where the top ``k`` can be, with the same
draws and the same generator consumption.
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
    return _top_k_of(tiers, log_weights, rng.standard_exponential(size), k)


def _top_k_of(tiers: np.ndarray | None, log_weights: np.ndarray | None, exponential: np.ndarray,
              k: int) -> np.ndarray:
    """``gumbel_top_k`` given its exponential noise (one value per entry) and ``1 <= k <= len(exponential)``."""
    size = len(exponential)
    # ascending sort keys: -(log w + G) = log E - log w
    keys = exponential if log_weights is None else np.log(exponential) - log_weights
    if tiers is not None and (tiers != 1).any():  # rare: some zero distance; sort by (tier, key)
        return np.lexsort((keys, tiers))[:k]
    if k < size:
        top = np.argpartition(keys, k - 1)[:k]
        return top[np.argsort(keys[top], kind="stable")]
    return np.argsort(keys, kind="stable")


HEAVY = 256  # entries of largest weight kept per key (PDWSWeights.heavy): the threshold's sample
FILTER_MARGIN = 1e-6  # in log units: far above the round-off of the filter (~1e-13), so it only ever adds entries


@dataclass(frozen=True, eq=False)
class PDWSWeights:
    """Eq. 3's weights of one key over the whole vocabulary (``pdws_weights``), computed once and shared by every
    draw from that key, so that a draw pays only for its own noise.

    A draw (``PDWSSampler.draw_many``) must still draw one exponential per available entry (the same generator
    consumption, hence the same draws as the per-call path), but needs the exact Gumbel key ``log E - log w``
    only where it can reach the top ``k``: a threshold ``t`` is the ``k``-th smallest key among the heaviest
    available entries (``heavy``), and ``log E_j - log w_j <= t`` is ``E_j <= exp(t + top) * scaled_j`` with
    ``scaled = exp(log w - top)``, one multiply and compare per entry instead of a logarithm and an argpartition.
    The filter keeps a superset (``FILTER_MARGIN``); on that superset the keys are computed exactly as the
    per-call path computes them, so the same ``k`` entries come out in the same order. Where that cannot be
    guaranteed (a zero distance, weights spanning more than a double's range, a tie among the first ``k + 1``
    keys, a pool too small to gain) the draw falls back to the per-call path with the same noise."""

    n: float
    tiers: np.ndarray  # int8 per entry, as pdws_tiers
    logs: np.ndarray  # log h_j^n per entry (0 where the tier is not 1), as pdws_tiers
    top: float  # the largest log-weight
    scaled: np.ndarray  # exp(logs - top), in (0, 1] when ``filterable``
    heavy: np.ndarray  # indices of the HEAVY largest log-weights, largest first
    filterable: bool  # every entry in tier 1 and every scaled weight a positive double


def pdws_weights(distances: np.ndarray, n: float) -> PDWSWeights:
    """The per-key part of PDWS over the whole vocabulary (distances from ``unit_cosine_distances``)."""
    tiers, logs = pdws_tiers(distances, n)
    if len(logs) == 0:
        return PDWSWeights(n, tiers, logs, 0.0, logs, np.zeros(0, dtype=np.int64), False)
    top = float(logs.max())
    scaled = np.exp(logs - top)
    heavy = np.argpartition(-logs, min(HEAVY, len(logs)) - 1)[:HEAVY]
    heavy = heavy[np.argsort(-logs[heavy], kind="stable")]
    filterable = bool((tiers == 1).all() and np.isfinite(top) and (scaled > 0).all())
    return PDWSWeights(n, tiers, logs, top, scaled, heavy, filterable)


def _filtered_top_k(weights: PDWSWeights, available: np.ndarray, candidates: np.ndarray,
                    exponential: np.ndarray, k: int) -> np.ndarray | None:
    """``_top_k_of(tiers[candidates], logs[candidates], exponential, k)`` computed on a superset of the top ``k``
    (``PDWSWeights``); ``None`` where the result could differ from it."""
    heavy = weights.heavy[available[weights.heavy]]  # the heaviest available entries, at most HEAVY
    if not weights.filterable or len(heavy) < k or len(candidates) <= 8 * len(heavy):
        return None  # no cheap threshold (a zero distance, the heaviest entries used up) or nothing to gain
    seed_keys = np.log(exponential[np.searchsorted(candidates, heavy)]) - weights.logs[heavy]
    threshold = np.partition(seed_keys, k - 1)[k - 1]  # >= the k-th smallest key of the whole pool
    bound = np.exp(threshold + weights.top + FILTER_MARGIN)
    near = np.flatnonzero(exponential <= bound)  # scaled <= 1: nothing else can pass the next test
    inside = near[exponential[near] <= bound * weights.scaled[candidates[near]]]
    keys = np.log(exponential[inside]) - weights.logs[candidates[inside]]
    order = np.argsort(keys, kind="stable")
    if len(order) < k:
        return None
    first = keys[order[:k + 1]]
    if (first[1:] == first[:-1]).any():  # a tie near the top: the per-call path's argpartition decides it
        return None
    return inside[order[:k]]


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

    def remove_drawn(self, drawn: np.ndarray) -> None:
        """Remove entries a sampler has just drawn from ``indices()``: distinct and available by construction,
        so not checked again (``remove`` checks, for any other caller)."""
        self.available[drawn] = False

    def remove(self, index: int | np.ndarray) -> None:
        index = np.atleast_1d(np.asarray(index, dtype=np.int64))
        if not self.available[index].all() or len(np.unique(index)) != len(index):
            raise ValueError(f"candidate(s) {index.tolist()} already used or excluded")
        self.available[index] = False


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
        chosen = candidates[gumbel_top_k(np.ones(len(candidates), dtype=np.int8), None, k, rng)]
        pool.remove_drawn(chosen)
        return chosen

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

    def weights(self, distances: np.ndarray) -> PDWSWeights:
        """The per-key part of every draw from ``distances`` (``PDWSWeights``): compute once per key and pass it
        to ``draw_many`` in place of the distances when a key is drawn from more than once."""
        return pdws_weights(np.asarray(distances), self.n)

    def draw_many(self, pool: CandidatePool, distances: np.ndarray | PDWSWeights, k: int,
                  rng: np.random.Generator) -> np.ndarray:
        """Up to ``k`` distinct entries in draw order, exactly as ``k`` successive Eq. 3 draws without replacement
        (Gumbel-top-k), removed from the pool: the whole budget in one vectorised call. ``distances`` may be the
        key's ``PDWSWeights`` (``weights``): the same draws from the same generator, at less cost per call."""
        candidates = pool.indices()
        if len(candidates) == 0:
            raise ValueError("the candidate pool is empty")
        if isinstance(distances, PDWSWeights):
            if distances.n != self.n:
                raise ValueError(f"weights for n={distances.n} given to a PDWS sampler with n={self.n}")
            k = min(int(k), len(candidates))
            if k <= 0:
                return np.zeros(0, dtype=np.int64)
            exponential = rng.standard_exponential(len(candidates))
            positions = _filtered_top_k(distances, pool.available, candidates, exponential, k)
            if positions is None:
                positions = _top_k_of(distances.tiers[candidates], distances.logs[candidates], exponential, k)
        else:
            tiers, logs = pdws_tiers(np.asarray(distances)[candidates], self.n)
            positions = gumbel_top_k(tiers, logs, k, rng)
        chosen = candidates[positions]
        pool.remove_drawn(chosen)
        return chosen

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
