"""Reading the chosen option letter out of a model's free-text reply: the one parser every method uses.

Strict vs lenient, explicitly: Inspect's own ``choice()`` scorer is the *strict* reading (the reply must
carry its ``ANSWER: X`` line) and stays the default metric of the Inspect tasks. ``answer_letter`` is the
*lenient* reading used by the attack engines (a reply only has to name one option unambiguously) and by the
lenient accuracy shown beside Inspect's strict one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# "the answer is C", "Answer: (B)", "correct answer - D"
ANSWER_DECLARATION = re.compile(r"(?:correct\s+)?answer\s*(?:is|:|-|=)\s*(?:option\s*)?\(?\**([A-J])\b",
                                re.IGNORECASE)


def normalise_text(text: str) -> str:
    """Lower case, straight quotes, single spaces, no wrapping quotes/markup or trailing punctuation."""
    text = text.lower().replace("’", "'").replace("“", '"').replace("”", '"')
    return re.sub(r"\s+", " ", text).strip().strip("\"'*`").rstrip(".,;").strip()


def answer_letter(text: str, letters: Sequence[str], options: Mapping[str, str] | None = None) -> str | None:
    """The option letter a reply names, or ``None`` when it names none or several.

    In order: a leading letter (``"C"``, ``"(B)"``, ``"**D**"``, ``"C) Ceftriaxone"``); the last declared
    answer (``"The answer is B."``, ``"answer: b"``); the one option whose text the reply repeats (case and
    punctuation aside); a single stand-alone letter in a short reply (``"I pick option A here"``), where a
    sentence-opening article ``"A"`` does not count (``"A patient like this ..."``).
    """
    stripped = text.strip()
    if not stripped:
        return None
    allowed = "".join(letters)
    first = re.match(rf"^[\W_]*([{allowed}])\s*(?:[\.\):\]\*,]|$|\n)", stripped)
    if first:
        return first.group(1)
    declared = [m.group(1).upper() for m in ANSWER_DECLARATION.finditer(stripped)]
    declared = [letter for letter in declared if letter in letters]
    if declared:
        return declared[-1]
    if options:
        norm = normalise_text(stripped)
        hits = [letter for letter, option in options.items() if normalise_text(option) == norm]
        if len(hits) == 1:
            return hits[0]
    standalone = set()
    for match in re.finditer(rf"(?<![A-Za-z])([{allowed}])(?![A-Za-z])", stripped):
        sentence_start = not stripped[: match.start()].strip() or stripped[: match.start()].rstrip()[-1] in ".!?"
        if match.group(1) == "A" and sentence_start and re.match(r" [a-z]", stripped[match.end():]):
            continue  # the article "A" opening a sentence
        standalone.add(match.group(1))
    if len(standalone) == 1 and len(stripped) <= 40:
        return standalone.pop()
    return None
