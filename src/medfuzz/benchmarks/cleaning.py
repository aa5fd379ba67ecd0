"""Prompt-time cleaning of known upstream artifacts. The stored data is never altered."""

from __future__ import annotations


def clean_text(text: str) -> str:
    """Strip surrounding whitespace and a stray trailing double quote.

    About 60 MedQA options end in a newline plus a lone ``"`` and about 70 questions end in a lone ``"``
    (HELM strips them with ``rstrip('"').rstrip()``). We only drop a trailing quote when the text holds an
    odd number of quotes, so a legitimately quoted ending such as ``called "X"`` survives.
    """
    cleaned = text.strip()
    if cleaned.endswith('"') and cleaned.count('"') % 2 == 1:
        cleaned = cleaned[:-1].rstrip()
    return cleaned
