"""Entity recognition and typing over answer options, and span substitution.

Recognition is longest-match dictionary lookup (the paper used scispaCy + UMLS semantic groups; see
docs/tces.md): case-insensitive, on whole words, multi-word entities, punctuation between words ignored
(``beta-blocker`` = ``beta blocker``), possessive ``'s`` tolerated. Matches never overlap; at each position the
longest vocabulary entry wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from medfuzz.benchmarks.items import MCQItem
from medfuzz.samplers.vocab import Vocabulary, name_tokens, normalise_name

# Generic heads that MeSH lists as descriptors but that are never a useful entity on their own: matching
# "disease" inside "Parkinson disease" (when the full name is not in the vocabulary) would swap a head noun.
GENERIC_NAMES = frozenset({"disease", "diseases", "syndrome", "syndromes", "disorder", "disorders", "condition",
                           "conditions", "drug", "drugs", "medicine", "agent", "agents"})


@dataclass(frozen=True)
class Mention:
    """One recognised entity in one option: its span in the option text and the vocabulary entry."""

    letter: str
    start: int
    end: int
    text: str
    index: int
    name: str

    def to_dict(self) -> dict[str, object]:
        return {"letter": self.letter, "start": self.start, "end": self.end, "text": self.text,
                "vocab_index": self.index, "vocab_name": self.name}


class EntityMatcher:
    """Longest-match lookup of a vocabulary's names (and aliases) in text."""

    def __init__(self, vocabulary: Vocabulary, exclude: frozenset[str] = GENERIC_NAMES) -> None:
        self.vocabulary = vocabulary
        self._lookup: dict[tuple[str, ...], int] = {}
        for index, name in enumerate(vocabulary.names):
            self._add(normalise_name(name), index, exclude)
        for alias, index in vocabulary.aliases.items():
            self._add(alias, index, exclude)
        self.max_words = max((len(key) for key in self._lookup), default=0)

    def _add(self, key: str, index: int, exclude: frozenset[str]) -> None:
        words = tuple(key.split())
        if words and key not in exclude:
            self._lookup.setdefault(words, index)

    def find(self, text: str, letter: str = "") -> list[Mention]:
        tokens = name_tokens(text)
        found: list[Mention] = []
        i = 0
        while i < len(tokens):
            for length in range(min(self.max_words, len(tokens) - i), 0, -1):
                words = tuple(token for token, _, _ in tokens[i:i + length])
                index = self._lookup.get(words)
                if index is not None:
                    start, end = tokens[i][1], tokens[i + length - 1][2]
                    found.append(Mention(letter, start, end, text[start:end], index, self.vocabulary.names[index]))
                    i += length
                    break
            else:
                i += 1
        return found


@dataclass(frozen=True)
class TypedOptions:
    """Option entities of one type, split into the key's and the distractors' (Algorithm 1, SplitByLabel)."""

    key_letter: str
    key: tuple[Mention, ...]
    distractors: tuple[Mention, ...]

    def excluded_indices(self) -> set[int]:
        """Vocabulary entries already shown in the options: never offered as replacements."""
        return {m.index for m in (*self.key, *self.distractors)}


def type_options(item: MCQItem, matcher: EntityMatcher) -> TypedOptions:
    """Recognise the entities of ``matcher``'s type in every option of ``item`` (texts as stored)."""
    key: list[Mention] = []
    distractors: list[Mention] = []
    for letter, text in item.options.items():
        mentions = matcher.find(text, letter)
        (key if letter == item.answer else distractors).extend(mentions)
    return TypedOptions(item.answer, tuple(key), tuple(distractors))


def _special(word: str) -> bool:
    """Acronyms, inner capitals and digits keep their spelling (``HIV``, ``IgA``, ``99m``); a capital after a
    hyphen does not count (``N-Acetylglucosamine``)."""
    if any(c.isdigit() for c in word):
        return True
    letters = [c for c in word if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return True
    return any(c.isupper() for part in word.split("-") for c in part[1:])


def match_case(surface: str, replacement: str) -> str:
    """Spell ``replacement`` in the capitalisation style of the text it replaces.

    ALL CAPS stays all caps; Title Case Words stay title case; a capitalised first word (sentence case)
    capitalises only the first word; lower case stays lower case. Acronyms, inner capitals and digits keep the
    vocabulary's spelling, and so do the capitals of a multi-word name the vocabulary writes in sentence case
    (``technetium Tc 99m exametazime``: there a capital means something).
    """
    letters = [c for c in surface if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return replacement.upper()
    words = replacement.split(" ")
    vocab_title = all(w[:1].isupper() for w in words if w[:1].isalpha())
    meaningful_caps = len(words) > 1 and not vocab_title
    plain = list(words) if meaningful_caps else [w if _special(w) else w.lower() for w in words]
    surface_words = [w for w in surface.split() if w[:1].isalpha()]
    if len(surface_words) > 1 and all(w[0].isupper() for w in surface_words):
        plain = [w if _special(w) else w[:1].upper() + w[1:] for w in plain]
    elif plain and not _special(plain[0]):
        first = plain[0]
        plain[0] = (first[:1].upper() if surface[:1].isupper() else first[:1].lower()) + first[1:]
    return " ".join(plain)


def substitute(text: str, mention: Mention, replacement: str) -> str:
    """``text`` with the mention's span replaced by ``replacement`` (capitalisation matched)."""
    if text[mention.start:mention.end] != mention.text:
        raise ValueError(f"mention {mention.text!r} is not at {mention.start}:{mention.end} of {text!r}")
    return f"{text[:mention.start]}{match_case(mention.text, replacement)}{text[mention.end:]}"


def substituted_item(item: MCQItem, mention: Mention, replacement: str) -> MCQItem:
    options = dict(item.options)
    options[mention.letter] = substitute(options[mention.letter], mention, replacement)
    return item.with_options(options)

