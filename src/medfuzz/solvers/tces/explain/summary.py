"""Numbers that summarise how a substitution changes a Shapley profile (TCES §5.3 / App. E, quantified).

The paper shows heatmaps and reads two things off them: the top-1 token follows the model's prediction (symbol
binding), and the profile changes most near the substituted entity. Here both become numbers per output letter:

- ``share``: each region's part of the attribution mass Σ|φ| (regions: the stem, each option with its letter
  label, and ``entity`` = the substituted span inside its option), for the clean and the attacked prompt;
- ranks (1 = the largest φ) of the best-ranked token of the key option, of the substituted option and of the
  entity span, and their change;
- the top-1 token and whether it lies in the option the model predicts;
- Spearman's ρ between the two profiles over the tokens the prompts share (``scipy.stats.spearmanr``): low ρ is a
  profile rearranged by a one-entity edit.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question
from medfuzz.errors import MedfuzzError
from medfuzz.solvers.tces.explain.shapley import TokenAttribution

STEM = "stem"
ENTITY = "entity"


@dataclass(frozen=True)
class QuestionLayout:
    """Character ranges of the stem, each option line and the substituted span in ``format_question(item)``."""

    text: str
    stem: tuple[int, int]
    options: dict[str, tuple[int, int]]
    entity: tuple[int, int] | None

    @classmethod
    def of(cls, item: MCQItem, entity_letter: str | None = None,
           entity_span: tuple[int, int] | None = None) -> QuestionLayout:
        """``entity_span`` is a range in the clean option text of ``entity_letter`` (``item.clean_options()``)."""
        text = format_question(item)
        stem = item.clean_question()
        position = len(stem) + 2  # format_question: stem, a blank line, then one "L. text" line per option
        options: dict[str, tuple[int, int]] = {}
        entity = None
        for letter, option in item.clean_options().items():
            line = f"{letter}. {option}"
            options[letter] = (position, position + len(line))
            if letter == entity_letter and entity_span is not None:
                offset = position + len(letter) + 2
                entity = (offset + entity_span[0], offset + entity_span[1])
            position += len(line) + 1
        for letter, option in item.clean_options().items():
            a, b = options[letter]
            if text[a:b] != f"{letter}. {option}":  # format_question changed: the regions would be wrong
                raise MedfuzzError(f"item {item.id}: option {letter} is not where format_question puts it")
        return cls(text, (0, len(stem)), options, entity)

    def region(self, span: tuple[int, int], token: str) -> str:
        """Where a token lies: by its first visible character (whitespace-only tokens: by their start)."""
        visible = len(token) - len(token.lstrip())
        at = span[0] + (visible if visible < len(token) else 0)
        if self.stem[0] <= at < self.stem[1]:
            return STEM
        for letter, (a, b) in self.options.items():
            if a <= at < b:
                return letter
        return "gap"  # the blank line and newlines between regions

    def in_entity(self, span: tuple[int, int]) -> bool:
        return self.entity is not None and span[0] < self.entity[1] and self.entity[0] < span[1]


def changed_option(clean: MCQItem, attacked: MCQItem) -> tuple[str, tuple[int, int], tuple[int, int]]:
    """The one option the attack changed, and the changed character range in its clean and its attacked text
    (common prefix and suffix removed, widened to whole words). A stem change or several changed options is an
    error: not a TCES pair."""
    if clean.letters != attacked.letters or clean.answer != attacked.answer:
        raise MedfuzzError(f"item {clean.id}: the attacked item has other letters or another key")
    if clean.clean_question() != attacked.clean_question():
        raise MedfuzzError(f"item {clean.id}: the attacked item changes the stem; expected one changed option")
    a_opts, b_opts = clean.clean_options(), attacked.clean_options()
    changed = [letter for letter in clean.letters if a_opts[letter] != b_opts[letter]]
    if len(changed) != 1:
        raise MedfuzzError(f"item {clean.id}: expected exactly one changed option, found {changed or 'none'}")
    letter = changed[0]
    a, b = a_opts[letter], b_opts[letter]
    prefix = _shared(a, b)
    suffix = _shared(a[prefix:][::-1], b[prefix:][::-1])
    # widen to whole words: Ciprofloxacin -> Ceftazidime share the "C", but the entity is the whole word (the
    # widened text is common to both strings, so both spans move alike)
    while prefix > 0 and a[prefix - 1].isalnum():
        prefix -= 1
    while suffix > 0 and a[len(a) - suffix].isalnum():
        suffix -= 1
    return letter, (prefix, len(a) - suffix), (prefix, len(b) - suffix)


def _shared(a: str, b: str) -> int:
    """Length of the common prefix of two strings."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def ranks(values: np.ndarray) -> np.ndarray:
    """1 for the largest value; ties share the best rank (1 + how many are strictly larger)."""
    order = np.sort(values)[::-1]
    return np.searchsorted(-order, -values, side="left") + 1


def profile_summary(attribution: TokenAttribution, layout: QuestionLayout, output: str, key: str,
                    victim: str, predicted: str | None) -> dict[str, Any]:
    """Mass shares, signed sums, ranks and the top-1 token of one profile for one output."""
    phi = attribution.column(output)
    regions = [layout.region(s, t) for s, t in zip(attribution.spans, attribution.tokens, strict=True)]
    entity = np.array([layout.in_entity(s) for s in attribution.spans], dtype=bool)
    magnitude = np.abs(phi)
    total = float(magnitude.sum())
    names = [STEM, *layout.options]
    share = {name: _ratio(magnitude[[r == name for r in regions]].sum(), total) for name in names}
    share[ENTITY] = _ratio(magnitude[entity].sum(), total)
    signed = {name: float(phi[[r == name for r in regions]].sum()) for name in names}
    signed[ENTITY] = float(phi[entity].sum())
    rank = ranks(phi)

    def best(mask: np.ndarray | list[bool]) -> int | None:
        selected = rank[np.asarray(mask, dtype=bool)]
        return int(selected.min()) if selected.size else None

    top = int(np.argmax(phi))
    return {
        "share": share,
        "signed": signed,
        "key_rank": best([r == key for r in regions]),
        "substituted_option_rank": best([r == victim for r in regions]),
        "entity_rank": best(entity),
        "tokens": len(phi),
        "top1": {"index": top, "token": attribution.tokens[top], "region": regions[top], "value": float(phi[top]),
                 "in_entity": bool(entity[top])},
        "top1_in_predicted_option": None if predicted is None else regions[top] == predicted,
    }


def _ratio(part: float, total: float) -> float:
    return float(part / total) if total > 0 else math.nan


def shared_token_correlation(clean: TokenAttribution, attacked: TokenAttribution, output: str) -> dict[str, Any]:
    """Spearman's ρ of the two profiles over the tokens both prompts share (aligned with ``difflib`` on token
    text, so the tokens of the substituted span are left out)."""
    from scipy.stats import spearmanr

    matcher = difflib.SequenceMatcher(a=clean.tokens, b=attacked.tokens, autojunk=False)
    pairs = [(i + k, j + k) for i, j, size in matcher.get_matching_blocks() for k in range(size)]
    if len(pairs) < 3:
        return {"shared_tokens": len(pairs), "spearman_rho": math.nan, "p_value": math.nan}
    a = clean.column(output)[[i for i, _ in pairs]]
    b = attacked.column(output)[[j for _, j in pairs]]
    if np.ptp(a) == 0 or np.ptp(b) == 0:  # a constant profile has no rank order (spearmanr would warn, then NaN)
        return {"shared_tokens": len(pairs), "spearman_rho": math.nan, "p_value": math.nan}
    result = spearmanr(a, b)
    return {"shared_tokens": len(pairs), "spearman_rho": float(result.statistic), "p_value": float(result.pvalue)}


def _delta(after: float | None, before: float | None) -> float | None:
    if after is None or before is None:
        return None
    return after - before


def pair_summary(clean: dict[str, Any], attacked: dict[str, Any], correlation: dict[str, Any],
                 victim: str) -> dict[str, Any]:
    """Attacked minus clean for the headline numbers of one output (positive rank change = the tokens fell)."""
    return {
        "substituted_option_share": {"clean": clean["share"][victim], "attacked": attacked["share"][victim]},
        "rest_share": {"clean": 1 - clean["share"][victim], "attacked": 1 - attacked["share"][victim]},
        "entity_share": {"clean": clean["share"][ENTITY], "attacked": attacked["share"][ENTITY]},
        "key_rank": {"clean": clean["key_rank"], "attacked": attacked["key_rank"],
                     "change": _delta(attacked["key_rank"], clean["key_rank"])},
        "substituted_option_rank": {"clean": clean["substituted_option_rank"],
                                    "attacked": attacked["substituted_option_rank"],
                                    "change": _delta(attacked["substituted_option_rank"],
                                                     clean["substituted_option_rank"])},
        "entity_rank": {"clean": clean["entity_rank"], "attacked": attacked["entity_rank"],
                        "change": _delta(attacked["entity_rank"], clean["entity_rank"])},
        **correlation,
    }
