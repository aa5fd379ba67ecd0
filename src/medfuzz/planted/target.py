"""The planted target: answer probabilities that are a known, seeded function of the prompt (see ``spec``).

It knows the answer key of the items it was given (``PlantedSpec.target.data`` or a list passed in) and
recognises a question by its set of option texts (MedFuzz keeps the options; option order may be shuffled)
or, failing that, by its stem (TCES keeps the stem and changes a distractor). An unknown question gets the
uniform distribution. A TCES substitution that the planted TCES rule makes win (``spec.tces``, module ``tces``)
moves the mass to the substituted distractor. It plays the MedFuzz target dialog (reasoning, 1-5 confidences,
letter), direct letter prompts, Inspect's ``ANSWER: X`` template and completion prompts ending in ``Answer:``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medfuzz.benchmarks.answers import normalise_text
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.models.protocol import ChatMessage
from medfuzz.planted.spec import PlantedSpec, read_accuracy_file
from medfuzz.planted.tces import PlantedTCES, apply_win
from medfuzz.planted.text import (
    ShownQuestion,
    classify_target_step,
    contains_phrase,
    find_question,
    sentences,
    text_key,
    wants_answer_line,
)


@dataclass(frozen=True)
class Reply:
    """What a planted model says; ``letter_probs``: the distribution at the answer position (answer steps)."""

    text: str
    letter_probs: dict[str, float] | None = None


_key = text_key


class PlantedTarget:
    def __init__(self, spec: PlantedSpec, items: Sequence[MCQItem] | None = None) -> None:
        self.spec = spec
        self.tces = PlantedTCES(spec.tces)
        t = spec.target
        if items is None:
            from medfuzz.benchmarks import load_items

            items = load_items(t.benchmark, t.data, columns=t.columns)
        self.items = {item.id: item for item in items}
        table = read_accuracy_file(t.accuracy) if t.accuracy not in ("beta", "constant") else {}
        self.base: dict[str, float] = {}
        self.planted_distractor: dict[str, str] = {}
        self._by_options: dict[frozenset[str], list[MCQItem]] = {}
        self._by_stem: list[tuple[str, MCQItem]] = []
        self._stem_key: dict[str, str] = {}  # item id -> its stem's key (the rule looks it up on every call)
        self._answer_key: dict[str, str] = {}  # item id -> the key's option text, as a key
        for item in items:
            if t.accuracy == "beta":
                raw = float(np.random.default_rng(derive_seed(spec.seed, "accuracy", item.id)).beta(t.beta_a, t.beta_b))
            elif t.accuracy == "constant":
                raw = t.constant
            else:
                if item.id not in table:
                    raise ValueError(f"planted accuracy file {t.accuracy}: no row for item {item.id!r}")
                raw = table[item.id]
            self.base[item.id] = min(t.high, max(t.low, raw))
            distractors = [text for letter, text in item.clean_options().items() if letter != item.answer]
            self.planted_distractor[item.id] = random.Random(derive_seed(spec.seed, "distractor", item.id)).choice(
                distractors)
            self._by_options.setdefault(frozenset(_key(o) for o in item.clean_options().values()), []).append(item)
            self._stem_key[item.id] = _key(item.clean_question())
            self._answer_key[item.id] = _key(item.clean_options()[item.answer])
            self._by_stem.append((self._stem_key[item.id], item))

    # ----------------------------------------------------------------------------------------- the rule

    def identify(self, question: ShownQuestion) -> MCQItem | None:
        """The item a question shows. An item whose options and stem are both shown wins; then an item whose
        stem is shown (TCES keeps the stem, and a substitution can recreate another item's option set); then
        an item whose option set is shown (MedFuzz rewrites the stem and keeps the options)."""
        message = normalise_text(question.message)
        found = self._by_options.get(frozenset(_key(o) for o in question.options.values()), [])
        both = [item for item in found if self._stem_key[item.id] in message]
        if both:
            return both[0]
        by_stem = next((item for stem, item in self._by_stem if stem and stem in message), None)
        return by_stem or (found[0] if found else None)

    def triggered(self, question: ShownQuestion) -> bool:
        return contains_phrase(question.stem, self.spec.target.triggers)

    def distribution(self, question: ShownQuestion, seed: int | None, context: str = "") -> dict[str, float]:
        """P(letter) for the shown question: the planted rule, with this call's jitter (keyed by the call
        seed and the whole ``context``, so calls are independent and one call's letters share one draw)."""
        t = self.spec.target
        letters = question.letters
        item = self.identify(question)
        by_text = {_key(text): letter for letter, text in question.options.items()}
        key_letter = by_text.get(self._answer_key[item.id]) if item else None
        if item is None or key_letter is None:
            probs = {letter: 1.0 / len(letters) for letter in letters}
        else:
            draw = random.Random(derive_seed(self.spec.seed, "noise", seed, context or question.message))
            u = draw.uniform(-1.0, 1.0)
            q = min(1.0, max(0.0, self.base[item.id] + t.noise * u))
            moved = min(t.delta, q) if self.triggered(question) else 0.0
            others = [letter for letter in letters if letter != key_letter]
            probs = {letter: (1.0 - q) / len(others) for letter in others}
            probs[key_letter] = q - moved
            planted = by_text.get(_key(self.planted_distractor[item.id]), others[0])
            probs[planted] += moved
            probs = {letter: probs[letter] for letter in letters}
            won = self.tces_win(item, question)
            if won is not None:
                probs = apply_win(probs, won, self.spec.tces.win)
        if t.bias_rate and t.bias_letter in probs:
            probs = {letter: (1 - t.bias_rate) * p + (t.bias_rate if letter == t.bias_letter else 0.0)
                     for letter, p in probs.items()}
        return probs

    def tces_win(self, item: MCQItem, question: ShownQuestion) -> str | None:
        """The letter of a substituted distractor that the planted TCES rule makes win, if any."""
        if not self.spec.tces.active:
            return None
        substitution = self.tces.substitution(item, question.options)
        if substitution is None or self.tces.wins(item, substitution) is None:
            return None
        return substitution.letter

    def added_sentences(self, question: ShownQuestion) -> list[str]:
        """Sentences of the shown stem that the original item does not have (what an attack added)."""
        item = self.identify(question)
        if item is None:
            return []
        original = sentences(item.clean_question())
        known = {_key(s) for s in original}
        shown = sentences(question.stem)
        start = next((i for i, s in enumerate(shown) if _key(s) in known), len(shown))
        return [s for s in shown[start:] if _key(s) not in known]

    # ---------------------------------------------------------------------------------------- replies

    def respond(self, messages: Sequence[ChatMessage], seed: int | None = None,
                temperature: float | None = None) -> Reply:
        question = find_question(messages)
        if question is None:
            return Reply("There is no multiple-choice question here to answer.")
        step = classify_target_step(messages)
        context = "\n".join(f"{m.role}: {m.content}" for m in messages)
        probs = self.distribution(question, seed, context)
        best = max(probs, key=lambda letter: probs[letter])
        if step == "reasoning":
            text = f"Weighing the clinical picture, option {best} ({question.options[best]}) fits best."
            added = self.added_sentences(question)
            rng = random.Random(derive_seed(self.spec.seed, "mention", seed, context))
            if added and rng.random() < self.spec.target.mention_rate:
                partial = len(added) > 1 and rng.random() < self.spec.target.partial_mention_rate
                text = f"The question also says: {' '.join(added[:1] if partial else added)} " + text
            return Reply(text)
        if step == "confidences":
            return Reply("\n".join(f"{letter}: {1 + round(4 * p)}" for letter, p in probs.items()))
        if temperature == 0:
            letter = best
        else:  # sampled answers follow the probabilities (temperature only matters as 0 = argmax)
            rng = random.Random(derive_seed(self.spec.seed, "sample", seed, context))
            letter = rng.choices(list(probs), weights=list(probs.values()))[0]
        text = f"ANSWER: {letter}" if wants_answer_line(messages) else letter
        return Reply(text, probs)


def log_probs(probs: dict[str, float]) -> dict[str, float]:
    """Natural-log probabilities; letters with probability 0 are left out (as below a top-k cut-off)."""
    return {letter: math.log(p) for letter, p in probs.items() if p > 0}
