"""Entity recognition and typing over answer options, and span substitution.

Recognition is longest-match dictionary lookup (the paper used scispaCy + UMLS semantic groups; see
docs/tces.md): case-insensitive, on whole words, multi-word entities, punctuation between words ignored
(``beta-blocker`` = ``beta blocker``), possessive ``'s`` tolerated. Matches never overlap; at each position the
longest vocabulary entry wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from medfuzz.benchmarks.items import MCQItem
from medfuzz.samplers.vocab import Vocabulary, fold_accents, name_tokens, normalise_name

# Generic heads that MeSH lists as descriptors but that are never a useful entity on their own: matching
# "disease" inside "Parkinson disease" (when the full name is not in the vocabulary) would swap a head noun.
GENERIC_NAMES = frozenset({"disease", "diseases", "syndrome", "syndromes", "disorder", "disorders", "condition",
                           "conditions", "drug", "drugs", "medicine", "agent", "agents"})


# Words that may follow or surround an entity without making it part of a longer name: function words and
# clause words shared by both types, then the words that keep a drug or a disease in its role.
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTION_WORDS = _words("""
a an the this that these those its their his her and or but nor plus versus vs than then of in on into onto with
without within for to from by at as via per about over under between after before during until while when if
because due instead followed alone only also not no is are was were be been being has have had may might can could
should will would which who whom whose what where each every both either neither all any some other another
""")
ROLE_WORDS: dict[str, frozenset[str]] = {
    "drugs": _words("""
therapy therapies treatment treatments monotherapy regimen regimens injection injections infusion infusions
tablet tablets capsule capsules dose doses dosing dosage daily twice once weekly nightly orally po iv im sc
intravenously intramuscularly subcutaneously topically mg g mcg ug µg ml units unit level levels concentration
concentrations toxicity overdose poisoning intoxication withdrawal use abuse administration prophylaxis
induced associated related activity secretion release synthesis production excess challenge test trial course
application supplementation supplement supplements replacement oral intravenous intramuscular subcutaneous topical
inhaled nebulized sublingual transdermal intranasal rectal ophthalmic high low dose start begin initiate continue add
administer give prescribe switch increase decrease discontinue stop hold resume treat treated therapy cream
ointment drops spray patch solution causes inhibits blocks increases decreases reduces binds acts
"""),
    "diseases": _words("""
disease diseases syndrome syndromes disorder disorders infection infections exacerbation flare attack attacks
episode episodes type stage grade secondary primary caused induced associated related acute chronic subacute
congenital acquired recurrent relapsing severe mild moderate early late onset progressive familial hereditary
idiopathic bilateral unilateral diagnosis history risk development
"""),
}
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]./|!?]")  # between two words: the phrase ends


@dataclass(frozen=True)
class Mention:
    """One recognised entity in one option: its span in the option text and the vocabulary entry."""

    letter: str
    start: int
    end: int
    text: str
    index: int
    name: str
    fit: str = "whole"  # whole: the option is (nearly) the entity itself; phrase: an entity inside a longer text

    def to_dict(self) -> dict[str, object]:
        return {"letter": self.letter, "start": self.start, "end": self.end, "text": self.text,
                "vocab_index": self.index, "vocab_name": self.name, "fit": self.fit}


class EntityMatcher:
    """Longest-match lookup of a vocabulary's names (and aliases) in text."""

    def __init__(self, vocabulary: Vocabulary, exclude: frozenset[str] = GENERIC_NAMES) -> None:
        self.vocabulary = vocabulary
        self._lookup: dict[tuple[str, ...], int] = {}
        for index, name in enumerate(vocabulary.names):
            self._add(normalise_name(name), index, exclude)
        for alias, index in vocabulary.aliases.items():
            self._add(alias, index, exclude)
        if vocabulary.kind == "diseases":  # MeSH names are plural ("Adjustment Disorders"); text is singular
            for key, index in list(self._lookup.items()):
                singular = _singular(key[-1])
                if singular != key[-1]:
                    self._add(" ".join((*key[:-1], singular)), index, exclude)
        self.max_words = max((len(key) for key in self._lookup), default=0)

    def _add(self, key: str, index: int, exclude: frozenset[str]) -> None:
        words = tuple(key.split())
        if words and key not in exclude:
            self._lookup.setdefault(words, index)

    def find(self, text: str, letter: str = "") -> list[Mention]:
        tokens = name_tokens(fold_accents(text))
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

    def typed(self, text: str, letter: str = "", found: list[Mention] | None = None) -> list[Mention]:
        """The matches of ``find`` that stand on their own (see the module docstring), each with its ``fit``."""
        found = self.find(text, letter) if found is None else found
        role = FUNCTION_WORDS | ROLE_WORDS.get(self.vocabulary.kind, frozenset())
        tokens = name_tokens(fold_accents(text))
        kept = [m for m in found if not _runs_on(text, m, tokens, role)]
        inside = [any(m.start <= start < m.end for m in kept) for _, start, _ in tokens]
        others = sum(1 for (word, _, _), covered in zip(tokens, inside, strict=True)
                     if not covered and word not in role and not any(c.isdigit() for c in word))
        fit = "whole" if others <= 1 else "phrase"
        return [Mention(m.letter, m.start, m.end, m.text, m.index, m.name, fit) for m in kept]


def _singular(word: str) -> str:
    """``disorders`` → ``disorder``, ``allergies`` → ``allergy``; words in -ss, -us, -is, -os stay."""
    if len(word) < 5 or not word.endswith("s") or word.endswith(("ss", "us", "is", "os")):
        return word
    return word[:-3] + "y" if word.endswith("ies") else word[:-1]


def _runs_on(text: str, mention: Mention, tokens: list[tuple[str, int, int]], role: frozenset[str]) -> bool:
    """Whether the name is the first part of a longer name (``charcoal blood agar``) or the tail of a hyphenated
    word (``anti-insulin``): then it does not name an entity of the type."""
    if mention.start >= 2 and text[mention.start - 1] == "-" and text[mention.start - 2].isalnum():
        return True
    following = next(((word, start) for word, start, _ in tokens if start >= mention.end), None)
    if following is None:
        return False
    word, start = following
    if _CLAUSE_BREAK.search(text[mention.end:start]):
        return False
    return word not in role and not any(c.isdigit() for c in word)


@dataclass(frozen=True)
class TypedOptions:
    """Option entities of one type, split into the key's and the distractors' (Algorithm 1, SplitByLabel).

    ``key``/``distractors`` hold the typed mentions (names standing on their own); ``shown`` every vocabulary
    entry matched anywhere in the options, typed or not (never offered as a replacement)."""

    key_letter: str
    key: tuple[Mention, ...]
    distractors: tuple[Mention, ...]
    shown: frozenset[int] = frozenset()

    def excluded_indices(self) -> set[int]:
        """Vocabulary entries already shown in the options: never offered as replacements."""
        return {*self.shown, *(m.index for m in (*self.key, *self.distractors))}

    @property
    def victims(self) -> tuple[Mention, ...]:
        """RankSelect's candidates: the distractor mentions whose option is (nearly) the entity itself when there
        are any, else every typed distractor mention."""
        whole = tuple(m for m in self.distractors if m.fit == "whole")
        return whole or self.distractors


def type_options(item: MCQItem, matcher: EntityMatcher) -> TypedOptions:
    """Recognise and type the entities of ``matcher``'s type in every option of ``item`` (texts as stored)."""
    key: list[Mention] = []
    distractors: list[Mention] = []
    shown: set[int] = set()
    for letter, text in item.options.items():
        found = matcher.find(text, letter)
        shown.update(m.index for m in found)
        (key if letter == item.answer else distractors).extend(matcher.typed(text, letter, found))
    return TypedOptions(item.answer, tuple(key), tuple(distractors), frozenset(shown))


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

