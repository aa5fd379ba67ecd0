"""The bill's upper bound, shown before the first model call: a task logs how many calls per role its run can
make at most (``max_calls`` of the method's config) and records it in the task metadata for the report."""

from __future__ import annotations

import logging
from typing import Protocol

from inspect_ai import Task

log = logging.getLogger(__name__)


class _Budgeted(Protocol):
    LABEL: str

    def max_calls(self, items: int) -> dict[str, int]: ...


def announce_max_calls(config: _Budgeted, task: Task) -> Task:
    """Log (at WARNING, the level Inspect shows by default: it is about money) and record the maximum number of
    model calls per role for the task's items; ``--limit`` and ``--epochs`` scale it afterwards."""
    items = len(task.dataset)
    calls = config.max_calls(items)
    task.metadata = {**(task.metadata or {}), "max_calls": calls}
    roles = ", ".join(f"{role} {count:,}" for role, count in calls.items())
    log.warning("%s: at most %s model calls for %d items (%s); fewer when attacks stop early, --limit and "
                "--epochs scale it", config.LABEL, f"{sum(calls.values()):,}", items, roles)
    return task
