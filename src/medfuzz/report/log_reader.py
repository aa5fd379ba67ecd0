"""The logs ``medfuzz report`` is given (``collect_logs``), each Inspect log read once per report.

Every renderer takes the list of paths (``render(log_paths, out_dir)``) and picks out its own logs, so without a
shared reader one log is parsed by each of them (an ``.eval`` with thousands of samples takes seconds per read).
``render_all`` opens ``read_once()``; inside it ``read_log`` parses a file once and hands every later caller the
same ``EvalLog`` (or raises the same error again for a file that is not an Inspect log). Outside it, ``read_log``
is ``read_eval_log``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

_LOADED: ContextVar[dict[Path, Any] | None] = ContextVar("medfuzz_report_loaded_logs", default=None)

# What the report never reads of a sample: its transcript. At the MedQA split's size a MedFuzz sample is ~3 MB
# of JSON, 85 % of it events (one ModelEvent per call) and attachments (their deduplicated message text); the
# report reads the scores (the records are in the score metadata), the sample metadata, ids and errors. Loading
# the transcripts made `medfuzz report` over a 1,272-item MedFuzz run hold more than 7 GB (docs/performance.md, P6).
TRANSCRIPT_FIELDS = frozenset({"events", "attachments", "messages"})


@contextmanager
def read_once() -> Iterator[None]:
    """Within the block every log is parsed at most once (full, with its samples) and kept in memory."""
    token = _LOADED.set({})
    try:
        yield
    finally:
        _LOADED.reset(token)


def read_log(path: str | Path, header_only: bool = False) -> Any:
    """The Inspect log at ``path`` without the samples' transcripts (``TRANSCRIPT_FIELDS``); inside ``read_once``
    with its samples even for ``header_only`` (one parse serves the header check and the samples). Raises what
    ``read_eval_log`` raises for a file that is not a log."""
    from inspect_ai.log import read_eval_log

    loaded = _LOADED.get()
    if loaded is None:
        return read_eval_log(str(path), header_only=header_only, exclude_fields=set(TRANSCRIPT_FIELDS))
    key = Path(path).resolve()
    if key not in loaded:
        try:
            loaded[key] = read_eval_log(str(path), exclude_fields=set(TRANSCRIPT_FIELDS))
        except Exception as err:  # remembered: the next renderer gets the same answer without a second parse
            loaded[key] = err
    found = loaded[key]
    if isinstance(found, Exception):
        raise found
    return found


def remember(path: str | Path, log: Any) -> None:
    """Inside ``read_once``: ``log`` is what ``read_log(path)`` returns (a log built in memory and written there,
    e.g. shards merged into one run), so it is not parsed again. Outside it, nothing."""
    loaded = _LOADED.get()
    if loaded is not None:
        loaded[Path(path).resolve()] = log


def collect_logs(paths: list[Path]) -> list[Path]:
    """Inspect ``.eval``/``.json`` logs and lm-eval ``results_*.json`` files under the given paths."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such log file or folder")
        found += sorted(path.rglob("*.eval"))
        found += sorted(p for p in path.rglob("*.json") if not p.name.startswith("samples_"))
    return found
