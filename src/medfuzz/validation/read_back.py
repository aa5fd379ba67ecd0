"""What the surfaces section reads back where users read it, shared by its per-method modules."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def terminal_numbers(paths: list[Path], harness: str, title: str) -> dict[str, str]:
    """The terminal summary's lines of one result (``report.terminal.result_lines``, as ``medfuzz run`` prints
    them): metric -> the text shown after its label."""
    from medfuzz.report.labels import label
    from medfuzz.report.terminal import first_screen_results, result_lines

    [result] = [r for r in first_screen_results(paths) if r.harness == harness and r.title.startswith(title)]
    lines = result_lines(result)
    return {n.metric: line.split(label(n.metric), 1)[1].strip()
            for n, line in zip(result.numbers, lines[1:], strict=False)}


def summary_fields(numbers: dict[str, Any]) -> dict[str, Any]:
    """A ``summary.json`` result's numbers as ``metric:part`` -> value (value, k, n, and both Wilson ends)."""
    out: dict[str, Any] = {}
    for name, fields in numbers.items():
        out |= {f"{name}:{part}": fields.get(part) for part in ("value", "k", "n")}
        if fields.get("ci95"):
            out |= {f"{name}:low": fields["ci95"][0], f"{name}:high": fields["ci95"][1]}
    return out


def card_fields(card: dict[str, Any]) -> dict[str, Any]:
    """A model card's metrics (type -> entry) as ``metric:part`` -> value (value and both Wilson ends)."""
    out: dict[str, Any] = {}
    for name, metric in card.items():
        out[f"{name}:value"] = metric.get("value")
        ends = (metric.get("args") or {}).get("ci95")
        if ends:
            out |= {f"{name}:low": ends[0], f"{name}:high": ends[1]}
    return out


__all__ = ["card_fields", "summary_fields", "terminal_numbers"]
