"""Inspect shell around the TCES engine: one ``@solver`` that attacks the sample's item with the task's model.

Inspect scorer and metrics for TCES; every number comes from ``tces_stats.summarise`` over the per-sample
records kept in ``Score.metadata["record"]``.

TCES attack tasks: ``medfuzz/tces`` (``-T benchmark=...``) and ``medfuzz/tces_<benchmark>`` for every benchmark of the
registry (``medfuzz/tces_medqa``, ``medfuzz/tces_medmcqa``, ``medfuzz/tces_mcq`` for your own data).

Example::

    inspect eval medfuzz/tces_medqa --model openai/gpt-4o-mini -T entity=drugs -T sampler=pdws -T n=-20 -T budget=8
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any

from inspect_ai import Task, task
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medfuzz.adapters.inspect_model import InspectChatModel, default_generate_config
from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK, Benchmark
from medfuzz.benchmarks.selection import DEFAULT, DataSelection
from medfuzz.records.keys import CONFIG_KEY
from medfuzz.scorers.tces import TCESSummary, summarise
from medfuzz.solvers.tces.attack import TCESResources, attack_item, count_attackable
from medfuzz.solvers.tces.config import TCESConfig
from medfuzz.tasks.inspect.call_bound import announce_max_calls
from medfuzz.tasks.inspect.planning import planning
from medfuzz.tasks.inspect.rescoring import rescorable
from medfuzz.tasks.inspect.run_checks import ANSWERED, NOT_ASKED, RunChecks, reason
from medfuzz.tasks.inspect.samples import selected_dataset
from medfuzz.tasks.inspect.task_options import task_options
from medfuzz.tasks.inspect.user_errors import one_line_user_errors
from medfuzz.tasks.inspect.variants import benchmark_task, per_benchmark, selection_parameters

# Inspect records this in each log (eval.task_version) and eval-set resumes only logs of the same version:
# bump it when the task's scoring, metrics or data change (CHANGELOG.md, "Task versions")
TASK_VERSION = 1
METADATA_KEY = "tces"


@cache
def shared_resources(entity: str, vocabulary: str | None, embedding: str) -> TCESResources:
    """Vocabulary, matcher and vectors, built once per process for each combination."""
    return TCESResources.build(entity, vocabulary, embedding)


def embed_anchor_texts(config: TCESConfig, task: Task) -> int:
    """Embed the key option texts a TCES task's attacks will anchor on (``TCESResources.embed_anchor_texts``),
    with the resources its solver uses (``Method.before_first_call``: ``medfuzz run`` calls it before the first
    model call); cached on disk, a later run reads the vectors and never loads the encoder. Texts embedded."""
    resources = shared_resources(config.entity, config.vocabulary, config.embedding)
    return resources.embed_anchor_texts(MCQItem.from_record(sample.metadata["item"]) for sample in task.dataset)


@solver
def tces_attack(config: TCESConfig | None = None) -> Solver:
    """Attack the sample's item (``metadata["item"]``) and leave the full result in ``metadata["tces"]``."""
    config = config or TCESConfig()
    # built with the task (its vectors ready before the first sample), except for a plan (``planning_only``)
    resources = None if planning() else shared_resources(config.entity, config.vocabulary, config.embedding)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        nonlocal resources
        if resources is None:
            resources = shared_resources(config.entity, config.vocabulary, config.embedding)
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
def tces_clean_acc() -> Metric:
    """Accuracy on the clean questions of the attackable (entity-bearing) items."""
    return _field("clean_accuracy")


@metric
def tces_attacked_acc() -> Metric:
    """Accuracy after the attack (an item counts as correct when it was correct clean and never flipped)."""
    return _field("attacked_accuracy")


@metric
def tces_asr() -> Metric:
    """ASR@budget: flipped items among those answered correctly clean."""
    return _field("asr")


@metric
def tces_queries_to_success() -> Metric:
    return _field("mean_queries_to_success")


@metric
def tces_gini_simpson() -> Metric:
    """1 - Σ q² over the replacement entities of successful attacks (low = a few entities reused)."""
    return _field("gini_simpson")


@metric
def tces_reused_entities() -> Metric:
    """The most reused successful replacement entities, as ``reused:<name>`` = count (top 5)."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return {f"reused:{name}": float(count) for name, count in _summary(scores).top_entities}
    return compute


@metric
def tces_llm_errors() -> Metric:
    """Items whose attack ended in an LLM error after the retries (left out of every other number)."""
    return _field("llm_errors")


@metric
def tces_llm_error_rate() -> Metric:
    """LLM-error items among all items of the run."""
    def compute(scores: list[SampleScore]) -> float:
        summary = _summary(scores)
        return summary.llm_errors / summary.items if summary.items else float("nan")
    return compute


# the headline first: Inspect's log list and `inspect view` show the first metric as the run's number
@rescorable
@scorer(metrics=[tces_asr(), tces_clean_acc(), tces_attacked_acc(), tces_queries_to_success(),
                 tces_gini_simpson(), tces_reused_entities(), tces_llm_errors(), tces_llm_error_rate()])
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


def llm_error_of_item(scores: dict[str, SampleScore]) -> str:
    """``run_checks`` verdict of a TCES sample: its attack's LLM-error reason; an item with no entity of the
    type was never asked."""
    score = scores.get("tces_scorer")
    record = (score.score.metadata or {}).get("record") if score is not None else None
    if not isinstance(record, dict):
        return ANSWERED
    if record.get("outcome") == "llm_error":
        return reason(record.get("reason"))
    return NOT_ASKED if record.get("outcome") == "no_entity" else ANSWERED


def tces_task(benchmark: str, selection: DataSelection, config: TCESConfig) -> Task:
    """The TCES Inspect task for a benchmark and a checked config (what every ``@task`` below returns). Which
    items can be attacked (an entity of the type in a distractor) is said when the task is built: how many, and
    why each other one is not (``attackable``, also in the task metadata)."""
    dataset, data = selected_dataset(benchmark, selection, config.seed)
    attackable = count_attackable(benchmark, data["data_name"],
                                  (MCQItem.from_record(s.metadata["item"]) for s in dataset), config)
    return Task(
        version=TASK_VERSION,
        dataset=dataset,
        solver=tces_attack(config),
        scorer=tces_scorer(),
        config=default_generate_config(),
        # the call bound is said (and recorded) when the run starts, for the run's own samples
        early_stopping=RunChecks(llm_error_of_item, partial(announce_max_calls, config)),
        metadata={"medfuzz_method": "tces", **data, "attackable": attackable, CONFIG_KEY: config.to_dict()},
    )


def _configs(task: str, raw: dict[str, Any]) -> tuple[DataSelection, TCESConfig]:
    """The data selection and the TCES config from one task's options (each name checked by its owner)."""
    raw = task_options(task, raw, (*DataSelection.names(), *TCESConfig.names()))
    data = {k: raw.pop(k) for k in DataSelection.names() if k in raw}
    return DataSelection.from_options(**data), TCESConfig.from_options(**raw)


# data-selection parameters: in the signatures (Inspect lists them), defaults from their owner ``DataSelection``
@task
@one_line_user_errors
def tces(benchmark: str = DEFAULT_BENCHMARK, data: str = DEFAULT.data, split: str | None = DEFAULT.split,
         limit: int | None = DEFAULT.limit, shuffle_choices: bool = DEFAULT.shuffle_choices,
         columns: str | None = DEFAULT.columns, data_name: str | None = DEFAULT.data_name, **options: Any) -> Task:
    """TCES (type-consistent entity substitution) on ``benchmark`` (a ``benchmarks.registry`` key: medqa, medmcqa,
    mcq for your own data, ...). Every ``TCESConfig``
    parameter is a ``-T name=value`` option (``entity``, ``sampler``, ``n``, ``budget``, ``zoo_m``, ...; table in
    docs/tces.md); names are checked by ``task_options``."""
    return tces_task(benchmark, *_configs("medfuzz/tces", {
        "data": data, "split": split, "limit": limit, "shuffle_choices": shuffle_choices, "columns": columns,
        "data_name": data_name, **options}))


def _tces_task(benchmark: Benchmark):
    params = selection_parameters(DEFAULT.split)
    return benchmark_task(f"tces_{benchmark.key}", benchmark, params,
                          lambda b, raw: tces_task(b.key, *_configs(f"medfuzz/tces_{b.key}", raw)),
                          f"TCES on {benchmark.title}; options as ``medfuzz/tces``.", __name__)


__all__ = ["tces"]
per_benchmark(globals(), "tces_{key}", _tces_task)  # tces_medqa, tces_medmcqa, tces_mcq, ... (added to __all__)
