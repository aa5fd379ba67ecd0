"""The ``-T`` options of every medfuzz Inspect task, by one rule.

Inspect gives a task the ``-T`` names its signature has and warns about (and drops) the others, unless the task
takes ``**kwargs``: then it gets every name. Every medfuzz task takes ``**options`` so that a misspelt name stops
the run instead of running with the default, and ``task_options`` sorts what arrives:

- a name the task takes is kept (its owner, ``DataSelection`` or the method's config, converts and checks it);
- a name the task does not take but another medfuzz task does (``data`` reaching ``medfuzz/medguard``, ``turns``
  reaching ``medfuzz/tces_medqa``) is warned about and dropped, as Inspect does with a parameter a task lacks:
  ``inspect eval-set`` (and ``inspect eval`` with several tasks) passes one ``-T`` to every task of the set;
- a name no medfuzz task takes is an error naming the closest known name (this task's first, else any medfuzz
  task's), so ``-T dta=demo`` never runs on the default data.

The rule is the same for ``inspect eval`` and ``inspect eval-set``, with one task or several: a task cannot see
which other tasks share its run. With one task, the warning is the signal that a name did nothing. "Another
medfuzz task" means a method in the registry (``medfuzz.records.methods``: ``Method.options()``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from medfuzz.options import unknown_name
from medfuzz.records.methods import METHODS

log = logging.getLogger(__name__)


def known_task_options() -> frozenset[str]:
    """Every ``-T`` name some medfuzz Inspect task takes (the registered methods' task options)."""
    return frozenset(name for method in METHODS.values() for name in method.options())


def task_options(task: str, raw: Mapping[str, Any], takes: Collection[str],
                 why_not: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The options of ``raw`` that ``task`` (its Inspect name, ``medfuzz/medguard``) ``takes``; the other medfuzz
    tasks' names are dropped with one warning (``why_not``: a reason for a name this task deliberately lacks),
    and any other name raises ``ConfigError``."""
    why_not = why_not or {}
    known = known_task_options()
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in raw.items():
        if name in takes:
            kept[name] = value
        elif name in known or name in why_not:
            dropped.append(name)
        else:
            raise unknown_name(task, name, takes, known)
    if dropped:
        reasons = "".join(f"; {why_not[name]}" for name in dropped if name in why_not)
        log.warning("%s: -T %s ignored: not a parameter of this task (another medfuzz task's: an eval set passes "
                    "one -T to every task)%s", task, ", ".join(dropped), reasons)
    return kept
