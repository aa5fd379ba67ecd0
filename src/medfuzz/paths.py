"""Where medfuzz keeps files between runs (one place, so every cache honours ``MEDFUZZ_CACHE``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$MEDFUZZ_CACHE``, else ``~/.cache/medfuzz``; created on first use."""
    root = Path(os.environ.get("MEDFUZZ_CACHE", Path.home() / ".cache" / "medfuzz"))
    root.mkdir(parents=True, exist_ok=True)
    return root
