"""How ``medfuzz run`` stops: one interrupt (SIGINT, SIGTERM or SIGHUP) stops the whole command at any phase,
one ``medfuzz run`` writes to an output folder at a time, and a configuration failure ends the eval set at once.

- Signals. Inside the Inspect half, asyncio's runner (which Inspect runs on) turns the first SIGINT into a
  cancellation of the eval, which writes the runs' logs as ``cancelled`` and never retries them; elsewhere
  SIGINT raises ``KeyboardInterrupt``. SIGTERM and SIGHUP are sent to whichever SIGINT handler is current, so
  all three stop the same way. Inspect may swallow the cancellation and return normally, so every stop signal
  is also recorded here (``STOP.signum``), wrapping the runner's handler from Inspect's ``on_run_start`` hook,
  and the command checks that record rather than the logs' statuses. A watchdog ends the process
  ``GRACE`` seconds after the first signal whatever is still running, after killing the child processes
  registered with ``STOP.children``.
- The folder lock is ``flock`` on ``OUT/.medfuzz-run.lock``: the kernel releases it when the process ends,
  however it ends, so a killed run never leaves a stale lock.
- A run that ended with ``ModelConfigError`` (401/403/404, a refused connection: every call would fail the
  same way) would be retried by the eval set up to ``retry_attempts`` times, each retry failing again;
  Inspect retries any run with status ``error`` and offers no per-error choice, so the ``on_sample_end`` hook
  records the failure and cancels the eval set the way an interrupt does.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from medfuzz.errors import MedfuzzError

GRACE = 4.5  # seconds from the first stop signal to a forced exit (the bound is 5 s)
INTERRUPTED = 130  # the exit status of a command stopped by a signal (as shells report SIGINT)
LOCK_NAME = ".medfuzz-run.lock"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class StopState:
    """What stopped (or is stopping) this ``medfuzz run``."""

    active: bool = False  # set by ``install``: the hooks act only inside ``medfuzz run``
    signum: int | None = None  # the first stop signal received
    config_failure: str | None = None  # the configuration failure that ended the eval set
    children: list[Any] = field(default_factory=list)  # subprocess.Popen objects to kill on a forced exit
    after_eval_set: bool = False  # set by ``restore_sigint``: a signal inside an event loop is only recorded
    _watchdog: threading.Timer | None = None

    def note(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            self._watchdog = threading.Timer(GRACE, self._force_exit)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _force_exit(self) -> None:
        import sys

        kill_children(self.children)
        with contextlib.suppress(Exception):
            print(f"\nmedfuzz run: stopped by {self.name} (forced after {GRACE:g} s). Run the same command again "
                  "to finish: finished runs, samples and model calls are not paid again.", file=sys.stderr,
                  flush=True)
        os._exit(INTERRUPTED)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def reset(self) -> None:
        """A fresh state for the next command of this process (in place: other modules hold this object)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        fresh = StopState()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))


STOP = StopState()


def kill_children(children: list[Any]) -> None:
    """SIGKILL the process group of every registered child still running (each was started in its own
    session, so its group is its own and holds its children)."""
    for child in list(children):
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)


class _NotedSigint:
    """The current SIGINT handler (asyncio's runner's), recording the signal before calling it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        STOP.note(signum)
        if callable(self.inner):
            self.inner(signum, frame)
        else:
            raise KeyboardInterrupt


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM / SIGHUP (and SIGINT outside an event loop): recorded, then handled as the current SIGINT
    handler handles SIGINT, so that every signal stops the same way.

    After the eval set, a signal that arrives while an event loop runs (Inspect reads logs through
    ``asyncio.run``) is only recorded: a ``KeyboardInterrupt`` raised inside that loop leaves its tasks half
    closed, and asyncio's shutdown then prints their tracebacks. The command checks ``STOP`` after each step
    that follows the eval set, and the watchdog ends it within ``GRACE`` seconds in any case."""
    STOP.note(signum)
    current = signal.getsignal(signal.SIGINT)
    if signum != signal.SIGINT and callable(current) and current is not _on_interrupt:
        current(signal.SIGINT, frame)
        return
    if STOP.after_eval_set and _event_loop_running():
        return
    raise KeyboardInterrupt


def _event_loop_running() -> bool:
    import asyncio

    return asyncio._get_running_loop() is not None  # the public get_running_loop raises when there is none


def install() -> None:
    """Stop handlers for ``medfuzz run``. SIGINT gets Python's default handler back even when the process
    started with it ignored (a non-interactive shell's ``cmd &``): the command is then stoppable like any
    other; asyncio's runner replaces that handler by its graceful one only while it is the default."""
    STOP.active = True
    for stop in STOP_SIGNALS:
        _previous.setdefault(stop, signal.getsignal(stop))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _on_interrupt)


_previous: dict[int, Any] = {}  # the handlers before ``install``, put back by ``uninstall``


def uninstall() -> None:
    """After a command that was not stopped: the process's own handlers back and ``STOP`` fresh, so that a later
    command or Inspect eval in the same process (a notebook, the test suite) starts from nothing: no recorded
    signal, no hooks acting, asyncio's graceful SIGINT handling for its next event loop."""
    if threading.current_thread() is threading.main_thread():
        for stop, handler in _previous.items():
            signal.signal(stop, handler if handler is not None else signal.SIG_DFL)
    _previous.clear()
    STOP.reset()


def run_stoppable(command: Callable[[], int], name: str) -> int:
    """``command()`` (a whole CLI command, e.g. ``medfuzz run``) under the stop handlers, installed first, so that
    an interrupt while the rest loads ends as cleanly as one mid-run; an interrupt before ``command`` caught one
    itself (imports, argument checks) ended it before any run started. When stopping, what finished is written
    and said: exit now, so that no interpreter shutdown (thread joins, atexit writers) runs after the stop."""
    install()
    try:
        code = command()
    except KeyboardInterrupt:  # before the plan exists: nothing ran yet
        interrupted_by(KeyboardInterrupt())
        print(f"\n{name}: stopped by {STOP.name} before any run started", flush=True)
        code = INTERRUPTED
    except BaseException:
        if STOP.signum is None:
            uninstall()
        raise
    if STOP.signum is not None:
        exit_now(code)
    uninstall()
    return code


def exit_now(code: int) -> None:
    """Flush the console and end the process with ``code`` at once (``os._exit``: no atexit handler, no join of
    a library's worker thread, no late write after the stop was reported)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    kill_children(STOP.children)
    os._exit(code)


def interrupted_by(err: BaseException | None = None) -> bool:
    """Whether the command is stopping for a signal (a ``KeyboardInterrupt`` counts as SIGINT)."""
    if isinstance(err, KeyboardInterrupt):
        STOP.note(signal.SIGINT)
    return STOP.signum is not None


def _wrap_sigint() -> None:
    current = signal.getsignal(signal.SIGINT)
    if (threading.current_thread() is threading.main_thread() and not isinstance(current, _NotedSigint)
            and current is not _on_interrupt):  # ours already records the signal
        signal.signal(signal.SIGINT, _NotedSigint(current))


def restore_sigint() -> None:
    """After the eval set: a SIGINT handler that records the signal, then raises ``KeyboardInterrupt`` as
    Python's default does. Recording matters after the eval set: a ``KeyboardInterrupt`` raised inside a library's
    event loop (the report reads logs through one) can come out as another exception, and the command must still
    see that it was stopped. Installed whatever the current handler is: an eval set whose runs were all found
    finished starts no runner, so no hook wrapped the handler."""
    if STOP.active and threading.current_thread() is threading.main_thread():
        STOP.after_eval_set = True
        signal.signal(signal.SIGINT, _on_interrupt)


def config_failure_of(record: Any) -> str | None:
    """The ``ModelConfigError`` message a sample or run log ended with, as text (Inspect stores
    ``repr(exception)``), or ``None``."""
    error = getattr(record, "error", None)
    if error is None:
        return None
    match = re.search(r"ModelConfigError: (.+)", error.traceback or "")
    if match:
        return match.group(1).strip()
    if "ModelConfigError" in (error.message or ""):
        return error_text(error.message)
    return None


def error_text(message: str) -> str:
    """``ExceptionName("text")`` (how Inspect records an error) as ``text``."""
    match = re.fullmatch(r"\s*\w+\((['\"])(.*)\1\)\s*", message or "", flags=re.DOTALL)
    if match is None:
        return (message or "").strip()
    with contextlib.suppress(ValueError, SyntaxError):
        import ast

        return str(ast.literal_eval(match.group(1) + match.group(2) + match.group(1)))
    return match.group(2)


def register_hooks() -> None:
    """Register the Inspect hooks this module needs (once; imported late so that the signal handlers are in
    place before Inspect's import, which takes seconds)."""
    global _registered
    if _registered:
        return
    from inspect_ai.hooks import Hooks, RunStart, SampleEnd, TaskStart, hooks

    @hooks(name="medfuzz_run_stop", description="medfuzz run: one interrupt stops the suite; a configuration "
                                                "failure ends the eval set without retries")
    class RunStopHooks(Hooks):
        def enabled(self) -> bool:
            return STOP.active

        async def on_run_start(self, data: RunStart) -> None:
            _wrap_sigint()

        async def on_task_start(self, data: TaskStart) -> None:
            _wrap_sigint()

        async def on_sample_end(self, data: SampleEnd) -> None:
            # a sample that raised ModelConfigError fails its run (Inspect's task-end hook fires only for a run
            # that ends normally, so the sample's end is where the failure is seen)
            failure = config_failure_of(data.sample)
            if failure is None or STOP.config_failure is not None:
                return
            STOP.config_failure = failure
            current = signal.getsignal(signal.SIGINT)
            inner = current.inner if isinstance(current, _NotedSigint) else current
            if callable(inner) and inner not in (signal.default_int_handler, _on_interrupt):
                inner(signal.SIGINT, None)  # the runner cancels the eval: no retry of any run

    _registered = True


_registered = False


class FolderBusy(MedfuzzError):
    """Another ``medfuzz run`` holds the output folder."""


WRITE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})


def unwritable(out: Path, err: OSError) -> str:
    """One line for an ``--out`` that cannot be written (read-only, no permission, full disk or quota)."""
    where = f" ({err.filename})" if err.filename and str(err.filename) != str(out) else ""
    return (f"--out {out}: cannot write there: {err.strerror or err}{where}. Choose a folder you can write to "
            "with free space; finished work already in it is kept and reused by the same command")


def _leave_nothing(out: Path, lock: Path, created: bool) -> None:
    """Remove the lock (while it is still held, so no other run can take the file in between) when it is all the
    folder holds, and the folder when this run created it."""
    if any(p.name != LOCK_NAME for p in out.iterdir()):
        return
    lock.unlink(missing_ok=True)
    if created:
        out.rmdir()


@contextlib.contextmanager
def folder_lock(out: Path) -> Iterator[Path]:
    """Hold ``OUT/.medfuzz-run.lock`` for the block; refuse at once when another process holds it. A block that
    leaves nothing in the folder but the lock (a failed preflight, a bad option found late) leaves nothing behind:
    the lock file goes, and the folder too when this call created it."""
    if out.exists() and not out.is_dir():
        raise MedfuzzError(f"--out {out}: this is a file, not a folder; name a folder (it is created if missing)")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / LOCK_NAME
        handle = path.open("a+")
    except OSError as err:
        raise MedfuzzError(unwritable(out, err)) from None
    held = False
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise FolderBusy(f"--out {out}: another medfuzz run (pid {holder}) is writing to this folder; wait for "
                             "it to end, or choose another --out") from None
        held = True
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield path
    finally:
        if held:  # never another holder's lock
            with contextlib.suppress(OSError):
                _leave_nothing(out, path, created)
        handle.close()  # closing releases the lock (the kernel releases it too if the process is killed)
