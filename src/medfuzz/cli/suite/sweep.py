"""``medfuzz sweep tces``: the TCES paper's two studies as one resumable set of Inspect runs.

- the **n-sweep** (paper Fig. 2, §5.1): one PDWS run per exponent n of the grid and per entity type;
- the **DiscreteZOO gradient-point study** (App. E, Fig. 6): one DiscreteZOO run per number of gradient points M
  and per entity type.

All runs go to Inspect's own ``eval_set`` in one log folder, so running the same command again after an
interruption (Ctrl-C, a crash, a rate limit) runs only what is missing or failed: eval_set pairs each task with
its log by a task identifier (task name, task args, model, roles, generate config) and reuses the finished ones.
Each run's task args name its grid point (``entity``, ``sampler``, ``n`` / ``zoo_m``), and the eval metadata
carries ``medfuzz_sweep`` (the sweep's name), which ``medfuzz.report.sweep`` groups by.

Task args are passed exactly as Inspect's CLI would parse ``-T name=value`` (YAML scalars: ``n=-20`` is the
integer -20), so ``inspect eval-set`` with the same ``-T`` values finds the same runs (``commands`` prints them).
"""

from __future__ import annotations

import logging
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import registry
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.options import ConfigError, cli_value  # noqa: F401 - re-exported for the sweep CLI
from medfuzz.samplers.vocab import ENTITY_TYPES
from medfuzz.solvers.tces.config import TCESConfig

log = logging.getLogger(__name__)

SWEEP_KEY = "medfuzz_sweep"  # eval metadata key holding the sweep's name
TASK = "medfuzz/tces"
# set by the grid, per run: not accepted among the other options
GRID_OPTIONS = ("benchmark", "entity", "sampler", "n", "zoo_m", "vocabulary")
DATA_OPTIONS = DataSelection.names()  # data, split, limit, shuffle_choices, columns, data_name


def number(value: float) -> int | float:
    """An integral float as an int (``-20.0`` → ``-20``): what ``-T n=-20`` gives on the command line, so the
    task args (and eval_set's task identifier) match an ``inspect eval-set`` run of the same grid point."""
    return int(value) if float(value).is_integer() else float(value)


def parse_grid(text: str, name: str, kind: type = float) -> tuple[Any, ...]:
    """``"-50,-20,0,20"`` → ``(-50, -20, 0, 20)``; duplicates are an error (they would be one run twice)."""
    values: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = kind(float(part)) if kind is int else float(part)
        except ValueError:
            raise ConfigError(f"{name}: {part!r} is not a number (expected a comma-separated list)") from None
        if kind is int and float(part) != value:
            raise ConfigError(f"{name}: {part!r} is not an integer")
        if not math.isfinite(float(value)):
            raise ConfigError(f"{name}: {part!r} is not finite")
        values.append(number(value) if kind is float else value)
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}: {text!r} repeats a value")
    return tuple(values)


@dataclass(frozen=True)
class TCESSweep:
    """The grid of a TCES sweep; ``runs()`` lists the task args of every run (every one a ``-T`` set)."""

    name: str = "tces"
    benchmark: str = registry.DEFAULT_BENCHMARK
    entities: tuple[str, ...] = ("drugs", "diseases")
    n_grid: tuple[int | float, ...] = (-50, -20, -5, 0, 5, 20, 50)
    zoo_m: tuple[int, ...] = (2, 5, 10)
    # other TCESConfig options (budget, embedding, seed, ...) and the data options, as task args
    options: Mapping[str, Any] = field(default_factory=dict)
    # per entity type: a vocabulary file (builtin when absent)
    vocabularies: Mapping[str, str] = field(default_factory=dict)
    zoo_budget: int | None = None  # budget of the DiscreteZOO runs (default: the options' budget)

    def __post_init__(self) -> None:
        registry.get(self.benchmark)  # a benchmark of benchmarks.registry
        for entity in self.entities:
            if entity not in ENTITY_TYPES:
                raise ConfigError(f"--entity: {entity!r} is not one of {list(ENTITY_TYPES)}")
        for entity in self.vocabularies:
            if entity not in self.entities:
                raise ConfigError(f"--vocabulary {entity}=...: {entity!r} is not among the swept entity types "
                                  f"{list(self.entities)}")
        for name in self.options:
            if name in GRID_OPTIONS:
                raise ConfigError(f"-T {name}=...: set by the sweep (use --benchmark, --entity, --n-grid, --zoo-m, "
                                  "--vocabulary ENTITY=PATH)")
        if not self.entities or not (self.n_grid or self.zoo_m):
            raise ConfigError("the sweep is empty: give at least one entity type and an --n-grid or --zoo-m")
        for args in self.runs():  # every run's config is checked (unknown names, ranges) before any call
            TCESConfig.from_options(**{k: v for k, v in args.items() if k not in ("benchmark", *DATA_OPTIONS)})

    def _base(self, entity: str) -> dict[str, Any]:
        args: dict[str, Any] = {"benchmark": self.benchmark, "entity": entity, **self.options}
        if entity in self.vocabularies:
            args["vocabulary"] = self.vocabularies[entity]
        return args

    def runs(self) -> list[dict[str, Any]]:
        """Task args of every run: per entity type the PDWS n grid, then the DiscreteZOO M grid."""
        runs = []
        for entity in self.entities:
            for n in self.n_grid:
                runs.append({**self._base(entity), "sampler": "pdws", "n": number(n)})
            for m in self.zoo_m:
                zoo = {**self._base(entity), "sampler": "zoo", "zoo_m": int(m)}
                if self.zoo_budget is not None:
                    zoo["budget"] = int(self.zoo_budget)
                runs.append(zoo)
        return runs

    def warnings(self) -> list[str]:
        """Settings that make a study say less than it seems to."""
        notes = []
        budget = self.zoo_budget if self.zoo_budget is not None else self.options.get("budget", TCESConfig.budget)
        big = [m for m in self.zoo_m if m >= int(budget)]
        if big:
            notes.append(f"DiscreteZOO M = {big} is at least the budget {budget}: each step keeps one query for the "
                         "update, so those runs use fewer gradient points than M (raise --zoo-budget)")
        return notes

    def tasks(self) -> list[Any]:
        """The Inspect tasks (``medfuzz/tces`` with each run's args)."""
        from medfuzz.tasks.inspect.tces import tces

        return [tces(**args) for args in self.runs()]

    def commands(self, model: str, log_dir: str | Path, roles: Sequence[str] = (),
                 extra: Sequence[str] = ()) -> list[str]:
        """The same runs as ``inspect eval-set`` command lines, one per grid point (Inspect's CLI takes one
        ``-T`` set per call; ``--log-dir-allow-dirty`` lets each call share the folder with the others)."""
        lines = []
        for args in self.runs():
            words = ["inspect", "eval-set", TASK, "--model", model, *(w for r in roles for w in ("--model-role", r)),
                     "--log-dir", str(log_dir), "--log-dir-allow-dirty", "--metadata", f"{SWEEP_KEY}={self.name}",
                     *(w for k, v in args.items() for w in ("-T", f"{k}={_cli_text(v)}")), *extra]
            lines.append(shlex.join(words))
        return lines


def _cli_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@dataclass
class SweepOutcome:
    success: bool
    logs: list[Any]  # EvalLog headers, one per run
    reused: int  # runs eval_set found finished in the folder before this call




def run_sweep(sweep: TCESSweep, model: str, log_dir: str | Path, model_roles: Mapping[str, str] | None = None,
              **eval_set_args: Any) -> SweepOutcome:
    """Run (or resume) every run of ``sweep`` with ``inspect_ai.eval_set`` in ``log_dir``; ``eval_set_args`` go
    to eval_set (``retry_attempts``, ``max_tasks``, ``max_samples``, ``display``, ``log_dir_allow_dirty``...)."""
    from inspect_ai import eval_set

    for note in sweep.warnings():
        log.warning("sweep %s: %s", sweep.name, note)
    log_dir = Path(log_dir)
    from medfuzz.cli.suite.inspect_half import finished_logs

    before = finished_logs(log_dir)
    success, logs = eval_set(sweep.tasks(), log_dir=str(log_dir), model=model, model_roles=dict(model_roles or {}),
                             metadata={SWEEP_KEY: sweep.name}, **eval_set_args)
    reused = sum(entry.location in before for entry in logs)
    return SweepOutcome(success=success, logs=list(logs), reused=reused)
