"""TCES against a fake OpenAI-compatible server of fixed latency in its own process (issue 13, target P1; a
benchmark, not a test).

Every item of the run is in flight at once (as Inspect runs samples); within an item the queries follow one
another, because the attack stops at the first flip (Algorithm 1) and, for DiscreteZOO, each step needs the
scores of its gradient points. For concurrency limits 1, 16 and 64 (the OpenAI-compatible adapter's
per-endpoint ``max_connections``), each measured ``--repeat`` times, it prints calls, wall time, the naive
ideal ``calls x latency / concurrency``, the critical-path ideal (the longest chain of calls that must follow
one another, from a replay of the same run on a virtual clock with unlimited concurrency, x latency), their
ratio critical/wall, bound/wall (bound = the larger ideal) and CPU per call of the client process (the
server's CPU is its own process's) and of the engine alone (the virtual replay: no HTTP client).

The embedding is a deterministic hash encoder (384-d) over the bundled drug vocabulary: the numbers are about
scheduling and per-call overhead, not about which replacement the real encoder would pick.

    PYTHONPATH=src python bench/tces_latency.py [--latency 0.05] [--seeds 2] [--budget 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai import SERVER, critical_path, open_connections, start_server
from medfuzz_latency import CONCURRENCY, HEADER, TRANSPORT, Limited, close, http_client, row

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.models.openai_compat import OpenAIChatModel
from medfuzz.models.protocol import ChatModel
from medfuzz.samplers.entities import type_options
from medfuzz.samplers.vocab import load_vocabulary
from medfuzz.solvers.tces.attack import TCESResources, attack_item, clean_item
from medfuzz.solvers.tces.config import TCESConfig

ADAPTER_LIMIT = "max_connections" in inspect.signature(OpenAIChatModel).parameters


class HashEncoder:
    """Seeded unit vectors per text: deterministic, instant, no model download."""

    name = "hash-384"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.random.default_rng(int.from_bytes(hashlib.sha256(t.lower().encode()).digest()[:8], "big"))
                .normal(size=384) for t in texts]
        return np.asarray([r / np.linalg.norm(r) for r in rows], dtype=np.float32)


def resources() -> TCESResources:
    vocabulary = load_vocabulary("drugs")
    encoder = HashEncoder()
    return TCESResources(vocabulary, encoder, encoder.encode(vocabulary.names))


def model(url: str, concurrency: int) -> ChatModel:
    if ADAPTER_LIMIT:
        return OpenAIChatModel("target", url, "k", max_connections=concurrency, http_client=http_client())
    return Limited(OpenAIChatModel("target", url, "k"), asyncio.Semaphore(concurrency))


async def attack(target: ChatModel, work: list[tuple[MCQItem, TCESConfig]], shared: TCESResources):
    return await asyncio.gather(*(attack_item(item, target, shared, config) for item, config in work))


async def run_and_close(target: ChatModel, work, shared: TCESResources, warm: bool, clock: dict[str, float]):
    """The run, timed inside the loop; ``warm``: the model's connections are opened before the clock starts."""
    try:
        if warm:
            await open_connections(target, min(len(work), getattr(target, "max_connections", len(work))))
        clock["cpu"], clock["start"] = time.process_time(), time.perf_counter()
        results = await attack(target, work, shared)
        clock["wall"], clock["cpu"] = time.perf_counter() - clock["start"], time.process_time() - clock["cpu"]
        return results
    finally:
        await close(target)


def measure(url: str, work, shared: TCESResources, concurrency: int, warm: bool) -> tuple[list, float, float]:
    target = model(url, concurrency)  # set-up, not per-call cost
    clock: dict[str, float] = {}
    results = asyncio.run(run_and_close(target, work, shared, warm, clock))
    return results, clock["wall"], clock["cpu"]


def calls_of(results) -> int:
    return sum(u["calls"] for r in results for u in r.usage.values())


def table(url: str, title: str, work, shared: TCESResources, latency: float, repeat: int) -> None:
    def replay(make: Callable[[str], ChatModel]):
        return attack(make("target"), work, shared)

    virtual = critical_path("tces", replay)
    print(f"\n{title}: critical path {virtual.chain} calls ({virtual.calls} calls; engine alone "
          f"{virtual.engine_cpu / virtual.calls * 1000:.2f} ms CPU per call on the virtual clock)")
    print(HEADER)
    for concurrency in CONCURRENCY:
        at_limit = critical_path("tces", replay, limit=concurrency).chain  # this schedule at this limit, free CPU
        for run in range(1, repeat + 1):
            cold = measure(url, work, shared, concurrency, warm=False)
            results, wall, cpu = measure(url, work, shared, concurrency, warm=True)
            counts: dict[str, int] = {}
            for r in results:
                counts[r.outcome.value] = counts.get(r.outcome.value, 0) + 1
            print(row(concurrency, run, calls_of(results), latency, virtual.chain, at_limit, cold[1], wall, cpu,
                      ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--seeds", type=int, default=2, help="attacks per item (different seeds, like epochs)")
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated limits on calls in flight")
    parser.add_argument("--transport", choices=["httpx", "aiohttp"], default="httpx",
                        help="the openai SDK's HTTP transport (aiohttp: openai.DefaultAioHttpClient())")
    parser.add_argument("--server", choices=["asyncio", "threads"], default="asyncio",
                        help="the fake server: one asyncio loop (aiohttp.web) or a thread per connection "
                             "(ThreadingHTTPServer, the first P1 tables)")
    args = parser.parse_args()
    TRANSPORT["transport"] = args.transport
    SERVER["server"] = args.server
    CONCURRENCY[:] = [int(c) for c in args.concurrency.split(",")]

    shared = resources()
    items = [i for i in load_items("medqa", "demo") if type_options(clean_item(i), shared.matcher).distractors]
    server, url = start_server("tces", args.latency)
    try:
        print(f"fake server ({args.server}): own process, {args.latency * 1000:.0f} ms per call; "
              "limit on calls in flight: "
              f"{'the adapter (max_connections per endpoint)' if ADAPTER_LIMIT else 'a semaphore in front'}; "
              f"SDK transport {args.transport}")
        for sampler, extra in (("pdws", {}), ("zoo", {"zoo_m": 3})):
            work = [(item, TCESConfig(sampler=sampler, budget=args.budget, seed=seed, **extra))
                    for seed in range(args.seeds) for item in items]
            table(url, f"TCES {sampler}: {len(items)} items x {args.seeds} seeds, B={args.budget}", work, shared,
                  args.latency, args.repeat)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
