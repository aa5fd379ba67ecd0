"""The first screen as terminal lines: the results ``report.overview`` computes for the page, rendered as the
text ``medfuzz run``'s summary prints (``cli.summary``) and ``medfuzz validate`` reads back (``validation.surfaces``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def first_screen_results(paths: list[Path]) -> list[Any]:
    """The first screen's results over ``paths`` (``report.overview.build``), every card's, in its order."""
    from medfuzz.report.overview import build

    return [result for card in build(paths) for result in card.results]


LABEL_WIDTH = 56


def result_lines(result: Any) -> list[str]:
    """One first-screen result: its harness, title and data, then one line per number (its label, then
    ``Number.shown``: the text the page's cell holds), then its note and the run's α where it has one."""
    from medfuzz.report.labels import label

    data = f"  ({result.data.name})" if result.data is not None else ""
    lines = [f"  {result.harness:7s}  {result.title}{data}"]
    labels = [label(n.metric) for n in result.numbers]
    width = min(LABEL_WIDTH, max(map(len, labels), default=0))  # a longer label pushes its own number right
    lines += [f"    {words:<{width}}  {n.shown()}" for words, n in zip(labels, result.numbers, strict=True)]
    notes = [result.note] if result.note else []
    if result.alpha is not None:
        notes.append(f"α = {result.alpha:g} (the run's own)")
    if notes:
        lines.append(f"    ({'; '.join(notes)})")
    return lines
