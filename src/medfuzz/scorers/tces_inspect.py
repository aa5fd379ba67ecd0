"""Inspect scorer and metrics for TCES; every number comes from ``tces_stats.summarise`` over the per-sample
records kept in ``Score.metadata["record"]``."""

from __future__ import annotations

from collections.abc import Callable

from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from medfuzz.scorers.tces_stats import TCESSummary, summarise
from medfuzz.solvers.tces_inspect import METADATA_KEY


def _summary(scores: list[SampleScore]) -> TCESSummary:
    return summarise(s.score.metadata["record"] for s in scores if s.score.metadata and "record" in s.score.metadata)


def _field(name: str) -> Callable[[list[SampleScore]], float]:
    def compute(scores: list[SampleScore]) -> float:
        return float(getattr(_summary(scores), name))
    return compute


@metric
def clean_accuracy() -> Metric:
    """Accuracy on the clean questions of the attackable (entity-bearing) items."""
    return _field("clean_accuracy")


@metric
def attacked_accuracy() -> Metric:
    """Accuracy after the attack (an item counts as correct when it was correct clean and never flipped)."""
    return _field("attacked_accuracy")


@metric
def attack_success_rate() -> Metric:
    """ASR@budget: flipped items among those answered correctly clean."""
    return _field("asr")


@metric
def mean_queries_to_success() -> Metric:
    return _field("mean_queries_to_success")


@metric
def gini_simpson_diversity() -> Metric:
    """1 - Σ q² over the replacement entities of successful attacks (low = a few entities reused)."""
    return _field("gini_simpson")


@metric
def reused_entities() -> Metric:
    """The most reused successful replacement entities, as ``reused:<name>`` = count (top 5)."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return {f"reused:{name}": float(count) for name, count in _summary(scores).top_entities}
    return compute


@scorer(metrics=[clean_accuracy(), attacked_accuracy(), attack_success_rate(), mean_queries_to_success(),
                 gini_simpson_diversity(), reused_entities()])
def tces_scorer() -> Scorer:
    """Per sample: numeric flags in ``value`` (success, attacked, evaluated, queries) and the whole attack record
    (victim span, replacement, distance, answers, modified item, usage) in ``metadata["record"]``."""

    async def score(state: TaskState, target: Target) -> Score:
        record = state.metadata[METADATA_KEY]
        outcome = record["outcome"]
        success = outcome == "success"
        return Score(
            value={
                "success": float(success),
                "attacked": float(outcome in ("success", "failure")),
                "evaluated": float(outcome in ("success", "failure", "already_wrong")),
                "queries": float(record["queries_used"]),
            },
            answer=record["target_answers"][-1],
            explanation=f"{outcome}: {record['reason']}",
            metadata={"record": record},
        )

    return score
