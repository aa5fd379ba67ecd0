"""The planted models behind an OpenAI-compatible HTTP server on 127.0.0.1 (stdlib ``http.server``: no
dependency), so the real clients are exercised: Inspect's ``openai-api`` provider, lm-eval's
``local-completions`` / ``local-chat-completions``, the ``openai`` package.

Endpoints: ``GET /v1/models``; ``POST /v1/chat/completions`` (``logprobs``/``top_logprobs`` on the answer
letter); ``POST /v1/completions`` (``echo`` with per-token prompt log-probabilities, one character per
token); ``GET /tokenizer_info``, ``POST /tokenize``, ``POST /detokenize`` (lm-eval's remote tokenizer, so
``local-completions`` needs no Hugging Face tokenizer). Model ``<name>`` is the target and
``<name>-attacker`` the attacker.

``TransientFaults`` makes it behave like a busy real endpoint: a seeded share of distinct model-call requests
fail on their first attempt (500, 429 with ``Retry-After``, or a hang longer than the client's deadline) and
succeed when retried, so a run must retry its way to the same numbers as a faultless one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.models.protocol import ChatMessage
from medfuzz.planted import ATTACKER_SUFFIX
from medfuzz.planted.attacker import PlantedAttacker
from medfuzz.planted.scoring import positions
from medfuzz.planted.spec import PlantedSpec
from medfuzz.planted.target import PlantedTarget, log_probs

INSPECT_SERVICE = "planted"  # Inspect reads PLANTED_BASE_URL / PLANTED_API_KEY for openai-api/planted/<model>
API_KEY = "planted"
EOS = "\x03"


def _content(value: Any) -> str:
    if isinstance(value, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(part.get("text", "") for part in value if isinstance(part, dict))
    return str(value or "")


def _prompt_text(prompt: Any) -> list[str]:
    """``prompt`` of /v1/completions as texts: a string, a list of strings, token ids or lists of them."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return ["".join(map(chr, prompt))]
    if isinstance(prompt, list):
        return [p if isinstance(p, str) else "".join(map(chr, p)) for p in prompt]
    raise ValueError(f"unsupported prompt {prompt!r:.80}")


def _cut(text: str, stop: Any, max_tokens: int | None) -> str:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    for s in stops:
        if s and s in text:
            text = text[: text.index(s)]
    return text[:max_tokens] if max_tokens is not None else text


TRANSIENT_KINDS = ("500", "429", "hang")
MODEL_CALL_PATHS = ("/v1/chat/completions", "/v1/completions")  # latency and faults: not /tokenize, /models


@dataclass
class TransientFaults:
    """A seeded ``rate`` of distinct model-call requests (keyed by their exact body) fail on their first attempt
    with one of ``kinds`` (drawn per request): ``500``, ``429`` (``Retry-After: 1``), or ``hang`` (no reply for
    ``hang_seconds``, then the connection closes). A retry of the same body succeeds. ``served`` counts the
    faults served per kind."""

    rate: float = 0.0
    kinds: tuple[str, ...] = TRANSIENT_KINDS
    hang_seconds: float = 10.0
    seed: int = 0
    served: Counter[str] = field(default_factory=Counter)
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in TRANSIENT_KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds must be some of {TRANSIENT_KINDS}, got {list(self.kinds)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")

    @classmethod
    def parse(cls, text: str) -> TransientFaults:
        """``RATE[:KIND+KIND...]``, e.g. ``0.1`` or ``0.1:500+429+hang``."""
        rate, _, kinds = text.partition(":")
        try:
            return cls(float(rate), tuple(kinds.split("+")) if kinds else TRANSIENT_KINDS)
        except ValueError as err:
            raise ValueError(f"--faults {text!r}: {err} (expected RATE[:KIND+KIND], e.g. 0.1:500+429+hang)") from None

    def fault_for(self, raw: bytes) -> str | None:
        """The fault this request gets, or None: only the first attempt of a request drawn into the faulty share."""
        if self.rate <= 0.0:
            return None
        digest = hashlib.sha256(f"{self.seed}|".encode() + raw).hexdigest()
        if int(digest[:8], 16) / 0x100000000 >= self.rate:
            return None
        with self._lock:
            if digest in self._seen:
                return None
            self._seen.add(digest)
        kind = self.kinds[int(digest[8:16], 16) % len(self.kinds)]
        with self._lock:
            self.served[kind] += 1
        return kind


class PlantedApp:
    """Request handling, independent of the HTTP plumbing (so it can be tested directly)."""

    def __init__(self, spec: PlantedSpec, items: Sequence[MCQItem] | None = None) -> None:
        self.spec = spec
        self.target = PlantedTarget(spec, items)
        self.attacker = PlantedAttacker(spec.attacker, spec.seed)
        self.models = [spec.name, spec.name + ATTACKER_SUFFIX]
        self.requests = 0
        # per model: chat completions answered and their (word-count) tokens, for scale benchmarks
        self.calls: dict[str, int] = {}
        self.tokens: dict[str, int] = {}

    def _behaviour(self, model: str) -> Any:
        if model not in self.models:
            raise LookupError(f"unknown model {model!r}; this server has {self.models}")
        return self.attacker if model.endswith(ATTACKER_SUFFIX) else self.target

    def models_list(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "medfuzz"}
                                           for m in self.models]}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model", ""))
        behaviour = self._behaviour(model)
        messages = [ChatMessage(m["role"] if m["role"] in ("system", "user", "assistant") else "user",
                                _content(m.get("content"))) for m in body.get("messages", [])]
        reply = behaviour.respond(messages, seed=body.get("seed"), temperature=body.get("temperature"))
        text = _cut(reply.text, body.get("stop"), None)
        logprobs = None
        if body.get("logprobs"):
            top = int(body.get("top_logprobs") or 0)
            logprobs = {"content": self._chat_logprobs(text, reply.letter_probs, top)}
        words = sum(len(m.content.split()) for m in messages)
        self.calls[model] = self.calls.get(model, 0) + 1
        self.tokens[model] = self.tokens.get(model, 0) + words + len(text.split())
        return {
            "id": f"chatcmpl-planted-{self.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": logprobs}],
            "usage": {"prompt_tokens": words, "completion_tokens": len(text.split()),
                      "total_tokens": words + len(text.split())},
        }

    @staticmethod
    def _chat_logprobs(text: str, probs: dict[str, float] | None, top: int) -> list[dict[str, Any]]:
        """One entry per word-like token; the answer letter (the reply's last token) carries the letters'
        log-probabilities, every other token is certain."""
        import re

        tokens = re.findall(r"\s*\S+", text) or [text]
        entries = []
        for i, token in enumerate(tokens):
            alternatives = [(token, 0.0)]
            logprob = 0.0
            if probs is not None and i == len(tokens) - 1 and token.strip() in probs:
                letter = token.strip()
                lead = token[: len(token) - len(letter)]
                logs = sorted(log_probs(probs).items(), key=lambda kv: -kv[1])
                alternatives = [(lead + k, v) for k, v in logs]
                logprob = dict(logs).get(letter, -100.0)
            entries.append({"token": token, "logprob": logprob, "bytes": list(token.encode()),
                            "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())}
                                             for t, v in alternatives[:top]]})
        return entries

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model", ""))
        if self._behaviour(model) is not self.target:
            raise LookupError("completions are served for the target model only")
        echo, top = bool(body.get("echo")), body.get("logprobs")
        max_tokens = body.get("max_tokens", 16)
        seed = body.get("seed")
        choices = []
        for index, prompt in enumerate(_prompt_text(body.get("prompt", ""))):
            reply = self.target.respond([ChatMessage("user", prompt)], seed=seed,
                                        temperature=body.get("temperature"))
            generated = _cut(reply.text, body.get("stop"), max_tokens)
            text = (prompt if echo else "") + generated
            choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": "stop", "logprobs": None}
            if top is not None:
                scored = positions(self.target, prompt + generated, seed, top=int(top) or 1)
                start = 0 if echo else len(prompt)
                shown = scored[start:]
                choice["logprobs"] = {
                    "tokens": [p.token for p in shown],
                    "token_logprobs": [None if echo and i == 0 else p.logprob for i, p in enumerate(shown)],
                    "top_logprobs": [None if echo and i == 0 else p.top for i, p in enumerate(shown)],
                    "text_offset": list(range(start, start + len(shown))),
                }
            choices.append(choice)
        return {"id": f"cmpl-planted-{self.requests}", "object": "text_completion", "created": int(time.time()),
                "model": model, "choices": choices,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    @staticmethod
    def tokenizer_info() -> dict[str, Any]:
        return {"eos_token": EOS, "bos_token": None, "pad_token": None, "model_max_length": 1_000_000,
                "chat_template": "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
                                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"}

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests += 1
        path = path.split("?", 1)[0].rstrip("/")
        try:
            if method == "GET" and path == "/v1/models":
                return 200, self.models_list()
            if method == "GET" and path == "/tokenizer_info":
                return 200, self.tokenizer_info()
            if method == "POST" and path == "/tokenize":
                return 200, {"tokens": [ord(c) for c in str(body.get("prompt", ""))]}
            if method == "POST" and path == "/detokenize":
                return 200, {"prompt": "".join(map(chr, body.get("tokens", [])))}
            if method == "POST" and path == "/v1/chat/completions":
                if body.get("stream"):
                    return 400, {"error": {"message": "streaming is not supported by the planted server"}}
                return 200, self.chat(body)
            if method == "POST" and path == "/v1/completions":
                return 200, self.completions(body)
        except LookupError as err:
            return 404, {"error": {"message": str(err), "type": "invalid_request_error"}}
        except (KeyError, TypeError, ValueError) as err:
            return 400, {"error": {"message": f"bad request: {err}", "type": "invalid_request_error"}}
        return 404, {"error": {"message": f"no route {method} {path}"}}


def _handler(app: PlantedApp, latency: float = 0.0,
             faults: TransientFaults | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _fault(self, kind: str) -> None:
            if kind == "hang":  # longer than the client's deadline: it gives up and retries
                time.sleep(faults.hang_seconds if faults else 0.0)
                self.close_connection = True
                return
            status, retry = (429, {"Retry-After": "1"}) if kind == "429" else (500, {})
            data = json.dumps({"error": {"message": f"planted transient fault {kind}", "type": "server_error"}})
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                **retry}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data.encode())

        def _reply(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            model_call = method == "POST" and self.path.split("?", 1)[0].rstrip("/") in MODEL_CALL_PATHS
            if latency and model_call:  # as slow as the endpoint being imitated (one thread per connection, so
                time.sleep(latency)  # concurrent calls overlap like a real server's); tokenizing is not a call
            kind = faults.fault_for(raw) if faults is not None and model_call else None
            if kind is not None:
                self._fault(kind)
                return
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                status, payload = 400, {"error": {"message": "the body is not JSON"}}
            else:
                status, payload = app.handle(method, self.path, body if isinstance(body, dict) else {})
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply("GET")

        def do_POST(self) -> None:
            self._reply("POST")

        def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request is noise here
            pass

    return Handler


@dataclass
class PlantedServer:
    app: PlantedApp
    httpd: ThreadingHTTPServer
    thread: threading.Thread
    faults: TransientFaults | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def target_name(self) -> str:
        return self.app.models[0]

    @property
    def attacker_name(self) -> str:
        return self.app.models[1]

    def inspect_env(self) -> dict[str, str]:
        prefix = INSPECT_SERVICE.upper()
        return {f"{prefix}_BASE_URL": self.base_url, f"{prefix}_API_KEY": API_KEY}

    def inspect_model(self, attacker: bool = False) -> str:
        return f"openai-api/{INSPECT_SERVICE}/{self.attacker_name if attacker else self.target_name}"

    def usage_text(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.inspect_env().items())
        return "\n".join([
            f"medfuzz: planted models {self.app.models} serving at {self.base_url} (spec {self.app.spec.source})",
            "", "Inspect:", f"  export {env}",
            f"  inspect eval medfuzz/medfuzz_medqa --model {self.inspect_model()} "
            f"--model-role attacker={self.inspect_model(attacker=True)} -T data=demo",
            f"  inspect eval medfuzz/tces_medqa --model {self.inspect_model()} -T data=demo -T sampler=pdws -T n=-20"
            + (f" -T vocabulary={self.app.spec.tces.vocabulary}" if self.app.spec.tces.vocabulary else ""),
            "", "lm-eval (loglikelihood tasks, remote tokenizer of this server):",
            f"  medfuzz-lm-eval --model local-completions --model_args model={self.target_name},"
            f"base_url={self.base_url}/completions,tokenizer_backend=remote --tasks medqa_clean "
            "--metadata '{\"data\": \"demo\"}'",
        ])

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def launch(spec: PlantedSpec | None = None, items: Sequence[MCQItem] | None = None, port: int = 0,
           latency_ms: float = 0.0, faults: TransientFaults | None = None) -> PlantedServer:
    """Serve in a background thread (port 0: a free one); ``stop()`` ends it. ``latency_ms``: a fixed delay
    before every model call's reply (scale runs against a server as slow as a real endpoint); ``faults``:
    transient first-attempt failures of a share of the calls."""
    if latency_ms < 0:
        raise ValueError(f"latency_ms must be 0 or more, got {latency_ms}")
    app = PlantedApp(spec or PlantedSpec.load(), items)
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(app, latency_ms / 1000.0, faults))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="planted-server", daemon=True)
    thread.start()
    return PlantedServer(app, httpd, thread, faults)


@contextlib.contextmanager
def serve(spec: PlantedSpec | None = None, items: Sequence[MCQItem] | None = None,
          port: int = 0) -> Iterator[PlantedServer]:
    server = launch(spec, items, port)
    try:
        yield server
    finally:
        server.stop()
