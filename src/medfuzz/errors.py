"""Errors that users see. Each one names where the problem is, so it can be fixed without guessing."""

from __future__ import annotations

from pathlib import Path


class MedfuzzError(Exception):
    """Base class of every error medfuzz raises on purpose."""


class DataError(MedfuzzError, ValueError):
    """A dataset row that cannot become an item. Names the file, the row (1-based) and the field."""

    def __init__(self, source: str | Path, row: int | None, field: str | None, problem: str) -> None:
        self.source = str(source)
        self.row = row
        self.field = field
        self.problem = problem
        where = self.source
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")


class ModelUnavailableError(MedfuzzError, RuntimeError):
    """The embedded model or its server cannot be found or started."""
