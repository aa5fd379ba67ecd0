"""An Inspect ``Model`` (any provider Inspect supports) as a medfuzz ``ChatModel``.

Inspect's own retry, caching, concurrency limits and logging stay in charge; we translate messages in and
turn a failed or refused generation into a recorded ``Generation.error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)

from medfuzz.models.logprobs import TokenLogprob, extract_letter_logprobs
from medfuzz.models.openai_compat import TOP_LOGPROBS
from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

_MESSAGE_TYPES: dict[str, Any] = {
    "system": ChatMessageSystem,
    "user": ChatMessageUser,
    "assistant": ChatMessageAssistant,
}


class InspectChatModel:
    def __init__(self, model: Model, letter_position: str = "first") -> None:
        self._model = model
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
        config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed)
        if letters:
            # set per call: the CLI's --logprobs does not reach role models (DESIGN §4)
            config = config.merge(GenerateConfig(logprobs=True, top_logprobs=TOP_LOGPROBS))
        inspect_messages = [_MESSAGE_TYPES[m.role](content=m.content) for m in messages]
        try:
            output = await self._model.generate(inspect_messages, config=config)
        except Exception as err:  # provider errors that survived Inspect's retries
            return Generation(text="", error=f"{type(err).__name__}: {err}", model=self.name)
        usage = TokenUsage(
            input_tokens=output.usage.input_tokens if output.usage else 0,
            output_tokens=output.usage.output_tokens if output.usage else 0,
        )
        if output.error:
            return Generation(text="", error=output.error, usage=usage, model=self.name)
        if not output.choices:
            return Generation(text="", error="empty response (no choices)", usage=usage, model=self.name)
        choice = output.choices[0]
        text = output.completion
        if choice.stop_reason == "content_filter" and not text.strip():
            return Generation(text="", error="refusal: content filter", usage=usage, model=self.name)
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
