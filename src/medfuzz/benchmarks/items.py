"""The multiple-choice item every loader produces and every engine consumes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from medfuzz.benchmarks.cleaning import clean_text

LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class MCQItem:
    """One multiple-choice question.

    ``options`` maps consecutive letters (A, B, ...) to option text in display order; ``answer`` is the
    letter of the correct option. Texts are stored exactly as loaded; ``clean_*`` give prompt-ready text.
    """

    id: str
    question: str
    options: dict[str, str]
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        letters = list(self.options)
        if letters != list(LETTERS[: len(letters)]):
            raise ValueError(f"item {self.id}: option letters must be consecutive from A, got {letters}")
        if self.answer not in self.options:
            raise ValueError(f"item {self.id}: answer {self.answer!r} is not one of {letters}")

    @property
    def letters(self) -> list[str]:
        return list(self.options)

    @property
    def answer_index(self) -> int:
        return self.letters.index(self.answer)

    @property
    def answer_text(self) -> str:
        return self.options[self.answer]

    def clean_question(self) -> str:
        return clean_text(self.question)

    def clean_options(self) -> dict[str, str]:
        return {letter: clean_text(text) for letter, text in self.options.items()}

    def with_question(self, question: str, **metadata: Any) -> MCQItem:
        """The same item with another stem (used by attacks); options and answer are kept."""
        return replace(self, question=question, metadata={**self.metadata, **metadata})

    def with_options(self, options: dict[str, str], **metadata: Any) -> MCQItem:
        """The same item with replaced option texts in the same slots (answer letter kept)."""
        if list(options) != self.letters:
            raise ValueError(f"item {self.id}: replacement options must keep letters {self.letters}")
        return replace(self, options=dict(options), metadata={**self.metadata, **metadata})

    def shuffled(self, seed: int) -> MCQItem:
        """The item with its options in a seeded random order; the answer letter follows its option.

        ``metadata["option_order"]`` records, for each new letter, the letter it had originally.
        """
        original = self.letters
        order = original.copy()
        random.Random(seed).shuffle(order)
        options = {LETTERS[i]: self.options[old] for i, old in enumerate(order)}
        answer = LETTERS[order.index(self.answer)]
        return replace(
            self,
            options=options,
            answer=answer,
            metadata={**self.metadata, "option_order": dict(zip(LETTERS, order, strict=False))},
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "options": dict(self.options),
            "answer": self.answer,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> MCQItem:
        return cls(
            id=str(record["id"]),
            question=record["question"],
            options=dict(record["options"]),
            answer=record["answer"],
            metadata=dict(record.get("metadata") or {}),
        )


def item_seed(seed: int, item_id: str) -> int:
    """A per-item seed that is stable across processes (Python's ``hash`` is salted per process)."""
    import hashlib

    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def derive_seed(seed: int, *parts: object) -> int:
    """A seed for one random choice or model call, stable across processes and call order."""
    return item_seed(seed, ":".join(str(p) for p in parts)) % (2**31 - 1)
