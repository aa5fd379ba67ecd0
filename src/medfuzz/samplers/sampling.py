"""Samplers over a vocabulary's embedding: random (RandS), powerscaled distance-weighted (PDWS, Eq. 3) and the
pieces of DiscreteZOO (Eq. 6-7). All draws are without replacement from a ``CandidatePool`` and take a seeded
``numpy.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

SAMPLERS = ("rands", "pdws", "zoo")


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def cosine_distances(anchor: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``h(k, e_j) = 1 - cos(k, e_j)`` for every row ``e_j``, clipped to ``[0, 2]`` (float round-off)."""
    vectors = np.atleast_2d(np.asarray(vectors))
    anchor = unit_rows(anchor)[0].astype(vectors.dtype if vectors.dtype.kind == "f" else np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    dots = vectors @ anchor  # no normalised copy of the (large) vocabulary matrix
    similarity = np.divide(dots, norms, out=np.zeros(len(vectors), dtype=np.float64), where=norms > 0)
    return np.clip(1.0 - similarity.astype(np.float64), 0.0, 2.0)


def pdws_log_weights(distances: np.ndarray, n: float) -> np.ndarray:
    """``log h_j^n = n log h_j``, with the limits made explicit: a zero distance has weight 0 for ``n > 0`` and
    infinite weight for ``n < 0`` (then only the zero-distance entries can be drawn, uniformly)."""
    distances = np.asarray(distances, dtype=np.float64)
    if n == 0:
        return np.zeros_like(distances)
    zero = distances <= 0.0
    with np.errstate(divide="ignore"):
        logs = np.log(np.where(zero, 1.0, distances))
    weights = n * logs
    if n > 0:
        weights[zero] = -np.inf
    elif zero.any():
        weights = np.where(zero, 0.0, -np.inf)
    return weights


def pdws_probabilities(distances: np.ndarray, n: float) -> np.ndarray:
    """Eq. 3, ``p_j = h_j^n / sum_j h_j^n``, computed in log space (a softmax of ``n log h``) so large ``|n|``
    neither overflows nor underflows: as ``n → +inf`` all mass goes to the farthest entry (ties share it)."""
    weights = pdws_log_weights(distances, n)
    if len(weights) == 0:
        return weights
    if not np.isfinite(weights).any():  # every entry has weight 0 (all at distance 0 with n > 0): uniform
        return np.full(len(weights), 1.0 / len(weights))
    weights = weights - weights[np.isfinite(weights)].max()
    probabilities = np.exp(weights)  # exp(-inf) = 0
    return probabilities / probabilities.sum()


class CandidatePool:
    """Vocabulary entries an attack may still use: the key's and the options' entities are excluded, and every
    drawn entry is removed (sampling without replacement, Algorithm 1)."""

    def __init__(self, size: int, excluded: Iterable[int] = ()) -> None:
        self.available = np.ones(size, dtype=bool)
        for index in excluded:
            self.available[index] = False

    def __len__(self) -> int:
        return int(self.available.sum())

    def indices(self) -> np.ndarray:
        return np.flatnonzero(self.available)

    def remove(self, index: int) -> None:
        if not self.available[index]:
            raise ValueError(f"candidate {index} was already used or excluded")
        self.available[index] = False


@dataclass(frozen=True)
class RandomSampler:
    """RandS: every available entry equally likely (PDWS with n = 0, without touching the distances)."""

    name: str = "rands"

    def draw(self, pool: CandidatePool, distances: np.ndarray, rng: np.random.Generator) -> int:
        candidates = pool.indices()
        if len(candidates) == 0:
            raise ValueError("the candidate pool is empty")
        choice = int(candidates[rng.integers(len(candidates))])
        pool.remove(choice)
        return choice


@dataclass(frozen=True)
class PDWSSampler:
    """PDWS: draw ``e_j`` with probability ∝ ``h(k, e_j)^n`` among the available entries (Eq. 3); ``n < 0``
    favours entries near the key, ``n > 0`` far ones, ``n = 0`` is uniform."""

    n: float
    name: str = "pdws"

    def probabilities(self, pool: CandidatePool, distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        candidates = pool.indices()
        return candidates, pdws_probabilities(np.asarray(distances)[candidates], self.n)

    def draw(self, pool: CandidatePool, distances: np.ndarray, rng: np.random.Generator) -> int:
        if len(pool) == 0:
            raise ValueError("the candidate pool is empty")
        candidates, probabilities = self.probabilities(pool, distances)
        if len(candidates) == 0:
            raise ValueError("the candidate pool is empty")
        choice = int(candidates[rng.choice(len(candidates), p=probabilities)])
        pool.remove(choice)
        return choice


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


def nearest_available(target: np.ndarray, vectors: np.ndarray, pool: CandidatePool) -> int:
    """Eq. 7: the available entry with the smallest cosine distance to ``target`` (lowest index on ties)."""
    candidates = pool.indices()
    if len(candidates) == 0:
        raise ValueError("the candidate pool is empty")
    distances = cosine_distances(target, vectors[candidates])
    return int(candidates[int(np.argmin(distances))])
