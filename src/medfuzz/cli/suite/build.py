"""The Inspect tasks a plan runs (``build_tasks``, each through its method's task module) and the bound of model
calls they imply, per run and role (``Bound``)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medfuzz.cli.suite.plan import SuitePlan, SuiteRun, run_key
from medfuzz.records.keys import SUITE_KEY
from medfuzz.records.methods import METHODS as REGISTRY
from medfuzz.tasks.inspect.shards import shard_task

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
        for spec in REGISTRY.values():
            if spec.task_module is None:
                continue
            module = importlib.import_module(spec.task_module)
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


def before_first_call(built: Sequence[tuple[SuiteRun, Any]]) -> int:
    """What each run's method does before the first model call (``Method.before_first_call``: TCES embeds the
    key options its attacks anchor on, so its encoder does not load in the middle of the first run, a pause of
    7-20 s on 2 cores that the ETA read as a slower endpoint); the count of what it did."""
    import pkgutil

    done = 0
    for run, task in built:
        spec = REGISTRY.get(run.method)
        if spec is not None and spec.before_first_call is not None:
            done += pkgutil.resolve_name(spec.before_first_call)(method_config(run), task)
    return done


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


