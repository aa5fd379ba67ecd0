"""Shards of one run merged into one run before any statistic.

``medfuzz run --shard K/N`` runs the K-th of N contiguous slices of every run's samples (``tasks.inspect.shards.
shard_task``), one process or machine per shard, each with its own output folder. Each shard's log records its
slice in the task metadata (``medfuzz_shard``: index, count, the whole run's sample count and the slice's
[start, end)). Here the N logs of one run (same task, task args, model, model roles and suite label) become one
Inspect log: the samples in the whole run's order, the token usage summed, the run-start records (the call bound,
MedFuzz's attainability) recomputed for the whole run, and the metrics recomputed by Inspect's own
``recompute_metrics`` from every sample's scores. Every metric is a function of the samples' scores, and every
method seeds a sample from the sample itself, so the merged log's numbers are the ones one unsharded run gives
(``tests/core/test_shards.py`` runs both and compares every metric).

The merged log is written as a real Inspect log (``inspect view`` reads it), with Inspect's shard provenance
(``EvalSpec.shards``: a ledger entry per shard). Its samples are what the report reads (``log_reader.read_log``):
scores with their records, metadata, usage and errors; their transcripts (events, messages) stay in the shard
logs, which the ledger names (at the split's size the transcripts are 85 % of a MedFuzz sample).

A shard set with a shard missing, overlapping slices, or a shard that did not finish merges into a log with
status ``error`` whose message says what is missing: the report shows it with a banner and never as a finished
run, names it on the console and exits 1. Shards of one task and model in two configurations (task args, roles,
shard count, ...) are never merged together: each configuration is its own (incomplete) run, and the report
names what differs (complete shard sets of different settings are separate runs and no problem).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.records.keys import METHOD_KEY, SHARD_KEY, SUITE_KEY, recorded_config
from medfuzz.records.methods import METHODS
from medfuzz.report.problems import Problems, describe

MERGED_KEY = "medfuzz_merged_shards"  # a merged log's metadata: the shard count, the run's samples, the shard logs
MERGED_DIR = "merged-shards"


@dataclass
class ShardLog:
    path: Path
    log: Any  # the full EvalLog

    @property
    def slice(self) -> dict[str, int]:
        return self.log.eval.metadata[SHARD_KEY]


def shard_of(log: Any) -> dict[str, int] | None:
    return (log.eval.metadata or {}).get(SHARD_KEY)


def group_key(log: Any) -> str:
    """What makes shards one run: everything in the run's identity except its slice."""
    meta = {k: v for k, v in (log.eval.metadata or {}).items() if k not in (SHARD_KEY, MERGED_KEY)}
    shard = shard_of(log) or (log.eval.metadata or {}).get(MERGED_KEY, {})
    return json.dumps({"task": log.eval.task, "model": log.eval.model, "args": log.eval.task_args,
                       "roles": {k: v.model for k, v in (log.eval.model_roles or {}).items()},
                       "label": meta.get(SUITE_KEY), "count": shard.get("count"),
                       "samples": shard.get("samples")}, sort_keys=True, default=str)


def _newest_per_slice(shards: list[ShardLog]) -> list[ShardLog]:
    """One log per shard index: a retried shard leaves earlier attempts in its folder; the finished one wins,
    then the newest."""
    best: dict[int, ShardLog] = {}
    for shard in shards:
        k = shard.slice["index"]
        rank = (shard.log.status == "success", shard.log.stats.completed_at or "", shard.log.eval.created or "")
        current = best.get(k)
        if current is None or rank > (current.log.status == "success", current.log.stats.completed_at or "",
                                      current.log.eval.created or ""):
            best[k] = shard
    return [best[k] for k in sorted(best)]


def _problem(shards: list[ShardLog]) -> str | None:
    """Why the shards do not make one finished run, or None."""
    count, total = shards[0].slice["count"], shards[0].slice["samples"]
    covered: list[tuple[int, int]] = sorted((s.slice["start"], s.slice["end"]) for s in shards)
    problems = []
    position = 0
    for start, end in covered:
        if start > position:
            problems.append(f"samples {position}-{start - 1} (no shard log covers them)")
        elif start < position:
            problems.append(f"samples {start}-{position - 1} are in two shard logs")
        position = max(position, end)
    if position < total:
        problems.append(f"samples {position}-{total - 1} (no shard log covers them)")
    unfinished = [f"{s.slice['index']}/{count} ({s.log.status})" for s in shards if s.log.status != "success"]
    if unfinished:
        problems.append(f"shard {', '.join(unfinished)} did not finish")
    if not problems:
        return None
    return (f"shards of this run, merged: {len(shards)} shard log(s) of {count}; missing or unfinished: "
            + "; ".join(problems) + ". Run the missing shards (medfuzz run --shard K/N) and report again.")


def _usage_sum(usages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for usage in usages:
        for model, value in (usage or {}).items():
            total[model] = total[model] + value if model in total else value.model_copy()
    return total


def _run_start_records(log: Any, samples: int) -> dict[str, Any]:
    """The records a run makes for its sample count when it starts (the call bound, and what its method's spec
    adds, e.g. MedFuzz's attainability), recomputed for the whole run from its recorded config: a shard's are
    for its slice. The same for every method whose config bounds its calls (``records.methods``)."""
    meta = log.eval.metadata or {}
    spec = METHODS.get(str(meta.get(METHOD_KEY)))
    if "max_calls" not in meta or spec is None or spec.config is None or not spec.config_bounds_calls:
        return {}
    config = spec.config().from_options(**recorded_config(meta))
    return {**(spec.start_records(config, samples) if spec.start_records else {}),
            "max_calls": config.max_calls(samples)}


def merge(shards: list[ShardLog]) -> Any:
    """One Inspect log from the shard logs of one run (see the module's docstring)."""
    from inspect_ai.log import EvalError, EvalShardEntry, EvalShards, recompute_metrics

    shards = _newest_per_slice(shards)
    first = shards[0].log
    count, total = shards[0].slice["count"], shards[0].slice["samples"]
    samples = [sample for shard in shards for sample in (shard.log.samples or [])]
    ids = [sample.id for sample in samples]
    epochs = max((s.log.eval.config.epochs or 1) for s in shards)
    sample_ids = list(dict.fromkeys(ids))
    meta = {k: v for k, v in (first.eval.metadata or {}).items() if k != SHARD_KEY}
    meta.update(_run_start_records(first, len(sample_ids) * epochs))
    meta[MERGED_KEY] = {"count": count, "samples": total, "logs": [s.path.name for s in shards]}
    dataset = first.eval.dataset.model_copy(update={"samples": total, "sample_ids": sample_ids})
    stats = first.stats.model_copy(update={
        "started_at": min(s.log.stats.started_at for s in shards),
        "completed_at": max(s.log.stats.completed_at for s in shards),
        "model_usage": _usage_sum([s.log.stats.model_usage for s in shards]),
        "role_usage": _usage_sum([getattr(s.log.stats, "role_usage", None) or {} for s in shards])})
    problem = _problem(shards)
    ledger = [EvalShardEntry(
        shard=str(s.slice["index"]), log=s.path.name, eval_set_id=s.log.eval.eval_set_id, status=s.log.status,
        error=s.log.error, samples=len(s.log.samples or []), selected=len(s.log.eval.dataset.sample_ids or []),
        selection_digest=hashlib.sha256(json.dumps(s.log.eval.dataset.sample_ids or [], default=str).encode())
        .hexdigest(), started_at=s.log.stats.started_at, completed_at=s.log.stats.completed_at,
        model_usage=s.log.stats.model_usage, role_usage=getattr(s.log.stats, "role_usage", None) or {},
        size=s.path.stat().st_size, mtime=s.path.stat().st_mtime) for s in shards]
    spec = first.eval.model_copy(update={"metadata": meta, "dataset": dataset,
                                         "eval_id": hashlib.sha256("".join(s.log.eval.eval_id for s in shards)
                                                                   .encode()).hexdigest()[:22],
                                         "shards": EvalShards(selection="ids", ledger=ledger)})
    merged = first.model_copy(update={
        "eval": spec, "stats": stats, "samples": samples,
        "status": "success" if problem is None else "error",
        "error": None if problem is None else EvalError(message=problem, traceback="", traceback_ansi="")})
    if samples:
        recompute_metrics(merged)
    return merged


def merged_name(log: Any) -> str:
    stamp = (log.eval.created or "").replace(":", "-")[:19]
    task = log.eval.task.split("/")[-1]
    return f"{stamp}_{task}_{log.eval.eval_id}.eval"


def merge_shards(paths: Sequence[Path], out_dir: Path, problems: Problems | None = None) -> list[Path]:
    """``paths`` with every shard set replaced by its merged log, written under ``out_dir/merged-shards`` (and,
    inside ``log_reader.read_once``, handed to the renderers without a second parse). A merged log among ``paths``
    whose shards are there too is replaced by a fresh merge; other files pass through unchanged. With
    ``problems``, each shard set that does not make one finished run (a shard missing or unfinished, slices
    overlapping) and each run whose shards come in two configurations is named there; a shard set that cannot
    be merged at all is named and left out (its shards are never read as separate runs)."""
    from inspect_ai.log import write_eval_log

    from medfuzz.report.log_reader import read_log, remember

    groups: dict[str, list[ShardLog]] = defaultdict(list)
    merged_inputs: dict[str, list[Path]] = defaultdict(list)
    kept: list[Path] = []
    for path in paths:
        log = None
        if path.suffix in (".eval", ".json") and not path.name.startswith("results_"):
            try:
                log = read_log(path)
            except Exception:  # not an Inspect log (eval-set.json, ...): the renderers decide what it is
                log = None
        if log is not None and shard_of(log) is not None:
            groups[group_key(log)].append(ShardLog(path, log))
        elif log is not None and (log.eval.metadata or {}).get(MERGED_KEY):
            merged_inputs[group_key(log)].append(path)
        else:
            kept.append(path)
    for key, paths_of_merged in merged_inputs.items():
        if key not in groups:  # only the merged log was given: it is the run
            kept += paths_of_merged
    if not groups:
        return kept
    if problems is not None:
        for where, message in mixed_configurations(groups):
            problems.add(where, message)
    target = out_dir / MERGED_DIR
    target.mkdir(parents=True, exist_ok=True)
    for shards in groups.values():
        try:
            merged = merge(shards)
            path = target / merged_name(merged)
            write_eval_log(merged, str(path))
        except Exception as err:
            if problems is None:
                raise
            problems.add(_where(shards[0].log), f"its {len(shards)} shard log(s) could not be merged "
                                                f"({describe(err)}); left out of every number")
            continue
        merged = merged.model_copy(update={"location": str(path)})
        remember(path, merged)
        kept.append(path)
        if problems is not None and merged.status != "success" and merged.error is not None:
            problems.add(f"{MERGED_DIR}/{path.name}", merged.error.message)
    return kept


def _where(log: Any) -> str:
    return f"{log.eval.task} on {log.eval.model}"


IDENTITY_WORDS = {"args": "task args", "roles": "model roles", "label": "suite label", "count": "shard count",
                  "samples": "run size"}


def mixed_configurations(groups: dict[str, list[ShardLog]]) -> list[tuple[str, str]]:
    """(where, message) for each task and model whose shards come in more than one configuration and do not
    make a whole run in each: shards of two different runs given as if they were one. Each configuration is
    merged apart, and the message says what differs. Complete shard sets of different settings (a seed study)
    are separate runs and no problem."""
    by_run: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    incomplete: set[tuple[str, str]] = set()
    for key, shards in groups.items():
        identity = json.loads(key)
        by_run[(identity["task"], identity["model"])].append(identity)
        if _problem(_newest_per_slice(shards)) is not None:
            incomplete.add((identity["task"], identity["model"]))
    found = []
    for (task, model), identities in by_run.items():
        if len(identities) < 2 or (task, model) not in incomplete:
            continue
        differences = []
        for field, words in IDENTITY_WORDS.items():
            values = [identity.get(field) for identity in identities]
            if all(v == values[0] for v in values):
                continue
            if all(isinstance(v, dict) or v is None for v in values):  # name the keys that differ, with values
                names = sorted({k for v in values for k in (v or {})})
                for name in names:
                    per = [(v or {}).get(name, "unset") for v in values]
                    if any(p != per[0] for p in per):
                        differences.append(f"{words} {name}: {' / '.join(map(str, per))}")
            else:
                differences.append(f"{words}: {' / '.join('unset' if v is None else str(v) for v in values)}")
        found.append((f"{task} on {model}", f"shards of {len(identities)} different configurations "
                      f"({'; '.join(differences) or 'settings differ'}); each configuration is merged apart and "
                      "none is pooled with another. Report each configuration's shard logs on their own."))
    return found
