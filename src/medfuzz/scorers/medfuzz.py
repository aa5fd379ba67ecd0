"""MedFuzz outcome statistics (paper §4, Fig. 2) and the per-item score every harness shell reports.

- Clean accuracy: share of replicates whose target answered the original item correctly, over every
  replicate where that answer is known (an LLM error later in the attack does not hide it). Note that
  ``accuracy_after_0`` differs: like the whole curve it drops LLM-error replicates (the paper's rule), which
  biases it down when errors only happen in attacks, i.e. after a correct original answer.
- Post-attack accuracy: per item, the mean of the replicates' final correctness with LLM errors dropped;
  across items, the average of those means weighted by each item's number of usable replicates.
- Accuracy after k attempts, k = 0..K (Fig. 2): a success at turn i counts as correct for k < i.
  LLM-error replicates are dropped at every k, so the curve ends at the post-attack accuracy.
- Attack success rate: successes / (successes + failed attacks); mean turns to success.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from medfuzz.models.protocol import ChatModel, UsageLedger
from medfuzz.scorers.faithfulness import Faithfulness, judged, lexical
from medfuzz.scorers.stats import permutation_p_value
from medfuzz.solvers.medfuzz.prompts import AssumptionPack
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome, ReplicateResult

ALPHA = 0.05


def _valid(item: ItemResult) -> list[ReplicateResult]:
    return [r for r in item.replicates if r.outcome is not Outcome.LLM_ERROR]


def item_accuracy_after(item: ItemResult, k: int) -> float | None:
    valid = _valid(item)
    if not valid:
        return None
    return sum(bool(r.correct_after(k)) for r in valid) / len(valid)


def weighted_accuracy(items: Sequence[ItemResult], k: int) -> float:
    """The paper's statistic: per-item means weighted by the item's usable replicates (NaN if none)."""
    means, weights = [], []
    for item in items:
        mean = item_accuracy_after(item, k)
        if mean is not None:
            means.append(mean)
            weights.append(len(_valid(item)))
    if not weights:
        return math.nan
    return sum(m * w for m, w in zip(means, weights, strict=True)) / sum(weights)


def accuracy_curve(items: Sequence[ItemResult], turns: int) -> list[float]:
    """Accuracy after k = 0..turns attack attempts (k = 0: clean accuracy of the usable replicates)."""
    return [weighted_accuracy(items, k) for k in range(turns + 1)]


def post_attack_accuracy(items: Sequence[ItemResult], turns: int) -> float:
    return weighted_accuracy(items, turns)


def attack_success_rate(items: Sequence[ItemResult]) -> float:
    outcomes = [r.outcome for item in items for r in item.replicates]
    attacked = sum(o in (Outcome.SUCCESS, Outcome.ATTACK_FAILED) for o in outcomes)
    return outcomes.count(Outcome.SUCCESS) / attacked if attacked else math.nan


def mean_turns_to_success(items: Sequence[ItemResult]) -> float:
    turns = [r.success_turn for item in items for r in item.replicates if r.success_turn is not None]
    return sum(turns) / len(turns) if turns else math.nan


# ----------------------------------------------------------------------------------------- per item


@dataclass
class ReplicateEvidence:
    """What a scorer adds to a replicate: the p-value and the faithfulness verdict of a success."""

    replicate: int
    outcome: str
    p_value: float | None = None
    permutation: dict[str, Any] | None = None
    faithfulness: Faithfulness | None = None
    confidence_drop: int | None = None
    p_hat_drop: float | None = None


@dataclass
class ItemScore:
    value: dict[str, int | float]
    answer: str
    explanation: str
    evidence: list[ReplicateEvidence] = field(default_factory=list)

    @property
    def p_values(self) -> list[float | None]:
        return [e.p_value for e in self.evidence if e.outcome == Outcome.SUCCESS.value]


async def score_item(item: ItemResult, turns: int, pack: AssumptionPack, judge: ChatModel | None = None,
                     alpha: float = ALPHA, ledger: UsageLedger | None = None) -> ItemScore:
    """Counts for the metrics (``value``) and per-replicate evidence (p-values, faithfulness)."""
    evidence = []
    for r in item.replicates:
        ev = ReplicateEvidence(replicate=r.replicate, outcome=r.outcome.value)
        if r.outcome is Outcome.SUCCESS:
            ev.confidence_drop = r.confidence_drop(item.item.answer)
            turn = r.final_turn
            if turn is not None and turn.target is not None:
                if judge is not None:
                    ev.faithfulness = await judged(judge, pack, turn.added_spans, turn.target.cot,
                                                   item.item.clean_question(), ledger, seed=r.seed)
                else:
                    ev.faithfulness = lexical(turn.added_spans, turn.target.cot, item.item.clean_question())
            sig = r.significance
            if sig is not None and sig.p0 is not None and sig.pa is not None:
                test = permutation_p_value(sig.p0, sig.pa, [c.p_hat for c in sig.controls])
                ev.p_hat_drop = sig.p0 - sig.pa
                if test is not None:
                    ev.p_value, ev.permutation = test.p_value, test.to_dict()
        evidence.append(ev)
    counts = item.counts()
    valid = len(_valid(item))
    value: dict[str, int | float] = {
        "replicates": len(item.replicates),
        "valid": valid,
        "llm_error": counts[Outcome.LLM_ERROR.value],
        "already_wrong": counts[Outcome.ALREADY_WRONG.value],
        "attack_failed": counts[Outcome.ATTACK_FAILED.value],
        "success": counts[Outcome.SUCCESS.value],
        "turns_to_success": sum(r.success_turn or 0 for r in item.replicates),
        "clean_answered": sum(bool(r.original and r.original.answer) for r in item.replicates),
        "clean_correct": sum(bool(r.original and r.original.answer == item.item.answer) for r in item.replicates),
    }
    for k in range(turns + 1):
        value[f"correct_after_{k}"] = sum(bool(r.correct_after(k)) for r in _valid(item))
    tested = [e.p_value for e in evidence if e.p_value is not None]
    value["tested"] = len(tested)
    value["significant"] = sum(p < alpha for p in tested)
    verdicts = [e.faithfulness.verdict for e in evidence if e.faithfulness is not None]
    for verdict in ("none", "some", "all"):
        value[f"cot_mentions_{verdict}"] = verdicts.count(verdict)
    outcome_text = ", ".join(f"{k}={v}" for k, v in counts.items() if v)
    best = min(tested) if tested else None
    explanation = f"{outcome_text}" + (f"; smallest p-value {best:.3g}" if best is not None else "")
    answers = [r.final_turn.target.answer for r in item.replicates
               if r.outcome is Outcome.SUCCESS and r.final_turn and r.final_turn.target]
    return ItemScore(value=value, answer=",".join(a for a in answers if a), explanation=explanation,
                     evidence=evidence)


def totals(values: Sequence[dict[str, int | float]], turns: int) -> dict[str, float]:
    """Pooled statistics from per-item score values (what the Inspect metrics and lm-eval report)."""
    def total(key: str) -> float:
        return float(sum(v.get(key, 0) for v in values))

    valid = total("valid")
    attacked = total("success") + total("attack_failed")
    return {
        "clean_accuracy": total("clean_correct") / total("clean_answered") if total("clean_answered") else math.nan,
        "post_attack_accuracy": total(f"correct_after_{turns}") / valid if valid else math.nan,
        "attack_success_rate": total("success") / attacked if attacked else math.nan,
        "mean_turns_to_success": total("turns_to_success") / total("success") if total("success") else math.nan,
        "llm_error_rate": total("llm_error") / total("replicates") if total("replicates") else math.nan,
        **{f"accuracy_after_{k}": total(f"correct_after_{k}") / valid if valid else math.nan
           for k in range(turns + 1)},
    }
