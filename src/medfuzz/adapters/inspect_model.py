"""An Inspect ``Model`` (any provider Inspect supports) as a medfuzz ``ChatModel``.

Inspect's own retry, caching, concurrency limits and logging stay in charge; we translate messages in and
turn a failed or refused generation into a recorded ``Generation.error`` (a configuration failure, 401/403/404,
raises ``ModelConfigError`` instead: the run stops with that reason).

Two defaults every call gets unless the user set them (``docs/foundation.md``, "Failure policy"):

- ``attempt_timeout`` (``ATTEMPT_TIMEOUT`` = 20 s): Inspect cuts a hung request only with it, and model roles
  do not inherit it from the task or the CLI, so it is set here per call when neither the model's own config
  nor the active one has it;
- the call cache: Inspect's ``CachePolicy`` (expiry from ``MEDFUZZ_CALL_CACHE``, default one week; ``off`` turns
  it off). The engines seed every call, so a cached reply is the reply; ``inspect eval-retry`` after a kill
  then re-pays none of the calls that had completed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    CachePolicy,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from inspect_ai.model._generate_config import active_generate_config  # not re-exported; needed to respect it
from inspect_ai.util import LimitExceededError

from medfuzz.models import call_cache
from medfuzz.models.failures import cap_reply, config_failure, describe, redact, redact_exception, redact_value
from medfuzz.models.logprobs import TokenLogprob, extract_letter_logprobs
from medfuzz.models.openai_compat import TOP_LOGPROBS
from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

ATTEMPT_TIMEOUT = 20  # seconds per attempt; a hung connection becomes a retry
MAX_RETRIES = 3
REQUEST_TIMEOUT = 60  # seconds for a call including its retries: then it is an LLM error


def default_generate_config() -> GenerateConfig:
    """The per-task defaults (``Task(config=...)``): a bounded call time instead of Inspect's retry-forever.
    ``--attempt-timeout``, ``--max-retries`` and ``--timeout`` on the command line override them."""
    return GenerateConfig(attempt_timeout=ATTEMPT_TIMEOUT, max_retries=MAX_RETRIES, timeout=REQUEST_TIMEOUT)


def cache_policy() -> CachePolicy | bool:
    """Inspect's cache policy for engine calls, from ``MEDFUZZ_CALL_CACHE`` (``False`` when it is off)."""
    return CachePolicy(expiry=call_cache.expiry(), per_epoch=True) if call_cache.enabled() else False


def call_config(model: Model, max_tokens: int, temperature: float | None, seed: int | None,
                logprobs: bool) -> GenerateConfig:
    """The per-call ``GenerateConfig``, built in one constructor: ``GenerateConfig.merge`` deep-copies both
    configs, and Inspect merges this one again with the model's and the active config on every call
    (``bench/medfuzz_inspect_cpu.py``). The fields are disjoint, so this equals the merged config."""
    fields: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    if model.config.attempt_timeout is None and active_generate_config().attempt_timeout is None:
        fields["attempt_timeout"] = ATTEMPT_TIMEOUT
    if logprobs:
        # set per call: the CLI's --logprobs does not reach role models (DESIGN §4)
        fields.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
    return GenerateConfig(**fields)


REDACTING = "_medfuzz_redacts_errors"  # marks a provider whose errors are already redacted


def redact_provider_errors(model: Model) -> Model:
    """``model`` with its provider's errors redacted of the API key where the provider raises them (once per
    provider instance). Inspect writes a provider exception's text to its trace log, the model event and the
    sample or eval error inside ``Model.generate``, before a solver or this adapter can catch it; a provider
    that echoes the key in a 401 body would otherwise put it into every ``.eval`` and the trace log. Inspect
    calls ``model.api.generate``, so the key is taken out there (``redact_exception``: in place, keeping the
    type and status code Inspect's retry logic and ``config_failure`` read). Inspect has no hook for this."""
    api = model.api
    if getattr(api, REDACTING, False):
        return model
    secrets = (getattr(api, "api_key", None),)
    provider_generate = api.generate

    async def generate(*args: Any, **kwargs: Any) -> Any:
        try:
            result = await provider_generate(*args, **kwargs)
        except Exception as err:
            redact_exception(err, secrets)
            raise
        output, call = result if isinstance(result, tuple) else (result, None)
        if isinstance(output, BaseException):  # a provider may return its error (Inspect then raises it)
            redact_exception(output, secrets)
        elif isinstance(getattr(output, "error", None), str):  # or a reply whose error Inspect logs
            output.error = redact(output.error, secrets)
        else:
            return result
        if call is not None:  # the raw exchange Inspect logs with the failed call's event
            call.response = redact_value(call.response, secrets)
        return result

    setattr(api, "generate", generate)  # noqa: B010 - an instance attribute shadows the method Inspect calls
    setattr(api, REDACTING, True)
    return model


_MESSAGE_TYPES: dict[str, Any] = {
    "system": ChatMessageSystem,
    "user": ChatMessageUser,
    "assistant": ChatMessageAssistant,
}


class InspectChatModel:
    def __init__(self, model: Model, letter_position: str = "first") -> None:
        self._model = redact_provider_errors(model)
        self.name = str(model)
        self.letter_position = letter_position

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        letters: Sequence[str] | None = None,
    ) -> Generation:
        config = call_config(self._model, max_tokens, temperature, seed, bool(letters))
        inspect_messages = [_MESSAGE_TYPES[m.role](content=m.content) for m in messages]
        try:
            output = await self._model.generate(inspect_messages, config=config, cache=cache_policy())
        except LimitExceededError:  # Inspect's own sample limits end the sample as Inspect decides
            raise
        except Exception as err:  # provider errors that survived Inspect's retries
            fatal = config_failure(err, (getattr(self._model.api, "api_key", None),))
            if fatal is not None:
                raise fatal from None
            return Generation(text="", error=describe(err, (getattr(self._model.api, "api_key", None),)),
                              model=self.name)
        usage = TokenUsage(
            input_tokens=output.usage.input_tokens if output.usage else 0,
            output_tokens=output.usage.output_tokens if output.usage else 0,
        )
        key = (getattr(self._model.api, "api_key", None),)
        if output.error:
            return Generation(text="", error=cap_reply(str(output.error), key)[:500], usage=usage, model=self.name)
        if not output.choices:
            return Generation(text="", error="empty response (no choices)", usage=usage, model=self.name)
        choice = output.choices[0]
        text = cap_reply(output.completion, key)
        if choice.stop_reason == "content_filter" and not text.strip():
            return Generation(text="", error="refusal: content filter", usage=usage, model=self.name)
        if not text.strip() and choice.stop_reason not in ("stop", "max_tokens", "model_length"):
            # no text and no normal stop (e.g. Inspect gave up at its attempt time-out): say why, not "unparseable"
            return Generation(text="", error=f"no reply text (stop reason: {choice.stop_reason})", usage=usage,
                              model=self.name)
        letter_logprobs = None
        if letters and choice.logprobs is not None:
            positions = [
                TokenLogprob(
                    token=entry.token,
                    logprob=float(entry.logprob),
                    top=tuple((alt.token, float(alt.logprob)) for alt in (entry.top_logprobs or [])),
                )
                for entry in choice.logprobs.content
            ]
            letter_logprobs = extract_letter_logprobs(positions, letters, where=self.letter_position)  # type: ignore[arg-type]
        return Generation(text=text, letter_logprobs=letter_logprobs, usage=usage, model=self.name)
