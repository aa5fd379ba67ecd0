"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp server, ...) as a ``ChatModel``.

Retries, back-off and timeouts are the ``openai`` client's own: ``timeout`` seconds per attempt (default
``DEFAULT_TIMEOUT`` = 20 s) and ``max_retries`` retries of 429, 5xx, time-outs and dropped connections (default
``DEFAULT_RETRIES`` = 2, honouring ``Retry-After``), so a hung connection is retried after 20 s and becomes an
LLM error after about a minute. What is left of a failure becomes a recorded ``Generation.error``, except a
configuration failure (401/403/404), which raises ``ModelConfigError`` (``medfuzz.models.failures``).

Concurrency: at most ``max_connections`` calls (default ``DEFAULT_MAX_CONNECTIONS``) are in flight per endpoint
(``base_url``) at once, shared by every ``OpenAIChatModel`` of that endpoint in the running event loop (a target
and an attacker on one server share one limit; the first model to call sets it), like Inspect's
``max_connections``. Engines put all their independent work in flight at once and rely on this one limit.

Per-call CPU: the request goes out through the client's ``post`` with the body as plain JSON and the reply is
read as plain JSON, skipping the SDK's recursive parameter transform and its pydantic response model (about
8 ms of CPU per call on these machines, several times the rest of the plugin; ``bench/medfuzz_latency.py
--profile 16``); retries, back-off, time-outs and HTTP errors stay the SDK's.

The API key comes from the ``api_key`` argument or the ``OPENAI_API_KEY`` environment variable; it is never
part of a result, an error message or a cache key.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Sequence
from typing import Any

from medfuzz.models.failures import cap_reply, config_failure, describe
from medfuzz.models.logprobs import TokenLogprob, extract_letter_logprobs
from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

TOP_LOGPROBS = 20  # OpenAI's maximum; enough to see every answer letter of a 4-10 option item
DEFAULT_TIMEOUT = 20.0  # seconds per attempt
DEFAULT_RETRIES = 2
DEFAULT_MAX_CONNECTIONS = 16  # calls in flight per endpoint (Inspect's default for most providers is 10)

# per event loop (a semaphore belongs to one loop) and endpoint: the one limit on calls in flight
_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = \
    weakref.WeakKeyDictionary()


def endpoint_gate(endpoint: str, limit: int) -> asyncio.Semaphore:
    """The running loop's semaphore for ``endpoint`` (created with ``limit`` by the first caller)."""
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    gate = gates.get(endpoint)
    if gate is None:
        gate = gates[endpoint] = asyncio.Semaphore(limit)
    return gate


class OpenAIChatModel:
    """Chat completions against ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``)."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        logprobs: bool = True,
        letter_position: str = "first",
        extra_body: dict[str, Any] | None = None,
        http_client: Any = None,
    ) -> None:
        import httpx
        from openai import AsyncOpenAI

        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.name = model
        self.endpoint = base_url or "openai"
        self.max_connections = max_connections
        self.logprobs = logprobs
        self.letter_position = letter_position
        self.extra_body = extra_body or {}
        self.identity = f"{self.endpoint}|{model}"  # what the call cache keys on (never the key)
        key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self._secrets = (key,)
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=key,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self._raw = httpx.Response  # ``post(cast_to=self._raw)``: the SDK hands back the body unparsed

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        letters: Sequence[str] | None = None,
    ) -> Generation:
        request: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": max_tokens,
        }
        if temperature is not None:
            request["temperature"] = temperature
        if seed is not None:
            request["seed"] = seed
        want_logprobs = bool(letters) and self.logprobs
        if want_logprobs:
            request["logprobs"] = True
            request["top_logprobs"] = TOP_LOGPROBS
        if self.extra_body:
            request.update(self.extra_body)  # what the SDK's ``extra_body`` does: merged into the JSON body
        try:
            async with endpoint_gate(self.endpoint, self.max_connections):
                response = await self._client.post("/chat/completions", body=request, cast_to=self._raw)
            data = response.json()
        except Exception as err:  # network, HTTP, timeout, bad body: recorded; only a misconfiguration is fatal
            fatal = config_failure(err, self._secrets)
            if fatal is not None:
                raise fatal from None
            return Generation(text="", error=describe(err, self._secrets), model=self.name)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            return Generation(text="", error="empty response (no choices)", model=self.name)
        choice = choices[0] or {}
        message = choice.get("message") or {}
        text = cap_reply(message.get("content") or "", self._secrets)
        usage_data = data.get("usage") or {}
        usage = TokenUsage(
            input_tokens=usage_data.get("prompt_tokens") or 0,
            output_tokens=usage_data.get("completion_tokens") or 0,
        )
        letter_logprobs = None
        if want_logprobs and letters:
            letter_logprobs = extract_letter_logprobs(
                _positions(choice.get("logprobs")), letters, where=self.letter_position  # type: ignore[arg-type]
            )
        refusal = message.get("refusal")
        if refusal and not text:
            return Generation(text="", error=f"refusal: {cap_reply(refusal, self._secrets)[:500]}", usage=usage,
                              model=self.name)
        return Generation(text=text, letter_logprobs=letter_logprobs, usage=usage, model=self.name)


def _positions(logprobs: Any) -> list[TokenLogprob] | None:
    """The reply's per-token log-probs (``choices[0].logprobs.content`` of the JSON body)."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return None
    # float(): some servers send numbers as strings or numpy-style values; results stay JSON-serialisable.
    # A malformed entry (no token, no number) makes the reply's logprobs unusable, never the call a crash:
    # the letter then comes from the text, as for a server without logprobs.
    try:
        return [
            TokenLogprob(
                token=str(entry["token"]),
                logprob=float(entry["logprob"]),
                top=tuple((str(alt["token"]), float(alt["logprob"])) for alt in (entry.get("top_logprobs") or [])),
            )
            for entry in content
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
