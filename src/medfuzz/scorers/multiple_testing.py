"""Multiple-comparison adjustment of per-attack p-values (Holm and Benjamini-Hochberg, via statsmodels).

Entries that are ``None`` (attacks that were not tested, or whose test failed) are kept in place and left
out of the family, so the adjusted list lines up with the input.
"""

from __future__ import annotations

from collections.abc import Sequence

METHODS = {"holm": "holm", "bh": "fdr_bh"}


def adjust(p_values: Sequence[float | None], method: str) -> list[float | None]:
    """Adjusted p-values (``method``: ``holm`` or ``bh``), ``None`` where the input is ``None``."""
    if method not in METHODS:
        raise ValueError(f"unknown adjustment {method!r}; choose from {sorted(METHODS)}")
    tested = [(i, p) for i, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    if not tested:
        return adjusted
    from statsmodels.stats.multitest import multipletests

    _, corrected, _, _ = multipletests([p for _, p in tested], method=METHODS[method])
    for (i, _), value in zip(tested, corrected, strict=True):
        adjusted[i] = float(value)
    return adjusted


def adjust_all(p_values: Sequence[float | None]) -> dict[str, list[float | None]]:
    return {name: adjust(p_values, name) for name in METHODS}
