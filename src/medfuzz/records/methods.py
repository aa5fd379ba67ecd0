"""The method registry: one ``Method`` per method medfuzz runs, collected in ``METHODS``, the one mapping the
suite (``medfuzz run``'s plan, its option checks, its bound and its lm-eval half), lm-eval's option reader, the
report (its sections, its first screen, ``summary.json``, ``model-index.yaml``, its labels), the terminal
summary and the log reader (``keys.method_of``) loop over. A method is added by ``register``-ing one more spec;
the shells' own per-method tables (a first-screen reader, a summary block) are optional refinements.

A spec holds what every layer may know: names, keys, option names and refusals, titles and labels, and the
config dataclass (harness-free, loaded when asked). What only a shell holds is named here the way that shell
looks it up, so this layer points up at nothing: the Inspect task by its Inspect registry name (the tasks layer
builds it with Inspect's ``registry_create``), the section renderer by its module's name inside ``medfuzz.report``
(the report imports it). A method with no renderer is shown by its run cards and by the ``headline`` metrics of
its Inspect logs, which is all a new method needs to appear in the report.

TextAttack's attack recipes (one recipe per paper over shared components) are the model: a spec composes
what the layers provide; it computes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# the task options every question-based method takes (``benchmarks.selection.DataSelection`` and the option
# shuffle's seed); ``tests/core/test_method_registry.py`` holds them equal to DataSelection's fields
DATA_OPTIONS = ("data", "split", "limit", "shuffle_choices", "columns", "data_name", "seed")


def _fixed_label(label: str) -> Callable[[Mapping[str, Any]], str]:
    """A method whose every run has one label, whatever its task args."""
    return lambda args: label


@dataclass(frozen=True)
class Method:
    """Everything medfuzz knows about one method, by the layer that uses it (see the module docstring)."""

    key: str  # the method's name: --methods, METHOD_KEY's value in the logs, the report's section key
    title: str  # a result's title on the report's first screen ("TCES")
    section: str  # the report's section heading ("Clean baselines")
    blurb: str  # the line under the heading: what the numbers mean
    # --- the suite (``medfuzz run``)
    # the Inspect registry name of the task the suite runs, per benchmark ("medfuzz/tces_{benchmark}": a
    # ``benchmarks.registry`` key fills it; a method that reads no benchmark names one task)
    inspect_task: str
    run_rank: float  # the suite runs the chosen methods cheapest first (a misconfiguration shows early)
    config: Callable[[], type] | None = None  # the method's config dataclass (its fields are task options)
    data_options: tuple[str, ...] = DATA_OPTIONS  # () for a method that reads no benchmark (MedGuard)
    extra_options: tuple[str, ...] = ()  # task options outside the config and the data selection
    limit_option: str = "limit"  # the task option that counts its items (MedGuard: per aspect)
    config_bounds_calls: bool = False  # the config's ``max_calls(n)`` bounds a run; else one call per sample
    # what else a run records when it starts as a function of its config and sample count (the shard merge
    # recomputes it for the whole run beside the bound): record name -> value
    start_records: Callable[[Any, int], dict[str, Any]] | None = None
    # `medfuzz run`'s runs of it at a level that does not name it: one mapping of task options per run
    level_runs: tuple[Mapping[str, Any], ...] = ({},)
    # a builtin method's Inspect task module under ``medfuzz.tasks.inspect`` (``_registry`` imports it, which
    # registers its tasks; ``medfuzz run`` builds them from it); a method of another package: None (its tasks
    # are found in Inspect's registry by ``inspect_task``)
    task_module: str | None = None
    roles: tuple[str, ...] = ()  # model roles besides the target (MedFuzz: its attacker)
    starts_first: bool = False  # with one run at a time it starts first (it makes most of the calls)
    run_label: Callable[[Mapping[str, Any]], str] | None = None  # a run's label from its task args; None: key
    # --- the logs
    recorded: bool = True  # its Inspect task writes METHOD_KEY (the clean baselines are read by task name)
    # --- lm-eval
    lm_eval_family: str | None = None  # its hooks' family: the --metadata prefix aimed at them ("clean")
    lm_eval_options: Callable[[], tuple[str, ...]] | None = None  # the names its hooks use (before refusals)
    lm_eval_refused: Mapping[str, str] = field(default_factory=dict)  # names its hooks refuse, with why
    lm_eval_tasks: tuple[str, ...] = ()  # the suite's lm-eval tasks, formatted with the benchmark and each setting
    lm_eval_input: str = "limit"  # "limit": the suite passes <family>_<limit_option>; "fuzzed": MedFuzz's log
    lm_eval_names: tuple[str, ...] = ()  # lm-eval task names that report as this method ({benchmark}: every one)
    lm_eval_prefix: str | None = None  # and every task name that starts with this
    lm_eval_metrics: tuple[str, ...] = ()  # the metrics of its lm-eval results the first screen shows
    lm_eval_headline: tuple[str, ...] = ()  # of which those the comparison figure draws
    # --- the report
    renderer: str | None = None  # its section's renderer: a module name inside medfuzz.report
    key_parameters: tuple[str, ...] = ()  # the task args a run card's title names
    headline: tuple[str, ...] = ()  # the Inspect metrics its first-screen result shows (a renderer may show more)
    harness_note: str = ""  # why lm-eval's and Inspect's numbers differ, shown where both appear
    model_index_task: str = ""  # the task's name in model-index.yaml
    labels: Mapping[str, str] = field(default_factory=dict)  # words for its metric ids
    more_labels: Callable[[], Mapping[str, str]] | None = None  # labels derived from a taxonomy (loaded on use)

    def options(self) -> tuple[str, ...]:
        """The names its Inspect task takes: the data selection, its own extras, its config's fields."""
        configured = () if self.config is None else tuple(f.name for f in dataclasses.fields(self.config()))
        return (*self.data_options, *self.extra_options, *configured)

    def label_of(self, args: Mapping[str, Any]) -> str:
        return self.run_label(args) if self.run_label is not None else self.key

    def inspect_task_for(self, benchmark: str) -> str:
        """Its Inspect task on ``benchmark`` (a ``benchmarks.registry`` key)."""
        return self.inspect_task.format(benchmark=benchmark)

    def owns_lm_eval_task(self, task: str) -> bool:
        if self.lm_eval_prefix is not None and task.startswith(self.lm_eval_prefix):
            return True
        from medfuzz.benchmarks import registry

        return any(task == name.format(benchmark=key) for name in self.lm_eval_names for key in registry.BENCHMARKS)

    def label_table(self) -> dict[str, str]:
        return {**self.labels, **(self.more_labels() if self.more_labels is not None else {})}


METHODS: dict[str, Method] = {}  # key -> spec, in the report's order (``run_rank`` orders the suite)


def register(method: Method) -> Method:
    """Add a method (or replace one of the same key)."""
    METHODS[method.key] = method
    return method


@contextmanager
def registered(method: Method) -> Iterator[Method]:
    """``method`` in the registry for the ``with`` block only (a test's own method)."""
    before = METHODS.get(method.key)
    register(method)
    try:
        yield method
    finally:
        if before is None:
            METHODS.pop(method.key, None)
        else:
            METHODS[method.key] = before


def suite_order(keys: Any = None) -> tuple[str, ...]:
    """The registered methods (or ``keys`` of them) in the order the suite runs them."""
    chosen = METHODS if keys is None else [k for k in METHODS if k in set(keys)]
    return tuple(sorted(chosen, key=lambda k: METHODS[k].run_rank))


def by_lm_eval_task(task: str) -> Method | None:
    """The method an lm-eval task reports as (``None``: not a medfuzz method's task)."""
    return next((m for m in METHODS.values() if m.owns_lm_eval_task(task)), None)


# ------------------------------------------------------------------------------------------------ the methods


def _init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _selection_options() -> tuple[str, ...]:
    """The data-selection names (``DataSelection``) and the seed of its option shuffle."""
    from medfuzz.benchmarks.selection import DataSelection

    return (*_init_fields(DataSelection), "seed")


def _tces_config() -> type:
    from medfuzz.solvers.tces.config import TCESConfig

    return TCESConfig


def _medfuzz_config() -> type:
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig

    return MedFuzzConfig


def _medfuzz_start_records(config: Any, samples: int) -> dict[str, Any]:
    from medfuzz.records.run_start import attainability_record

    return {"attainability": attainability_record(config, samples)}


def _medguard_config() -> type:
    from medfuzz.solvers.medguard.config import MedGuardConfig

    return MedGuardConfig


def _tces_lm_eval_options() -> tuple[str, ...]:
    return (*_init_fields(_tces_config()), *_selection_options(), "drugs_vocabulary", "diseases_vocabulary")


def _medfuzz_lm_eval_options() -> tuple[str, ...]:
    # the attack path selects items with data, split and attack_limit (a fuzzed file's items are its own)
    return (*_init_fields(_medfuzz_config()), "data", "split", "columns", "data_name", "fuzzed", "outcomes",
            "cache_dir", "retry_errors", "attack_limit", "attack_concurrency", "target_base_url", "target_model",
            "attacker_base_url", "attacker_model", "api_key_env", "call_timeout", "call_retries")


def _medguard_lm_eval_options() -> tuple[str, ...]:
    return tuple(_init_fields(_medguard_config()))


def _tces_label(args: Mapping[str, Any]) -> str:
    return f"tces {args['entity']} {args.get('sampler', 'pdws')}"


@cache
def _medguard_labels() -> dict[str, str]:
    from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS, Principle

    return {**{f"medguard_{a.value}": f"safety index: {a.value.replace('_', ' ')}" for a in ALL_ASPECTS},
            **{f"medguard_{p.value}": f"safety index: {p.value} (principle)" for p in Principle}}


_TCES_INSPECT_ONLY = ("lm-eval's TCES tasks only build documents (the model is asked by lm-eval, for letter "
                      "log-likelihoods); {} exists in Inspect's medfuzz/tces only")

register(Method(
    key="baseline", title="Clean baseline", section="Clean baselines",
    blurb="Accuracy on the unmodified questions. Strict: Inspect's choice() scorer (the reply must end with "
          "'ANSWER: X'); lenient: the reply may name its option another way.",
    inspect_task="medfuzz/{benchmark}_clean", task_module="baselines", run_rank=0, extra_options=("prompt_style",),
    run_label=_fixed_label("clean baseline"), recorded=False,
    lm_eval_family="clean", lm_eval_options=_selection_options, lm_eval_tasks=("{benchmark}_clean",),
    lm_eval_names=("{benchmark}_clean",), lm_eval_metrics=("acc",), lm_eval_headline=("acc",),
    key_parameters=("prompt_style", "shuffle_choices"), headline=("baseline_acc",),
    harness_note="lm-eval's medqa_clean scores the most likely answer letter by log-likelihood, Inspect's scores "
                 "the answer the model generates (strict: its 'ANSWER: X' line), so the two can disagree on the "
                 "same items.",
    model_index_task="Clean multiple-choice accuracy",
    labels={
        "baseline_acc": "strict accuracy (Inspect choice, answered samples)",
        "baseline_stderr": "strict accuracy, standard error",
        "baseline_llm_errors": "LLM errors (no answer after the retries)",
        "baseline_llm_error_rate": "LLM-error rate",
        "lenient_accuracy": "lenient accuracy",
        "lenient_needed": "replies only the lenient reading could use",
    }))

register(Method(
    key="medfuzz", title="MedFuzz", section="MedFuzz",
    blurb="An attacker LLM rewrites each question with patient characteristics that should not change the "
          "answer; success = the target's answer flips (paper Algorithms 1-2).",
    inspect_task="medfuzz/medfuzz_{benchmark}", task_module="medfuzz", run_rank=3, config=_medfuzz_config,
    config_bounds_calls=True,
    start_records=_medfuzz_start_records,
    roles=("attacker",), starts_first=True,
    lm_eval_family="medfuzz", lm_eval_options=_medfuzz_lm_eval_options, lm_eval_tasks=("medfuzz_{benchmark}",),
    lm_eval_input="fuzzed", lm_eval_prefix="medfuzz",
    lm_eval_metrics=("clean_acc", "attacked_acc", "flip_rate"), lm_eval_headline=("flip_rate",),
    renderer="medfuzz", key_parameters=("turns", "replicates", "controls", "pvalue_prompt"),
    headline=("medfuzz_post_attack_acc", "medfuzz_asr"),
    harness_note="lm-eval's medfuzz_* tasks score the letter log-likelihoods of the clean and the already fuzzed "
                 "question, Inspect's MedFuzz scores the answers the target generates while the attacker rewrites "
                 "it over K turns, so the two can disagree on the same items.",
    model_index_task="MedFuzz adversarial robustness",
    labels={
        "medfuzz_post_attack_acc": "post-attack accuracy (paper §4: LLM errors dropped)",
        "medfuzz_asr": "attack success rate",
        "medfuzz_clean_acc": "clean accuracy",
        "medfuzz_post_attack_acc_upper": "post-attack accuracy, upper bound (attack-phase LLM errors as correct)",
        "medfuzz_attack_error_share": "share of replicates ending in an LLM error during the attack",
        "medfuzz_turns_to_success": "mean attempts to success",
        "medfuzz_llm_error_rate": "LLM-error rate (replicates)",
        "medfuzz_llm_errors": "LLM errors (replicates)",
        "medfuzz_significant": "significant attacks, valid p ≤ α (unadjusted)",
        "medfuzz_significant_holm": "significant attacks after Holm",
        "medfuzz_significant_bh": "significant attacks after Benjamini-Hochberg",
        "medfuzz_significant_paper": "significant with the paper's b/M ≤ α, among tests that drew all M controls "
                                     "(not observed where the sequential test stopped early; comparison only)",
        "medfuzz_smallest_p": "smallest attainable p-value, 1/(M+1)",
        "medfuzz_holm_attainable": "Holm can reject at this M and family (1 = yes)",
        "medfuzz_bh_attainable": "BH can reject at this M (1 = yes)",
        "medfuzz_controls_for_holm": "M that Holm over this run's tested attacks needs",
        "medfuzz_untested_attacks": "successful attacks left untested (too few controls)",
        "medfuzz_unfaithful_rate": "flips whose reasoning mentions none of the added text",
        "medfuzz_misses_some_rate": "flips whose reasoning misses some added text",
        "medfuzz_target_calls_per_item": "target calls per item",
        "medfuzz_attacker_calls_per_item": "attacker calls per item",
        "medfuzz_target_calls_per_success": "target calls per successful attack",
        "medfuzz_attacker_calls_per_success": "attacker calls per successful attack",
        "medfuzz_target_calls_per_pvalue": "target calls per p-value",
        "medfuzz_attacker_calls_per_pvalue": "attacker calls per p-value",
        "medfuzz_controls_per_pvalue": "usable controls per p-value",
    }))

register(Method(
    key="tces", title="TCES", section="TCES",
    blurb="One entity in a distractor option is replaced by a type-consistent entity drawn by the sampler; "
          "success = the answer leaves the key within the query budget.",
    inspect_task="medfuzz/tces_{benchmark}", task_module="tces", run_rank=1, config=_tces_config,
    config_bounds_calls=True,
    level_runs=({"entity": "drugs"}, {"entity": "diseases"}),
    run_label=_tces_label,
    lm_eval_family="tces", lm_eval_options=_tces_lm_eval_options, lm_eval_tasks=("tces_{benchmark}_{entity}",),
    lm_eval_prefix="tces", lm_eval_metrics=("clean_acc", "attacked_acc", "flip_rate"),
    lm_eval_headline=("flip_rate",),
    lm_eval_refused={
        "entity": "the entity type is part of the task name (tces_<benchmark>_drugs | _diseases)",
        "budget": "lm-eval's TCES tasks are the single-query transform (B = 1); use Inspect's medfuzz/tces for "
                  "B > 1",
        **{name: _TCES_INSPECT_ONLY.format(name) for name in ("zoo_m", "zoo_step", "zoo_neighbours", "max_tokens",
                                                               "temperature", "max_retries")},
    },
    renderer="tces", key_parameters=("entity", "sampler", "n", "budget"), headline=("tces_asr",),
    harness_note="lm-eval's tces_* tasks score one substitution per item by letter log-likelihood (ASR@1); "
                 "Inspect's TCES searches up to B substitutions and scores generated answers (ASR@B).",
    model_index_task="TCES type-consistent entity substitution",
    labels={
        "tces_asr": "attack success rate within the query budget (ASR@B)",
        "tces_asr_at_1": "attack success rate at the first query (ASR@1)",
        "tces_clean_acc": "clean accuracy",
        "tces_attacked_acc": "accuracy after the attack",
        "tces_queries_to_success": "mean queries to success",
        "tces_gini_simpson": "Gini-Simpson diversity of successful replacements",
        "tces_llm_errors": "LLM errors (items)",
        "tces_llm_error_rate": "LLM-error rate (items)",
    }))

register(Method(
    key="medguard", title="MedGuard", section="MedGuard",
    blurb="Safety indices per aspect and principle (± bootstrap SE); pairwise McNemar tests between models.",
    inspect_task="medfuzz/medguard", task_module="medguard", run_rank=2, config=_medguard_config, data_options=(),
    limit_option="limit_per_aspect",
    lm_eval_family="medguard", lm_eval_options=_medguard_lm_eval_options, lm_eval_tasks=("medguard",),
    lm_eval_prefix="medguard", lm_eval_metrics=("safety",), lm_eval_headline=("safety",),
    lm_eval_refused={
        "temperature": "lm-eval's MedGuard tasks read letter log-likelihoods (the argmax: what temperature 0 "
                       "gives); no sampling happens, so a temperature has no effect. Use Inspect to sample",
        "generator": "the generator role exists only in Inspect; build a benchmark file with `medfuzz medguard "
                     "build --generator-model ...` and pass medguard_benchmark",
        "aspects": "each aspect is its own task (medguard_<aspect>; the medguard group runs all ten): list the "
                   "ones you want in --tasks",
    },
    renderer="medguard", key_parameters=("strategy", "aspects"), headline=("medguard_overall",),
    harness_note="lm-eval's MedGuard scores the most likely answer letter; Inspect's scores the generated reply, "
                 "where a refusal or an unparsed reply counts as wrong.",
    model_index_task="MedGuard medical safety",
    labels={
        "medguard_overall": "overall safety index (mean of the aspects)",
        "medguard_llm_errors": "LLM errors (no answer after the retries)",
        "medguard_llm_error_rate": "LLM-error rate",
    },
    more_labels=_medguard_labels))
