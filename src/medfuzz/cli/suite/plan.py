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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.benchmarks.registry import BENCHMARKS as BENCHMARK_REGISTRY
from medfuzz.cli.suite.levels import LEVELS
from medfuzz.cli.suite.shard import shard_pair
from medfuzz.errors import MedfuzzError
from medfuzz.options import ConfigError, did_you_mean, flag, flag_values
from medfuzz.records.methods import METHODS as REGISTRY
from medfuzz.records.methods import suite_order

log = logging.getLogger(__name__)

METHODS = suite_order()  # the registered methods (``records.methods``), cheapest first: --methods' default
EMBEDDED = "embedded"  # --model value: start the embedded SmolLM2 server
TEMPLATE_ATTACKER = "template"  # --attacker value: the deterministic template attacker (no LLM)
TEMPLATE_ATTACKER_MODEL = "medfuzz-template/attacker"


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
        return self._limit_for(method, LEVELS[self.level].limits)

    def lm_eval_limit_for(self, method: str) -> int | None:
        """Items for one method's lm-eval half: as ``limit_for``, except that the level's own lm-eval count
        (``Level.lm_eval_limits``: the demo's single-substitution TCES on 5 items) replaces the level's."""
        return self._limit_for(method, {**LEVELS[self.level].limits, **LEVELS[self.level].lm_eval_limits})

    def _limit_for(self, method: str, level_limits: Mapping[str, int]) -> int | None:
        option = self._options_for(method, REGISTRY[method].options()).get(REGISTRY[method].limit_option)
        if option is not None:
            return option
        if method in self.limits:
            return self.limits[method]
        return self.limit if self.limit is not None else level_limits.get(method)

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
            settings = level.settings_for(key)
            every = [{**data, method.limit_option: self.limit_for(key), **setting, **extra} for setting in settings]
            labels = [method.label_of(args) for args in every]
            if len(set(labels)) < len(labels):  # a spec whose label does not tell its runs apart: the logs are
                # found by label, so each run's own settings are added to it
                labels = [" ".join([label, *(f"{k} {v}" for k, v in setting.items())])
                          for label, setting in zip(labels, settings, strict=True)]
            runs += [SuiteRun(label, key, method.inspect_task_for(self.benchmark), _drop_none(args))
                     for label, args in zip(labels, every, strict=True)]
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
