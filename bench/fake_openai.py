"""A fixed-latency fake OpenAI-compatible chat server for the latency benchmarks, run in its OWN process (so its
CPU is not counted as the client's), plus the scripted replies it gives and a virtual-time replay that measures
the critical path of a run (the longest chain of calls that must follow one another).

    python bench/fake_openai.py --kind medfuzz --latency 0.05     # prints "PORT <n>" and serves until killed

``start_server`` starts it as a subprocess and returns (process, base URL). Replies:

- ``medfuzz``: the attacker appends "noted clue<turn>." (controls: "ctl<n>."); the target, which knows the right
  option of every demo item, is fooled at the turn the item's hash picks (or never), and gives letter log-probs.
- ``tces``: the target answers the key unless a hash of the whole prompt (item, option texts, seed) picks a
  wrong letter (about one prompt in six), and gives letter log-probs.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import math
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

Reply = tuple[str, dict[str, float] | None]


def _stem_and_options(messages: list[dict]) -> tuple[str, dict[str, str]]:
    first = next(m["content"] for m in messages if m["role"] == "user")
    match = re.search(r"clinical setting\.\n\n(.*?)\n\n(A\. .*?)\n\n", first, re.S)
    if not match:
        return "", {}
    return match.group(1), dict(re.findall(r"^([A-J])\. (.+)$", match.group(2), re.M))


def medfuzz_reply(body: dict, answers: dict[str, str]) -> Reply:
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


def tces_reply(body: dict, keys: dict[str, str]) -> Reply:
    prompt = body["messages"][-1]["content"]
    letters = re.findall(r"^([A-J])\. ", prompt, re.M) or ["A", "B", "C", "D"]
    key = next((letter for stem, letter in keys.items() if stem in prompt), letters[0])
    digest = int.from_bytes(hashlib.sha256(f"{prompt}|{body.get('seed')}".encode()).digest()[:4], "big")
    letter = key if digest % 6 else letters[(letters.index(key) + 1) % len(letters)] if key in letters else key
    return letter, {k: math.log(0.7 if k == letter else 0.1) for k in letters}


def responder(kind: str) -> Callable[[dict], Reply]:
    items = load_items("medqa", "demo")
    if kind == "medfuzz":
        answers = {item.clean_question(): item.clean_options()[item.answer] for item in items}
        return lambda body: medfuzz_reply(body, answers)
    keys = {item.clean_question()[:200]: item.answer for item in items}
    return lambda body: tces_reply(body, keys)


def completion(body: dict, text: str, logprobs: dict[str, float] | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if logprobs and body.get("logprobs"):
        top = [{"token": k, "logprob": v, "bytes": None} for k, v in logprobs.items()]
        choice["logprobs"] = {"content": [{"token": text, "logprob": logprobs.get(text, -1.0), "bytes": None,
                                           "top_logprobs": top}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def serve(kind: str, latency: float) -> None:
    reply = responder(kind)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every call
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            started = time.perf_counter()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(completion(body, *reply(body))).encode()
            time.sleep(max(0.0, latency - (time.perf_counter() - started)))  # the latency includes our own work
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 256
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


def serve_asyncio(kind: str, latency: float) -> None:
    """The same replies from an asyncio server (aiohttp.web): one event loop instead of a thread per
    connection, so 64 replies due at the same instant do not queue for the GIL behind each other's thread
    switches. The latency is still measured from the moment the body is read and includes our own work."""
    from aiohttp import web

    reply = responder(kind)

    async def chat(request: web.Request) -> web.Response:
        started = time.perf_counter()
        body = json.loads(await request.read())
        data = json.dumps(completion(body, *reply(body))).encode()
        await asyncio.sleep(max(0.0, latency - (time.perf_counter() - started)))
        return web.Response(body=data, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=256)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


SERVER = {"server": "asyncio"}  # --server threads: the first benchmarks' ThreadingHTTPServer


def start_server(kind: str, latency: float) -> tuple[subprocess.Popen, str]:
    """The fake server in a child process; its base URL once it listens."""
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--kind", kind,
                                "--latency", str(latency), "--server", SERVER["server"]],
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


async def open_connections(model: Any, count: int) -> None:
    """``count`` concurrent throw-away calls through ``model`` before the timed run, so that its HTTP connections
    are open (a warm pool, as in any run past its first calls): setting up a few dozen connections at once costs
    ~50 ms on these machines, a large share of a 0.45-s critical path and nothing in a real run's hours."""
    messages = [ChatMessage("system", "warm-up"), ChatMessage("user", "warm-up")]
    await asyncio.gather(*(model.generate(messages, max_tokens=1) for _ in range(count)))


# ------------------------------------------------------------------------- critical path by virtual time


class _IdleSelector:
    """A selector with nothing to watch: waiting ``timeout`` seconds just moves the virtual clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self.loop = loop

    def select(self, timeout: float | None = None) -> list:
        if timeout:
            self.loop.now += timeout
        return []

    def register(self, *args: Any) -> None:
        raise RuntimeError("the virtual-time loop runs no I/O")

    def get_map(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer when nothing is ready: ``asyncio.sleep(latency)``
    costs no real time, and CPU work costs no virtual time. With every call a ``sleep(latency)`` and no limit
    on concurrency, the run ends at (longest chain of dependent calls) x latency: the critical path."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(selector=_IdleSelector(self))  # type: ignore[arg-type]

    def time(self) -> float:
        return self.now

    def _make_self_pipe(self) -> None:  # no self-pipe: nothing wakes this loop from another thread
        self._ssock = self._csock = None  # type: ignore[assignment]

    def _close_self_pipe(self) -> None:
        pass

    def _write_to_self(self) -> None:
        pass


class InstantModel:
    """A ChatModel that answers like the fake server after ``asyncio.sleep(latency)``, with no HTTP."""

    def __init__(self, name: str, reply: Callable[[dict], Reply], latency: float,
                 gate: asyncio.Semaphore | None = None) -> None:
        self.name, self.reply, self.latency, self.gate = name, reply, latency, gate
        self.calls = 0
        self.reply_cpu = 0.0  # the fake server's own work, not the client's

    async def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int = 512,
                       temperature: float | None = None, seed: int | None = None,
                       letters: Sequence[str] | None = None) -> Generation:
        self.calls += 1
        if self.gate is None:
            await asyncio.sleep(self.latency)
        else:  # the adapter's limit: a first-come semaphore
            async with self.gate:
                await asyncio.sleep(self.latency)
        body = {"model": self.name, "seed": seed, "messages": [{"role": m.role, "content": m.content}
                                                               for m in messages]}
        started = time.process_time()
        text, logprobs = self.reply(body)
        self.reply_cpu += time.process_time() - started
        wanted = {k: v for k, v in (logprobs or {}).items() if letters and k in letters} or None
        return Generation(text=text, letter_logprobs=wanted if letters else None, usage=TokenUsage(1, 1),
                          model=self.name)


@dataclass
class Replay:
    """A run replayed on the virtual clock: its critical path, its calls and the client's own CPU."""

    chain: int  # longest chain of calls that must follow one another
    calls: int
    engine_cpu: float  # seconds of CPU outside the fake replies: the engine's own work, no HTTP client


def critical_path(kind: str, run: Callable[[Callable[[str], InstantModel]], Any],
                  profile: cProfile.Profile | None = None, limit: int | None = None) -> Replay:
    """``run(make_model)`` with unlimited concurrency on the virtual clock, where ``make_model(name)`` gives a
    model answering like the ``kind`` server after one virtual second per call. ``limit``: at most that many
    calls in flight across all models (one first-come semaphore, like the adapter's per-endpoint limit): the
    run's length is then what this schedule reaches at that limit when CPU costs nothing."""
    reply = responder(kind)
    models: list[InstantModel] = []
    loop = VirtualTimeLoop()
    gate: list[asyncio.Semaphore] = []

    def make(name: str) -> InstantModel:
        if limit is not None and not gate:
            gate.append(asyncio.Semaphore(limit))
        models.append(InstantModel(name, reply, 1.0, gate[0] if gate else None))
        return models[-1]

    cpu = time.process_time()
    try:
        if profile:
            profile.enable()
        loop.run_until_complete(run(make))
    finally:
        if profile:
            profile.disable()
        loop.close()
    cpu = time.process_time() - cpu - sum(m.reply_cpu for m in models)
    return Replay(round(loop.now), sum(m.calls for m in models), cpu)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["medfuzz", "tces"], required=True)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--server", choices=["asyncio", "threads"], default="asyncio")
    args = parser.parse_args()
    (serve_asyncio if args.server == "asyncio" else serve)(args.kind, args.latency)
