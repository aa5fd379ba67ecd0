"""A scripted ``ChatModel`` for tests and dry runs: replies come from a list or a function of the chat.

Every call is recorded (messages, options, reply) so a test can assert on exactly what an engine sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage

Reply = str | Generation | Exception
Responder = Callable[[Sequence[ChatMessage], dict[str, Any]], Reply]


@dataclass
class ScriptedCall:
    messages: list[ChatMessage]
    options: dict[str, Any]
    reply: Generation


@dataclass
class ScriptedChatModel:
    """Replies in order from ``replies`` (or from ``responder(messages, options)`` when given).

    A reply may be a string (becomes the text; token usage counts words), a full ``Generation``, or an
    exception, which becomes a recorded LLM error exactly as a real backend would report it.
    """

    replies: list[Reply] = field(default_factory=list)
    responder: Responder | None = None
    name: str = "scripted"
    calls: list[ScriptedCall] = field(default_factory=list)

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        letters: Sequence[str] | None = None,
    ) -> Generation:
        options = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                   "letters": list(letters) if letters else None}
        if self.responder is not None:
            raw: Reply = self.responder(messages, options)
        elif self.replies:
            raw = self.replies.pop(0)
        else:
            raw = RuntimeError("scripted model ran out of replies")
        if isinstance(raw, Exception):
            reply = Generation(text="", error=f"{type(raw).__name__}: {raw}", model=self.name)
        elif isinstance(raw, Generation):
            reply = raw
        else:
            words = sum(len(m.content.split()) for m in messages)
            reply = Generation(text=raw, usage=TokenUsage(words, len(raw.split())), model=self.name)
        self.calls.append(ScriptedCall(list(messages), options, reply))
        return reply
