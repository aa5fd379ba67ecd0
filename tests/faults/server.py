"""A fault-injecting OpenAI-compatible chat server on 127.0.0.1 for the fault suite (stdlib only).

It answers ``POST /v1/chat/completions`` (and ``GET /v1/models``) the way a cooperative model would: the key of
the multiple-choice item in the prompt (looked up among the known items by option texts), in the format the
prompt asks for (Inspect's ``ANSWER: X``, a bare letter, MedFuzz's reasoning / confidences / letter, and a
MedFuzz attacker that appends a harmless sentence). On top of that a seeded ``Schedule`` injects one fault kind:

- transport: ``rate_limit`` (429 with ``Retry-After``), ``server_error`` (500), ``unavailable`` (503), ``hang``
  (no reply until the client gives up), ``drop`` (connection closed without a reply), ``truncated_json``
  (200 whose body is cut in half);
- content: ``empty`` (200, empty content), ``refusal`` (200, ``refusal`` set and no content), ``bad_letter``
  (an answer letter outside the item's options), ``huge`` (the right answer followed by megabytes of text);
- configuration: ``auth`` (401) and ``not_found`` (404, unknown model), on every call; ``auth_echo`` (401 whose
  body echoes the key it received, as some providers do: the canary test checks that no key reaches a file);
  ``reply_echo`` (200 whose content quotes the key instead of an answer: medfuzz quotes unparseable replies).

Which requests get the fault: ``poison`` (substrings; a request whose messages contain one is faulty on every
attempt — an *unrecoverable* fault for that item) and ``rate`` (a seeded share of dialogs, identified by their
opening system and user messages, whose first ``times`` calls are faulty — a *transient* fault that one retry
gets past, whether the client repeats the identical request, the engine asks again with a new seed, or a dialog
goes on).

The server counts everything per request key (a hash of the canonical request body): calls, completed 200
replies, faults served. ``hold_after`` makes it stop answering (hold new requests open) after that many
completed replies, so a test can kill a client at a point where every completed reply has been delivered.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.items import MCQItem
from medfuzz.planted import PlantedSpec
from medfuzz.planted.server import PlantedApp
from medfuzz.solvers.medfuzz import prompts as medfuzz_prompts

TRANSPORT_FAULTS = ("rate_limit", "server_error", "unavailable", "hang", "drop", "truncated_json")
CONTENT_FAULTS = ("empty", "refusal", "bad_letter", "huge")
CONFIG_FAULTS = ("auth", "not_found")
ECHO_FAULTS = ("auth_echo", "reply_echo")  # modes of their own: the fault matrix (CONFIG_FAULTS) is unchanged
FAULT_KINDS = TRANSPORT_FAULTS + CONTENT_FAULTS + CONFIG_FAULTS + ECHO_FAULTS

MODEL = "fault-model"
PLANTED_TOKENIZER = PlantedApp(PlantedSpec(), items=[])  # its /tokenize and /detokenize, for the auth_echo mode
OPTION_LINE = re.compile(r"^\(?([A-J])[.)]\s+(.+?)\s*$", re.M)


@dataclass
class Schedule:
    """Which fault, on which requests. ``kind=None``: no faults (a well-behaved server)."""

    kind: str | None = None
    rate: float = 0.0
    times: int = 1
    poison: tuple[str, ...] = ()
    seed: int = 0
    retry_after: float = 1.0  # seconds; HTTP says an integer, the OpenAI SDK reads a float (the tests wait 0.05 s)
    hang_seconds: float = 60.0
    huge_bytes: int = 2_000_000

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {FAULT_KINDS}")

    def faulty(self, key: str, text: str, attempt: int) -> bool:
        """Whether this attempt (0-based, per conversation ``key``) gets the fault."""
        if self.kind is None:
            return False
        if self.kind in CONFIG_FAULTS + ECHO_FAULTS or any(marker in text for marker in self.poison):
            return True
        draw = int(hashlib.sha256(f"{self.seed}|{key}".encode()).hexdigest()[:8], 16) / 0x100000000
        return draw < self.rate and attempt < self.times


@dataclass
class Stats:
    calls: int = 0
    completed: int = 0
    faults: Counter = field(default_factory=Counter)
    attempts: Counter = field(default_factory=Counter)  # conversation key -> calls
    requested_keys: Counter = field(default_factory=Counter)  # request key -> calls
    completed_keys: Counter = field(default_factory=Counter)  # request key -> 200 replies delivered
    failed_keys: set = field(default_factory=set)  # keys that got a fault at least once
    authorization: list = field(default_factory=list)  # Authorization headers seen (the canary test reads them)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


class Responder:
    """The cooperative model: correct answers for the known items, in the format each prompt asks for."""

    def __init__(self, items: Iterable[MCQItem]) -> None:
        self.by_answer: dict[str, list[MCQItem]] = {}
        for item in items:
            self.by_answer.setdefault(item.clean_options()[item.answer].strip(), []).append(item)

    def key_letter(self, text: str) -> tuple[str, dict[str, str]]:
        """The letter of the known key among the option lines of ``text`` (``"A"`` when none is known)."""
        shown: dict[str, str] = {}
        for letter, option in OPTION_LINE.findall(text):
            shown.setdefault(letter, option)
        by_text = {option: letter for letter, option in shown.items()}
        best, overlap = None, -1
        for option, letter in by_text.items():
            for item in self.by_answer.get(option, []):
                common = len(set(item.clean_options().values()) & set(by_text))
                if common > overlap:
                    best, overlap = letter, common
        return best or "A", shown

    def reply(self, messages: list[dict[str, Any]]) -> str:
        texts = [(m.get("role"), _text(m.get("content"))) for m in messages]
        system = next((t for r, t in texts if r == "system"), "")
        users = [t for r, t in texts if r == "user"]
        last = users[-1] if users else ""
        first_with_options = next((t for t in users if OPTION_LINE.search(t)), last)
        if system.startswith(medfuzz_prompts.ATTACKER_SYSTEM):
            return self._attacker(users, last)
        if "For each numbered item" in last:  # faithfulness judge
            return "\n".join(f"{i}: no" for i in range(1, 10))
        letter, shown = self.key_letter(first_with_options)
        if last == medfuzz_prompts.TARGET_CONFIDENCE:
            return "\n".join(f"{x}: {5 if x == letter else 1}" for x in shown)
        if "ANSWER: $LETTER" in last:
            return f"ANSWER: {letter}"
        if "clinical setting" in last and "step by step" in last:
            return f"The findings point to {shown.get(letter, 'the key')}; the other options fit less well."
        return letter

    def _attacker(self, users: list[str], last: str) -> str:
        cold = users[0]
        found = re.search(r"Question:\n(.*?)\n\nA\. ", cold, re.S)
        stem = found.group(1) if found else ""
        shown = OPTION_LINE.findall(cold.split("Correct answer")[0])
        options = "\n".join(f"{letter}. {text}" for letter, text in shown)
        if "systematic word-for-word substitution" in last:
            return f"{stem} The patient enjoys knitting.\n\n{options}"
        if "modified question" in last and ("Now write" in last or "could not be used" in last):
            return f"Modified question: {stem} The patient enjoys gardening.\n\n{options}"
        if last.startswith("That did not work"):
            return "The test taker was not swayed by the added hobby."
        return "Plan: add a hobby that hints at a distractor."


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that give up on a hung or dropped request reset the connection: expected here, not news."""


class FaultServer:
    """``with FaultServer(schedule) as server:`` — ``server.base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self, schedule: Schedule | None = None, items: Iterable[MCQItem] | None = None,
                 hold_after: int | None = None) -> None:
        self.schedule = schedule or Schedule()
        self.responder = Responder(items if items is not None else default_items())
        self.stats = Stats()
        self.hold_after = hold_after
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # ---------------------------------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self, api_key: str = "fault-key") -> dict[str, str]:
        """Environment for Inspect's ``openai-api/faults/<model>`` provider."""
        return {"FAULTS_BASE_URL": self.base_url, "FAULTS_API_KEY": api_key}

    inspect_model = f"openai-api/faults/{MODEL}"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def reset(self, schedule: Schedule | None = None, hold_after: int | None = None) -> None:
        with self.lock:
            self.schedule = schedule or Schedule()
            self.stats = Stats()
            self.hold_after = hold_after

    def wait_for(self, completed: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while self.stats.completed < completed:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server completed {self.stats.completed} of {completed} calls")
            time.sleep(0.05)

    # ------------------------------------------------------------------------------------------ serving

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                if server.schedule.kind == "auth_echo" and self.path.rstrip("/") == "/tokenizer_info":
                    self._json(200, PlantedApp.tokenizer_info())  # lm-eval's remote tokenizer: open, as vLLM's
                elif self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
                    return
                if server.schedule.kind == "auth_echo" and self.path.rstrip("/") in ("/tokenize", "/detokenize"):
                    self._json(*PLANTED_TOKENIZER.handle("POST", self.path, body))  # one character, one token
                    return
                server._serve(self, body)

            def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self._send(status, data, headers)

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

        return Handler

    def _serve(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        key = request_key(body)
        conversation = request_key({"messages": messages[:2]})  # the dialog, whatever follows its opening
        text = "\n".join(_text(m.get("content")) for m in messages)
        with self.lock:
            schedule = self.schedule
            attempt = self.stats.attempts[conversation]
            self.stats.attempts[conversation] += 1
            self.stats.requested_keys[key] += 1
            self.stats.calls += 1
            self.stats.authorization.append(handler.headers.get("Authorization", ""))
            hold = self.hold_after is not None and self.stats.completed >= self.hold_after
        if hold:  # held open until the server stops (the client is killed meanwhile)
            self.stopping.wait()
            return
        if schedule.faulty(conversation, text, attempt):
            with self.lock:
                self.stats.faults[schedule.kind] += 1
                self.stats.failed_keys.add(key)
            if self._fault(handler, body, messages, schedule):
                return
        reply = self.responder.reply(messages)
        self._complete(handler, body, key, reply)

    def _complete(self, handler: Any, body: dict[str, Any], key: str, content: str | None,
                  refusal: str | None = None) -> None:
        handler._json(200, completion(body, content, refusal))
        with self.lock:
            self.stats.completed += 1
            self.stats.completed_keys[key] += 1

    def _fault(self, handler: Any, body: dict[str, Any], messages: list[dict[str, Any]], s: Schedule) -> bool:
        """Serve the fault; True when the request is finished (content faults count as completed replies)."""
        kind = s.kind
        key = request_key(body)
        if kind == "rate_limit":
            handler._json(429, error_body("Rate limit reached", "rate_limit_exceeded"),
                          {"Retry-After": str(s.retry_after)})
        elif kind == "server_error":
            handler._json(500, error_body("internal server error", "server_error"))
        elif kind == "unavailable":
            handler._json(503, error_body("service unavailable", "server_error"))
        elif kind == "hang":
            self.stopping.wait(s.hang_seconds)
            handler.close_connection = True
        elif kind == "drop":
            handler.close_connection = True
            with suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "truncated_json":
            data = json.dumps(completion(body, self.responder.reply(messages))).encode()
            handler._send(200, data[: len(data) // 2], {"Content-Length": str(len(data) // 2)})
        elif kind == "auth":
            handler._json(401, error_body("Incorrect API key provided", "invalid_api_key"))
        elif kind == "auth_echo":
            key = handler.headers.get("Authorization", "").removeprefix("Bearer ")
            handler._json(401, error_body(f"Incorrect API key provided: {key}", "invalid_api_key"))
        elif kind == "reply_echo":  # a 200 reply quoting the key instead of answering (a proxy's debug echo)
            echoed = handler.headers.get("Authorization", "").removeprefix("Bearer ")
            self._complete(handler, body, key, f"Debug: request authorised with {echoed}; no answer follows.")
        elif kind == "not_found":
            handler._json(404, error_body(f"The model {body.get('model')!r} does not exist", "model_not_found"))
        elif kind == "empty":
            self._complete(handler, body, key, "")
        elif kind == "refusal":
            self._complete(handler, body, key, None, refusal="I can't help with that.")
        elif kind == "bad_letter":
            self._complete(handler, body, key, bad_letter(self.responder.reply(messages)))
        elif kind == "huge":
            reply = self.responder.reply(messages)
            self._complete(handler, body, key, reply + "\n" + "x" * s.huge_bytes)
        return True


def request_key(body: dict[str, Any]) -> str:
    """What identifies a request: its canonical body (retries of one request share it)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def bad_letter(reply: str) -> str:
    """The same reply with every answer letter replaced by one no 4/5-option item has."""
    return re.sub(r"\b[A-E]\b", "H", reply) if reply.strip() else "H"


def error_body(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def completion(body: dict[str, Any], content: str | None, refusal: str | None = None) -> dict[str, Any]:
    prompt_tokens = sum(len(_text(m.get("content")).split()) for m in body.get("messages") or [])
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content, "refusal": refusal},
        "finish_reason": "content_filter" if refusal else "stop",
    }
    if body.get("logprobs") and content and len(content.strip()) == 1:
        letter = content.strip()
        top = [{"token": letter, "logprob": -0.1, "bytes": None}, {"token": "Z", "logprob": -2.5, "bytes": None}]
        choice["logprobs"] = {"content": [{"token": letter, "logprob": -0.1, "bytes": None, "top_logprobs": top}]}
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len((content or "").split()),
                  "total_tokens": prompt_tokens + len((content or "").split())},
    }


def default_items() -> list[MCQItem]:
    """The bundled demo items (the suite's tasks run on them)."""
    return [*load_items("medqa", "demo"), *load_items("medmcqa", "demo")]


def main() -> None:  # pragma: no cover - manual use: python -m tests.faults.server KIND RATE
    import sys

    kind = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "none" else None
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    with FaultServer(Schedule(kind=kind, rate=rate)) as server:
        print(server.base_url, flush=True)
        server.stopping.wait()


if __name__ == "__main__":  # pragma: no cover
    main()
