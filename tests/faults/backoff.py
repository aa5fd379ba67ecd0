"""Back-off set for the test, not real seconds.

A retried call waits before its next attempt, at three levels: the ``openai`` SDK's own retries (Inspect's
OpenAI-compatible provider and medfuzz's lm-eval client both keep them: 0.5 s doubled per retry, up to 8 s, unless
the server sends ``Retry-After``), then Inspect's retry loop (tenacity: 3-6 s before the first retry,
``wait_exponential_jitter(initial=3, jitter=3)`` in ``inspect_ai.model._retry``, unless the provider's
``ModelAPI.retry_wait()`` names another wait), then medfuzz's guard around a plain ``generate()``
(``medfuzz.tasks.inspect.failure_policy.BACKOFF``: 2 s, doubled per try). A fault test proves *what* happens after the
retries (the outcome, the LLM-error count, the reason a run stops), never how long the waits were, so the tests
keep the same retries and attempts and wait about 50 times less, in the same exponential shapes. The fault
server's 429 says ``Retry-After: 0.05`` (``RETRY_AFTER``; the SDK honours a fraction of a second) instead of 1 s.

- ``short_backoff()``: the waits shortened in this process for the ``with`` block (the root conftest applies it to
  every test; ``tests/faults/suite.py`` to every fault case, bench/fault_table.py included);
- ``subprocess_env(env)``: the environment for a subprocess (``inspect eval``, ``medfuzz run``, the lm-eval attack
  path) whose Python then loads ``tests/faults/short_backoff/sitecustomize.py`` at start-up, which applies the
  same waits for the whole process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenacity import wait_exponential_jitter

ROOT = Path(__file__).resolve().parents[2]
SITECUSTOMIZE_DIR = Path(__file__).resolve().parent / "short_backoff"
INSPECT_WAIT = {"multiplier": 0.05, "max": 0.5, "jitter": 0.05}  # Inspect's default: 3, 30 min, 3 (seconds)
GUARD_BACKOFF = 0.05  # medfuzz's guard: 2.0 s
RETRY_AFTER = 0.05  # seconds, the fault server's Retry-After on a 429 in the tests (its default: 1)
SDK_DELAYS = {"INITIAL_RETRY_DELAY": 0.01, "MAX_RETRY_DELAY": 0.1}  # the openai SDK's: 0.5 s, 8 s


def _inspect_wait() -> wait_exponential_jitter:
    from tenacity import wait_exponential_jitter

    return wait_exponential_jitter(**INSPECT_WAIT)


def _apply() -> tuple[object, float, dict[str, float]]:
    """Shorten the three waits; returns what they were (for ``short_backoff`` to restore)."""
    import openai._base_client as sdk
    from inspect_ai.model._model import ModelAPI

    from medfuzz.tasks.inspect import failure_policy

    saved = (ModelAPI.__dict__["retry_wait"], failure_policy.BACKOFF, {name: getattr(sdk, name) for name in SDK_DELAYS})
    # module globals that the SDK's _calculate_retry_timeout reads at every retry
    for name, seconds in SDK_DELAYS.items():
        setattr(sdk, name, seconds)
    # ModelAPI.retry_wait() is the hook Inspect's providers override to choose their wait (vllm, grok, sglang do);
    # the OpenAI-compatible provider the fault server is reached through keeps the base class's None (= default)
    ModelAPI.retry_wait = lambda self: _inspect_wait()  # type: ignore[method-assign]
    failure_policy.BACKOFF = GUARD_BACKOFF
    return saved


def install() -> None:
    """For the whole process (the subprocesses' sitecustomize)."""
    _apply()


@contextlib.contextmanager
def short_backoff() -> Iterator[None]:
    import openai._base_client as sdk
    from inspect_ai.model._model import ModelAPI

    from medfuzz.tasks.inspect import failure_policy

    retry_wait, backoff, delays = _apply()
    try:
        yield
    finally:
        ModelAPI.retry_wait = retry_wait  # type: ignore[method-assign]
        failure_policy.BACKOFF = backoff
        for name, seconds in delays.items():
            setattr(sdk, name, seconds)


def subprocess_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the sitecustomize folder and the repository root (for ``tests.faults.backoff``) first on
    PYTHONPATH. medfuzz itself still comes from the installed package: no ``src/`` entry is added (an extra
    ``<root>/src`` makes Inspect see the src/ egg-info too and find no medfuzz tasks)."""
    paths = [str(SITECUSTOMIZE_DIR), str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
