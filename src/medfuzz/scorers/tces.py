"""TCES run statistics from per-item result records (``TCESResult.to_dict()``), harness-free.

Which items count where:

- *evaluated*: outcome ``success``, ``attack_failed`` or ``already_wrong`` (the target answered the clean question and,
  if attacked, every attack query). ``no_entity`` items are outside the attackable subset (as the paper's
  drug-/disease-mention subsets) and ``llm_error`` items are dropped and counted separately.
- clean accuracy and attacked accuracy are over the evaluated items; ASR is successes among the evaluated items
  the target answered correctly clean (``success`` + ``attack_failed``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from medfuzz.stats import gini_simpson

EVALUATED = ("success", "attack_failed", "already_wrong")


def top_entities(entities: Iterable[str], k: int = 5) -> list[tuple[str, int]]:
    """The ``k`` most reused entities, most frequent first (ties alphabetical, so the order is stable)."""
    return sorted(Counter(entities).items(), key=lambda pair: (-pair[1], pair[0]))[:k]


@dataclass
class TCESSummary:
    items: int
    evaluated: int
    clean_correct: int
    successes: int
    llm_errors: int
    no_entity: int
    clean_accuracy: float
    attacked_accuracy: float
    asr: float
    mean_queries_to_success: float
    gini_simpson: float
    top_entities: list[tuple[str, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def summarise(records: Iterable[Mapping[str, Any]], top: int = 5) -> TCESSummary:
    records = list(records)
    outcomes = Counter(r["outcome"] for r in records)
    evaluated = sum(outcomes[o] for o in EVALUATED)
    attacked = outcomes["success"] + outcomes["attack_failed"]
    successes = [r for r in records if r["outcome"] == "success"]
    replacements = [r["replacement"] for r in successes]
    queries = [r["queries_to_success"] for r in successes]
    return TCESSummary(
        items=len(records),
        evaluated=evaluated,
        clean_correct=attacked,
        successes=len(successes),
        llm_errors=outcomes["llm_error"],
        no_entity=outcomes["no_entity"],
        clean_accuracy=_ratio(attacked, evaluated),
        attacked_accuracy=_ratio(outcomes["attack_failed"], evaluated),
        asr=_ratio(len(successes), attacked),
        mean_queries_to_success=float(np.mean(queries)) if queries else float("nan"),
        gini_simpson=gini_simpson(replacements),
        top_entities=top_entities(replacements, top),
    )


def successes_by_budget(records: Iterable[Mapping[str, Any]], budget: int) -> tuple[list[int], int]:
    """The successes within b queries for b = 1..budget (an attack that succeeded at query q counts for every
    b ≥ q), and the attacked items they are out of: the counts behind ``asr_by_budget`` and its Wilson
    intervals."""
    attacked = [r for r in records if r["outcome"] in ("success", "attack_failed")]
    hits = np.array([r["queries_to_success"] for r in attacked if r["outcome"] == "success"], dtype=np.int64)
    return [int(np.sum(hits <= b)) for b in range(1, budget + 1)], len(attacked)


def asr_by_budget(records: Iterable[Mapping[str, Any]], budget: int) -> list[float]:
    """ASR@b for b = 1..budget from queries-to-success (query scaling, Fig. 4): an attack that succeeded at
    query q counts for every b ≥ q. Valid for sequential samplers, whose first b queries do not depend on B."""
    hits, attacked = successes_by_budget(records, budget)
    return [_ratio(k, attacked) for k in hits]
