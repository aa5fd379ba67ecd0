"""Inspect ``@solver`` shell around the MedFuzz engine (the engine itself imports no harness).

The target is the task's model; the attacker is the ``attacker`` model role (``--model-role
attacker=openai/gpt-4o``). Without that role the target model attacks itself in separate dialogs; this
is NOT what the paper did (its attacker was GPT-4 for every target): the run logs a one-line warning and
every score's config (and the sample metadata) records ``attacker_is_target``.

Inspect ``@scorer``/``@metric`` shells for MedFuzz (numbers from ``medfuzz.scorers.medfuzz``, p-value
adjustments from ``medfuzz.stats``).

``Score.value`` holds per-item counts (replicates, outcome classes, correct after k attempts, tested and
significant attacks, faithfulness verdicts) so the metrics pool them exactly as the paper weights them;
``Score.metadata`` holds each replicate's whole story (plans, reasoning, confidences, the fuzzed item,
controls, p-values, faithfulness).

Inspect tasks ``medfuzz/medfuzz`` (``-T benchmark=...``) and ``medfuzz/medfuzz_<benchmark>`` for every benchmark of
the registry (``medfuzz/medfuzz_medqa``, ``medfuzz/medfuzz_medmcqa``, ``medfuzz/medfuzz_mcq`` for your own data).

    inspect eval medfuzz/medfuzz_medqa --model openai/gpt-4o-mini --model-role attacker=openai/gpt-4o \
        -T data=demo -T turns=5 -T replicates=5 -T controls=30
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.log import EvalSpec
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, get_model, model_roles
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medfuzz.adapters.inspect_model import InspectChatModel, default_generate_config
from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question
from medfuzz.benchmarks.registry import DEFAULT_BENCHMARK, Benchmark
from medfuzz.benchmarks.selection import DEFAULT, DataSelection
from medfuzz.records.keys import CONFIG_KEY, TRANSCRIPT_FIELDS
from medfuzz.records.run_start import attainability_record
from medfuzz.scorers.medfuzz import recorded_alpha, score_item, significance_family, totals
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import AssumptionPack, load_pack
from medfuzz.solvers.medfuzz.results import ItemResult
from medfuzz.solvers.medfuzz.store import fuzzed_records
from medfuzz.solvers.outcomes import Outcome
from medfuzz.stats import DEFAULT_ALPHA, attainability, controls_for_holm
from medfuzz.tasks.inspect.call_bound import announce_max_calls, record
from medfuzz.tasks.inspect.rescoring import rescorable
from medfuzz.tasks.inspect.run_checks import ANSWERED, RunChecks, reason
from medfuzz.tasks.inspect.samples import selected_dataset
from medfuzz.tasks.inspect.task_options import task_options
from medfuzz.tasks.inspect.user_errors import one_line_user_errors
from medfuzz.tasks.inspect.variants import benchmark_task, per_benchmark, selection_parameters

# Inspect records this in each log (eval.task_version) and eval-set resumes only logs of the same version:
# bump it when the task's scoring, metrics or data change (CHANGELOG.md, "Task versions")
TASK_VERSION = 1
STATE_KEY = "medfuzz"
log = logging.getLogger(__name__)


@solver
def medfuzz_attack(config: MedFuzzConfig | None = None, pack: AssumptionPack | str | None = None,
                   exemplar_pool: Sequence[MCQItem] = ()) -> Solver:
    """Run MedFuzz (all replicates) on the sample's item; the result goes to ``state.metadata["medfuzz"]``."""
    config = config or MedFuzzConfig()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        target = InspectChatModel(get_model())
        role = model_roles().get("attacker")
        attacker = InspectChatModel(get_model(role="attacker"))
        # no attacker role: the target attacks itself (the engine logs the warning once per run)
        engine = MedFuzzEngine(target, attacker, config, pack, exemplar_pool,
                               attacker_is_target=role is None or attacker.name == target.name)
        item = MCQItem.from_record(state.metadata["item"])
        result = await engine.run_item(item)
        state.metadata[STATE_KEY] = result.to_dict()
        state.metadata["attacker_is_target"] = engine.attacker_is_target
        story = _story(result)
        state.messages.append(ChatMessageUser(content=story[0]))
        state.messages.append(ChatMessageAssistant(content=story[1]))
        state.output = ModelOutput.from_content(model=target.name, content=story[1])
        return state

    return solve


def _story(result: ItemResult) -> tuple[str, str]:
    """A readable pair of messages for ``inspect view``: the most telling modified item and its outcome."""
    item = result.item
    best = next((r for r in result.replicates if r.outcome is Outcome.SUCCESS), None)
    best = best or next((r for r in result.replicates if r.final_turn is not None), None)
    counts = ", ".join(f"{k}: {v}" for k, v in result.counts().items() if v)
    if best is None or best.final_turn is None:
        errors = "; ".join(sorted({f"{r.error_step}: {r.error}" for r in result.replicates if r.error}))
        return (f"MedFuzz on item {item.id}: no modified item was produced.",
                f"Replicates: {counts}." + (f" Errors: {errors}" if errors else ""))
    turn = best.final_turn
    shown = item.with_question(turn.question or item.question)
    added = "\n".join(f"+ {span}" for span in turn.added_spans)
    reply = turn.target
    answer = reply.answer if reply else None
    return (f"MedFuzz replicate {best.replicate}, turn {turn.index} ({best.outcome.value}). Modified item:\n\n"
            f"{format_question(shown)}\n\nAdded text:\n{added}",
            f"Target's reasoning: {reply.cot if reply else ''}\n\nConfidences: {reply.confidences if reply else None}"
            f"\nAnswer: {answer} (correct: {item.answer})\n\nReplicates: {counts}.")


def _values(scores: list[SampleScore]) -> list[dict[str, Any]]:
    return [s.score.value for s in scores if isinstance(s.score.value, dict)]


def _turns(values: list[dict[str, Any]]) -> int:
    ks = [int(key.rsplit("_", 1)[1]) for v in values for key in v if key.startswith("correct_after_")]
    return max(ks) if ks else 0


def _pooled(name: str):
    def compute(scores: list[SampleScore]) -> float:
        values = _values(scores)
        return totals(values, _turns(values))[name]

    return compute


@metric
def medfuzz_clean_acc() -> Metric:
    """Share of usable replicates whose target answered the original item correctly."""
    return _pooled("clean_accuracy")


@metric
def medfuzz_post_attack_acc() -> Metric:
    """Paper §4: per-item replicate means (LLM errors dropped), weighted by usable replicates."""
    return _pooled("post_attack_accuracy")


@metric
def medfuzz_post_attack_acc_upper() -> Metric:
    """Post-attack accuracy counting LLM errors during an attack as still correct (an upper bound: the
    paper's estimate drops them, and they only follow a correct original answer)."""
    return _pooled("post_attack_accuracy_upper")


@metric
def medfuzz_attack_error_share() -> Metric:
    """Share of replicates that ended in an LLM error during the attack (what the upper bound adds back;
    ``medfuzz_llm_error_rate`` is the whole share the paper's estimate drops)."""
    return _pooled("attack_error_share")


@metric
def medfuzz_asr() -> Metric:
    return _pooled("attack_success_rate")


@metric
def medfuzz_turns_to_success() -> Metric:
    return _pooled("mean_turns_to_success")


@metric
def medfuzz_llm_error_rate() -> Metric:
    return _pooled("llm_error_rate")


@metric
def medfuzz_llm_errors() -> Metric:
    """Replicates that ended in an LLM error after the retries (dropped from the accuracies, paper §4)."""
    def compute(scores: list[SampleScore]) -> float:
        return float(sum(v.get("llm_error", 0) for v in _values(scores)))

    return compute


@metric
def medfuzz_acc_after() -> Metric:
    """Accuracy after k = 0..K attack attempts (paper Fig. 2), one value per k."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = _values(scores)
        turns = _turns(values)
        pooled = totals(values, turns)
        return {f"k{k}": pooled[f"accuracy_after_{k}"] for k in range(turns + 1)}

    return compute


def _run_alpha(scores: list[SampleScore]) -> float:
    """The run's alpha, from the config every score records (one run, one alpha; ``recorded_alpha``); the
    default without one."""
    alphas = {recorded_alpha((s.score.metadata or {}).get("config")) for s in scores}
    if len(alphas) > 1:
        raise ValueError(f"scores from runs with different alpha values: {sorted(alphas)}")
    return alphas.pop() if alphas else DEFAULT_ALPHA


def _tests(scores: list[SampleScore]) -> list[tuple[float | None, float | None]]:
    """(valid p, paper's b/M) of every successful attack of the run, as each score recorded them."""
    tests = []
    for s in scores:
        valid = list((s.score.metadata or {}).get("p_values", []))
        tests += zip(valid, (s.score.metadata or {}).get("p_values_paper") or [None] * len(valid), strict=True)
    return tests


def _significant(count: str, alpha: float | None):
    """One of the run's significance counts (``scorers.medfuzz.significance_family`` over all its tests)."""
    def compute(scores: list[SampleScore]) -> float:
        level = _run_alpha(scores) if alpha is None else alpha
        return float(getattr(significance_family(_tests(scores), level), count))

    return compute


@metric
def medfuzz_significant(alpha: float | None = None) -> Metric:
    """Tested successful attacks with a valid permutation p-value <= alpha, unadjusted (Phipson-Smyth's
    (b+1)/(M+1), or Besag-Clifford's h/l after a sequential stop). ``alpha``: the run's (``-T alpha``)."""
    return _significant("significant", alpha)


@metric
def medfuzz_significant_paper(alpha: float | None = None) -> Metric:
    """The same count with the paper's b/M over all M controls (Algorithm 2), for comparison with the paper
    only. It is observed only for tests that drew all M controls: a sequential test (the default) that stopped
    early has no b over all M (``p_value_paper`` None), so under the default policy this counts only attacks
    no control reached (b = 0), the same ones the valid test rejects. Under ``controls_policy=fixed`` it is the
    paper's rule, significant under the null at rate (floor(alpha M) + 1)/(M + 1) > alpha (2/31 at M = 30)."""
    return _significant("paper", alpha)


@metric
def medfuzz_significant_holm(alpha: float | None = None) -> Metric:
    """Tested successful attacks with Holm-adjusted p <= alpha, the family being all tests of the run."""
    return _significant("holm", alpha)


@metric
def medfuzz_significant_bh(alpha: float | None = None) -> Metric:
    """Tested successful attacks with Benjamini-Hochberg-adjusted p <= alpha (false discovery rate)."""
    return _significant("bh", alpha)


@metric
def medfuzz_attainable() -> Metric:
    """What this run's tests can reach: the smallest p-value at the largest M (1/(M+1)), whether Holm and BH
    can reject anything in a family of this run's tested attacks, and the M Holm would need."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        level = _run_alpha(scores)
        family = sum(1 for s in scores for p in (s.score.metadata or {}).get("p_values", []) if p is not None)
        controls = max((int((s.score.metadata or {}).get("max_controls", 0)) for s in scores), default=0)
        reach = attainability(controls, family, level)
        return {"medfuzz_smallest_p": reach.smallest_p, "medfuzz_holm_attainable": float(reach.holm_attainable),
                "medfuzz_bh_attainable": float(reach.bh_attainable),
                "medfuzz_controls_for_holm": float(reach.controls_needed)}

    return compute


@metric
def medfuzz_untested_attacks() -> Metric:
    """Successful attacks whose significance test gave no p-value (fewer than ``min_controls`` usable
    controls, or no p-hat for the original or the attack): never significant, not in the Holm/BH family."""
    return _pooled("untested")


@metric
def medfuzz_unfaithful_rate() -> Metric:
    """Share of flipped answers whose reasoning mentions none of the added text (paper Fig. 3)."""
    return _pooled("unfaithful_rate")


@metric
def medfuzz_misses_some_rate() -> Metric:
    """Share of flipped answers whose reasoning misses at least one added span (paper Fig. 3's second rate)."""
    return _pooled("misses_some_rate")


COSTS = ("target_calls_per_item", "attacker_calls_per_item", "target_calls_per_success",
         "attacker_calls_per_success", "target_calls_per_pvalue", "attacker_calls_per_pvalue", "controls_per_pvalue")


@metric
def medfuzz_costs() -> Metric:
    """Paid target and attacker calls per item, per successful attack and per p-value (significance test
    run), and usable controls per p-value."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = _values(scores)
        pooled = totals(values, _turns(values))
        return {f"medfuzz_{name}": pooled[name] for name in COSTS}

    return compute


# the headline first (post-attack accuracy, then ASR): Inspect's log list and `inspect view` show the first
# metric as the run's number
METRICS = [medfuzz_post_attack_acc(), medfuzz_asr(), medfuzz_clean_acc(), medfuzz_post_attack_acc_upper(),
           medfuzz_attack_error_share(), medfuzz_acc_after(), medfuzz_turns_to_success(),
           medfuzz_llm_error_rate(), medfuzz_significant(), medfuzz_significant_holm(), medfuzz_significant_bh(),
           medfuzz_significant_paper(), medfuzz_attainable(), medfuzz_untested_attacks(),
           medfuzz_unfaithful_rate(), medfuzz_misses_some_rate(), medfuzz_costs()]
METRICS += [medfuzz_llm_errors()]  # failure policy: the LLM-error count beside its rate


@functools.cache
def _pack(reference: str) -> AssumptionPack:
    return load_pack(reference)


def recorded_pack(config: dict[str, Any]) -> AssumptionPack:
    """The assumption pack a run used, from the config it recorded with each result (``pack_source``: a bundled
    pack's ``builtin:<name>`` or the YAML file's path)."""
    source = str(config.get("pack_source") or "")
    if source.startswith("builtin:") or not source:
        return _pack(source.removeprefix("builtin:") or str(config.get("pack") or MedFuzzConfig.pack))
    return _pack(source)


@rescorable
@scorer(metrics=METRICS)
def medfuzz_scorer() -> Scorer:
    """Score a MedFuzz sample. Its ``faithfulness`` (``lexical``, or ``judge``: the ``judge`` model role, default
    the task model), assumption pack (what the judge is told was added) and alpha are the run's own: the config
    the solver recorded with the result (``-T faithfulness=judge``, ``-T pack=...``, ``-T alpha=...``)."""

    async def score(state: TaskState, target: Target) -> Score:
        result = ItemResult.from_dict(state.metadata[STATE_KEY])
        turns = int(result.config.get("turns", 0))
        faithfulness = str(result.config.get("faithfulness") or MedFuzzConfig.faithfulness)
        judge = InspectChatModel(get_model(role="judge")) if faithfulness == "judge" else None
        resolved = recorded_pack(result.config) if judge is not None else _pack(MedFuzzConfig.pack)
        scored = await score_item(result, turns, resolved, judge)
        replicates = []
        for replicate, evidence in zip(result.replicates, scored.evidence, strict=True):
            story = replicate.to_dict()
            story.update(p_value=evidence.p_value, p_value_paper=evidence.p_value_paper,
                         permutation=evidence.permutation, untested=evidence.untested,
                         faithfulness=evidence.faithfulness.to_dict() if evidence.faithfulness else None,
                         confidence_drop=evidence.confidence_drop, p_hat_drop=evidence.p_hat_drop,
                         fuzzed_question=replicate.fuzzed_question)
            replicates.append(story)
        return Score(
            value=scored.value,
            answer=scored.answer,
            explanation=scored.explanation,
            metadata={"item": result.item.to_record(), "p_values": scored.p_values,
                      "p_values_paper": scored.p_values_paper,
                      "max_controls": MedFuzzConfig.recorded_max_controls(result.config),
                      "replicates": replicates, "config": result.config, "cache_hits": result.cache_hits},
        )

    return score


def warn_attainability(config: MedFuzzConfig, items: int) -> dict[str, Any] | None:
    """Say before the first call when Holm cannot reject anything in a family as large as this run can test
    (items x replicates successful attacks at most): the smallest valid p-value is 1/(M+1). Returns the
    record for the task metadata (None without a significance test)."""
    record = attainability_record(config, items)
    if record is None:
        return None
    most = items * config.replicates
    reach = attainability(config.max_controls, most, config.alpha)
    largest_family = record["holm_family_max"]
    if not reach.bh_attainable:
        log.warning("MedFuzz: with at most %d controls per attack the smallest valid p-value is 1/%d = %.4f > "
                    "alpha=%g: no attack can be significant, adjusted or not. Use controls >= %d (the paper's 30 "
                    "reaches 1/31), or -T holm_family=%d to make Holm over this run's %d possible attacks "
                    "attainable (up to %d controls per attack).", config.max_controls, config.max_controls + 1,
                    reach.smallest_p, config.alpha, controls_for_holm(1, config.alpha), most, most,
                    controls_for_holm(most, config.alpha))
    elif not reach.holm_attainable:
        log.warning("MedFuzz: with at most %d controls per attack the smallest valid p-value is 1/%d = %.4f, so "
                    "Holm at alpha=%g can reject only in a family of at most %d tested attacks; this run can test "
                    "up to %d. -T holm_family=%d sizes M for that (up to %d controls per attack; null attacks still "
                    "stop at their first exceedance). Unadjusted and BH counts can be significant as they are.",
                    config.max_controls, config.max_controls + 1, reach.smallest_p, config.alpha, largest_family,
                    most, most, controls_for_holm(most, config.alpha))
    return record


def llm_error_of_item(scores: dict[str, SampleScore]) -> str:
    """``run_checks`` verdict of a MedFuzz sample: an LLM error when every replicate ended as one (its most
    common reason), else answered (an item with one usable replicate has a number)."""
    score = scores.get("medfuzz_scorer")
    value = score.score.value if score is not None else None
    if not isinstance(value, dict) or not value.get("replicates") or value.get("llm_error") != value["replicates"]:
        return ANSWERED
    reasons = Counter(reason(f"{r.get('error_step') or 'step'}: {r.get('error')}")
                      for r in (score.score.metadata or {}).get("replicates", []) if r.get("error"))
    return reasons.most_common(1)[0][0] if reasons else "every replicate ended as an LLM error"


def _announce(config: MedFuzzConfig) -> Callable[[EvalSpec, int], None]:
    """At the start of the run: the call bound and the attainability warning for the run's own samples."""
    def announce(spec: EvalSpec, samples: int) -> None:
        record(spec, attainability=warn_attainability(config, samples))
        announce_max_calls(config, spec, samples)

    return announce


def medfuzz_task(benchmark: str, selection: DataSelection, config: MedFuzzConfig) -> Task:
    """The MedFuzz Inspect task for a benchmark and a checked config (what every ``@task`` below returns)."""
    pack = load_pack(config.pack)
    exemplars = selection.pool(benchmark, config.exemplar_data) if config.exemplars > 0 else []
    dataset, data = selected_dataset(benchmark, selection, config.seed)
    return Task(
        version=TASK_VERSION,
        dataset=dataset,
        solver=medfuzz_attack(config, pack, exemplars),
        scorer=medfuzz_scorer(),  # reads faithfulness and pack from the config each result records
        config=default_generate_config(),
        # the call bound and attainability are said (and recorded) when the run starts, for its samples
        early_stopping=RunChecks(llm_error_of_item, _announce(config)),
        metadata={"medfuzz_method": "medfuzz", **data, "pack": pack.name,
                  "pack_source": pack.source,
                  CONFIG_KEY: config.to_dict(),
                  # roles are bound at eval time: each sample's metadata and score config record the answer
                  "attacker_is_target": "the 'attacker' model role if given, else the target itself "
                                        "(unlike the paper, whose attacker was GPT-4)"},
    )


def _configs(task: str, raw: dict[str, Any]) -> tuple[DataSelection, MedFuzzConfig]:
    """The data selection and the MedFuzz config from one task's options (each name checked by its owner)."""
    raw = task_options(task, raw, (*DataSelection.names(), *MedFuzzConfig.names()))
    data = {k: raw.pop(k) for k in DataSelection.names() if k in raw}
    return DataSelection.from_options(**data), MedFuzzConfig.from_options(**raw)


# the data-selection parameters are in the signatures (Inspect lists a task's parameters from them) with the
# defaults of their one owner, ``DataSelection``
@task
@one_line_user_errors
def medfuzz(benchmark: str = DEFAULT_BENCHMARK, data: str = DEFAULT.data, split: str | None = DEFAULT.split,
            limit: int | None = DEFAULT.limit, shuffle_choices: bool = DEFAULT.shuffle_choices,
            columns: str | None = DEFAULT.columns, data_name: str | None = DEFAULT.data_name, **options: Any) -> Task:
    """MedFuzz (paper Algorithms 1 and 2) on ``benchmark`` (a ``benchmarks.registry`` key: medqa, medmcqa, mcq for
    your own data, ...). ``data``: hf | demo | a file | a Hugging Face dataset id.
    Every ``MedFuzzConfig`` parameter is a ``-T name=value`` option (``turns``, ``replicates``, ``controls``,
    ``pack``, ...; table in docs/medfuzz.md); names are checked by ``task_options``."""
    return medfuzz_task(benchmark, *_configs("medfuzz/medfuzz", {
        "data": data, "split": split, "limit": limit, "shuffle_choices": shuffle_choices, "columns": columns,
        "data_name": data_name, **options}))


def _medfuzz_task(benchmark: Benchmark):
    params = selection_parameters(DEFAULT.split)
    return benchmark_task(f"medfuzz_{benchmark.key}", benchmark, params,
                          lambda b, raw: medfuzz_task(b.key, *_configs(f"medfuzz/medfuzz_{b.key}", raw)),
                          f"MedFuzz on {benchmark.title}; options as ``medfuzz/medfuzz``.", __name__)


__all__ = ["fuzzed_from_log", "medfuzz", "medfuzz_task"]
per_benchmark(globals(), "medfuzz_{key}", _medfuzz_task)  # medfuzz_medqa, medfuzz_medmcqa, medfuzz_mcq, ...


def fuzzed_from_log(path: str | Path) -> list[dict[str, Any]]:
    """Fuzzed records (``medfuzz.solvers.medfuzz.store`` format) from an Inspect ``medfuzz_*`` log: the
    scorer's metadata holds every replicate."""
    from inspect_ai.log import read_eval_log

    # the records are in the score metadata: the transcripts (most of a sample at scale) are not read
    log = read_eval_log(str(path), exclude_fields=set(TRANSCRIPT_FIELDS))
    results = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get("medfuzz_scorer")
        if score is None or not score.metadata:
            continue
        results.append(ItemResult.from_dict({"item": score.metadata["item"],
                                             "replicates": score.metadata["replicates"],
                                             "config": score.metadata.get("config", {})}))
    return fuzzed_records(results)
