"""A line every few seconds while a step of ``medfuzz run`` that reports nothing itself runs, and the clock format
of every duration the command prints (``eta_text``)."""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def eta_text(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


HEARTBEAT_SECONDS = 10.0  # the longest a phase of medfuzz run goes without a line


class Heartbeat:
    """A line on stderr every ``interval`` seconds (``text()``, from a background thread) while a step that says
    nothing runs: building the tasks (minutes on a first run: TCES embeds its vocabularies), the Inspect half
    without a terminal, the lm-eval half (its own progress is in its log file), the report. A user who sees no
    line for minutes cannot tell a slow step from a hung one."""

    def __init__(self, text: Callable[[], str], interval: float = HEARTBEAT_SECONDS) -> None:
        self.text = text
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="medfuzz-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                line = self.text()
            except Exception as err:  # a status that cannot be read is no reason to stop the run
                line = f"medfuzz run: still working (status unavailable: {type(err).__name__})"
            print(line, file=sys.stderr, flush=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def elapsed_line(what: str, started: float, note: str = "") -> Callable[[], str]:
    """``text`` for a ``Heartbeat`` of a step with no progress of its own: what it does and how long so far."""
    return lambda: f"medfuzz run: {what}: {eta_text(time.monotonic() - started)} so far{note}"


# the last tqdm bar in lm-eval's output: "Running loglikelihood requests:  45%|####   | 450/1000 [00:30<00:37, ...]"
_TQDM = re.compile(r"(?P<desc>[^\r\n|]*?):?\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*"
                   r"\[(?P<elapsed>[\d:]+)<(?P<left>[\d:?]+)")


def lm_eval_status(log_file: Path, started: float) -> str:
    """The lm-eval half's line: the phase lm-eval is in and its requests done, with lm-eval's own estimate of
    the time that phase has left, read from the end of its output (``OUT/lm-eval.out``)."""
    elapsed = eta_text(time.monotonic() - started)
    try:
        with log_file.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - 16_384))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        tail = ""
    bars = list(_TQDM.finditer(tail))
    if not bars:
        return f"medfuzz run: lm-eval half: loading the model and building its tasks · elapsed {elapsed}"
    bar = bars[-1]
    n, total = int(bar["n"]), int(bar["total"])
    phase_name = bar["desc"].strip() or "requests"
    left = "done" if n >= total else f"ETA {bar['left']} (lm-eval's, this phase)"
    return (f"medfuzz run: lm-eval half: {phase_name} {n:,}/{total:,} ({bar['pct']} %), {left} · elapsed "
            f"{elapsed}")
