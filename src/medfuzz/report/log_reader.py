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

from medfuzz.records.keys import TRANSCRIPT_FIELDS

_LOADED: ContextVar[dict[Path, Any] | None] = ContextVar("medfuzz_report_loaded_logs", default=None)



@contextmanager
def read_once() -> Iterator[None]:
    """Within the block every log is parsed at most once (full, with its samples) and kept in memory."""
    token = _LOADED.set({})
    try:
        yield
    finally:
        _LOADED.reset(token)


# Inspect decompresses a sample's whole member before it streams the fields it keeps, so one member's size is what
# reading it costs (the transcript fields are skipped, not unread). A paper-level MedFuzz sample is ~3 MB; a member
# far above that holds a runaway model output (a 44 KB `.eval` of three 200 MB members took `medfuzz report` to
# 490 MB and 148 s). Larger members: the log is left out, named, unless the cap is raised.
MEMBER_CAP_VARIABLE = "MEDFUZZ_LOG_MEMBER_MB"
DEFAULT_MEMBER_CAP_MB = 100


class OversizedLog(ValueError):
    """An ``.eval`` member larger, decompressed, than the cap: reading it would hold it whole in memory."""


def check_member_sizes(path: str | Path) -> None:
    """Raise ``OversizedLog`` naming the largest member of an ``.eval`` archive above the cap (its zip directory
    says each member's decompressed size: nothing is decompressed to find out)."""
    import os
    import zipfile

    if Path(path).suffix != ".eval" or not zipfile.is_zipfile(path):
        return
    cap_mb = float(os.environ.get(MEMBER_CAP_VARIABLE) or DEFAULT_MEMBER_CAP_MB)
    with zipfile.ZipFile(path) as archive:
        largest = max(archive.infolist(), key=lambda info: info.file_size, default=None)
    if largest is not None and largest.file_size > cap_mb * 1_000_000:
        raise OversizedLog(f"{largest.filename} is {largest.file_size / 1e6:,.0f} MB decompressed, above the "
                           f"{cap_mb:,.0f} MB a member may hold here (a runaway model output?); set "
                           f"{MEMBER_CAP_VARIABLE} to read it anyway")


def read_log(path: str | Path, header_only: bool = False) -> Any:
    """The Inspect log at ``path`` without the samples' transcripts (``TRANSCRIPT_FIELDS``); inside ``read_once``
    with its samples even for ``header_only`` (one parse serves the header check and the samples). Raises what
    ``read_eval_log`` raises for a file that is not a log."""
    from inspect_ai.log import read_eval_log

    loaded = _LOADED.get()
    if loaded is None:
        if not header_only:
            check_member_sizes(path)
        return read_eval_log(str(path), header_only=header_only, exclude_fields=set(TRANSCRIPT_FIELDS))
    key = Path(path).resolve()
    if key not in loaded:
        try:
            check_member_sizes(path)
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
