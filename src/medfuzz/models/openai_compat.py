"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp server, ...) as a ``ChatModel``.

Retries, back-off and timeouts are the ``openai`` client's own: ``timeout`` seconds per attempt (default
``DEFAULT_TIMEOUT`` = 20 s) and ``max_retries`` retries of 429, 5xx, time-outs and dropped connections (default
``DEFAULT_RETRIES`` = 2, honouring ``Retry-After``), so a hung connection is retried after 20 s and becomes an
LLM error after about a minute. What is left of a failure becomes a recorded ``Generation.error``, except a
configuration failure (401/403/404), which raises ``ModelConfigError`` (``medfuzz.models.failures``).

The API key comes from the ``api_key`` argument or the ``OPENAI_API_KEY`` environment variable; it is never
part of a result, an error message or a cache key.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from medfuzz.models.failures import cap_reply, config_failure, describe
from medfuzz.models.logprobs import TokenLogprob, extract_letter_logprobs
from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

TOP_LOGPROBS = 20  # OpenAI's maximum; enough to see every answer letter of a 4-10 option item
DEFAULT_TIMEOUT = 20.0  # seconds per attempt
DEFAULT_RETRIES = 2


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
        logprobs: bool = True,
        letter_position: str = "first",
        extra_body: dict[str, Any] | None = None,
        http_client: Any = None,
    ) -> None:
        from openai import AsyncOpenAI

        self.name = model
        self.logprobs = logprobs
        self.letter_position = letter_position
        self.extra_body = extra_body or {}
        self.identity = f"{base_url or 'openai'}|{model}"  # what the call cache keys on (never the key)
        key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self._secrets = (key,)
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=key,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

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
            request["extra_body"] = self.extra_body
        try:
            response = await self._client.chat.completions.create(**request)
        except Exception as err:  # network, HTTP, timeout, bad body: recorded; only a misconfiguration is fatal
            fatal = config_failure(err, self._secrets)
            if fatal is not None:
                raise fatal from None
            return Generation(text="", error=describe(err, self._secrets), model=self.name)
        if not response.choices:
            return Generation(text="", error="empty response (no choices)", model=self.name)
        choice = response.choices[0]
        text = cap_reply(choice.message.content or "")
        usage = TokenUsage(
            input_tokens=getattr(response.usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(response.usage, "completion_tokens", 0) or 0,
        )
        letter_logprobs = None
        if want_logprobs and letters:
            letter_logprobs = extract_letter_logprobs(
                _positions(choice.logprobs), letters, where=self.letter_position  # type: ignore[arg-type]
            )
        refusal = getattr(choice.message, "refusal", None)
        if refusal and not text:
            return Generation(text="", error=f"refusal: {cap_reply(refusal)[:500]}", usage=usage, model=self.name)
        return Generation(text=text, letter_logprobs=letter_logprobs, usage=usage, model=self.name)


def _positions(logprobs: Any) -> list[TokenLogprob] | None:
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return None
    # llama.cpp returns numpy float32 values: cast so results stay JSON-serialisable
    return [
        TokenLogprob(
            token=entry.token,
            logprob=float(entry.logprob),
            top=tuple((alt.token, float(alt.logprob)) for alt in (entry.top_logprobs or [])),
        )
        for entry in content
    ]
