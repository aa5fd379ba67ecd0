"""Kill a run mid-way with SIGKILL, resume it, and count at the fault server how many calls that had completed
before the kill were paid for again (tests/faults/test_resume.py asserts 0; bench/fault_table.py reports the
numbers with the call cache on and off)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.faults.server import FaultServer, Schedule


@dataclass
class Resumed:
    completed_before_kill: int  # 200 replies the killed run had received
    calls_after: int  # calls the resumed run made
    repaid: int  # of those, calls that had completed before the kill
    reference: int | None = None  # calls of an uninterrupted run, when measured
    resume_output: str = ""


def kill_and_resume(server: FaultServer, first: Sequence[str], resume: Callable[[], Sequence[str]] | None,
                    env: dict[str, str], hold_after: int, settle: float = 1.5, timeout: float = 600) -> Resumed:
    """Run ``first`` until the server has completed ``hold_after`` calls (later calls are held open, so every
    completed reply has reached the client), wait ``settle`` seconds, SIGKILL it, then run ``resume`` (default:
    ``first`` again) to the end."""
    server.reset(Schedule(), hold_after=hold_after)
    process = subprocess.Popen(list(first), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        server.wait_for(hold_after, timeout=timeout)
        time.sleep(settle)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the group of the process we started (its children included)
        process.wait()
    before = Counter(server.stats.completed_keys)
    server.reset(Schedule())
    done = subprocess.run(list(resume() if resume else first), env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"the resumed run exited {done.returncode}:\n{output[-3000:]}")
    after = server.stats.requested_keys
    repaid = sum(min(count, after[key]) for key, count in before.items())
    return Resumed(sum(before.values()), server.stats.calls, repaid, resume_output=output)
