"""The planted MedFuzz attacker: valid modified items built from the original vignette plus sentences from a
bank (some carrying a trigger phrase, with a probability that grows after each post-mortem), control fuzzes
that substitute every added word by a trigger-free word (same count, same place), and malformed replies at
a planted rate. No language model: a seeded function of the dialog it is given.

``TemplateAttacker`` is the same machinery with only neutral patient-characteristic sentences and no
malformed replies: a deterministic attacker that can drive a real target (``medfuzz-template/attacker``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from medfuzz.benchmarks.items import derive_seed
from medfuzz.models.protocol import ChatMessage
from medfuzz.planted.spec import AttackerSpec
from medfuzz.planted.target import Reply
from medfuzz.planted.text import option_block, sentences

MALFORMED_KINDS = ("tampered_options", "dropped_original", "unchanged")
_CORRECT = re.compile(r"Correct answer:\s*([A-J])\b")
_CONTROL = re.compile(r"Original question:\n(.*?)\n\nModified question:\n(.*?)\n\nCorrect answer:", re.S)
_WORD = re.compile(r"^(\W*)(.*?)(\W*)$")


def classify_attacker_step(messages: Sequence[ChatMessage]) -> str:
    """``control`` | ``item`` | ``postmortem`` | ``plan`` for the attacker's last user message."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    low = last.lower()
    if "original question:" in low and "modified question:" in low:
        return "control"
    if "modified question" in low and ("now write" in low or "could not be used" in low):
        return "item"
    if low.startswith("that did not work"):
        return "postmortem"
    return "plan"


def split_stem_options(text: str) -> tuple[str, list[str]]:
    """A shown item ("stem\\n\\nA. ...\\nB. ...") as its stem and its option lines."""
    found = option_block(text)
    if found is None:
        return text.strip(), []
    start, options = found
    lines = text.splitlines()
    return "\n".join(lines[:start]).strip(), [f"{letter}. {option}" for letter, option in options.items()]


def insert_before_question(stem: str, added: Sequence[str]) -> str:
    """The stem with ``added`` sentences placed before its last sentence (the question being asked)."""
    parts = sentences(stem)
    if len(parts) <= 1:
        return " ".join([*added, *parts])
    return " ".join([*parts[:-1], *added, parts[-1]])


def _case_like(word: str, model: str) -> str:
    return word[:1].upper() + word[1:] if model[:1].isupper() else word


def substitute_added(original: str, modified: str, words: Sequence[str], rng: random.Random) -> str:
    """The original stem with each word the modification added replaced by a word from ``words`` (punctuation
    and capitalisation kept): the same syntax and word count, unrelated meaning."""
    a, b = original.split(), modified.split()
    # the attack inserts before the last sentence: match the tail first, so an added sentence that starts
    # with the same word as the question ("The ...") is not mistaken for original text
    suffix = 0
    while suffix < min(len(a), len(b)) and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    prefix = 0
    while prefix < min(len(a), len(b)) - suffix and a[prefix] == b[prefix]:
        prefix += 1
    new = []
    for word in b[prefix:len(b) - suffix]:
        lead, core, trail = _WORD.match(word).groups()  # type: ignore[union-attr]
        new.append(f"{lead}{_case_like(rng.choice(list(words)), core)}{trail}")
    return " ".join([*b[:prefix], *new, *b[len(b) - suffix:]])


class PlantedAttacker:
    """``red_herrings``: sentence templates with an ``{option}`` slot; when given, one of the added sentences
    names a distractor (the attacker knows the correct answer, as the paper's attacker does), the kind of
    irrelevant detail that pulls a weak target away from the key while the correct answer stays correct."""

    def __init__(self, spec: AttackerSpec, seed: int = 0, allow_triggers: bool = True,
                 red_herrings: Sequence[str] = ()) -> None:
        self.spec = spec
        self.seed = seed
        self.allow_triggers = allow_triggers
        self.red_herrings = tuple(red_herrings)

    def respond(self, messages: Sequence[ChatMessage], seed: int | None = None,
                temperature: float | None = None) -> Reply:
        step = classify_attacker_step(messages)
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        turn = sum(1 for m in messages if m.role == "user" and m.content.lower().startswith("now write your modified"))
        rng = random.Random(derive_seed(self.seed, "attacker", step, seed, turn, last))
        if step == "plan":
            return Reply("Plan: add a few patient characteristics to the vignette, before the question, that "
                         "could pull attention towards a distractor while the correct answer stays correct.")
        if step == "postmortem":
            return Reply("The added characteristics did not move the test taker enough; different ones may.")
        if step == "control":
            return Reply(self._control(last, rng))
        return Reply(self._item(messages, turn, rng))

    # ---------------------------------------------------------------------------------------- items

    def _original(self, messages: Sequence[ChatMessage]) -> tuple[str, list[str], str] | None:
        """The original stem, its option lines and the correct letter, from the attacker's first message."""
        for message in messages:
            found = _CORRECT.search(message.content)
            if message.role == "user" and found and "Question:\n" in message.content:
                shown = message.content.split("Question:\n", 1)[1]
                shown = shown.split("\n\nCorrect answer:", 1)[0]
                return (*split_stem_options(shown), found.group(1))
        return None

    def _red_herring(self, options: list[str], correct: str, rng: random.Random) -> str | None:
        distractors = [line.split(". ", 1)[1] for line in options if not line.startswith(f"{correct}. ")
                       and ". " in line]
        if not self.red_herrings or not distractors:
            return None
        option = rng.choice(distractors).strip().rstrip(".")
        if not option[:2].isupper():  # "Ceftriaxone" -> "ceftriaxone"; "MRI of the head" stays
            option = option[:1].lower() + option[1:]
        return rng.choice(self.red_herrings).format(option=option)

    def _malformed(self, stem: str, options: list[str], added: list[str], rng: random.Random) -> str:
        kind = rng.choice(MALFORMED_KINDS)
        if kind == "tampered_options" and options:
            options = [*options[:-1], options[-1] + " (revised)"]
            return "\n".join([insert_before_question(stem, added), "", *options])
        if kind == "dropped_original":
            return "\n".join([" ".join(added) + " Which option is correct?", "", *options])
        return "\n".join([stem, "", *options])

    def added_sentences(self, turn: int, rng: random.Random) -> list[str]:
        s = self.spec
        count = min(s.sentences, len(s.neutral_sentences) + 1)
        chosen = rng.sample(list(s.neutral_sentences), min(count, len(s.neutral_sentences)))
        if self.allow_triggers and rng.random() < s.trigger_probability(max(turn, 1)):
            chosen = [*chosen[: count - 1], rng.choice(list(s.trigger_sentences))]
            rng.shuffle(chosen)
        return chosen

    def _item(self, messages: Sequence[ChatMessage], turn: int, rng: random.Random) -> str:
        original = self._original(messages)
        if original is None:
            return "I could not find the original question in this conversation."
        stem, options, correct = original
        added = self.added_sentences(turn, rng)
        herring = self._red_herring(options, correct, rng)
        if herring is not None:
            added = [*added[:-1], herring]
            rng.shuffle(added)
        if rng.random() < self.spec.malformed_rate:
            return self._malformed(stem, options, added, rng)
        return "\n".join([insert_before_question(stem, added), "", *options])

    def _control(self, prompt: str, rng: random.Random) -> str:
        match = _CONTROL.search(prompt)
        if match is None:
            return "I could not find the two versions of the question."
        original, options = split_stem_options(match.group(1))
        modified, _ = split_stem_options(match.group(2))
        if rng.random() < self.spec.malformed_rate:
            return "\n".join([original, "", *options])  # the original unchanged: rejected, resampled
        return "\n".join([substitute_added(original, modified, self.spec.control_words, rng), "", *options])
