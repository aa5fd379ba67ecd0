"""What the surfaces section reads back where users read it, shared by its per-method modules."""

from __future__ import annotations

from pathlib import Path


def terminal_numbers(paths: list[Path], harness: str, title: str) -> dict[str, str]:
    """The terminal summary's lines of one result (``report.terminal.result_lines``, as ``medfuzz run`` prints
    them): metric -> the text shown after its label."""
    from medfuzz.report.labels import label
    from medfuzz.report.terminal import first_screen_results, result_lines

    [result] = [r for r in first_screen_results(paths) if r.harness == harness and r.title.startswith(title)]
    lines = result_lines(result)
    return {n.metric: line.split(label(n.metric), 1)[1].strip()
            for n, line in zip(result.numbers, lines[1:], strict=False)}


__all__ = ["terminal_numbers"]
