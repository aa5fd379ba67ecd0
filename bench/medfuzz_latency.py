"""MedFuzz against a local fake OpenAI-compatible server of fixed latency (a benchmark, not a test).

Prints two tables:

1. wall time of a MedFuzz attack run vs the ideal ``calls x latency / concurrency`` for a few concurrency
   limits (the limit is a semaphore on in-flight model calls, like Inspect's ``max_connections``). Calls inside
   one replicate are sequential by construction (each turn needs the last answer), so the ideal is only
   reachable when there are at least ``concurrency`` replicates in flight, and never below the critical path
   (the longest replicate's calls x latency);
2. target and attacker calls spent per p-value (Algorithm 2) for the ``dialog`` and ``direct`` p-hat prompts,
   with the wall time per p-value.

    PYTHONPATH=src python bench/medfuzz_latency.py [--latency 0.05] [--items 8] [--replicates 2] [--turns 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import socket
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.models.openai_compat import OpenAIChatModel
from medfuzz.models.protocol import ChatMessage, Generation
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine

LETTERS = "ABCD"


def _stem_and_options(messages: list[dict]) -> tuple[str, dict[str, str]]:
    first = next(m["content"] for m in messages if m["role"] == "user")
    match = re.search(r"clinical setting\.\n\n(.*?)\n\n(A\. .*?)\n\n", first, re.S)
    if not match:
        return "", {}
    return match.group(1), dict(re.findall(r"^([A-J])\. (.+)$", match.group(2), re.M))


def _reply(body: dict, answers: dict[str, str]) -> tuple[str, dict[str, float] | None]:
    """A scripted target/attacker: the attacker appends "noted clue<turn>."; the target, which knows the right
    option of every item, is fooled at the turn its item's hash picks (or never)."""
    messages = body["messages"]
    last = messages[-1]["content"]
    if body["model"] == "attacker":
        original = re.search(r"(?:Question|Original question):\n(.*?)\n\nA\. ", messages[1]["content"], re.S)
        stem = original.group(1) if original else ""
        block = re.search(r"\n\n(A\. .*?)\n\n", messages[1]["content"], re.S)
        options = block.group(1) if block else ""
        if "word-for-word substitution" in last:
            return f"{stem} The patient notes ctl{item_seed(body.get('seed') or 0, 'c') % 97}.\n\n{options}", None
        if last.startswith(("Now write your modified", "Your modified question")):
            turn = sum(m["role"] == "user" and m["content"].startswith("Now write your modified") for m in messages)
            return f"{stem} The patient notes clue{turn}.\n\n{options}", None
        return "A short plan or analysis.", None
    stem, options = _stem_and_options(messages)
    correct_text = answers.get(stem.split(" The patient notes")[0], "")
    fooled_at = item_seed(0, stem.split(" The patient notes")[0]) % 5  # 0 = never, else the turn
    fooled = fooled_at and f"clue{fooled_at}." in stem
    letter = next((k for k, v in options.items() if (v != correct_text) == bool(fooled)), "A")
    if last.startswith("For every option"):
        return "\n".join(f"{k}: {5 if k == letter else 1}" for k in options), None
    if last.startswith("Now give your final answer") or "Reply with only the letter" in last:
        return letter, {k: math.log(0.7 if k == letter else 0.1) for k in options}
    return "Brief reasoning about the case.", None


class FakeServer:
    def __init__(self, latency: float, answers: dict[str, str]) -> None:
        self.calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every call
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(latency)
                server.calls += 1
                text, lp = _reply(body, answers)
                choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                if lp and body.get("logprobs"):
                    top = [{"token": k, "logprob": v, "bytes": None} for k, v in lp.items()]
                    choice["logprobs"] = {"content": [{"token": text, "logprob": lp[text], "bytes": None,
                                                       "top_logprobs": top}]}
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                   "choices": [choice],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.daemon_threads = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


class Limited:
    """A ChatModel behind a shared semaphore: at most ``concurrency`` calls in flight across all models."""

    def __init__(self, model: OpenAIChatModel, gate: asyncio.Semaphore) -> None:
        self.model, self.gate, self.name = model, gate, model.name

    async def generate(self, messages: Sequence[ChatMessage], **kwargs) -> Generation:
        async with self.gate:
            return await self.model.generate(messages, **kwargs)


async def run(server: FakeServer, items, config: MedFuzzConfig, concurrency: int):
    import httpx

    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    client = httpx.AsyncClient(limits=limits, timeout=60)
    target = Limited(OpenAIChatModel("target", server.url, "k", http_client=client), gate)
    attacker = Limited(OpenAIChatModel("attacker", server.url, "k", http_client=client), gate)
    engine = MedFuzzEngine(target, attacker, config)
    before = server.calls
    started = time.perf_counter()
    results = await asyncio.gather(*(engine.run_item(item) for item in items))
    wall = time.perf_counter() - started
    await client.aclose()
    return results, wall, server.calls - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--controls", type=int, default=30)
    parser.add_argument("--option-orders", type=int, default=5)
    args = parser.parse_args()

    items = load_items("medqa", "demo", limit=args.items)
    answers = {item.clean_question(): item.clean_options()[item.answer] for item in items}
    server = FakeServer(args.latency, answers)

    print(f"MedFuzz attack run: {args.items} items x {args.replicates} replicates, K={args.turns}, "
          f"latency {args.latency * 1000:.0f} ms per call, no significance test")
    print(f"{'concurrency':>11} {'calls':>6} {'wall s':>8} {'ideal s':>8} {'wall/ideal':>10} {'critical s':>10}  "
          "outcomes")
    config = MedFuzzConfig(turns=args.turns, replicates=args.replicates, exemplars=0, controls=0)
    for concurrency in (1, 4, 16):
        results, wall, calls = asyncio.run(run(server, items, config, concurrency))
        ideal = calls * args.latency / concurrency
        outcomes: dict[str, int] = {}
        for result in results:
            for key, count in result.counts().items():
                outcomes[key] = outcomes.get(key, 0) + count
        shown = ", ".join(f"{k} {v}" for k, v in outcomes.items() if v)
        # the longest replicate's calls are sequential: no concurrency can beat that
        critical = max(sum(u["calls"] for u in r.usage.values()) for x in results for r in x.replicates)
        print(f"{concurrency:>11} {calls:>6} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>10.2f} "
              f"{critical * args.latency:>10.2f}  {shown}")

    print(f"\nCalls per p-value (Algorithm 2): M={args.controls} controls, {args.option_orders} option orders, "
          f"concurrency 16")
    print(f"{'p-hat prompt':>12} {'tests':>5} {'target/p':>8} {'attacker/p':>10} {'wall s/p':>8}  "
          "formula (target)")
    for prompt, per_draw in (("dialog", 3), ("direct", 1)):
        config = MedFuzzConfig(turns=args.turns, replicates=1, exemplars=0, controls=args.controls,
                               option_orders=args.option_orders, pvalue_prompt=prompt)
        results, wall, _ = asyncio.run(run(server, items, config, 16))
        tests = [r.significance for result in results for r in result.replicates if r.significance]
        if not tests:
            print(f"{prompt:>12}     0  (no successful attack to test)")
            continue
        target = sum(t.target_calls for t in tests) / len(tests)
        attacker = sum(t.attacker_calls for t in tests) / len(tests)
        formula = f"(2 + {args.controls}) x {args.option_orders} x {per_draw} = " \
                  f"{(2 + args.controls) * args.option_orders * per_draw}"
        print(f"{prompt:>12} {len(tests):>5} {target:>8.0f} {attacker:>10.0f} {wall / len(tests):>8.2f}  {formula}")
    server.httpd.shutdown()


if __name__ == "__main__":
    main()
