"""What ``medfuzz report`` could not draw or could not use: named on the console as it happens (one line each,
on stderr), listed at the top of the page, and returned by ``render_all`` so that the command exits 1.

Two kinds: a section (a renderer, the first screen, ``summary.json``) that raised, which the page shows as an
error in its place while everything else is still written; and an input the report could not use (an
unreadable ``.eval``, a shard set with a shard missing, shards of two configurations).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
MAX_MESSAGE = 600  # characters of an exception's message kept on the console and the page


@dataclass(frozen=True)
class Problem:
    where: str  # a section's title, a file name as the page shows it, or a file the report writes
    message: str
    error: str = ""  # for a part that raised: its exception as one line (what the page shows in its place)

    def line(self) -> str:
        return f"{self.where}: {self.message}"


def describe(err: BaseException) -> str:
    """An exception as one line: its type and its message (never a traceback or a repr)."""
    text = " ".join(str(err).split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + " …"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class Problems(list[Problem]):
    """The problems of one render, in the order they were found; each printed once when added (``echo``)."""

    def __init__(self, echo: bool = True, command: str = "medfuzz report") -> None:
        super().__init__()
        self.echo = echo
        self.command = command  # the console lines' prefix

    def add(self, where: str, message: str, error: str = "") -> Problem:
        problem = Problem(where, message, error)
        self.append(problem)
        if self.echo:
            print(f"{self.command}: {problem.line()}", file=sys.stderr, flush=True)
        return problem

    def failed(self, where: str, err: BaseException) -> Problem:
        error = describe(err)
        return self.add(where, f"failed: {error}", error)

    def guard(self, where: str, call: Callable[..., T], *args: Any, default: T, **kwargs: Any) -> T:
        """``call(*args, **kwargs)``, or ``default`` when it raises (the failure recorded under ``where``).
        Only ``Exception``: an interrupt still stops the command."""
        try:
            return call(*args, **kwargs)
        except Exception as err:  # one section's failure must not cost the others their output
            self.failed(where, err)
            _close_figures()
            return default


def _close_figures() -> None:
    """A renderer that raised mid-figure leaves it open; the next one must not draw into it."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")
