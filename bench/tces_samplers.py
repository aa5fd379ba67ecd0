"""TCES sampler benchmark (issue 13 §3, target P3): PDWS / RandS draws per second over a 10k vocabulary and cosine
distances per key, before (the per-draw implementation this project used until the vectorised samplers, kept
here verbatim as the reference) and after (``draw_many``: Gumbel-top-k, the whole budget in one call; the
vocabulary normalised once), measured in one run; then vocabulary embedding time cold vs cached. Prints tables;
not a test (timings depend on the machine).

``--per-key`` (issue 28, item 4): PDWS ``draw_many`` at the attack's budget from one key, before (issue 13's
per-call path, kept here verbatim: the weights of the whole vocabulary recomputed at every call) and after (the
key's ``PDWSWeights`` computed once, ``PDWSSampler.weights``), alternating in rounds in one process, with a check
that both give the same draws and leave the generator in the same state. Prints draws per second of the best
round (the least disturbed by other processes), the median round, and the fastest batch of 50 calls (closest to
a quiet machine's per-call time), and the one-off cost of the weights.

    python bench/tces_samplers.py [--vocab 10000] [--draws 2000] [--embed-names 2000] [--no-embed] [--per-key]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np

from medfuzz.samplers.embeddings import SentenceEncoder, vocabulary_vectors
from medfuzz.samplers.sampling import (
    CandidatePool,
    PDWSSampler,
    RandomSampler,
    gumbel_top_k,
    pdws_probabilities,
    pdws_tiers,
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


def issue13_pdws_draw_many(n: float, pool: CandidatePool, distances: np.ndarray, k: int,
                           rng: np.random.Generator) -> np.ndarray:
    """``PDWSSampler.draw_many`` as it was before issue 28 (verbatim): every call recomputes ``log h^n`` over the
    pool, takes the log of every noise value and argpartitions the whole pool."""
    candidates = pool.indices()
    if len(candidates) == 0:
        raise ValueError("the candidate pool is empty")
    tiers, logs = pdws_tiers(np.asarray(distances)[candidates], n)
    chosen = candidates[gumbel_top_k(tiers, logs, k, rng)]
    pool.remove(chosen)
    return chosen


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
    parser.add_argument("--per-key", action="store_true", help="only the per-key PDWS table (issue 28)")
    parser.add_argument("--rounds", type=int, default=7, help="--per-key: alternating rounds of 0.5 s each")
    args = parser.parse_args()
    if args.per_key:
        per_key_table(args)
        return

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


def per_key_table(args: argparse.Namespace) -> None:
    """PDWS at ``--budget`` from one key: issue 13's per-call path against the key's precomputed weights."""
    rng = np.random.default_rng(1)
    unit = unit_rows(rng.normal(size=(args.vocab, args.dim)).astype(np.float32), np.float32)
    excluded = (0, 1, 2, 3, 4)  # an attack's pool: the key's and the options' entities are out
    print(f"## PDWS from one key, budget {args.budget}, {args.vocab:,}-entry vocabulary less {len(excluded)} "
          f"excluded; load (1-minute) {os.getloadavg()[0]:.2f} at the start\n")
    print("| n | draws/s before: best / median round / fastest batch | draws/s after: best / median round / fastest "
          "batch | speed-up: best round / fastest batch | same draws | weights once per key (ms) |\n"
          "|---|---|---|---|---|---|")
    for n in (-20.0, -5.0, 0.0, 5.0, 20.0):
        distances = unit_cosine_distances(rng.normal(size=args.dim), unit)
        sampler = PDWSSampler(n)
        started = time.perf_counter()
        weights = sampler.weights(distances)
        weights_ms = (time.perf_counter() - started) * 1000
        same = True
        for seed in range(200):
            old_rng, new_rng = np.random.default_rng(seed), np.random.default_rng(seed)
            old = issue13_pdws_draw_many(n, CandidatePool(args.vocab, excluded), distances, args.budget, old_rng)
            new = sampler.draw_many(CandidatePool(args.vocab, excluded), weights, args.budget, new_rng)
            same &= bool(np.array_equal(old, new)) and old_rng.random() == new_rng.random()
        old_rng, new_rng = np.random.default_rng(0), np.random.default_rng(0)

        def before(n: float = n, distances: np.ndarray = distances, draw_rng: np.random.Generator = old_rng) -> int:
            return len(issue13_pdws_draw_many(n, CandidatePool(args.vocab, excluded), distances, args.budget,
                                              draw_rng))

        def after(sampler: PDWSSampler = sampler, weights=weights, draw_rng: np.random.Generator = new_rng) -> int:
            return len(sampler.draw_many(CandidatePool(args.vocab, excluded), weights, args.budget, draw_rng))

        olds, news, old_batches, new_batches = [], [], [], []
        for _ in range(args.rounds):  # alternating, so that both see the same load
            olds.append(per_second(before, 0.5))
            news.append(per_second(after, 0.5))
            old_batches.append(min(timeit.repeat(before, number=50, repeat=20)) / 50)
            new_batches.append(min(timeit.repeat(after, number=50, repeat=20)) / 50)
        old_best, new_best = args.budget / min(old_batches), args.budget / min(new_batches)
        print(f"| {n:+g} | {max(olds):,.0f} / {np.median(olds):,.0f} / {old_best:,.0f} | {max(news):,.0f} / "
              f"{np.median(news):,.0f} / {new_best:,.0f} | {max(news) / max(olds):.2f}× / {new_best / old_best:.2f}× | "
              f"{same} | {weights_ms:.2f} |", flush=True)
    print(f"\nload (1-minute) at the end {os.getloadavg()[0]:.2f}")


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
