"""``medfuzz run``: the robustness suite (clean baseline, TCES, MedGuard, MedFuzz) on one model as one Inspect
eval set, plus the same methods through lm-eval when asked.

Inspect's own ``eval_set`` runs the tasks in ``OUT/inspect``: it pairs each task with its log by a task
identifier (task name, task args, model, roles, generate config), so running the same command again after an
interruption reuses the finished runs, and ``eval-retry`` inside it reuses every finished sample of an
interrupted one; model calls inside an unfinished sample come from the call cache (``models.call_cache``:
Inspect's cache for every call medfuzz's engines make). Nothing here schedules work of its own.

What the suite runs is a *level* (``LEVELS``): the methods' settings, named, with the upper bound of model calls
each one implies. ``paper`` is every method at its paper's settings (the configs' defaults); ``direct`` and
``lean`` are cheaper MedFuzz settings (TCES and MedGuard stay at the paper's: they are cheap) whose bound per item
and statistical cost are measured on planted effects by ``bench/medfuzz_cost_levels.py`` (docs/medfuzz.md, "Cost
levels"); ``demo`` is the short run of ``medfuzz demo`` on the embedded model (a 135M model with the template
attacker: it shows the pipeline, not an attack's strength). Every summary states MedFuzz's bound per item, which
``tests/core/test_suite.py`` holds equal to ``MedFuzzConfig.max_calls``.

Concurrency and deadlines come from the backend (``backend_for``): one connection and a long deadline for the
embedded llama.cpp server (it answers one request at a time), more for an OpenAI-compatible server, Inspect's
own defaults for a hosted API; every value can be overridden and all of them are written to ``OUT/run.json``.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from medfuzz.benchmarks.registry import BENCHMARKS as BENCHMARK_REGISTRY
from medfuzz.cli.suite.shard import shard_pair
from medfuzz.errors import MedfuzzError
from medfuzz.options import ConfigError, did_you_mean, flag, flag_values
from medfuzz.records.keys import MODEL_LABEL, SUITE_KEY
from medfuzz.records.methods import METHODS as REGISTRY
from medfuzz.records.methods import suite_order
from medfuzz.tasks.inspect.shards import shard_task

log = logging.getLogger(__name__)

METHODS = suite_order()  # the registered methods (``records.methods``), cheapest first: --methods' default
EMBEDDED = "embedded"  # --model value: start the embedded SmolLM2 server
TEMPLATE_ATTACKER = "template"  # --attacker value: the deterministic template attacker (no LLM)
TEMPLATE_ATTACKER_MODEL = "medfuzz-template/attacker"


PER_METHOD = {"method": True}  # a Level field named after a method: that method's settings


@dataclass(frozen=True)
class Level:
    """Named settings for every method: task options per method, and a sentence on what they change."""

    name: str
    summary: str
    # per method (a ``records.methods`` key, marked PER_METHOD): its task options, one run per mapping
    medfuzz: Mapping[str, Any] = field(default_factory=dict, metadata=PER_METHOD)
    tces: tuple[Mapping[str, Any], ...] = field(default=({"entity": "drugs"}, {"entity": "diseases"}),
                                                metadata=PER_METHOD)
    medguard: Mapping[str, Any] = field(default_factory=dict, metadata=PER_METHOD)
    limits: Mapping[str, int] = field(default_factory=dict)  # per method, when --limit is not given
    generate: Mapping[str, Any] = field(default_factory=dict)  # Inspect generate config for every run
    data: str = "hf"  # the benchmark's source when --data is not given
    lm_eval: Mapping[str, Any] = field(default_factory=dict)  # extra lm-eval --metadata for the lm-eval half

    def settings_for(self, method: str) -> tuple[Mapping[str, Any], ...]:
        """The task options this level gives one method: one run per mapping (TCES: one per entity and
        sampler); a method the level does not name runs once, at its task's defaults."""
        named = {f.name for f in fields(self) if f.metadata.get("method")}
        if method not in named:
            return ({},)
        chosen = getattr(self, method)
        return tuple(chosen) if isinstance(chosen, tuple) else (chosen,)


LEVELS: dict[str, Level] = {
    "paper": Level(
        "paper", "every method at its paper's settings: MedFuzz K = 5 turns, 5 replicates, M = 30 control fuzzes "
                 "(sequential test), p̂ from the full dialog over 5 option orders (at most 3,270 calls per MedFuzz "
                 "item, 2,340 of them p̂ calls); TCES PDWS n = -20, budget 8, drugs and diseases; MedGuard "
                 "every aspect"),
    # The cheaper MedFuzz levels change only Algorithm 2's p̂ and the number of trajectories: K, M, the
    # sequential test, alpha and the seeds stay the paper's, so a replicate both levels run makes the same attack
    # and draws the same control fuzzes (the seeds derive from the item and the replicate, the option orders
    # are a prefix of the paper's), and only the p-value's precision differs (bench/medfuzz_cost_levels.py).
    "direct": Level(
        "direct", "the paper's settings with MedFuzz's p̂ read from the answer letter alone (1 call per option "
                  "order instead of the 3-call dialog): at most 1,710 calls per MedFuzz item (780 "
                  "p̂ calls); the same attacks and controls; needs letter log-probabilities from the target, "
                  "else each draw is one sampled letter (p̂ in steps of 1/5: little power); TCES and MedGuard at "
                  "the paper's",
        medfuzz={"pvalue_prompt": "direct"}),
    "lean": Level(
        "lean", "direct p̂ over 3 option orders and 3 replicates instead of 5: at most 840 calls per MedFuzz item "
                "(282 p̂ calls); 3 of the paper's 5 attack trajectories per item (fewer attacks found, "
                "wider ASR intervals), a noisier p̂ (less power on small effects; the test stays valid); needs "
                "letter log-probabilities like direct; TCES and MedGuard at the paper's",
        medfuzz={"pvalue_prompt": "direct", "option_orders": 3, "replicates": 3}),
    "demo": Level(
        "demo", "the demo's short run (medfuzz demo): MedFuzz on 10 items, K = 3, 1 replicate, M = 10 controls "
                "(too few for any attack to be significant at alpha 0.05), direct p̂, 1 option order (at most 82 "
                "calls per MedFuzz item); TCES RandS and PDWS on 12 items, budget 8; MedGuard 2 items per aspect",
        medfuzz={"turns": 3, "replicates": 1, "exemplars": 0, "controls": 10, "min_controls": 8, "option_orders": 1,
                 "pvalue_prompt": "direct", "max_tokens_scale": 0.25, "require_confidences": False,
                 "max_retries": 1},
        tces=tuple({"entity": entity, "sampler": sampler, "n": n, "budget": 8, "max_retries": 1}
                   for entity in ("drugs", "diseases") for sampler, n in (("rands", 0), ("pdws", -20))),
        limits={"baseline": 10, "tces": 12, "medfuzz": 10, "medguard": 2},
        # short greedy answers: SmolLM2 answers with a letter; MedFuzz's target keeps the paper's temperature 1.0
        # (its own config), so its sampled answers can move
        generate={"max_tokens": 32, "seed": 0, "temperature": 0.0}, data="demo",
        # lm-eval's single-substitution TCES tasks take the first 5 attackable items
        lm_eval={"tces_limit": 5}),
}
LEVELS["quick"] = Level(
    "quick", "the smallest run that touches every method (the end-to-end tests): the demo's settings on 2 "
             "MedFuzz items (at most 82 calls per MedFuzz item), TCES drugs with RandS on 10 items, MedGuard 1 "
             "item per aspect",
    medfuzz=LEVELS["demo"].medfuzz, tces=LEVELS["demo"].tces[:1],
    limits={"baseline": 10, "tces": 10, "medfuzz": 2, "medguard": 1}, generate=LEVELS["demo"].generate,
    data="demo", lm_eval=LEVELS["demo"].lm_eval)


@dataclass(frozen=True)
class Backend:
    """How hard to press one backend: Inspect's ``max_connections`` and per-attempt deadline, and why."""

    kind: str
    max_connections: int | None  # None: Inspect's default for the provider
    attempt_timeout: int | None  # seconds; None: no per-attempt deadline beyond the provider's
    max_samples: int | None
    why: str
    max_tasks: int | None = None  # runs at a time; None: eval_set's default (at least 10)


# Inspect providers that run the model on this machine or on a server the user runs (everything else is a hosted
# API: a provider's SDK client and its key)
SELF_HOSTED = ("openai-api", "vllm", "sglang", "ollama", "llama-cpp-python", "hf", "transformer_lens")


def backend_for(model: str) -> Backend:
    """Defaults for ``model`` (an Inspect model string, or ``embedded``)."""
    if model == EMBEDDED:
        return Backend("embedded llama.cpp server", 1, 120, 1,
                       "the embedded server answers one request at a time: one connection, one run and one sample "
                       "at a time (consecutive queries about one item reuse its prompt cache; runs in parallel "
                       "would interleave their prompts and evict it) and a deadline that covers a long reply on "
                       "2 cores", max_tasks=1)
    provider = model.split("/", 1)[0]
    if provider in SELF_HOSTED:
        return Backend("OpenAI-compatible or local server", 16, 120, None,
                       "a self-hosted server batches concurrent requests: 16 connections; 120 s per attempt "
                       "covers a long reasoning reply on a loaded server")
    return Backend("hosted API", None, 120, None,
                   "a hosted API: Inspect's own connection default for the provider (rate limits); 120 s per "
                   "attempt, after which Inspect retries")


def run_key(label: str, model: str, several: bool) -> str:
    """A run's name in the suite's output, bound and progress: its label, with the model when several run."""
    return f"{label} · {model}" if several else label


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: its label, the Inspect task function's registry name and its task args."""

    label: str
    method: str
    task: str  # medfuzz/<task>
    args: Mapping[str, Any]


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _resolved(text: str) -> Path:
    return Path(text).resolve()


def _pairs(values: list[str]) -> dict[str, Any]:
    """``--option NAME=VALUE`` (given several times) as the plan's ``options``; each value as Inspect's ``-T``
    reads it."""
    from medfuzz.options import cli_value

    pairs: dict[str, Any] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip():
            raise MedfuzzError(f"--option {value!r}: expected NAME=VALUE (e.g. medfuzz_turns=3)")
        pairs[name.strip().replace("-", "_")] = cli_value(rest.strip())
    return pairs


@dataclass
class SuitePlan:
    """What ``medfuzz run`` runs. Each field's ``flag`` metadata is its ``medfuzz run`` option (name, help,
    choices, how the text is read): the command's parser is generated from these fields (``add_flags``,
    ``from_arguments``), so an option and its field cannot drift apart. Every default the command has is a
    field's default or is resolved here (the level's data, the embedded model's attacker), so the suite scripted
    from Python runs what the command runs."""

    model: str = field(metadata=flag(
        "any Inspect model (openai/gpt-4o, openai-api/vllm/NAME, anthropic/...), several comma-separated (one eval "
        "set; the report compares them), or 'embedded' (SmolLM2, started here)", required=True))
    out: Path = field(metadata=flag("folder for logs, results, settings and the report", required=True,
                                    parse=_resolved))
    # None: the target attacks itself (logged), except the embedded model: the template attacker (a 135M model
    # cannot write valid rewrites); "template": the template attacker
    attacker: str | None = field(default=None, metadata=flag(
        "MedFuzz's attacker: an Inspect model, or 'template' (no LLM; the demo's). Default: the target attacks "
        "itself; with --model embedded, the template (a 135M model cannot write valid rewrites)"))
    # every method registered when the plan is made (a module-level default would freeze the registry as it was
    # when this module was first imported)
    methods: tuple[str, ...] = field(default_factory=suite_order, metadata=flag(
        f"comma-separated, of {', '.join(METHODS)}", parse=_comma_list))
    level: str = field(default="paper", metadata=flag(
        "named settings of every method, printed with their bound before the first call (docs/medfuzz.md, Cost "
        "levels): " + ", ".join(LEVELS), choices=tuple(LEVELS)))
    # the items of the baseline, TCES and MedFuzz: hf, demo, a file or a Hub id; None: the level's
    data: str | None = field(default=None, metadata=flag(
        "the questions: hf (the benchmark's Hugging Face release), demo (50 bundled items), your own "
        ".jsonl/.json/.csv/.parquet file in any layout medfuzz reads (MedQA's, MedMCQA's, MMLU-style, question + "
        "choices + answer; others with --columns) or hf:OWNER/NAME. Default: the level's (demo for --level demo "
        "/ quick, else hf)"))
    # None: mcq (your own data) when --data is a file or a Hub dataset id, else medqa
    benchmark: str | None = field(default=None, metadata=flag(
        f"the benchmark whose tasks run, one of {', '.join(BENCHMARK_REGISTRY)} (benchmarks.registry; mcq: your own "
        "data). Default: mcq when --data is a file or hf:OWNER/NAME, else medqa"))
    columns: str | None = field(default=None, metadata=flag(
        "where a file in another layout keeps each part: question:COL,options:COL|COL|...,answer:COL"
        "[,answer_format:letter|index0|index1|text|auto] or the same as JSON (docs/usage.md, Your own benchmark)"))
    data_name: str | None = field(default=None, metadata=flag(
        "the data's name in the logs, the report and the card (default: the file's stem)"))
    limit: int | None = field(default=None, metadata=flag(
        "items per method (MedGuard: per aspect); default: the level's, else every item"))
    limits: Mapping[str, int] = field(default_factory=dict)  # per method, over ``limit`` and the level's
    # NAME=VALUE: every method that has NAME; METHOD_NAME=VALUE (medfuzz_turns, tces_budget, medguard_seed,
    # baseline_prompt_style): that method only
    options: Mapping[str, Any] = field(default_factory=dict, metadata=flag(
        "a task option for every method that has it (seed=1), or for one method with its name as prefix "
        "(medfuzz_turns=3, tces_budget=1, medguard_aspects=privacy)", name="--option", short="-T",
        metavar="NAME=VALUE", many=True, parse=_pairs))
    # None (these five): the backend's (``backend_for``), else eval_set's
    max_connections: int | None = field(default=None, metadata=flag("default: per backend (run.json says)"))
    attempt_timeout: int | None = field(default=None, metadata=flag("seconds per model call attempt"))
    max_samples: int | None = field(default=None, metadata=flag(
        "samples at a time per run (default: 1 for the embedded model, else Inspect's)"))
    max_tasks: int | None = field(default=None, metadata=flag(
        "runs in parallel (default: 1 for the embedded model, else eval_set's: at least 10)"))
    retry_attempts: int | None = field(default=None, metadata=flag("eval_set's retries of a failed run"))
    display: str = field(default="none", metadata=flag(
        "Inspect's display (none: medfuzz's progress line with the bound and the ETA)"))
    # True: Inspect's realtime sample buffer (inspect view shows samples as they run)
    log_realtime: bool = field(default=False, metadata=flag(
        "keep Inspect's realtime sample buffer, so that inspect view shows samples while they run (off by default: "
        "medfuzz run prints its own progress; the logs are the same, and the buffer costs 11-42 % of the client's "
        "CPU per call: 19 % in docs/performance.md P9). --no-log-realtime, the default now, is still accepted"))
    # (k, n): this process runs the k-th of n slices of every run's samples
    shard: tuple[int, int] | None = field(default=None, metadata=flag(
        "run the K-th of N contiguous slices of every run's items (one process or machine per shard, each with its "
        "own --out); medfuzz report / compare merge the N shards of a run into one run before any statistic. "
        "auto: K and N from a Slurm job array (SLURM_ARRAY_TASK_ID/_MIN/_COUNT) or a Kubernetes Indexed Job "
        "(JOB_COMPLETION_INDEX; N from auto/N or MEDFUZZ_SHARD_COUNT); docs/performance.md P8",
        metavar="K/N|auto|auto/N", parse=shard_pair))

    @classmethod
    def from_arguments(cls, arguments: Any) -> SuitePlan:
        """The plan the options of ``add_flags(parser, SuitePlan)`` were given, its ``--option`` names checked."""
        plan = cls(**flag_values(cls, arguments))
        plan.check_options()
        return plan

    def __post_init__(self) -> None:
        if self.shard is not None:
            k, n = self.shard
            if not 1 <= k <= n:
                raise ConfigError(f"--shard {k}/{n}: expected K/N with 1 <= K <= N (e.g. 2/4)")
        unknown = [m for m in self.methods if m not in REGISTRY]
        if unknown or not self.methods:
            known = ", ".join(suite_order())
            if not self.methods:
                raise ConfigError(f"--methods names no method; choose from {known} (comma-separated)")
            raise ConfigError("--methods: " + "; ".join(f"{name!r} is not a method{did_you_mean(name, suite_order())}"
                                                         for name in unknown) + f" (choose from {known})")
        if self.level not in LEVELS:
            raise ConfigError(f"--level: {self.level!r} is not one of {list(LEVELS)}")
        # the level's defaults are the plan's, so the suite scripted from Python runs what `medfuzz run` runs
        if self.data is None:
            self.data = LEVELS[self.level].data
        self.benchmark = self._benchmark()
        if self.columns is not None:
            from medfuzz.benchmarks.columns import columns_text

            self.columns = columns_text(self.columns)  # a bad mapping stops here, before any task is built
        if self.attacker is None and self.model.strip() == EMBEDDED:
            self.attacker = TEMPLATE_ATTACKER
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit}")
        if not all(self.models):
            raise ConfigError(f"--model {self.model!r}: an empty model name")
        if EMBEDDED in self.models and len(self.models) > 1:
            raise ConfigError("--model embedded runs alone (it is started by this command); serve it with "
                              "`medfuzz serve` to compare it with other models in one eval set")

    def _benchmark(self) -> str:
        """The benchmark given, else ``mcq`` (your own data) for a file or a Hub dataset id, else ``medqa``."""
        from medfuzz.benchmarks import registry

        if self.benchmark is not None:
            return registry.get(self.benchmark).key
        return registry.DEFAULT_BENCHMARK if str(self.data).strip() in ("hf", "demo") else registry.OWN

    def data_args(self) -> dict[str, Any]:
        """The data-selection task options the plan gives every question-based run (and lm-eval's metadata)."""
        return _drop_none({"data": self.data, "columns": self.columns, "data_name": self.data_name})

    @property
    def models(self) -> tuple[str, ...]:
        """``--model A,B``: every model runs every task, as one eval set (Inspect runs one task per model at a
        time by default)."""
        return tuple(m.strip() for m in self.model.split(","))

    @property
    def backend(self) -> Backend:
        """The backend's defaults; with several models the most careful of theirs (the fewest connections, the
        longest deadline), since eval_set applies one setting to every model."""
        backends = [backend_for(m) for m in self.models]
        if len(backends) == 1:
            return backends[0]
        connections = [b.max_connections for b in backends if b.max_connections is not None]
        deadlines = [b.attempt_timeout for b in backends if b.attempt_timeout is not None]
        samples = [b.max_samples for b in backends if b.max_samples is not None]
        tasks = [b.max_tasks for b in backends if b.max_tasks is not None]
        return Backend(" + ".join(sorted({b.kind for b in backends})), min(connections, default=None),
                       max(deadlines, default=None), min(samples, default=None),
                       "several models in one eval set: the most careful of their defaults",
                       min(tasks, default=None))

    def limit_for(self, method: str) -> int | None:
        """Items for one method (MedGuard: per aspect) as its run gets them: a ``-T`` option (``baseline_limit=4``,
        ``limit=4``, ``medguard_limit_per_aspect=1``) wins, as it does in the task args (``runs``), then
        ``limits``, ``--limit`` and the level's; the lm-eval half and the summary use the same number."""
        option = self._options_for(method, REGISTRY[method].options()).get(REGISTRY[method].limit_option)
        if option is not None:
            return option
        if method in self.limits:
            return self.limits[method]
        return self.limit if self.limit is not None else LEVELS[self.level].limits.get(method)

    def _options_for(self, method: str, known: Sequence[str]) -> dict[str, Any]:
        """The ``--option`` values for one method: plain names it knows, then ``METHOD_NAME`` overriding them."""
        chosen: dict[str, Any] = {}
        for name, value in self.options.items():
            if name in known:
                chosen[name] = value
        prefix = f"{method}_"
        for name, value in self.options.items():
            if name.startswith(prefix) and name[len(prefix):]:
                chosen[name[len(prefix):]] = value
        return chosen

    def check_options(self) -> None:
        """Every ``--option`` must reach some chosen method (a typo must not run with defaults)."""

        known = {m: REGISTRY[m].options() for m in self.methods}
        everything = sorted({n for names in known.values() for n in names}
                            | {f"{m}_{n}" for m, names in known.items() for n in names})
        for name in self.options:
            method = next((m for m in self.methods if name.startswith(f"{m}_") and name[len(m) + 1:] in known[m]),
                          None)
            if method is None and not any(name in names for names in known.values()):
                raise ConfigError(f"--option {name}: no chosen method ({', '.join(self.methods)}) has this "
                                  f"option{did_you_mean(name, everything)}")

    def runs(self) -> list[SuiteRun]:
        """Every run of the suite, in the order they run (cheap first: a misconfiguration shows early)."""
        level = LEVELS[self.level]
        runs: list[SuiteRun] = []
        for key in suite_order(self.methods):
            method = REGISTRY[key]
            data = {k: v for k, v in self.data_args().items() if k in method.data_options}
            extra = self._options_for(key, method.options())
            for setting in level.settings_for(key):
                args = {**data, method.limit_option: self.limit_for(key), **setting, **extra}
                runs.append(SuiteRun(method.label_of(args), key, method.inspect_task_for(self.benchmark),
                                     _drop_none(args)))
        return runs

    def model_roles(self) -> dict[str, str]:
        if self.attacker is None or not any("attacker" in REGISTRY[m].roles for m in self.methods):
            return {}
        return {"attacker": TEMPLATE_ATTACKER_MODEL if self.attacker == TEMPLATE_ATTACKER else self.attacker}

    def settings(self) -> dict[str, Any]:
        """Everything the run was started with, defaults resolved (written to ``OUT/run.json``)."""
        backend = self.backend
        return {
            "model": self.model, "models": list(self.models), "attacker": self.attacker,
            "model_roles": self.model_roles(),
            "methods": list(self.methods), "level": self.level, "level_summary": LEVELS[self.level].summary,
            "data": self.data, "benchmark": self.benchmark, "columns": self.columns, "data_name": self.data_name,
            "limit": self.limit, "limits": {m: self.limit_for(m) for m in self.methods},
            "options": dict(self.options), "generate": dict(LEVELS[self.level].generate),
            "backend": asdict(backend),
            "max_connections": self.max_connections if self.max_connections is not None else backend.max_connections,
            "attempt_timeout": self.attempt_timeout if self.attempt_timeout is not None else backend.attempt_timeout,
            "max_samples": self.max_samples if self.max_samples is not None else backend.max_samples,
            "max_tasks": self.max_tasks if self.max_tasks is not None else backend.max_tasks,
            "retry_attempts": self.retry_attempts,
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "log_realtime": self.log_realtime,
            "runs": [{"label": r.label, "task": r.task, "args": dict(r.args)} for r in self.runs()],
        }


def _drop_none(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None}


# ------------------------------------------------------------------------------------------------ tasks


def create_task(name: str, args: Mapping[str, Any]) -> Any:
    """The Inspect Task registered as ``name`` (``Method.inspect_task``), built with ``args``. medfuzz's own
    tasks are called directly from the modules that define them (those ``medfuzz._registry`` loads): Inspect's
    registry names them ``medfuzz/...`` only when it can tell which installed distribution ships the module,
    and with the source folder on ``PYTHONPATH`` beside an editable install (a ``src/medfuzz.egg-info`` and
    the venv's dist-info, both named medfuzz) it cannot, so they are registered unprefixed and a lookup by name
    failed. Another package's task (a method registered from outside) goes through Inspect's
    ``registry_create``."""
    package, _, short = name.partition("/")
    if package == "medfuzz":
        from medfuzz.tasks.inspect import baselines, medguard, tces
        from medfuzz.tasks.inspect import medfuzz as medfuzz_tasks

        for module in (baselines, medfuzz_tasks, tces, medguard):
            factory = getattr(module, short, None)
            if callable(factory) and getattr(factory, "__module__", None) == module.__name__:  # its own @task
                return factory(**args)
    from inspect_ai.util import registry_create

    return registry_create("task", name, **args)


def build_tasks(plan: SuitePlan, planning: bool = False) -> list[tuple[SuiteRun, Any]]:
    """(run, Inspect Task) for every run; each task's metadata names its run (``SUITE_KEY``), which is how
    ``suite_logs`` finds the logs again (metadata is not part of eval_set's task identifier). Each task is built
    from its registry name (``create_task``): the same Task, name and task args as calling the ``@task``
    function. ``planning``: tasks for the dry run's bound and estimate, never run (``tasks.inspect.planning``:
    TCES does not embed its vocabulary); the same samples as a run's."""
    import contextlib

    from medfuzz.tasks.inspect.planning import planning_only

    built = []
    for run in plan.runs():
        with planning_only() if planning else contextlib.nullcontext():
            task = create_task(run.task, run.args)
        task.metadata = {**(task.metadata or {}), SUITE_KEY: run.label}
        if plan.shard is not None:
            task = shard_task(task, *plan.shard)
            if not len(task.dataset):  # fewer samples than shards: this slice is empty (the others cover them)
                continue
        built.append((run, task))
    return built


def embed_anchor_texts(built: Sequence[tuple[SuiteRun, Any]]) -> int:
    """Before the first model call: embed the key option texts the TCES runs' attacks will anchor on
    (``TCESResources.embed_anchor_texts``), with the resources those runs' solvers use. Otherwise the encoder
    loads in the middle of the first TCES run (a pause of 7-20 s on 2 cores that the ETA read as a slower
    endpoint); cached on disk, a later run reads the vectors and never loads the encoder."""
    from medfuzz.benchmarks.items import MCQItem
    from medfuzz.tasks.inspect.tces import shared_resources

    texts = 0
    for run, task in built:
        if run.method == "tces":
            config = method_config(run)
            resources = shared_resources(config.entity, config.vocabulary, config.embedding)
            texts += resources.embed_anchor_texts(MCQItem.from_record(sample.metadata["item"])
                                                  for sample in task.dataset)
    return texts


@dataclass(frozen=True)
class Bound:
    """The most model calls the suite can make, per run and role (the MedFuzz / TCES configs' ``max_calls``; the
    clean baseline and MedGuard ask one call per sample, plus the generator's rewrites MedGuard defers)."""

    per_run: dict[str, dict[str, int]]
    samples: dict[str, int]

    @property
    def total(self) -> int:
        return sum(sum(roles.values()) for roles in self.per_run.values())

    def lines(self) -> list[str]:
        width = max((len(label) for label in self.per_run), default=5)
        out = [f"  {label:{width}s}  {self.samples[label]:>6,} samples  at most {sum(calls.values()):>10,} calls  "
               f"({', '.join(f'{role} {count:,}' for role, count in calls.items())})"
               for label, calls in self.per_run.items()]
        out.append(f"  {'total':{width}s}  {sum(self.samples.values()):>6,} samples  at most {self.total:>10,} calls")
        return out


def method_config(run: SuiteRun) -> Any:
    """The config a run's task builds from its args (the data-selection names left out) when that config bounds
    its calls (MedFuzz, TCES: ``Method.config_bounds_calls``), or None for the methods whose bound is one call
    per sample."""
    from medfuzz.benchmarks.selection import DataSelection

    method = REGISTRY[run.method]
    if not method.config_bounds_calls or method.config is None:
        return None
    rest = {k: v for k, v in run.args.items() if k not in DataSelection.names()}
    return method.config().from_options(**rest)


def bound(built: Sequence[tuple[SuiteRun, Any]], models: Sequence[str] = ("",)) -> Bound:
    """The same ``max_calls`` each MedFuzz / TCES task logs when it starts, for the samples the suite gives it;
    one entry per run and model (keyed by ``run_key``; ``models`` default: one model)."""
    per_run: dict[str, dict[str, int]] = {}
    samples: dict[str, int] = {}
    for run, task in built:
        n = len(task.dataset)
        config = method_config(run)
        if config is not None:
            calls = config.max_calls(n)
        else:  # one answer per sample; MedGuard's deferred rewrites one generator call each
            pending = sum(1 for s in task.dataset if (s.metadata or {}).get("item", {}).get("metadata", {})
                          .get("pending"))
            calls = {"target": n, **({"generator": pending} if pending else {})}
        for model in models:
            key = run_key(run.label, model, several=len(models) > 1)
            samples[key] = n
            per_run[key] = dict(calls)
    return Bound(per_run, samples)


# ------------------------------------------------------------------------------------------------ running


@dataclass
class SuiteOutcome:
    success: bool
    logs: dict[str, Any]  # label -> EvalLog (header)
    reused: int  # runs eval_set found finished in the folder
    calls: int  # model calls this invocation made (cache hits not counted)
    config_failure: str | None = None  # a configuration failure (bad URL / key / model) ended the eval set


def finished_logs(log_dir: Path) -> set[str]:
    """Locations of the successful logs already in the folder (to tell reused runs from new ones)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    done = set()
    if log_dir.is_dir():
        for info in list_eval_logs(str(log_dir)):
            header = read_eval_log(info, header_only=True)
            if header.status == "success":
                done.add(header.location)
    return done


def finished_labels(log_dir: Path) -> list[str]:
    """The suite labels of the successful runs in the folder (what an interrupted command had finished)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    labels = []
    if log_dir.is_dir():
        for info in list_eval_logs(str(log_dir)):
            header = read_eval_log(info, header_only=True)
            label = (header.eval.metadata or {}).get(SUITE_KEY)
            if header.status == "success" and label:
                labels.append(label)
    return sorted(set(labels))


def samples_done_before(log_dir: Path, built: Sequence[tuple[SuiteRun, Any]], models: Sequence[str]) -> dict[str, int]:
    """Per run (``run_key``), the samples an earlier invocation finished that this one will reuse: every sample
    of a finished log (eval_set skips that run), the samples without error of an unfinished one (eval_set's
    retry reuses them). Inspect's task-start event lists a retried run's every sample and no event fires for a
    reused one, so without this a resumed suite's progress would count them as still to run."""
    from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample_summaries

    if not log_dir.is_dir():
        return {}
    args = {run.label: json.dumps(dict(run.args), sort_keys=True, default=str) for run, _ in built}
    newest: dict[str, tuple[str, int]] = {}
    for info in list_eval_logs(str(log_dir)):
        try:
            header = read_eval_log(info, header_only=True)
            label = (header.eval.metadata or {}).get(SUITE_KEY)
            passed = json.dumps(dict(header.eval.task_args_passed or {}), sort_keys=True, default=str)
            if label not in args or passed != args[label] or header.eval.model not in models:
                continue  # another run's log (other options): eval_set will not reuse it either
            if header.status == "success":
                done = header.results.total_samples if header.results else 0
            else:
                done = sum(1 for s in read_eval_log_sample_summaries(info) if s.error is None and s.completed)
        except (OSError, ValueError) as err:  # a log a killed run left half-written, or listed but gone: the
            log.debug("progress: %s not read (%s)", info.name, err)  # progress counts it as not done
            continue
        key = run_key(label, header.eval.model, several=len(models) > 1)
        if key not in newest or header.eval.created > newest[key][0]:
            newest[key] = (header.eval.created, done)
    return {key: done for key, (_, done) in newest.items()}


def eval_set_args(plan: SuitePlan) -> dict[str, Any]:
    settings = plan.settings()
    args: dict[str, Any] = {"display": plan.display, **LEVELS[plan.level].generate}
    # off unless asked: the buffer costs 11-42 % of the client's CPU per call (19 %: docs/performance.md P9) and
    # medfuzz run's progress line replaces the live view
    args["log_realtime"] = plan.log_realtime
    for name in ("max_connections", "attempt_timeout", "max_samples", "max_tasks", "retry_attempts"):
        if settings[name] is not None:
            args[name] = settings[name]
    import os

    if "INSPECT_EVAL_CTL_SERVER" not in os.environ:
        # Inspect's control server (uvicorn) takes SIGINT and SIGTERM while it serves and raises them again only
        # once it has shut down, so a stop signal would reach medfuzz run's handlers late (run_stop); a user who
        # wants `inspect ctl` turns it on with INSPECT_EVAL_CTL_SERVER=true
        args["ctl_server"] = False
    return args


def run_order(built: Sequence[tuple[SuiteRun, Any]], max_tasks: int | None) -> list[tuple[SuiteRun, Any]]:
    """The order the eval set starts the runs in. With one run at a time (the embedded model) MedFuzz goes
    first: it makes most of the calls, at a rate per item its bound overstates about tenfold, so until one of its
    samples has finished the ETA can only use that bound (issue 26: 8-12x too long at 25 % of the calls with
    MedFuzz last); the other runs' bounds are close to their use. Several runs at a time: the plan's order (the
    eval set starts them together). The order changes no result: each run is seeded by its own items."""
    if max_tasks != 1:
        return list(built)
    # stable: the rest keep their order
    return sorted(built, key=lambda pair: not REGISTRY[pair[0].method].starts_first)


def run_suite(plan: SuitePlan, built: Sequence[tuple[SuiteRun, Any]], models: Sequence[str],
              progress: Any | None = None) -> SuiteOutcome:
    """Run (or resume) the suite's Inspect tasks as one eval set in ``OUT/inspect``; ``models`` are the Inspect
    model strings (the embedded server's, once started)."""
    from inspect_ai import eval_set

    from medfuzz.cli.suite.stop import STOP, register_hooks, restore_sigint

    register_hooks()
    log_dir = plan.out / "inspect"
    before = finished_logs(log_dir)
    # the imports and the built tasks (long-lived: vocabularies, datasets) out of the collector's full passes
    # for the eval set: about 4 % less CPU per MedFuzz call (bench/medfuzz_inspect_cpu.py `+freeze`, P7b)
    gc.collect()
    gc.freeze()
    try:
        success, logs = eval_set([task for _, task in run_order(built, plan.settings()["max_tasks"])],
                                 log_dir=str(log_dir),
                                 model=list(models) if len(models) > 1 else models[0],
                                 model_roles=plan.model_roles() or None, **eval_set_args(plan))
    except KeyboardInterrupt:
        if STOP.config_failure is None or STOP.signum is not None:
            raise
        success, logs = False, _latest_logs(log_dir)  # ended by a configuration failure, not by the user
    finally:
        gc.unfreeze()
        restore_sigint()
    by_label = {}
    for entry in logs:
        label = (entry.eval.metadata or {}).get(SUITE_KEY)
        if label:
            by_label[run_key(label, entry.eval.model, several=len(models) > 1)] = entry
    reused = sum(entry.location in before for entry in logs)
    return SuiteOutcome(success=success, logs=by_label, reused=reused, calls=progress.calls if progress else 0,
                        config_failure=STOP.config_failure)


def _latest_logs(log_dir: Path) -> list[Any]:
    """The newest log header of every run in the folder (oldest first, so a later one replaces it by label)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    headers = [read_eval_log(info, header_only=True) for info in list_eval_logs(str(log_dir))]
    return sorted(headers, key=lambda h: h.eval.created)


def write_settings(plan: SuitePlan, suite_bound: Bound) -> Path:
    plan.out.mkdir(parents=True, exist_ok=True)
    path = plan.out / "run.json"
    settings = plan.settings()
    settings["max_calls"] = {"per_run": suite_bound.per_run, "total": suite_bound.total}
    path.write_text(json.dumps(settings, indent=2, default=str) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ lm-eval

LM_EVAL_EMBEDDED = "medfuzz-local"


@dataclass(frozen=True)
class LmEvalPlan:
    """The lm-eval half: ``model`` and ``model_args`` as ``medfuzz-lm-eval --model M --model_args A`` takes them."""

    model: str
    model_args: str = ""

    @classmethod
    def parse(cls, text: str, threads: int = 2) -> LmEvalPlan:
        """``embedded`` (the GGUF in-process), or ``MODEL`` / ``MODEL:ARGS`` (``hf:pretrained=...``,
        ``local-completions:model=...,base_url=...``)."""
        if text == EMBEDDED:
            return cls(LM_EVAL_EMBEDDED, f"n_threads={threads}")
        model, _, args = text.partition(":")
        if not model:
            raise ConfigError(f"--lm-eval {text!r}: expected MODEL or MODEL:MODEL_ARGS (e.g. hf:pretrained=NAME)")
        from medfuzz.tasks.lm_eval.hook_options import refuse_secret_model_args

        refuse_secret_model_args(args, where="--lm-eval")  # before the Inspect half, and before it is printed
        return cls(model, args)


def lm_eval_tasks(plan: SuitePlan, fuzzed_log: Path | None) -> tuple[list[str], dict[str, Any]]:
    """lm-eval task names and ``--metadata`` for the suite's methods (MedFuzz: the items the Inspect run
    fuzzed, scored by letter log-likelihood)."""
    tasks: list[str] = []
    metadata: dict[str, Any] = plan.data_args()
    for key in suite_order(plan.methods):
        method = REGISTRY[key]
        if not method.lm_eval_tasks or (method.lm_eval_input == "fuzzed" and fuzzed_log is None):
            continue
        settings = LEVELS[plan.level].settings_for(key)
        tasks += sorted({name.format_map({**setting, "benchmark": plan.benchmark})
                         for name in method.lm_eval_tasks for setting in settings})
        if method.lm_eval_input == "fuzzed":
            metadata["fuzzed"] = str(fuzzed_log)
        elif plan.limit_for(key):
            metadata[f"{method.lm_eval_family}_{method.limit_option}"] = plan.limit_for(key)
    return tasks, metadata


class LmEvalFailed(MedfuzzError):
    """The lm-eval half ended with a non-zero exit: ``cause`` is its last error line, ``tail`` its log's end."""

    def __init__(self, code: int, log_file: Path, cause: str, tail: list[str]) -> None:
        super().__init__(f"lm-eval half failed (exit {code}): {cause}")
        self.code, self.log_file, self.cause, self.tail = code, log_file, cause, tail

    def block(self) -> list[str]:
        """The failure as one block for the console: the cause, the log's last lines, where the whole log is."""
        return [f"{self}", *(f"  | {line}" for line in self.tail), f"  (whole log: {self.log_file})"]


def lm_eval_failure(code: int, log_file: Path, tail_lines: int = 12) -> LmEvalFailed:
    """What a failed lm-eval run says: its last exception line (``ValueError: ...``) as the cause."""
    import re

    lines = [line.rstrip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
    causes = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b.*", line)]
    cause = causes[-1] if causes else (lines[-1] if lines else "no output")
    return LmEvalFailed(code, log_file, cause[:500], [line[:300] for line in lines[-tail_lines:]])


def run_lm_eval(plan: SuitePlan, lm: LmEvalPlan, fuzzed_log: Path | None, log_file: Path,
                limits: Mapping[str, int] | None = None, model_label: str | None = None,
                children: list[Any] | None = None) -> Path:
    """The lm-eval half through ``medfuzz-lm-eval`` in a subprocess (lm-eval's CLI, results + samples in
    ``OUT/lm-eval``); its request cache (``--use_cache``) makes a re-run pay nothing for finished requests.
    ``model_label`` (the Inspect half's model) goes into ``--metadata`` as the model's name in the report.

    The subprocess runs in its own session (a terminal's Ctrl-C reaches only this process, which stops it and
    its children as one process group) and is registered in ``children`` for a forced exit. Raises
    ``LmEvalFailed`` when it fails, ``KeyboardInterrupt`` (after stopping it) when interrupted."""
    import os
    import shlex
    import shutil
    import subprocess
    import sys
    import time

    from medfuzz.cli.suite.heartbeat import Heartbeat, lm_eval_status


    tasks, metadata = lm_eval_tasks(plan, fuzzed_log)
    metadata.update(limits or {})
    if model_label:
        metadata[MODEL_LABEL] = model_label
    out = plan.out / "lm-eval"
    # the finished lm-eval run of this very command is reused, as the Inspect half reuses its finished runs: its
    # request cache would make a re-run free, but lm-eval would write a second results file of the same run, and
    # the report would show it twice (the record is not .json: the report reads every .json under the folder)
    record = {"model": lm.model, "model_args": lm.model_args, "tasks": list(tasks), "metadata": metadata}
    finished = plan.out / "lm-eval-cache" / "finished-run.jsonl"
    reused = finished_lm_eval_run(finished, record, out)
    if reused is not None:
        print(f"lm-eval half: finished before with the same command and settings ({reused.relative_to(out)}); "
              "reused, nothing run", flush=True)
        return out
    script = Path(sys.executable).parent / "medfuzz-lm-eval"
    command = [str(script if script.exists() else shutil.which("medfuzz-lm-eval")), "--model", lm.model,
               *(["--model_args", lm.model_args] if lm.model_args else []), "--tasks", ",".join(tasks),
               "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples",
               "--use_cache", str(plan.out / "lm-eval-cache" / "requests")]
    (plan.out / "lm-eval-cache").mkdir(parents=True, exist_ok=True)
    finished.unlink(missing_ok=True)
    before = set(out.rglob("results_*.json")) if out.is_dir() else set()
    print(f"$ {shlex.join(command)}", flush=True)  # pasteable: the --metadata JSON is quoted
    from medfuzz.models.local import die_with_parent

    with log_file.open("w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ},
                                   start_new_session=True,
                                   preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
        if children is not None:
            children.append(process)
        started = time.monotonic()
        try:
            with Heartbeat(lambda: lm_eval_status(log_file, started)):  # its progress is in its log, not here
                code = process.wait()
        except BaseException:  # Ctrl-C / SIGTERM / SIGHUP: stop lm-eval and whatever it started, then go on
            stop_process_group(process)
            raise
    if code != 0:
        raise lm_eval_failure(code, log_file)
    written = sorted(set(out.rglob("results_*.json")) - before, key=lambda p: p.stat().st_mtime)
    if written:
        finished.write_text(json.dumps({**record, "results": str(written[-1].relative_to(out))}) + "\n",
                            encoding="utf-8")
    return out


def finished_lm_eval_run(finished: Path, record: Mapping[str, Any], out: Path) -> Path | None:
    """The results file of an lm-eval half that finished with exactly ``record`` (model, model arguments, tasks,
    metadata), if it is still there."""
    try:
        previous = json.loads(finished.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict):
        return None
    results = out / str(previous.pop("results", ""))
    same = json.loads(json.dumps(record)) == previous  # as it was written: tuples as lists
    return results if same and results.is_file() and results.name.startswith("results_") else None


def stop_process_group(process: Any, grace: float = 1.5) -> None:
    """SIGTERM to the process group a child leads (it was started in its own session), SIGKILL after
    ``grace`` seconds; returns when the child has exited."""
    import contextlib
    import os
    import signal
    import subprocess

    for stop, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, stop)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the leader is gone; its children may not be
            os.killpg(process.pid, signal.SIGKILL)
        return
