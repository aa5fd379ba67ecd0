"""Parsing and validating what the MedFuzz models write, and diffing fuzzed items against originals.

Nothing here raises on bad model output: a parser returns ``None`` (or a ``ParsedItem`` with a problem) and
the engine turns that into a bounded retry and, if it persists, an LLM error for the turn.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from medfuzz.benchmarks.answers import ANSWER_DECLARATION, normalise_text
from medfuzz.benchmarks.items import MCQItem

_WORD = re.compile(r"\S+")
_REFUSAL = re.compile(
    r"\b(I\s*(?:can(?:no|')t|cannot|am unable to|'m unable to|won't|will not)|I'm sorry|I am sorry|"
    r"as an AI\b|against (?:my|the) (?:policy|guidelines))",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*$")
_LABEL = re.compile(
    r"^\s*(?:\*\*)?\s*(?:here(?:'s| is) (?:the |my )?)?(?:new(?:ly)? )?(?:modified |revised |rewritten )?"
    r"(?:version of the )?(?:(?:exam )?question|item)\s*(?:\*\*)?\s*[:\-]\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_OPTION_LINE = re.compile(r"^\s*(?:[-*•]\s*)?(?:\*\*)?\(?([A-J])\s*(?:\*\*)?\s*[\.\):]\s*(?:\*\*)?\s*(.+?)\s*$")


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.search(text[:400]))


# ------------------------------------------------------------------------------------------ target replies


def parse_confidences(text: str, letters: Sequence[str]) -> dict[str, int] | None:
    """1-5 confidence per option from replies such as ``A: 4``, ``- B) 2/5`` or ``4, 2, 1, 1``.

    Returns ``None`` unless every option gets exactly one score in 1..5.
    """
    if not text.strip():
        return None
    allowed = "".join(letters)
    cleaned = re.sub(r"\s*/\s*5\b|\s+out of\s+5\b", "", text)
    found: dict[str, int] = {}
    pair = re.compile(
        rf"(?<![A-Za-z])(?:option\s*)?([{allowed}])\s*(?:\([^)]*\))?\s*[:=\-–\)\.]\s*(?:\*\*)?\s*(\d+)(?!\d)",
        re.IGNORECASE,
    )
    for match in pair.finditer(cleaned):
        letter = match.group(1).upper()
        if letter in letters and letter not in found:
            found[letter] = int(match.group(2))
    if set(found) != set(letters):
        found = {}
        for line in cleaned.splitlines():
            head = re.match(rf"^[\W_]*(?:option\s*)?([{allowed}])\b(.*)$", line.strip(), re.IGNORECASE)
            if not head or head.group(1).upper() not in letters:
                continue
            numbers = re.findall(r"(?<![\d.])(\d+)(?![\d.]*\d)", head.group(2))
            if numbers:
                found.setdefault(head.group(1).upper(), int(numbers[-1]))
    if set(found) != set(letters):
        numbers = re.findall(r"(?<![\w.])(\d+)(?![\w.])", cleaned)
        if len(numbers) == len(letters) and not re.search(r"[A-Za-z]{3,}", cleaned):
            found = {letter: int(n) for letter, n in zip(letters, numbers, strict=True)}
    if set(found) != set(letters) or any(not 1 <= v <= 5 for v in found.values()):
        return None
    return {letter: found[letter] for letter in letters}


# ------------------------------------------------------------------------------------ attacker questions


@dataclass(frozen=True)
class ParsedItem:
    """A modified item, or why it cannot be used. ``kind``: unparseable | refusal | tampered_options |
    changed_answer | unchanged | dropped_original."""

    item: MCQItem | None
    problem: str | None = None
    kind: str | None = None
    options_given: bool = False

    @property
    def ok(self) -> bool:
        return self.item is not None


def _option_block(lines: list[str], letters: Sequence[str]) -> tuple[int, int, dict[str, str]] | None:
    """The last run of option lines A, B, C... (blank lines allowed between): (start, end, options)."""
    best = None
    i = 0
    while i < len(lines):
        match = _OPTION_LINE.match(lines[i])
        if match and match.group(1) == "A":
            options: dict[str, str] = {}
            expected = "A"
            j = i
            end = i
            while j < len(lines):
                if not lines[j].strip():
                    j += 1
                    continue
                m = _OPTION_LINE.match(lines[j])
                if not m or m.group(1) != expected:
                    break
                options[expected] = m.group(2).strip()
                end = j
                expected = chr(ord(expected) + 1)
                j += 1
            if len(options) >= 2:
                best = (i, end, options)
            i = max(end, i) + 1
        else:
            i += 1
    return best


def parse_modified_item(text: str, original: MCQItem, min_kept: float = 0.5,
                        require_options: bool = False) -> ParsedItem:
    """Validate an attacker's modified question against the original.

    The options must be the original ones (same letters, same texts in the same slots) and no other answer
    may be declared; when the attacker leaves the options out they are re-attached (unless
    ``require_options``). The stem must differ from the original and keep at least ``min_kept`` of the
    original's words in order (so the attack adds to the vignette instead of writing a new question).
    """
    lines = [line for line in text.strip().splitlines() if not _FENCE.match(line.strip())]
    if not "".join(lines).strip():
        return ParsedItem(None, "the reply was empty", "unparseable")
    block = _option_block(lines, original.letters)
    options_given = block is not None
    if block is not None:
        start, end, options = block
        stem_lines, tail = lines[:start], lines[end + 1:]
    else:
        options, stem_lines, tail = {}, lines, []
    if stem_lines:
        stem_lines[0] = _LABEL.sub("", stem_lines[0])
    stem = "\n".join(stem_lines).strip()
    if not stem:
        if is_refusal(text):
            return ParsedItem(None, "the attacker refused", "refusal")
        return ParsedItem(None, "no question text before the options", "unparseable", options_given)
    if not options_given and is_refusal(text):
        return ParsedItem(None, "the attacker refused", "refusal")
    declared = [m.group(1) for m in ANSWER_DECLARATION.finditer("\n".join(tail))]
    declared += [m.group(1) for m in ANSWER_DECLARATION.finditer(stem) if "correct" in m.group(0).lower()]
    if any(letter != original.answer for letter in declared):
        return ParsedItem(None, f"it declares answer {declared[-1]} but the correct answer is {original.answer}",
                          "changed_answer", options_given)
    # a trailing answer line inside the stem is dropped (the target must not see it)
    stem = re.sub(r"\n\s*(?:correct\s+)?answer\s*[:\-].*$", "", stem, flags=re.IGNORECASE).strip()
    clean = original.clean_options()
    if options_given:
        if list(options) != original.letters:
            return ParsedItem(None, f"it has options {list(options)} instead of {original.letters}",
                              "tampered_options", True)
        changed = [letter for letter in clean if normalise_text(options[letter]) != normalise_text(clean[letter])]
        if changed:
            key_text = normalise_text(clean[original.answer])
            moved_to = [letter for letter in options if normalise_text(options[letter]) == key_text]
            if moved_to and moved_to[0] != original.answer:
                return ParsedItem(None, f"the correct option moved from {original.answer} to {moved_to[0]}",
                                  "changed_answer", True)
            return ParsedItem(None, f"option(s) {', '.join(changed)} were changed; keep the options exactly",
                              "tampered_options", True)
    elif require_options:
        return ParsedItem(None, "the options are missing", "unparseable")
    if normalise_text(stem) == normalise_text(original.clean_question()):
        return ParsedItem(None, "the question is unchanged", "unchanged", options_given)
    kept = kept_share(original.clean_question(), stem)
    if kept < min_kept:
        return ParsedItem(None, f"only {kept:.0%} of the original question's words were kept; keep all of it "
                          "and add to it", "dropped_original", options_given)
    return ParsedItem(original.with_question(stem), None, None, options_given)


# ------------------------------------------------------------------------------------------------ diffs


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


@functools.lru_cache(maxsize=1024)
def word_opcodes(original: str, modified: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple, ...]]:
    """(original words, modified words, difflib opcodes) on whitespace words, compared case- and
    punctuation-insensitively. Memoised: every attack and control is diffed against its original by
    ``kept_share``, ``added_word_count`` and ``added_spans`` (about 1 ms of CPU per diff)."""
    a, b = _words(original), _words(modified)
    key = [w.lower().strip(".,;:!?\"'()") for w in a], [w.lower().strip(".,;:!?\"'()") for w in b]
    ops = difflib.SequenceMatcher(None, key[0], key[1], autojunk=False).get_opcodes()
    return tuple(a), tuple(b), tuple(tuple(op) for op in ops)


def kept_share(original: str, modified: str) -> float:
    """Share of the original's words that survive, in order, in the modified text."""
    a, _, ops = word_opcodes(original, modified)
    if not a:
        return 1.0
    return sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal") / len(a)


def added_word_count(original: str, modified: str) -> int:
    """Number of words the modification inserted or substituted (the paper's "number of words")."""
    _, _, ops = word_opcodes(original, modified)
    return sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in ("insert", "replace"))


def added_spans(original: str, modified: str) -> list[str]:
    """The runs of text the modification added, each split at sentence ends (one span ~ one added fact)."""
    _, b, ops = word_opcodes(original, modified)
    spans: list[str] = []
    for tag, _, _, j1, j2 in ops:
        if tag not in ("insert", "replace"):
            continue
        current: list[str] = []
        for word in b[j1:j2]:
            current.append(word)
            if re.search(r"[.!?;]$", word):
                spans.append(" ".join(current))
                current = []
        if current:
            spans.append(" ".join(current))
    return [s for s in spans if re.search(r"[A-Za-z]", s)]
