"""The planted TCES vulnerability (``TCESSpec``): recognise a TCES substitution in the question a target is shown
and decide whether the substituted entity wins.

The target knows the item's original options (its answer key), so a substitution is visible as exactly one
original option replaced by a new text; the substituted entity is what the new text has in place of the old one
(common leading and trailing words removed), looked up in the vocabulary. The vocabulary and its vectors are
the samplers' own (``load_vocabulary``, ``vocabulary_vectors`` with the same cache), loaded on the first
substitution seen, so targets that never see one (MedFuzz, MedGuard) never load an encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.options import ConfigError
from medfuzz.planted.spec import TCESSpec
from medfuzz.planted.text import text_key
from medfuzz.samplers.vocab import Vocabulary, name_tokens, normalise_name


@dataclass(frozen=True)
class Substitution:
    """One substituted distractor as the target sees it."""

    letter: str  # the letter the new option stands under in the shown question
    original: str
    shown: str
    index: int  # the vocabulary entry put in
    name: str


def changed_option(original: dict[str, str], shown: dict[str, str]) -> tuple[str, str, str] | None:
    """(shown letter, original text, new text) when exactly one original option is replaced by a new text
    (order may differ), else None."""
    before = {text_key(text) for text in original.values()}
    after = {text_key(text) for text in shown.values()}
    new = [(letter, text) for letter, text in shown.items() if text_key(text) not in before]
    gone = [text for text in original.values() if text_key(text) not in after]
    if len(new) != 1 or len(gone) != 1:
        return None
    return new[0][0], gone[0], new[0][1]


def inserted_text(original: str, shown: str) -> str:
    """The words of ``shown`` that replace words of ``original``: common leading and trailing words (compared
    by their matching keys) are dropped. ``Oral vancomycin`` → ``Oral linezolid`` gives ``linezolid``."""
    old = [token for token, _, _ in name_tokens(original.lower())]
    spans = name_tokens(shown.lower())
    new = [token for token, _, _ in spans]
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    kept = spans[start:len(spans) - end]
    return shown[kept[0][1]:kept[-1][2]] if kept else shown


class PlantedTCES:
    """The rule of ``TCESSpec``, with its vocabulary and unit vectors loaded on first use."""

    def __init__(self, spec: TCESSpec) -> None:
        self.spec = spec

    @cached_property
    def vocabulary(self) -> Vocabulary:
        from medfuzz.samplers.vocab import load_vocabulary

        return load_vocabulary(self.spec.entity, self.spec.vocabulary)

    @cached_property
    def index(self) -> dict[str, int]:
        """Matching key → vocabulary row (names only: a substitution always puts in a name)."""
        found: dict[str, int] = {}
        for row, name in enumerate(self.vocabulary.names):
            found.setdefault(normalise_name(name), row)
        return found

    @cached_property
    def universal(self) -> frozenset[int]:
        missing = [name for name in self.spec.universal if normalise_name(name) not in self.index]
        if missing:
            raise ConfigError(f"planted tces.universal: {missing} are not in the {self.spec.entity} vocabulary "
                              f"({self.vocabulary.source}); a substitution could never put them in")
        return frozenset(self.index[normalise_name(name)] for name in self.spec.universal)

    @cached_property
    def encoder(self):
        from medfuzz.samplers.embeddings import get_encoder

        return get_encoder(self.spec.embedding)

    @cached_property
    def unit(self) -> np.ndarray:
        """Unit-length float64 rows of the samplers' vocabulary vectors (same encoder, same cache)."""
        from medfuzz.samplers.embeddings import vocabulary_vectors
        from medfuzz.samplers.sampling import unit_rows

        return unit_rows(vocabulary_vectors(self.vocabulary, self.encoder), np.float64)

    def check(self) -> None:
        """Load everything now (and raise a config error now, not at the first substituted question)."""
        _ = self.universal
        if self.spec.radius is not None:
            _ = self.unit

    @cached_property
    def matcher(self):
        from medfuzz.samplers.entities import EntityMatcher

        return EntityMatcher(self.vocabulary)

    def key_vector(self, key_text: str) -> np.ndarray:
        from medfuzz.samplers.sampling import unit_rows

        found = self.matcher.find(key_text)
        if found:
            return self.unit[found[0].index]
        return unit_rows(self.encoder.encode([key_text]), np.float64)[0]

    def substitution(self, item: MCQItem, shown: dict[str, str]) -> Substitution | None:
        change = changed_option(item.clean_options(), shown)
        if change is None:
            return None
        letter, original, new = change
        # the whole new option first (a name put in may share words with the one it replaced: "Insulin" →
        # "Insulin Glargine" inserts "Glargine", which may be another name), then the words that changed
        row = self.index.get(normalise_name(new))
        if row is None:
            row = self.index.get(normalise_name(inserted_text(original, new)))
        if row is None:
            return None
        return Substitution(letter, original, new, row, self.vocabulary.names[row])

    def distance(self, item: MCQItem, row: int) -> float:
        """Cosine distance of vocabulary entry ``row`` to the key's entity (1 − cos, float64)."""
        key = self.key_vector(item.clean_options()[item.answer])
        return float(np.clip(1.0 - self.unit[row] @ key, 0.0, 2.0))

    def wins(self, item: MCQItem, substitution: Substitution) -> str | None:
        """``universal`` / ``near`` when the substituted entity wins, else None."""
        if substitution.index in self.universal:
            return "universal"
        if self.spec.radius is not None and self.distance(item, substitution.index) <= self.spec.radius:
            return "near"
        return None


def apply_win(probs: dict[str, float], letter: str, win: float) -> dict[str, float]:
    """``letter`` takes ``win``; the others share ``1 - win`` in proportion to their probabilities."""
    rest = sum(p for other, p in probs.items() if other != letter)
    out = {}
    for other, p in probs.items():
        if other == letter:
            out[other] = win
        else:
            out[other] = (1.0 - win) * (p / rest if rest > 0 else 1.0 / (len(probs) - 1))
    return out
