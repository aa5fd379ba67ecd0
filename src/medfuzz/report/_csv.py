"""Spreadsheet-safe CSV cells (OWASP "CSV injection"): every CSV the reports write passes its cells through
``safe_cell``, because model and attacker text lands in them and a reviewer opens them in a spreadsheet.

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return would be read as a formula
(``=HYPERLINK(...)``); it is prefixed with a single quote, which spreadsheets show as text. Numbers (also as
text, e.g. ``-0.25``) are left as they are so numeric columns stay numeric.
"""

from __future__ import annotations

from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _is_number(text):
        return "'" + text
    return text
