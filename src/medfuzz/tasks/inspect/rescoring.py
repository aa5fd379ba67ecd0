"""``inspect score LOG`` on medfuzz logs: the scorers found by the names the log records, and the state they
read rebuilt as the run left it.

Names. Inspect registers a package's scorer as ``medfuzz/<name>`` but records it in a log without the package
(``as_scorer_spec`` keeps ``registry_unqualified_name``: ``baseline_choice``), while the metrics keep theirs
(``medfuzz/baseline_acc``). ``inspect score LOG`` then looks each scorer up by the recorded name: ``<name>``,
then ``inspect_ai/<name>``, never ``medfuzz/<name>``. By then every ``inspect_ai`` entry point is loaded (its
hooks start-up), so medfuzz's scorers are registered; ``rescorable`` registers each one under its bare name
too, so the recorded name finds it. The bare alias makes the same scorer (same metrics, same score key in
``Sample.scores`` and ``results.scores``): nothing users see is renamed. No alias shadows a name already taken
(one of Inspect's own scorers, another package's bare scorer): that scorer is then left without an alias, with a
warning (``--scorer medfuzz/<name>`` still finds it), and tests/core/test_names.py checks the names against what
Inspect ships.

Choice marks. Inspect's ``multiple_choice`` solver marks the option the reply names on ``state.choices``, and
``choice()`` scores those marks; a log keeps the options' texts but not the marks, so a state rebuilt from a log
has none. ``marks_from_reply`` marks them again from the recorded reply with the solver's own parser, so the
re-score equals the run's score (a state the solver marked is left as it is).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from inspect_ai._util.registry import RegistryInfo, registry_add, registry_has, registry_info, registry_unqualified_name
from inspect_ai.solver import TaskState
from inspect_ai.solver._multiple_choice import parse_answers, set_choices_based_on_generated_response

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)

ALIASES: dict[str, str] = {}  # bare name -> the registered name (``medfuzz/<name>``) of the aliases made here


def rescorable(factory: F) -> F:
    """Register a ``@scorer`` factory under its bare name as well (the name a log records), so ``inspect score``
    loads it. Put it above ``@scorer``."""
    info = registry_info(factory)
    bare = registry_unqualified_name(info)
    if bare == info.name:  # not in an installed package: registered under the bare name already
        return factory
    if registry_has("scorer", bare) and ALIASES.get(bare) != info.name:  # someone else's: never shadowed
        log.warning("medfuzz scorer %s: the name %r is another scorer's, so `inspect score` needs `--scorer %s` "
                    "for medfuzz logs", info.name, bare, info.name)
        return factory

    @functools.wraps(factory)
    def alias(*args: Any, **kwargs: Any) -> Any:
        return factory(*args, **kwargs)

    registry_add(alias, RegistryInfo(type="scorer", name=bare, metadata=info.metadata))
    ALIASES[bare] = info.name
    return factory


def marks_from_reply(state: TaskState) -> None:
    """Mark ``state.choices`` from the reply as ``multiple_choice`` (one answer) does, when nothing marked them: the
    state ``inspect score`` rebuilt from a log. A reply without an ``ANSWER:`` line leaves them unmarked, as the
    solver did."""
    if state.choices and all(choice.correct is None for choice in state.choices):
        answers = parse_answers(state, multiple_correct=False)
        if answers:
            set_choices_based_on_generated_response(state, answers)
