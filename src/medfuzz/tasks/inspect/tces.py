"""Inspect shell around the TCES engine: one ``@solver`` that attacks the sample's item with the task's model.

Inspect scorer and metrics for TCES; every number comes from ``tces_stats.summarise`` over the per-sample
records kept in ``Score.metadata["record"]``.

TCES attack tasks: ``medfuzz/tces_medqa`` and ``medfuzz/tces_medmcqa``.

Example::

    inspect eval medfuzz/tces_medqa --model openai/gpt-4o-mini -T entity=drugs -T sampler=pdws -T n=-20 -T budget=8
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from inspect_ai import Task, task
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medfuzz.adapters.inspect_model import InspectChatModel
from medfuzz.benchmarks.items import MCQItem
from medfuzz.scorers.tces import TCESSummary, summarise
from medfuzz.solvers.tces.attack import TCESConfig, TCESResources, attack_item
from medfuzz.tasks.inspect._dataset import mcq_dataset

METADATA_KEY = "tces"


@cache
def shared_resources(entity_type: str, vocabulary: str | None, embedding: str) -> TCESResources:
    """Vocabulary, matcher and vectors, built once per process for each combination."""
    return TCESResources.build(entity_type, vocabulary, embedding)


@solver
def tces_attack(
    entity_type: str = "drugs",
    sampler: str = "pdws",
    n: float = -20.0,
    budget: int = 8,
    zoo_m: int = 5,
    zoo_step: float = 1.0,
    embedding: str = "default",
    vocabulary: str | None = None,
    seed: int = 0,
    max_tokens: int = 16,
) -> Solver:
    """Attack the sample's item (``metadata["item"]``) and leave the full result in ``metadata["tces"]``."""
    config = TCESConfig(entity_type=entity_type, sampler=sampler, n=float(n), budget=int(budget), zoo_m=int(zoo_m),
                        zoo_step=float(zoo_step), seed=int(seed), max_tokens=int(max_tokens))
    resources = shared_resources(entity_type, vocabulary, embedding)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        result = await attack_item(MCQItem.from_record(state.metadata["item"]), InspectChatModel(model), resources,
                                   config)
        state.metadata[METADATA_KEY] = result.to_dict()
        final = result.target_answers[-1] or ""
        state.output = ModelOutput.from_content(model=str(model), content=final)
        return state

    return solve


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
                "attacked": float(outcome in ("success", "attack_failed")),
                "evaluated": float(outcome in ("success", "attack_failed", "already_wrong")),
                "queries": float(record["queries_used"]),
            },
            answer=record["target_answers"][-1],
            explanation=f"{outcome}: {record['reason']}",
            metadata={"record": record},
        )

    return score


def _tces(benchmark: str, data: str, split: str | None, limit: int | None, shuffle_choices: bool, entity: str,
          sampler: str, n: float, budget: int, zoo_m: int, zoo_step: float, embedding: str, vocabulary: str | None,
          seed: int, max_tokens: int) -> Task:
    params = {"benchmark": benchmark, "entity": entity, "sampler": sampler, "n": float(n), "budget": int(budget),
              "zoo_m": int(zoo_m), "zoo_step": float(zoo_step), "embedding": embedding, "vocabulary": vocabulary,
              "seed": int(seed), "data": data, "split": split, "shuffle_choices": shuffle_choices}
    return Task(
        dataset=mcq_dataset(benchmark, data, split, limit, shuffle_choices, seed),
        solver=tces_attack(entity_type=entity, sampler=sampler, n=n, budget=budget, zoo_m=zoo_m, zoo_step=zoo_step,
                           embedding=embedding, vocabulary=vocabulary, seed=seed, max_tokens=max_tokens),
        scorer=tces_scorer(),
        metadata={"medfuzz_method": "tces", **params},
    )


@task
def tces_medqa(data: str = "hf", split: str = "test", limit: int | None = None, shuffle_choices: bool = False,
               entity: str = "drugs", sampler: str = "pdws", n: float = -20.0, budget: int = 8, zoo_m: int = 5,
               zoo_step: float = 1.0, embedding: str = "default", vocabulary: str | None = None, seed: int = 0,
               max_tokens: int = 16) -> Task:
    """TCES on MedQA-USMLE. ``entity``: drugs | diseases; ``sampler``: rands | pdws | zoo; ``n``: PDWS exponent
    (<0 near the key, >0 far); ``budget``: queries per item; ``zoo_m``/``zoo_step``: DiscreteZOO's M and λ;
    ``embedding``: default (offline MiniLM) | coder | gte-base | model name or path; ``vocabulary``: builtin or
    a file (DrugCentral ``id,name``, CTD ``name`` header, or one name per line)."""
    return _tces("medqa", data, split, limit, shuffle_choices, entity, sampler, n, budget, zoo_m, zoo_step,
                 embedding, vocabulary, seed, max_tokens)


@task
def tces_medmcqa(data: str = "hf", split: str = "validation", limit: int | None = None,
                 shuffle_choices: bool = False, entity: str = "drugs", sampler: str = "pdws", n: float = -20.0,
                 budget: int = 8, zoo_m: int = 5, zoo_step: float = 1.0, embedding: str = "default",
                 vocabulary: str | None = None, seed: int = 0, max_tokens: int = 16) -> Task:
    """TCES on MedMCQA; parameters as ``tces_medqa``."""
    return _tces("medmcqa", data, split, limit, shuffle_choices, entity, sampler, n, budget, zoo_m, zoo_step,
                 embedding, vocabulary, seed, max_tokens)
