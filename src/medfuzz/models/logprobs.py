"""Answer-letter log-probabilities from per-token logprob streams, across tokenisation variants.

Tokenisers spell the answer ``A`` as ``"A"``, ``" A"``, ``"A."``, ``"(A"``, ``" A)"`` ... and different
spellings of the same letter are different tokens, so their probabilities add (log-sum-exp). Completions
whose first token is EOS, whitespace or a special token are skipped to the first content token. When no
answer position can be found, or the backend returned no logprobs, the result is ``None``: the caller
reports "not available" rather than a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

_LETTER_TOKEN = re.compile(r"^\s*[\(\[]?\s*([A-Za-z])\s*[\.\)\]:,]?\s*$")
_SPECIAL = re.compile(r"^<[^<>\s]*>$|^<\|[^|]*\|>$|^\[/?[A-Z_]+\]$")


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its logprob, and the top alternatives at that position."""

    token: str
    logprob: float
    top: Sequence[tuple[str, float]] = field(default_factory=tuple)


def letter_of_token(token: str, letters: Sequence[str]) -> str | None:
    """The answer letter a token spells (``" B"``, ``"B."``, ``"(B"``), or ``None``.

    Only upper-case letters count: a lower-case ``" a"`` is far more often the English article.
    """
    match = _LETTER_TOKEN.match(token)
    if match and match.group(1) in letters:
        return match.group(1)
    return None


def _is_skippable(token: str) -> bool:
    return not token.strip() or bool(_SPECIAL.match(token.strip()))


def _logsumexp(values: Sequence[float]) -> float:
    peak = max(values)
    if peak == -math.inf:
        return -math.inf
    return peak + math.log(sum(math.exp(v - peak) for v in values))


def letter_logprobs_at(position: TokenLogprob, letters: Sequence[str]) -> dict[str, float]:
    """Log-probability of each letter at one position, summing over the spellings in the top list."""
    spellings: dict[str, dict[str, float]] = {}
    candidates = [*position.top, (position.token, position.logprob)]
    for token, logprob in candidates:
        letter = letter_of_token(token, letters)
        if letter is not None and logprob is not None and not math.isnan(float(logprob)):
            # the same spelling can appear twice (chosen token and in top): keep it once
            spellings.setdefault(letter, {})[token] = float(logprob)
    return {letter: _logsumexp(list(by_token.values())) for letter, by_token in spellings.items()}


def extract_letter_logprobs(
    positions: Sequence[TokenLogprob] | None,
    letters: Sequence[str],
    where: Literal["first", "last"] = "first",
) -> dict[str, float] | None:
    """Find the answer position in a completion and return the letters' log-probabilities there.

    ``where="first"``: the first content token must spell a letter (prompts that ask for the letter only);
    ``where="last"``: the last token that spells a letter (reasoning followed by a final answer).
    Returns ``None`` when no logprobs were given or no position spells a letter.
    """
    if not positions:
        return None
    content = [p for p in positions if not _is_skippable(p.token)]
    if not content:
        return None
    if where == "first":
        chosen = content[0] if letter_of_token(content[0].token, letters) else None
    else:
        chosen = next((p for p in reversed(content) if letter_of_token(p.token, letters)), None)
    if chosen is None:
        return None
    found = letter_logprobs_at(chosen, letters)
    return found or None


def normalise(letter_logprobs: dict[str, float], letters: Sequence[str]) -> dict[str, float]:
    """Probabilities over ``letters`` renormalised to sum to 1 (letters below the top-k cut-off get 0)."""
    total = sum(math.exp(letter_logprobs[letter]) for letter in letters if letter in letter_logprobs)
    if total <= 0:
        raise ValueError("no letter has positive probability")
    return {letter: math.exp(letter_logprobs[letter]) / total if letter in letter_logprobs else 0.0
            for letter in letters}
