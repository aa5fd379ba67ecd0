"""The bill's upper bound, shown before the first model call: a task logs how many calls per role its run can
make at most (``max_calls`` of the method's config) and records it in the eval's metadata for the report.

It is computed when the run starts (``run_checks.RunChecks.start_task``), for the samples the run really has:
Inspect applies ``--limit``, ``--sample-id`` and ``--epochs`` after the task is built, so a bound computed
from the task's dataset would be the whole file's."""

from __future__ import annotations

import logging
from typing import Protocol

from inspect_ai.log import EvalSpec

log = logging.getLogger(__name__)


class _Budgeted(Protocol):
    LABEL: str

    def max_calls(self, items: int) -> dict[str, int]: ...


def record(spec: EvalSpec, **values: object) -> None:
    """Add ``values`` to the metadata of the eval being run. ``spec`` is the eval's own spec (the one Inspect
    hands to ``start_task`` and writes into the log's header when the run ends), so this is what the log keeps;
    tests/e2e/test_run_checks_e2e.py reads it back from a real ``inspect eval`` log."""
    if spec.metadata is None:
        spec.metadata = {}
    spec.metadata.update(values)


def announce_max_calls(config: _Budgeted, spec: EvalSpec, samples: int) -> dict[str, int]:
    """Log (at WARNING, the level Inspect shows by default: it is about money) and record the maximum number of
    model calls per role for the run's ``samples`` (items × epochs)."""
    calls = config.max_calls(samples)
    record(spec, max_calls=calls)
    roles = ", ".join(f"{role} {count:,}" for role, count in calls.items())
    log.warning("%s: at most %s model calls for %d samples (%s); fewer when attacks stop early", config.LABEL,
                f"{sum(calls.values()):,}", samples, roles)
    return calls
