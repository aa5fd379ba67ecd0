"""Helpers of the golden-output tests: results are stored with paths made portable, so a golden file written
in one checkout compares equal in another (CI clones elsewhere)."""

from __future__ import annotations

import re
from typing import Any

# an absolute path into the repository's own folders: keep it from the folder on
_REPO_PATH = re.compile(r"^/.*?/((?:src/medfuzz|tests/fixtures)/.*)$")


def portable(value: Any) -> Any:
    """``value`` with every absolute path into src/medfuzz or tests/fixtures cut to that relative path."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, str):
        match = _REPO_PATH.match(value)
        return match.group(1) if match else value
    return value
