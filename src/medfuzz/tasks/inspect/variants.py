"""One Inspect task per method and benchmark, made from the benchmark registry (``benchmarks.registry``).

``per_benchmark(globals(), "{key}_clean", make)`` defines ``medqa_clean``, ``medmcqa_clean``, ``mcq_clean``, ...
in a task module, one per registered benchmark, now and for every benchmark registered later (a plugin's, a
test's): each is an ``@task`` whose signature lists the data selection with the benchmark's defaults (Inspect
lists a task's parameters, and records their defaults in the log, from its signature), then ``**options``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, MutableMapping
from typing import Any

from inspect_ai import Task, task

from medfuzz.benchmarks.registry import BENCHMARKS, Benchmark, on_register
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.tasks.inspect.user_errors import one_line_user_errors

Build = Callable[[Benchmark, dict[str, Any]], Task]


def selection_parameters(split: str | None = None, **extra: Any) -> list[inspect.Parameter]:
    """The data-selection parameters with their owner's defaults (``split``: the task's own), then ``extra``."""
    params = []
    for f in dataclasses.fields(DataSelection):
        if f.init:
            default = split if f.name == "split" else f.default
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default))
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value) for name, value in extra.items()]
    return params


def benchmark_task(name: str, benchmark: Benchmark, params: list[inspect.Parameter], build: Build, doc: str,
                   module: str) -> Callable[..., Task]:
    """An ``@task`` named ``name`` whose signature is ``params`` plus ``**options``; calling it builds
    ``build(benchmark, {every parameter with its default, then the options given})``."""
    signature = inspect.Signature([*params, inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD)])

    def make(**options: Any) -> Task:
        bound = signature.bind_partial(**options)
        bound.apply_defaults()
        values = dict(bound.arguments)
        return build(benchmark, {**{k: v for k, v in values.items() if k != "options"}, **values.get("options", {})})

    make.__name__ = make.__qualname__ = name
    make.__module__ = module
    make.__doc__ = doc
    make.__signature__ = signature  # type: ignore[attr-defined]
    return task(name=name)(one_line_user_errors(make))


def per_benchmark(namespace: MutableMapping[str, Any], pattern: str,
                  make: Callable[[Benchmark], Callable[..., Task]]) -> None:
    """Define ``pattern.format(key=...)`` in ``namespace`` (a task module's globals, listed in its ``__all__``)
    for every registered benchmark, and for every benchmark registered later (removed with it: Inspect's own
    registry keeps what it registered)."""
    def add(benchmark: Benchmark) -> None:
        name = pattern.format(key=benchmark.key)
        namespace[name] = make(benchmark)
        listed = namespace.setdefault("__all__", [])
        if name not in listed:
            listed.append(name)

    def remove(benchmark: Benchmark) -> None:
        name = pattern.format(key=benchmark.key)
        namespace.pop(name, None)
        if name in namespace.get("__all__", []):
            namespace["__all__"].remove(name)

    for benchmark in list(BENCHMARKS.values()):
        add(benchmark)
    on_register(add, remove)
