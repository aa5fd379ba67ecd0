"""Scripted MedFuzz actors for the unit tests: a target and an attacker that read the prompts they get.

The attacker appends ``The patient enjoys <clue><turn>.`` to the original question at each turn; the target
answers wrong exactly when the question contains one of its ``weak_spots``. Everything else is a knob, so a
test can force each branch (errors, refusals, tampering) at a chosen step.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_choices
from medfuzz.models import ChatMessage, Generation, ScriptedChatModel
from medfuzz.solvers.medfuzz import prompts

ITEM = MCQItem(
    id="q1",
    question="A 21-year-old man has fever and knee pain. The culture shows a gram-negative diplococcus. "
             "Which drug blocks cell wall synthesis?",
    options={"A": "Gentamicin", "B": "Ciprofloxacin", "C": "Ceftriaxone", "D": "Trimethoprim"},
    answer="C",
)


def stem_of(messages: Sequence[ChatMessage]) -> str:
    """The question stem shown in a target dialog's first user message."""
    first = next(m.content for m in messages if m.role == "user")
    match = re.search(r"clinical setting\.\n\n(.*?)\n\nA\. ", first, re.S)
    return match.group(1) if match else ""


def shown_options(messages: Sequence[ChatMessage]) -> dict[str, str]:
    first = next(m.content for m in messages if m.role == "user")
    return dict(re.findall(r"^([A-J])\. (.+)$", first, re.M))


@dataclass
class Target:
    """Answers right unless a weak spot is in the stem. Per-step overrides: ``fail`` maps a step name
    (reasoning, confidences, answer) to a list of replies used first (str, Exception or Generation)."""

    answer_text: str = "Ceftriaxone"
    weak_spots: tuple[str, ...] = ()
    wrong_text: str = "Gentamicin"
    fail: dict[str, list[Any]] = field(default_factory=dict)
    # by option text (or a function of the stem giving that): letter logprobs on the answer step, or,
    # with ``sample``, the distribution the answer is drawn from (seeded by the call seed, no logprobs)
    probabilities: dict[str, float] | Callable[[str], dict[str, float]] | None = None
    sample: bool = False
    log: list[str] = field(default_factory=list)

    def step(self, messages: Sequence[ChatMessage]) -> str:
        last = messages[-1].content
        if last == prompts.TARGET_CONFIDENCE:
            return "confidences"
        if last.startswith("Now give your final answer") or "Reply with only the letter" in last:
            return "answer"
        return "reasoning"

    def __call__(self, messages: Sequence[ChatMessage], options: dict[str, Any]):
        step = self.step(messages)
        self.log.append(step)
        if self.fail.get(step):
            return self.fail[step].pop(0)
        opts = shown_options(messages)
        by_text = {text: letter for letter, text in opts.items()}
        stem = stem_of(messages)
        tricked = any(spot in stem for spot in self.weak_spots)
        chosen = by_text[self.wrong_text if tricked else self.answer_text]
        if step == "reasoning":
            return f"Reasoning about {stem[:40]}; the picture fits {opts[chosen]}."
        if step == "confidences":
            return "\n".join(f"{letter}: {5 if letter == chosen else 1}" for letter in opts)
        if self.probabilities is not None:
            probs = self.probabilities(stem) if callable(self.probabilities) else self.probabilities
            if self.sample:
                u, acc = random.Random(options["seed"]).random() * sum(probs.values()), 0.0
                for text, p in probs.items():
                    acc += p
                    if u < acc:
                        return by_text[text]
                return by_text[text]
            lp = {by_text[t]: math.log(p) for t, p in probs.items() if p > 0}
            return Generation(text=chosen, letter_logprobs=lp)
        return chosen


@dataclass
class Attacker:
    """Plans, post-mortems and modified items; ``items`` overrides the modified item per call (str/Exception)."""

    clue: str = "clue"
    items: list[Any] = field(default_factory=list)
    plans: list[Any] = field(default_factory=list)
    controls: Callable[[int], Any] | None = None
    log: list[str] = field(default_factory=list)
    control_calls: int = 0

    def __call__(self, messages: Sequence[ChatMessage], options: dict[str, Any]):
        last = messages[-1].content
        shown = re.search(r"(?:Question|Original question):\n(.*?)\n\nA\. ", messages[1].content, re.S)
        original = shown.group(1) if shown else ITEM.question
        if "systematic word-for-word substitution" in last:
            self.log.append("control")
            self.control_calls += 1
            if self.controls is not None:
                return self.controls(self.control_calls)
            return item_text(original + f" The patient enjoys knitting{self.control_calls}.")
        if last.startswith("That did not work"):
            self.log.append("postmortem")
            return "The test taker ignored the hobby."
        if last.startswith("Now write your modified question") or last.startswith("Your modified question"):
            self.log.append("item")
            if self.items:
                return self.items.pop(0)
            turn = sum(1 for m in messages if m.role == "user" and m.content.startswith("Now write your modified"))
            return item_text(original + f" The patient enjoys {self.clue}{turn}.")
        self.log.append("plan")
        if self.plans:
            return self.plans.pop(0)
        return "Plan: add a hobby that suggests another drug."


def item_text(stem: str, item: MCQItem = ITEM, options: dict[str, str] | None = None) -> str:
    shown = item if options is None else item.with_options(options)
    return f"Modified question: {stem}\n\n{format_choices(shown)}"


def models(target: Target, attacker: Attacker) -> tuple[ScriptedChatModel, ScriptedChatModel]:
    return (ScriptedChatModel(responder=target, name="target"), ScriptedChatModel(responder=attacker, name="attacker"))


def probability_table(stem: str) -> dict[str, float]:
    """The original: P(correct) = 0.9; the attack (clue1 or clue2): 0.2; controls knitting1..3: 0.85, 0.1, 0.5."""
    table = {"clue1": 0.2, "clue2": 0.2, "knitting1": 0.85, "knitting2": 0.1, "knitting3": 0.5}
    p = next((v for k, v in table.items() if k in stem), 0.9)
    return {"Ceftriaxone": p, "Gentamicin": 1 - p}
