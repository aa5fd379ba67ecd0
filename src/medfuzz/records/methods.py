"""The method registry: one ``Method`` per method medfuzz runs, collected in ``METHODS``, the one mapping the
suite (``medfuzz run``'s plan, its option checks, its bound and its lm-eval half), lm-eval's option reader, the
report (its sections, its first screen, ``summary.json``, ``model-index.yaml``, its labels), the terminal
summary and the log reader (``keys.method_of``) loop over. A method is added by ``register``-ing one more spec;
its own section renderer, first-screen reader and terminal block are optional refinements it names.

A spec holds what every layer may know: names, keys, option names and refusals, titles and labels, and the
config dataclass (harness-free, loaded when asked). What only a shell holds is named here the way that shell
looks it up, so this layer points up at nothing: the Inspect task by its Inspect registry name (the tasks layer
builds it with Inspect's ``registry_create``); the section renderer, the first-screen reader and the terminal
block by their import names ("medfuzz.report.tces", "medfuzz.report.overview:tces_result"), which only the
report and the terminal summary import. A method with none of them is shown by its run cards and by the
``headline`` metrics of its Inspect logs, which is all a new method needs to appear in the report.

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
    # the import name of the module that defines its Inspect tasks: medfuzz's entry point (``_registry``) imports
    # it, which registers them, and ``medfuzz run`` builds its builtin tasks from it; None: its tasks are
    # registered by its own package (found in Inspect's registry by ``inspect_task``)
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
    # --- the shells' own code for it, each named "package.module" or "package.module:function" (as entry points
    # are: ``pkgutil.resolve_name``) and imported only by the shell that calls it, so this layer points up at
    # nothing; None: that shell's generic form (``tests/core/test_method_registry.py`` resolves every name)
    renderer: str | None = None  # its report section: a module with ``render(log_paths, out_dir)``
    # its first-screen result from one finished Inspect log: ``(log, path) -> MethodResult | None``; None: its
    # ``headline`` metrics as the task logged them (``report.overview.headline_result``)
    glance: str | None = None
    # or its first-screen results read over every input at once: ``(paths) -> [(model, MethodResult)]`` (MedGuard:
    # one result per model over its ten aspects' logs or lm-eval docs); lm-eval's own table rows for the files it
    # read are then left out (one number per estimate)
    glance_runs: str | None = None
    # ``medfuzz run``'s expected cost of one run: ``(config, task, n, ceiling, assumed) -> (expected, worst,
    # note)`` (``cli.suite.cost``); None: one call per sample, or its bound where its config bounds its calls
    cost_estimate: str | None = None
    # work ``medfuzz run`` does for one of its runs before the first model call: ``(config, task) -> int``
    # (TCES: embed the key options its attacks anchor on, so the encoder does not load mid-run)
    before_first_call: str | None = None
    terminal_title: str | None = None  # its block's title in the terminal summary: ``(Finished) -> str``
    terminal_words: str | None = None  # what its block adds in words: ``(Finished, harness) -> list[str]``
    # --- the report
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

    @property
    def lm_eval_limit_option(self) -> str:
        """The lm-eval ``--metadata`` name of its item count: its family and its task's (``clean_limit``,
        ``medguard_limit_per_aspect``)."""
        return f"{self.lm_eval_family}_{self.limit_option}"

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


# the fields of a spec that name a shell's code: each is imported only by the shell that calls it (the layer-order
# test reads these names in a ``Method(...)`` as that shell's, not as imports of this layer)
SHELL_CODE = ("task_module", "renderer", "glance", "glance_runs", "terminal_title", "terminal_words",
              "cost_estimate", "before_first_call")

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
    inspect_task="medfuzz/{benchmark}_clean", task_module="medfuzz.tasks.inspect.baselines", run_rank=0,
    extra_options=("prompt_style",),
    run_label=_fixed_label("clean baseline"), recorded=False,
    glance="medfuzz.report.overview:baseline_result", terminal_title="medfuzz.cli.summary:baseline_title",
    terminal_words="medfuzz.cli.summary:baseline_words",
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
    inspect_task="medfuzz/medfuzz_{benchmark}", task_module="medfuzz.tasks.inspect.medfuzz", run_rank=3,
    config=_medfuzz_config,
    config_bounds_calls=True,
    start_records=_medfuzz_start_records,
    roles=("attacker",), starts_first=True,
    lm_eval_family="medfuzz", lm_eval_options=_medfuzz_lm_eval_options, lm_eval_tasks=("medfuzz_{benchmark}",),
    lm_eval_input="fuzzed", lm_eval_prefix="medfuzz",
    lm_eval_metrics=("clean_acc", "attacked_acc", "flip_rate"), lm_eval_headline=("flip_rate",),
    renderer="medfuzz.report.medfuzz", glance="medfuzz.report.overview:medfuzz_result",
    terminal_title="medfuzz.cli.summary:medfuzz_title", terminal_words="medfuzz.cli.summary:medfuzz_words",
    cost_estimate="medfuzz.cli.suite.cost:medfuzz_cost",
    key_parameters=("turns", "replicates", "controls", "pvalue_prompt"),
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
    inspect_task="medfuzz/tces_{benchmark}", task_module="medfuzz.tasks.inspect.tces", run_rank=1, config=_tces_config,
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
    renderer="medfuzz.report.tces", glance="medfuzz.report.overview:tces_result",
    cost_estimate="medfuzz.cli.suite.cost:tces_cost",
    before_first_call="medfuzz.tasks.inspect.tces:embed_anchor_texts",
    key_parameters=("entity", "sampler", "n", "budget"), headline=("tces_asr",),
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
    inspect_task="medfuzz/medguard", task_module="medfuzz.tasks.inspect.medguard", run_rank=2,
    config=_medguard_config, data_options=(),
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
    renderer="medfuzz.report.medguard", glance_runs="medfuzz.report.overview:medguard_results",
    terminal_title="medfuzz.cli.summary:medguard_title", key_parameters=("strategy", "aspects"),
    headline=("medguard_overall",),
    harness_note="lm-eval's MedGuard scores the most likely answer letter; Inspect's scores the generated reply, "
                 "where a refusal or an unparsed reply counts as wrong.",
    model_index_task="MedGuard medical safety",
    labels={
        "medguard_overall": "overall safety index (mean of the aspects)",
        "medguard_llm_errors": "LLM errors (no answer after the retries)",
        "medguard_llm_error_rate": "LLM-error rate",
    },
    more_labels=_medguard_labels))
