"""A run's K-th of N shards as an Inspect task (``medfuzz run --shard K/N``): the task with its dataset cut to one
contiguous slice, the slice recorded in the task metadata for the report's merge (``medfuzz.report.shards``)."""

from __future__ import annotations

from typing import Any

from medfuzz.records.keys import SHARD_KEY


def shard_range(total: int, k: int, n: int) -> tuple[int, int]:
    """The k-th (1-based) of n contiguous, near-equal slices of ``total`` samples, as [start, end) (Inspect's
    sample-range form, ``--limit start,end``); the n slices cover every sample once, in order."""
    return (k - 1) * total // n, k * total // n


def shard_task(task: Any, k: int, n: int) -> Any:
    """``task`` with its dataset cut to the k-th of n slices; the slice is recorded in the task metadata
    (``SHARD_KEY``) so that ``medfuzz report`` / ``compare`` merge the n shard logs into one run before any
    statistic (``medfuzz.report.shards``). Every method seeds each sample from the sample itself, never from
    its position in the run, so a sample's result is the same in a shard as in the whole run (tested:
    ``tests/e2e/test_shards_e2e.py``)."""
    total = len(task.dataset)
    start, end = shard_range(total, k, n)
    task.dataset = task.dataset[start:end]
    task.metadata = {**(task.metadata or {}), SHARD_KEY: {"index": k, "count": n, "samples": total,
                                                           "start": start, "end": end}}
    return task


__all__ = ["shard_range", "shard_task"]
