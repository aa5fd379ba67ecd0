"""MedFuzz against a fake OpenAI-compatible server of fixed latency in its own process (a benchmark, not a test).

Prints two tables:

1. (issue 13, target P1) scheduling: for concurrency limits 1, 16 and 64 (at most that many model calls in
   flight across target and attacker: the OpenAI-compatible adapter's per-endpoint ``max_connections``), each
   measured ``--repeat`` times: calls, wall time, the naive ideal ``calls x latency / concurrency``, the
   critical-path ideal (the longest chain of calls that must follow one another, found by replaying the same
   run on a virtual clock with unlimited concurrency, x latency), their ratio critical/wall, bound/wall (bound
   = the larger of the two ideals: what no scheduler can beat) and the client's CPU time per call (this
   process's CPU; the server's runs in its own process). Two workloads: the attack alone (no significance
   test) and the attack with Algorithm 2's control fuzzes and p-hats;
2. target and attacker calls spent per p-value (Algorithm 2) for the ``dialog`` and ``direct`` p-hat prompts,
   with the wall time per p-value.

    PYTHONPATH=src python bench/medfuzz_latency.py [--latency 0.05] [--items 8] [--replicates 2] [--turns 3]
        [--repeat 2] [--profile 16]        # --profile C: cProfile of the client at concurrency C (top 25)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import io
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai import SERVER, Replay, critical_path, open_connections, start_server

from medfuzz.benchmarks import load_items
from medfuzz.models.openai_compat import OpenAIChatModel
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine

# the adapter's own per-endpoint limit (since issue 13); before it, the benchmark put a shared semaphore in front
SORT = "tottime"
ADAPTER_LIMIT = "max_connections" in inspect.signature(OpenAIChatModel).parameters


class Limited:
    """A ChatModel behind a shared semaphore: at most ``concurrency`` calls in flight across all models."""

    def __init__(self, model: OpenAIChatModel, gate: asyncio.Semaphore) -> None:
        self.model, self.gate, self.name = model, gate, model.name

    async def generate(self, messages: Sequence[ChatMessage], **kwargs) -> Generation:
        async with self.gate:
            return await self.model.generate(messages, **kwargs)


CONCURRENCY = [1, 16, 64]
TRANSPORT = {"transport": "httpx"}  # --transport aiohttp: the SDK's aiohttp transport (openai.DefaultAioHttpClient)


def http_client():
    import openai

    return openai.DefaultAioHttpClient() if TRANSPORT["transport"] == "aiohttp" else None


async def close(*models: ChatModel) -> None:
    """Close the SDK clients inside the run's loop (else they are closed at garbage collection, on a dead loop)."""
    for model in models:
        await getattr(model, "model", model)._client.close()


def models(url: str, concurrency: int) -> tuple[ChatModel, ChatModel]:
    import httpx

    if ADAPTER_LIMIT:  # one semaphore for the endpoint, shared by both models
        return (OpenAIChatModel("target", url, "k", max_connections=concurrency, http_client=http_client()),
                OpenAIChatModel("attacker", url, "k", max_connections=concurrency, http_client=http_client()))
    gate = asyncio.Semaphore(concurrency)
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency * 2), timeout=60)
    return (Limited(OpenAIChatModel("target", url, "k", http_client=client), gate),
            Limited(OpenAIChatModel("attacker", url, "k", http_client=client), gate))


async def attack(target: ChatModel, attacker: ChatModel, items, config: MedFuzzConfig):
    engine = MedFuzzEngine(target, attacker, config)
    return await asyncio.gather(*(engine.run_item(item) for item in items))


def calls_of(results) -> int:
    return sum(u["calls"] for x in results for r in x.replicates for u in r.usage.values())


def measure(url: str, items, config: MedFuzzConfig, concurrency: int,
            profile: cProfile.Profile | None = None, warm: bool = False) -> tuple[list, float, float]:
    """(results, wall seconds, client CPU seconds) of one run at ``concurrency``; ``warm``: the models' HTTP
    connections are opened before the clock starts (``open_connections``)."""
    target, attacker = models(url, concurrency)  # set-up (the SDK loads TLS certificates), not per-call cost
    clock: dict[str, float] = {}

    async def go():
        try:
            if warm:
                for model in (target, attacker):
                    await open_connections(model, concurrency)
            clock["cpu"], clock["start"] = time.process_time(), time.perf_counter()
            if profile:
                profile.enable()
            results = await attack(target, attacker, items, config)
            if profile:
                profile.disable()
            clock["wall"], clock["cpu"] = time.perf_counter() - clock["start"], time.process_time() - clock["cpu"]
            return results
        finally:
            await close(target, attacker)

    results = asyncio.run(go())
    return results, clock["wall"], clock["cpu"]


def critical(items, config: MedFuzzConfig, limit: int | None = None) -> Replay:
    def run(make: Callable[[str], ChatModel]):
        return attack(make("target"), make("attacker"), items, config)

    return critical_path("medfuzz", run, limit=limit)


def measure_virtual(items, config: MedFuzzConfig):
    captured: list = []

    async def run(make: Callable[[str], ChatModel]):
        captured.extend(await attack(make("target"), make("attacker"), items, config))

    critical_path("medfuzz", run)
    return captured, 0.0, 0.0


def longest_replicate(results) -> int:
    return max(sum(u["calls"] for u in r.usage.values()) for x in results for r in x.replicates)


def outcomes(results) -> str:
    counts: dict[str, int] = {}
    for result in results:
        for key, count in result.counts().items():
            counts[key] = counts.get(key, 0) + count
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v)


def scheduling_table(url: str, title: str, items, config: MedFuzzConfig, latency: float, repeat: int,
                     profile_at: int | None) -> None:
    virtual = critical(items, config)
    chain = virtual.chain
    print(f"\n{title}: critical path {chain} calls ({virtual.calls} calls; engine alone "
          f"{virtual.engine_cpu / virtual.calls * 1000:.2f} ms CPU per call on the virtual clock)")
    if not config.controls:  # every call of a replicate waits for the one before: its calls are the chain
        results, _, _ = measure_virtual(items, config)
        print(f"  independent check: longest replicate has {longest_replicate(results)} calls")
    print(HEADER)
    for concurrency in CONCURRENCY:
        at_limit = critical(items, config, concurrency).chain  # this schedule at this limit, free CPU
        for run in range(1, repeat + 1):
            profile = cProfile.Profile() if profile_at == concurrency and run == 1 else None
            cold = measure(url, items, config, concurrency)
            results, wall, cpu = measure(url, items, config, concurrency, profile, warm=True)
            print(row(concurrency, run, calls_of(results), latency, chain, at_limit, cold[1], wall, cpu,
                      outcomes(results)))
            if profile:
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats(SORT).print_stats(25)
                print(out.getvalue())


HEADER = (f"{'conc':>4} {'run':>3} {'calls':>6} {'naive s':>7} {'crit s':>7} {'limit s':>7} | {'cold wall':>9} "
          f"{'crit/wall':>9} | {'warm wall':>9} {'crit/wall':>9} {'limit/wall':>10} {'cpu ms/call':>11}  outcomes")


def row(concurrency: int, run: int, calls: int, latency: float, chain: int, at_limit: int, cold: float,
        warm: float, cpu: float, outcome: str) -> str:
    """One line of the P1 table. naive = calls x latency / limit; crit = critical path (unlimited calls in
    flight); limit = the same FIFO schedule at this limit with free CPU (the best this schedule can do here);
    cold = connections opened during the run, warm = before it; cpu = the client's CPU per call (warm run)."""
    naive, crit, lim = calls * latency / concurrency, chain * latency, at_limit * latency
    return (f"{concurrency:>4} {run:>3} {calls:>6} {naive:>7.2f} {crit:>7.2f} {lim:>7.2f} | {cold:>9.2f} "
            f"{crit / cold:>9.2f} | {warm:>9.2f} {crit / warm:>9.2f} {lim / warm:>10.2f} {cpu / calls * 1000:>11.2f}  "
            f"{outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--controls", type=int, default=30)
    parser.add_argument("--option-orders", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", type=int, default=None, metavar="CONCURRENCY")
    parser.add_argument("--skip-pvalue", action="store_true", help="only the scheduling tables")
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

    items = load_items("medqa", "demo", limit=args.items)
    server, url = start_server("medfuzz", args.latency)
    try:
        print(f"fake server ({args.server}): own process, {args.latency * 1000:.0f} ms per call; "
              "limit on calls in flight: "
              f"{'the adapter (max_connections per endpoint)' if ADAPTER_LIMIT else 'a semaphore in front'}; "
              f"SDK transport {args.transport}")
        config = MedFuzzConfig(turns=args.turns, replicates=args.replicates, exemplars=0, controls=0)
        scheduling_table(url, f"MedFuzz attack: {args.items} items x {args.replicates} replicates, K={args.turns}, "
                         "no significance test", items, config, args.latency, args.repeat, args.profile)
        small = items[: max(1, args.items // 2)]
        config = MedFuzzConfig(turns=args.turns, replicates=args.replicates, exemplars=0, controls=10,
                               option_orders=3, pvalue_prompt="direct")
        scheduling_table(url, f"MedFuzz attack + significance: {len(small)} items x {args.replicates} replicates, "
                         f"K={args.turns}, M=10 sequential, 3 option orders, direct p-hat", small, config,
                         args.latency, args.repeat, None)
        if not args.skip_pvalue:
            pvalue_table(url, items, args)
    finally:
        server.kill()
        server.wait()


def pvalue_table(url: str, items, args: argparse.Namespace) -> None:
    print(f"\nCalls per p-value (Algorithm 2): M={args.controls} controls, {args.option_orders} option orders, "
          f"concurrency 16")
    print(f"{'p-hat prompt':>12} {'tests':>5} {'target/p':>8} {'attacker/p':>10} {'wall s/p':>8}  "
          "formula (target, fixed M)")
    for prompt, per_draw in (("dialog", 3), ("direct", 1)):
        config = MedFuzzConfig(turns=args.turns, replicates=1, exemplars=0, controls=args.controls,
                               option_orders=args.option_orders, pvalue_prompt=prompt)
        results, wall, _ = measure(url, items, config, 16)
        tests = [r.significance for result in results for r in result.replicates if r.significance]
        if not tests:
            print(f"{prompt:>12}     0  (no successful attack to test)")
            continue
        target = sum(t.target_calls for t in tests) / len(tests)
        attacker = sum(t.attacker_calls for t in tests) / len(tests)
        formula = f"(2 + {args.controls}) x {args.option_orders} x {per_draw} = " \
                  f"{(2 + args.controls) * args.option_orders * per_draw}"
        print(f"{prompt:>12} {len(tests):>5} {target:>8.0f} {attacker:>10.0f} {wall / len(tests):>8.2f}  {formula}")


if __name__ == "__main__":
    main()
