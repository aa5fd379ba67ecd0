"""``medfuzz.cli.suite.stop`` leaves nothing behind: a command run in-process (a notebook, the test suite) ends
with the process's own signal handlers and a fresh ``STOP``, so a later Inspect eval in the same process is not
cancelled by a configuration failure read as an interrupt, and asyncio gets its graceful SIGINT handling back."""

from __future__ import annotations

import signal

import pytest

from medfuzz.cli.suite import stop as run_stop


def test_a_command_that_ran_its_eval_set_leaves_the_handlers_and_the_state_as_it_found_them() -> None:
    before = {stop: signal.getsignal(stop) for stop in run_stop.STOP_SIGNALS}
    seen = {}

    def command() -> int:
        run_stop.restore_sigint()  # what the eval set's end does inside medfuzz run
        seen["sigint"] = signal.getsignal(signal.SIGINT)
        seen["active"] = run_stop.STOP.active
        return 0

    assert run_stop.run_stoppable(command, "test") == 0
    assert seen == {"sigint": run_stop._on_interrupt, "active": True}  # inside: recording handler, hooks on
    assert {stop: signal.getsignal(stop) for stop in run_stop.STOP_SIGNALS} == before
    state = run_stop.STOP
    assert (state.active, state.signum, state.after_eval_set, state.config_failure) == (False, None, False, None)


def test_a_command_that_raised_also_leaves_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)

    def command() -> int:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        run_stop.run_stoppable(command, "test")
    assert signal.getsignal(signal.SIGTERM) == before and not run_stop.STOP.active


def test_outside_a_command_the_eval_sets_end_changes_no_handler() -> None:
    """``run_suite_plan`` called from Python (no ``run_stoppable``): Python's handling stays."""
    before = signal.getsignal(signal.SIGINT)
    run_stop.restore_sigint()
    assert signal.getsignal(signal.SIGINT) == before and not run_stop.STOP.after_eval_set


def test_the_recording_handler_is_never_wrapped_or_called_as_the_runners() -> None:
    """After the eval set a second Inspect run must not wrap ``_on_interrupt`` as if it were asyncio's runner's
    handler, and a configuration failure must not call it (that recorded a SIGINT and armed the forced exit)."""
    run_stop.install()
    try:
        run_stop.restore_sigint()
        run_stop._wrap_sigint()
        assert signal.getsignal(signal.SIGINT) is run_stop._on_interrupt
    finally:
        run_stop.uninstall()
    assert run_stop.STOP.signum is None
