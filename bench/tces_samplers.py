"""TCES sampler benchmark (issue 13 §3, target P3): PDWS / RandS draws per second over a 10k vocabulary and cosine
distances per key, before (the per-draw implementation this project used until the vectorised samplers, kept
here verbatim as the reference) and after (``draw_many``: Gumbel-top-k, the whole budget in one call; the
vocabulary normalised once), measured in one run; then vocabulary embedding time cold vs cached. Prints tables;
not a test (timings depend on the machine).

    python bench/tces_samplers.py [--vocab 10000] [--draws 2000] [--embed-names 2000] [--no-embed]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from medfuzz.samplers.embeddings import SentenceEncoder, vocabulary_vectors
from medfuzz.samplers.sampling import (
    CandidatePool,
    PDWSSampler,
    RandomSampler,
    pdws_probabilities,
    unit_cosine_distances,
    unit_rows,
)
from medfuzz.samplers.vocab import Vocabulary

# ----------------------------------------------------------------------------------- before (reference copy)


def before_cosine_distances(anchor: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The old per-key distances: the norms of the whole (un-normalised) matrix recomputed for every key."""
    anchor = unit_rows(anchor)[0].astype(vectors.dtype)
    norms = np.linalg.norm(vectors, axis=1)
    dots = vectors @ anchor
    similarity = np.divide(dots, norms, out=np.zeros(len(vectors), dtype=np.float64), where=norms > 0)
    return np.clip(1.0 - similarity.astype(np.float64), 0.0, 2.0)


def before_draw(n: float | None, available: np.ndarray, distances: np.ndarray, rng: np.random.Generator) -> int:
    """The old draw: probabilities over the pool, one ``rng.choice(p=...)`` per draw (``n=None``: RandS)."""
    candidates = np.flatnonzero(available)
    if n is None:
        choice = int(candidates[rng.integers(len(candidates))])
    else:
        choice = int(candidates[rng.choice(len(candidates), p=pdws_probabilities(distances[candidates], n))])
    available[choice] = False
    return choice


# ----------------------------------------------------------------------------------------------- timing


def per_second(work: Callable[[], int], seconds: float = 1.0) -> float:
    """Draws per second of ``work`` (which returns how many draws it made), repeated for about ``seconds``."""
    draws, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        draws += work()
    return draws / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--draws", type=int, default=2_000, help="draws from one pool (a long attack or sweep)")
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--embed-names", type=int, default=2_000, help="names to embed for the cache timing")
    parser.add_argument("--no-embed", action="store_true", help="skip the embedding timing")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(args.vocab, args.dim)).astype(np.float32)
    unit = unit_rows(vectors, np.float32)
    distances = unit_cosine_distances(rng.normal(size=args.dim), unit)
    size = len(distances)

    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "library default"
    print(f"## Samplers over a {size:,}-entry vocabulary ({args.dim}-d); BLAS threads: {threads}\n")
    print("| sampler | draws per call | before: draws/s (one draw per call) | after: draws/s (`draw_many`) | "
          "speed-up |\n|---|---|---|---|---|")
    for label, n, sampler in (("RandS", None, RandomSampler()), ("PDWS n=-20", -20.0, PDWSSampler(-20.0)),
                              ("PDWS n=+20", 20.0, PDWSSampler(20.0))):
        for k in (1, args.budget, args.draws):
            draw_rng = np.random.default_rng(0)

            def before(k: int = k, n: float | None = n, draw_rng: np.random.Generator = draw_rng) -> int:
                available = np.ones(size, dtype=bool)
                for _ in range(k):
                    before_draw(n, available, distances, draw_rng)
                return k

            def after(k: int = k, sampler=sampler, draw_rng: np.random.Generator = draw_rng) -> int:
                return len(sampler.draw_many(CandidatePool(size), distances, k, draw_rng))

            old, new = per_second(before), per_second(after)
            print(f"| {label} | {k:,} | {old:,.0f} | {new:,.0f} | {new / old:.1f}× |")

    keys = rng.normal(size=(50, args.dim)).astype(np.float32)
    start = time.perf_counter()
    for key in keys:
        before_cosine_distances(key, vectors)
    old_ms = (time.perf_counter() - start) / len(keys) * 1000
    start = time.perf_counter()
    for key in keys:
        unit_cosine_distances(key, unit)
    new_ms = (time.perf_counter() - start) / len(keys) * 1000
    print(f"\n| cosine distances key → {size:,} entries | before | after |\n|---|---|---|")
    print(f"| ms per key | {old_ms:.2f} | {new_ms:.3f} |")
    print(f"\n(one-off: normalising the {size:,} × {args.dim} matrix once takes "
          f"{timeit_ms(lambda: unit_rows(vectors, np.float32)):.1f} ms)\n")
    if not args.no_embed:
        embedding_timing(args.embed_names)


def timeit_ms(work: Callable[[], object], repeat: int = 5) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        work()
    return (time.perf_counter() - start) / repeat * 1000


def embedding_timing(count: int) -> None:
    names = tuple(f"compound {i} {w}" for i, w in enumerate(
        ["amidase", "ketolide", "sulfonate", "fluorophenyl", "carboxamide", "pyrimidine"] * (count // 6 + 1)
    ))[:count]
    vocab = Vocabulary("drugs", names, "bench")
    encoder = SentenceEncoder()
    encoder.encode(["warm-up"])  # model load is not part of either timing
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        vocabulary_vectors(vocab, encoder, cache=Path(cache))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        vocabulary_vectors(vocab, encoder, cache=Path(cache))
        warm = time.perf_counter() - start
    print(f"## Vocabulary embedding ({count:,} names, {encoder.name})\n")
    print("| | seconds | names/s |\n|---|---|---|")
    print(f"| cold (encode + write cache) | {cold:.2f} | {count / cold:,.0f} |")
    print(f"| cached (read .npy) | {warm:.4f} | {count / warm:,.0f} |")


if __name__ == "__main__":
    main()
