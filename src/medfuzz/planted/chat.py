"""The ``ChatModel`` face of the planted models (in-process; the server and the lm-eval LM are the others)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage
from medfuzz.planted.target import Reply, log_probs


class Behaviour(Protocol):
    def respond(self, messages: Sequence[ChatMessage], seed: int | None = None,
                temperature: float | None = None) -> Reply: ...


class PlantedChatModel:
    """Any planted behaviour (target or attacker) as a ``ChatModel``; letter log-probabilities are exactly
    the planted probabilities when ``letters`` is given and the reply is an answer."""

    def __init__(self, behaviour: Behaviour, name: str = "planted") -> None:
        self.behaviour = behaviour
        self.name = name
        self.calls = 0

    async def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int = 512,
                       temperature: float | None = None, seed: int | None = None,
                       letters: Sequence[str] | None = None) -> Generation:
        self.calls += 1
        reply = self.behaviour.respond(messages, seed=seed, temperature=temperature)
        letter_logprobs = None
        if letters and reply.letter_probs is not None:
            letter_logprobs = {k: v for k, v in log_probs(reply.letter_probs).items() if k in letters}
        usage = TokenUsage(sum(len(m.content.split()) for m in messages), len(reply.text.split()))
        return Generation(text=reply.text, letter_logprobs=letter_logprobs or None, usage=usage, model=self.name)
