"""The model protocol the harness-agnostic engines depend on.

An engine only ever calls ``await model.generate(messages, ...)`` and reads a ``Generation``. Backends
(an Inspect ``Model``, an lm-eval ``LM``, any OpenAI-compatible endpoint, a scripted fake in tests) live
behind it. A backend never raises for a model-side failure: it returns a ``Generation`` with ``error`` set,
so an engine can record an LLM error and carry on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class Generation:
    """One model reply.

    ``letter_logprobs`` maps answer letters to log-probabilities at the answer position when the backend
    gave them; ``None`` means "not available" (never a guess). A letter missing from the dict fell below
    the backend's top-k cut-off. ``error`` is set, and ``text`` empty, when the call failed.
    """

    text: str
    letter_logprobs: dict[str, float] | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    error: str | None = None
    model: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class ChatModel(Protocol):
    """What an engine needs of a model."""

    name: str

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        letters: Sequence[str] | None = None,
    ) -> Generation:
        """Reply to a chat. With ``letters``, also return the answer-letter log-probabilities if possible."""
        ...


@dataclass
class UsageLedger:
    """Counts calls and tokens per role (target, attacker, ...) so every result can say what it cost."""

    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tokens: dict[str, TokenUsage] = field(default_factory=lambda: defaultdict(TokenUsage))

    def record(self, role: str, generation: Generation) -> None:
        self.calls[role] += 1
        self.tokens[role] = self.tokens[role] + generation.usage
        if not generation.ok:
            self.errors[role] += 1

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {
            role: {
                "calls": self.calls[role],
                "errors": self.errors.get(role, 0),
                "input_tokens": self.tokens[role].input_tokens,
                "output_tokens": self.tokens[role].output_tokens,
            }
            for role in self.calls
        }
