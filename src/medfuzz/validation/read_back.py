"""What the surfaces section reads back where users read it, shared by its per-method modules."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from medfuzz.validation.checks import Check, differing_check

GLANCE = "<section id=glance>"
CHANCE = " (chance level)"  # the key of a row's chance-level cell among the first screen's rows
ROW = re.compile(r"<tr><th>([^<]+)</th><td class=num>([^<]*)</td>(?:<td class=num>([^<]*)</td>)?</tr>")


def terminal_numbers(paths: list[Path], harness: str, title: str) -> dict[str, str]:
    """The terminal summary's lines of one result (``report.terminal.result_lines``, as ``medfuzz run`` prints
    them): metric -> the text shown after its label."""
    from medfuzz.report.labels import label
    from medfuzz.report.terminal import first_screen_results, result_lines

    [result] = [r for r in first_screen_results(paths) if r.harness == harness and r.title.startswith(title)]
    lines = result_lines(result)
    return {n.metric: line.split(label(n.metric), 1)[1].strip()
            for n, line in zip(result.numbers, lines[1:], strict=False)}


def first_screen_cells(page: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """The report's first screen (``index.html``'s glance section): (model, harness, title) -> label -> the
    cell's text, as the page shows it; a row's chance level, where the page shows one, under label + ``CHANCE``."""
    from medfuzz.report.format import MISSING

    glance = page[page.index(GLANCE):page.index("</section>", page.index(GLANCE))]
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for card in glance.split("<div class=glance>")[1:]:
        heading = re.match(r"<h3>([^<]*)</h3>", card)
        model = html.unescape(heading.group(1)) if heading else ""
        for block in card.split("<div class=method>")[1:]:
            head = re.match(r"<h4>(.*?) <span class=tag>([^<]+)</span></h4>", block)
            if head is None:  # "no <method> run for this model"
                continue
            rows: dict[str, str] = {}
            for name, text, chance in ROW.findall(block):
                rows[html.unescape(name)] = html.unescape(text)
                if chance and chance != MISSING:  # a row without a chance level in a table with the column
                    rows[html.unescape(name) + CHANCE] = html.unescape(chance)
            found[(model, head.group(2), html.unescape(head.group(1)))] = rows
    return found


def first_screen_numbers(report: Path, harness: str, title: str) -> dict[str, str]:
    """One result's rows on the first screen of the report in ``report`` (the result of ``harness`` whose
    title starts with ``title``; one model): label -> the cell's text. Empty when the page has no such result."""
    cells = first_screen_cells((report / "index.html").read_text(encoding="utf-8"))
    found = [rows for (_, tag, head), rows in cells.items() if tag == harness and head.startswith(title)]
    return found[0] if len(found) == 1 else {}


def first_screen_differing(page: dict[str, str], terminal: dict[str, str],
                           chances: dict[str, float] | None = None) -> list[str]:
    """The first screen's rows against the terminal's lines of the same result (metric -> text, checked
    against the recount on their own): every line's label and text on the page, each of ``chances`` (metric ->
    the recounted chance level, 3 decimals) in its row's chance cell, and no other row or cell."""
    from medfuzz.report.labels import label

    if not page or not terminal:  # nothing read is nothing shown equal: a missing result fails
        return [f"the result is missing from the {'first screen' if not page else 'terminal'}"]
    expected = {label(metric): text for metric, text in terminal.items()}
    expected |= {label(metric) + CHANCE: f"{chance:.3f}" for metric, chance in (chances or {}).items()}
    differing = [f"{name}: {page.get(name)!r} (terminal {text!r})" for name, text in expected.items()
                 if page.get(name) != text]
    return differing + [f"{name}: {text!r} (not on the terminal)" for name, text in page.items()
                        if name not in expected]


def first_screen_check(method: str, where: str, page: dict[str, str], terminal: dict[str, str], n: int,
                       chances: dict[str, float] | None = None) -> Check:
    """Exact: the first screen shows every terminal line of the result (each checked against the recount on its
    own), the same text, the recounted ``chances`` where it shows a chance level, and nothing else."""
    what = "every row = the terminal's line" + (", every chance level = recount" if chances else "")
    return differing_check(method, f"{where}: first screen (index.html): {what}",
                           first_screen_differing(page, terminal, chances), n)


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


__all__ = ["card_fields", "first_screen_cells", "first_screen_check", "first_screen_differing", "first_screen_numbers",
           "summary_fields", "terminal_numbers"]
