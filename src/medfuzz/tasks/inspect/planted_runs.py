"""The planted target through the real ``medfuzz/medqa_clean`` task, in-process (``inspect_ai.eval``): what
``medfuzz validate``'s surfaces section runs, and the parts of the logs it reads back. The harness calls live
here, in the shell; ``medfuzz.validation.surfaces`` compares what they return with the planted truth."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from medfuzz.planted import PlantedSpec
from medfuzz.planted.server import launch


@dataclass(frozen=True)
class Reply:
    """One sample of a log as the recount needs it: the raw completion, the key, whether the sample errored."""

    sample_id: str
    completion: str
    target: str
    errored: bool


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` for the block, the previous values (or their absence) restored after."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def planted_logs(spec: PlantedSpec, runs: list[tuple[str, Callable[[], Any]]], folder: Path,
                 items: list | None = None, attacker: bool = False) -> list[Path]:
    """Each ``(folder name, task factory)`` of ``runs`` run in-process against one planted server (given
    ``items`` so that it knows their keys; else the spec's data), the call cache off; with ``attacker``, the
    planted attacker in the ``attacker`` role; their logs, in order."""
    server = launch(spec, items=items)
    logs = []
    roles = {"attacker": server.inspect_model(attacker=True)} if attacker else None
    try:
        with environment({**server.inspect_env(), "MEDFUZZ_CALL_CACHE": "0"}):
            for where, make in runs:
                [log] = inspect_eval(make(), model=server.inspect_model(), model_base_url=server.base_url,
                                     model_roles=roles, log_dir=str(folder / where), display="none",
                                     log_level="error", seed=spec.seed)
                if log.status != "success":
                    raise RuntimeError(f"validate surfaces: the {where} run did not finish: {log.error}")
                logs.append(Path(log.location.removeprefix("file://")))
    finally:
        server.stop()
    return logs


def clean_baseline_logs(spec: PlantedSpec, limit: int, folder: Path, shards: int) -> tuple[Path, list[Path]]:
    """The clean baseline on the bundled demo rows against the planted server: the whole run's log, and the
    logs of the same run as ``shards`` shards (``shard_task``, what ``medfuzz run --shard K/N`` runs)."""
    from medfuzz.tasks.inspect.baselines import medqa_clean  # type: ignore[attr-defined]  (made per benchmark)
    from medfuzz.tasks.inspect.shards import shard_task

    runs: list[tuple[str, Callable[[], Any]]] = [("inspect", lambda: medqa_clean(data="demo", limit=limit))]
    runs += [(f"shards/{k}", lambda k=k: shard_task(medqa_clean(data="demo", limit=limit), k, shards))
             for k in range(1, shards + 1)]
    whole, *parts = planted_logs(spec, runs, folder)
    return whole, parts


def medguard_log(spec: PlantedSpec, n: int, folder: Path) -> Path:
    """The real ``medfuzz/medguard`` task (every aspect, the bundled build with ``n`` items per aspect) against
    the planted server, which is given the built items so that it knows their keys; the log."""
    from medfuzz.solvers.medguard.builders import BuildConfig, build
    from medfuzz.tasks.inspect.medguard import medguard

    [log] = planted_logs(spec, [("medguard", lambda: medguard(n=n, seed=spec.seed))], folder,
                         items=build(BuildConfig(n=n, seed=spec.seed)).items)
    return log


def medguard_model_logs(specs: list[PlantedSpec], n: int, aspects: str, folder: Path) -> list[Path]:
    """The real ``medfuzz/medguard`` task on ``aspects`` (the bundled build, ``n`` items per aspect), once per
    planted model of ``specs`` (each its own server: the model is named by its spec), as a user compares models;
    the logs, in order."""
    from medfuzz.solvers.medguard.builders import BuildConfig, build
    from medfuzz.tasks.inspect.medguard import medguard

    items = build(BuildConfig(n=n, seed=specs[0].seed)).items
    return [log for spec in specs
            for log in planted_logs(spec, [(f"medguard-{spec.name}",
                                            lambda seed=spec.seed: medguard(n=n, seed=seed, aspects=aspects))],
                                    folder, items=items)]


def tces_log(spec: PlantedSpec, items: list, data: Path, vocabulary: Path, budget: int, folder: Path,
             shards: int = 0, limit: int | None = None) -> list[Path]:
    """The real ``medfuzz/tces`` task on a user's own file (``data``: the items, read without a column mapping;
    its first ``limit``) against the planted server, which is given the items so that it knows their keys; the
    defaults otherwise (PDWS n = -20 at temperature 0), on the planted rule's entity type and ``vocabulary``; the
    whole run's log, then, with ``shards``, the logs of the same run as that many shards (``shard_task``, what
    ``medfuzz run --shard K/N`` runs)."""
    from medfuzz.tasks.inspect.shards import shard_task
    from medfuzz.tasks.inspect.tces import tces

    def make() -> Any:
        return tces(benchmark="mcq", data=str(data), data_name="planted TCES items", entity=spec.tces.entity,
                    vocabulary=str(vocabulary), embedding=spec.tces.embedding, budget=budget, limit=limit)

    runs: list[tuple[str, Callable[[], Any]]] = [("tces", make)]
    runs += [(f"tces-shards/{k}", lambda k=k: shard_task(make(), k, shards)) for k in range(1, shards + 1)]
    return planted_logs(spec, runs, folder, items=items)


def recorded_metadata(log_path: Path) -> dict[str, Any]:
    """What a log's task recorded when it started (its ``eval.metadata``)."""
    return dict(read_eval_log(str(log_path), header_only=True).eval.metadata or {})


def medfuzz_log(spec: PlantedSpec, items: list, data: Path, options: dict[str, Any], folder: Path) -> Path:
    """The real ``medfuzz/medfuzz_mcq`` task on a user's own file (``data``: the items, read without a column
    mapping) with the planted target and the planted attacker in its ``attacker`` role, the task options
    ``options``; the server is given the items so that it knows their keys; the log."""
    from medfuzz.tasks.inspect.medfuzz import medfuzz

    def make() -> Any:
        return medfuzz(benchmark="mcq", data=str(data), data_name="planted MedFuzz items", **options)

    [log] = planted_logs(spec, [("medfuzz", make)], folder, items=items, attacker=True)
    return log


@dataclass(frozen=True)
class StoredScore:
    """One sample's stored score of one scorer: its value and the metadata the scorer wrote."""

    sample_id: str
    value: object
    metadata: dict[str, object]


def stored_scores(log_path: Path, scorer: str) -> list[StoredScore]:
    """Every sample's stored score of ``scorer`` (samples the scorer did not score are left out)."""
    log = read_eval_log(str(log_path))
    return [StoredScore(str(s.id), s.scores[scorer].value, dict(s.scores[scorer].metadata or {}))
            for s in log.samples or [] if s.scores and scorer in s.scores]


def replies(log_path: Path) -> list[Reply]:
    """Every sample's raw reply (the report's log reader leaves the completions out)."""
    log = read_eval_log(str(log_path))
    return [Reply(str(s.id), s.output.completion if s.output else "", str(s.target), bool(s.error))
            for s in log.samples or []]


def scorer_metrics(log_path: Path, scorer: str) -> dict[str, float]:
    """The metric values Inspect recorded for ``scorer`` in the log's header."""
    scores = read_eval_log(str(log_path), header_only=True).results.scores or []
    return {name: float(m.value) for s in scores if s.name == scorer for name, m in s.metrics.items()}


def model_of(log_path: Path) -> str:
    return str(read_eval_log(str(log_path), header_only=True).eval.model)


__all__ = ["Reply", "StoredScore", "clean_baseline_logs", "environment", "medfuzz_log", "medguard_log",
           "medguard_model_logs", "model_of", "planted_logs", "recorded_metadata", "replies", "scorer_metrics",
           "stored_scores", "tces_log"]
