"""TCES sampler benchmark: PDWS / RandS draws per second over a 10k vocabulary, and vocabulary embedding time
cold vs cached. Prints a table; not a test (timings depend on the machine).

    python bench/tces_samplers.py [--vocab 10000] [--draws 2000] [--embed-names 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from medfuzz.samplers.embeddings import SentenceEncoder, vocabulary_vectors
from medfuzz.samplers.sampling import CandidatePool, PDWSSampler, RandomSampler, cosine_distances
from medfuzz.samplers.vocab import Vocabulary


def draws_per_second(sampler, distances: np.ndarray, draws: int, fresh_pool: bool) -> float:
    """``fresh_pool``: every draw from a full pool (first query); otherwise one pool drained ``draws`` times."""
    rng = np.random.default_rng(0)
    pool = CandidatePool(len(distances))
    start = time.perf_counter()
    for _ in range(draws):
        if fresh_pool:
            pool = CandidatePool(len(distances))
        sampler.draw(pool, distances, rng)
    return draws / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--draws", type=int, default=2_000)
    parser.add_argument("--embed-names", type=int, default=2_000, help="names to embed for the cache timing")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(args.vocab, args.dim)).astype(np.float32)
    distances = cosine_distances(rng.normal(size=args.dim), vectors)
    rows = []
    for label, sampler in (("RandS", RandomSampler()), ("PDWS n=-20", PDWSSampler(-20.0)),
                           ("PDWS n=+20", PDWSSampler(20.0)), ("PDWS n=0", PDWSSampler(0.0))):
        for fresh in (True, False):
            rows.append((label, "fresh pool" if fresh else "drained pool",
                         draws_per_second(sampler, distances, args.draws, fresh)))
    start = time.perf_counter()
    for _ in range(20):
        cosine_distances(rng.normal(size=args.dim), vectors)
    distance_ms = (time.perf_counter() - start) / 20 * 1000

    print(f"## PDWS / RandS over a {args.vocab:,}-entry vocabulary ({args.dim}-d), {args.draws:,} draws each\n")
    print("| sampler | pool | draws/s |\n|---|---|---|")
    for label, pool, rate in rows:
        print(f"| {label} | {pool} | {rate:,.0f} |")
    print(f"\ncosine distances key → {args.vocab:,} entries: {distance_ms:.2f} ms per key\n")

    names = tuple(f"compound {i} {w}" for i, w in enumerate(
        ["amidase", "ketolide", "sulfonate", "fluorophenyl", "carboxamide", "pyrimidine"] * (args.embed_names // 6 + 1)
    ))[: args.embed_names]
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
    print(f"## Vocabulary embedding ({args.embed_names:,} names, {encoder.name})\n")
    print("| | seconds | names/s |\n|---|---|---|")
    print(f"| cold (encode + write cache) | {cold:.2f} | {args.embed_names / cold:,.0f} |")
    print(f"| cached (read .npy) | {warm:.4f} | {args.embed_names / warm:,.0f} |")


if __name__ == "__main__":
    main()
