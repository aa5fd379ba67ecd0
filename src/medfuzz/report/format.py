"""How the report and the terminal summary write numbers and HTML: the one place every page and ``medfuzz run``'s
closing summary take their number text, table cells, page style and CSV cells from.

- ``number``: a value as display text, with its ± SE, its interval ``[low, high]`` and its counts ``(k/n)`` or
  ``(n=N)``; a missing value (``None`` or NaN) is ``MISSING`` ("–") on every page and in the terminal.
- ``csv_cell``: a value as a CSV cell (floats to 4 significant digits, missing as an empty cell, text made
  spreadsheet-safe by ``safe_cell``). CSV cells differ from display text on purpose: a spreadsheet reads an empty
  cell as missing and "–" as text.
- ``display`` / ``table`` / ``markdown_tables`` / ``highlight``: the HTML the pages share, under one ``STYLE``.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MISSING = "–"  # a value that is None or NaN, wherever a number is shown

# ------------------------------------------------------------------------------------------- numbers


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _digits(value: float, spec: str, trim: bool, scale: float = 1.0) -> str:
    text = f"{value if scale == 1 else scale * value:{spec}}"  # a count stays an int (``,`` writes 5,440)
    if trim and "." in text and "e" not in text:  # 0.500 -> 0.5, 2.000 -> 2: parameters read as written
        text = text.rstrip("0").rstrip(".")
    return text


def number(value: float | int | None, *, se: float | None = None, interval: tuple[float, float] | None = None,
           k: int | None = None, n: int | None = None, spec: str = ".3f", scale: float = 1.0,
           trim: bool = False) -> str:
    """``value`` as text: ``spec`` (a format spec: ``.3f`` decimals, ``.4g`` significant digits for p-values,
    ``.0%`` a percentage, ``,`` a count) after multiplying by ``scale``, then `` [low, high]`` for a finite
    ``interval``, `` ± se`` for a finite ``se`` (both in the value's spec and scale), then `` (k/n)`` or
    `` (n=N)``. A missing value is ``MISSING`` alone: no interval, SE or count is shown for a number that is not
    there. ``trim`` drops trailing zeros (the run cards' parameters and metrics)."""
    if is_missing(value):
        return MISSING
    text = _digits(value, spec, trim, scale)
    if interval is not None and not any(is_missing(end) for end in interval):
        text += f" [{_digits(interval[0], spec, trim, scale)}, {_digits(interval[1], spec, trim, scale)}]"
    if isinstance(se, int | float) and not isinstance(se, bool) and not math.isnan(se):
        text += f" ± {_digits(se, spec, trim, scale)}"
    if k is not None and n is not None:
        text += f" ({k}/{n})"
    elif n is not None:
        text += f" (n={n})"
    return text


def p_value(value: float | None, missing: str = MISSING) -> str:
    """A p-value (or the confidence drop beside it) to 4 significant digits: a p-value's size is its point;
    ``missing``, words that say why, where there is none (an untested attack)."""
    return missing if is_missing(value) else number(value, spec=".4g")


# ------------------------------------------------------------------------------------------- CSV cells

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as written (OWASP "CSV injection"): model and attacker text lands in the CSVs and
    a reviewer opens them in a spreadsheet, so a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return (read as a formula, ``=HYPERLINK(...)``) is prefixed with a single quote, which spreadsheets
    show as text. Numbers (also as text, e.g. ``-0.25``) are left as they are so numeric columns stay numeric."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def csv_cell(value: Any) -> Any:
    """A value as the MedFuzz and review CSVs write it: a float to 4 significant digits, ``None`` as an empty
    cell, anything else as its text; spreadsheet-safe (``safe_cell``)."""
    if isinstance(value, float):
        return safe_cell(f"{value:.4g}")
    return safe_cell("" if value is None else str(value))


# ------------------------------------------------------------------------------------------- HTML

STYLE = """
body{font-family:system-ui,sans-serif;max-width:72em;margin:1em auto;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #4C72B0;padding-bottom:.2em;margin-top:2em}
nav a{margin-right:1em}.note{color:#555;font-size:.92em}
.run{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fafafa}
.run h3{margin:.2em 0 .4em;font-size:1.05em}
table{border-collapse:collapse;margin:.4em 0;font-size:.88em}
td,th{border:1px solid #ccc;padding:.15em .5em;text-align:left;vertical-align:top}th{background:#eef}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.md{overflow-x:auto}.grid{display:flex;flex-wrap:wrap;gap:1em}.grid>div{flex:1 1 22em}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
details{margin:.3em 0}.bad{color:#a33}
table{max-width:100%}td{overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}
.banner{background:#fde8e8;border-left:5px solid #c0392b;padding:.4em .8em;margin:.5em 0;color:#611}
.glance{border:2px solid #4C72B0;border-radius:8px;padding:.4em 1em .6em;margin:1em 0}
.glance h3{margin:.2em 0}.methods{display:flex;flex-wrap:wrap;gap:0 1.5em}.methods>.method{flex:1 1 20em;min-width:0}
.method h4{margin:.6em 0 .2em}.tag{font-size:.75em;background:#eef;border-radius:3px;padding:0 .3em;font-weight:normal}
"""


# the successful-attack cards of the MedFuzz attacks page and the review sheet, on top of ``STYLE``
ATTACK_STYLE = """
mark{background:#ffe066}section.attack{border-bottom:1px solid #ccc;padding:1em 0}
section.attack h2{font-size:1.05em;border:0;margin-top:.2em}.stats{color:#555;font-size:.9em}
fieldset{border:1px solid #ddd;margin:.4em 0}textarea{width:100%}
"""


def html_page(title: str, body: str, extra_style: str = "") -> str:
    """A self-contained page in the report's style (``STYLE``, plus ``extra_style``): every HTML page the report
    writes is one of these."""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}{extra_style}</style></head><body>{body}</body></html>")


class Shown(str):
    """A number already written out with its interval (``overview.Number.shown``): a numeric cell."""


def display(value: Any) -> str:
    """Any value of a run card as HTML text: ``(value, se)`` as ``value ± se``, numbers trimmed (``0.5``),
    counts with thousands separators, yes/no for booleans, "name: value" pairs for a dict, a path as its file
    name (never an absolute path), ``MISSING`` for nothing."""
    if isinstance(value, tuple) and len(value) == 2:
        main, stderr = value
        return number(main, se=stderr, trim=True) if isinstance(main, int | float) else display(main)
    if value is None:
        return MISSING
    if isinstance(value, bool):  # words, not Python's True/False
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value, trim=True)
    if isinstance(value, int):
        return number(value, spec=",")
    if isinstance(value, dict):  # readable "name: value" pairs, never JSON
        return "; ".join(f"{html.escape(str(k))}: {display(v)}" for k, v in value.items()) or MISSING
    if isinstance(value, list | tuple):
        return ", ".join(display(v) for v in value) or MISSING
    if isinstance(value, str) and path_like(value):  # the file name; a relative path on hover, never an absolute one
        title = "" if Path(value).is_absolute() else f" title=\"{html.escape(value)}\""
        return f"<span{title}>{html.escape(Path(value).name)}</span>"
    return html.escape(str(value))


def path_like(text: str) -> bool:
    if " " in text or "://" in text or not ("/" in text or "\\" in text):  # words and URLs are shown whole
        return False
    return Path(text).is_absolute() or text.startswith("~") or bool(Path(text).suffix) or len(text) > 40


def table_cell(value: Any) -> str:
    numeric = isinstance(value, int | float | tuple | Shown) and not isinstance(value, bool)
    return f"<td class=num>{display(value)}</td>" if numeric else f"<td>{display(value)}</td>"


def table(rows: Iterable[tuple[str, Any]], head: tuple[str, str] | None = None) -> str:
    """A two-column name/value table (empty text for no rows)."""
    body = "".join(f"<tr><th>{html.escape(str(k))}</th>{table_cell(v)}</tr>" for k, v in rows)
    top = f"<tr><th>{html.escape(head[0])}</th><th>{html.escape(head[1])}</th></tr>" if head else ""
    return f"<div class=scroll><table>{top}{body}</table></div>" if body else ""


def markdown_tables(text: str) -> str:
    """Markdown headings, pipe tables and plain lines as HTML (only what the renderers write)."""
    out, rows_seen = [], []

    def flush() -> None:
        if rows_seen:
            rows = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows_seen]
            rows = [r for r in rows if not all(re.fullmatch(r":?-{3,}:?", c) for c in r)]
            head, body = rows[0], rows[1:]
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table>")
            rows_seen.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            rows_seen.append(line)
            continue
        flush()
        heading = re.match(r"^(#{1,4})\s+(.*)", line)
        if heading:
            level = min(6, len(heading.group(1)) + 3)
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
    flush()
    return "\n".join(out)


def inline(text: str) -> str:
    """Markdown ``**bold**`` in escaped text."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))


def highlight(original: str, fuzzed: str) -> str:
    """The fuzzed question as HTML with inserted or substituted words in ``<mark>``."""
    # imported here: the solvers' package loads scipy, which the terminal summary's numbers do not need
    from medfuzz.solvers.medfuzz.parsing import word_opcodes

    _, words, ops = word_opcodes(original, fuzzed)
    parts = []
    for tag, _, _, j1, j2 in ops:
        text = html.escape(" ".join(words[j1:j2]))
        if not text:
            continue
        parts.append(f"<mark>{text}</mark>" if tag in ("insert", "replace") else text)
    return " ".join(parts)


def shown_path(path: str | Path, out_dir: Path) -> str:
    """A file as the page and the console name it: relative to the report folder when it is at most two folders
    up from it (``merged-shards/x.eval``, ``../inspect/x.eval``), else its name alone; never an absolute path,
    which would publish the user's folders with the page."""
    import os

    try:
        relative = Path(os.path.relpath(Path(path).resolve(), Path(out_dir).resolve()))
    except ValueError:  # another drive (Windows)
        return Path(path).name
    return str(relative) if relative.parts[:3].count("..") < 3 else Path(path).name
