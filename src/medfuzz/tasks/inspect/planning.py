"""Tasks built for a plan and never run (``medfuzz run --dry-run``: their datasets and configs give the call bound
and the cost estimate). A solver that prepares something costly when it is built (TCES embeds its vocabulary:
about a minute on an empty cache, most of a dry run before) asks ``planning()`` and leaves that work to its first
sample instead; everything else (the dataset, the config and its checks) is built as for a run, so a plan's
samples are the run's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_PLANNING: ContextVar[bool] = ContextVar("medfuzz_planning_only", default=False)


def planning() -> bool:
    """Whether the tasks being built now are only planned (inside ``planning_only``)."""
    return _PLANNING.get()


@contextmanager
def planning_only() -> Iterator[None]:
    """Build tasks for a plan inside this block: their solvers defer their costly preparation."""
    token = _PLANNING.set(True)
    try:
        yield
    finally:
        _PLANNING.reset(token)
