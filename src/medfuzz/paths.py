"""Where medfuzz keeps files between runs (one place, so every cache honours ``MEDFUZZ_CACHE``)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def cache_dir() -> Path:
    """``$MEDFUZZ_CACHE``, else ``~/.cache/medfuzz``; created on first use."""
    root = Path(os.environ.get("MEDFUZZ_CACHE", Path.home() / ".cache" / "medfuzz"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """``write(stream)`` into a temporary file beside ``path``, then rename it to ``path``: a concurrent reader (a
    second run, a parallel test worker) sees the old file or the whole new one, never half of it; a failed write
    leaves no temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
