"""Where a log is: Inspect names a log by its ``location``, which is a ``file:`` URI for the logs an eval set
found finished (from its listing) and a plain path for the logs it wrote."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse


def local_path(location: str) -> Path:
    """A log's ``location`` as a local path."""
    if location.startswith("file:"):
        return Path(unquote(urlparse(location).path))
    return Path(location)
