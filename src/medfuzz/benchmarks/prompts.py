"""How an item is shown to a model. One place, so every harness sees the same question text."""

from __future__ import annotations

from enum import StrEnum

from medfuzz.benchmarks.items import MCQItem


class PromptStyle(StrEnum):
    BASIC = "basic"
    COT = "cot"


def format_choices(item: MCQItem) -> str:
    return "\n".join(f"{letter}. {text}" for letter, text in item.clean_options().items())


def format_question(item: MCQItem) -> str:
    """Question stem then lettered options, artifacts cleaned."""
    return f"{item.clean_question()}\n\n{format_choices(item)}"


def completion_prompt(item: MCQItem) -> str:
    """Plain-text prompt for loglikelihood scoring of the answer letter (``" A"`` etc. follow it)."""
    return f"Question: {item.clean_question()}\n{format_choices(item)}\nAnswer:"


LETTER_INSTRUCTION = "Answer the following multiple choice question with the letter of the correct option only."


def letter_prompt(item: MCQItem) -> str:
    """Instruction, question and options, then ``Answer:`` (for a short generated letter)."""
    return f"{LETTER_INSTRUCTION}\n\n{format_question(item)}\n\nAnswer:"
