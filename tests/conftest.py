from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from medfuzz.planted.server import PlantedServer, launch
from tests.faults.backoff import short_backoff

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# Speed classes, by where a test lives. `pytest` alone is the fast loop (pyproject's addopts: -m "not slow"); the
# full run (README, .ci/run) adds -m "slow or not slow". A test is slow when its folder, file or test (a node-id
# prefix) is listed here or it is marked e2e (a real run through the harnesses), wherever it lives: the files stay
# where their subject is.
SLOW_PLACES = {
    "tests/e2e/": "real CLIs against the embedded model (SmolLM2 behind llama.cpp)",
    "tests/faults/test_fault_suite.py": "the fault matrix: a real Inspect eval per task family x fault kind",
    "tests/faults/test_run_checks.py": "real `inspect eval` subprocesses against the fault server",
    "tests/faults/test_resume.py": "real runs killed with SIGKILL and resumed (subprocesses)",
    "tests/faults/test_canary.py": "real runs of every key route, then every file on disk searched",
    "tests/validation/test_planted_e2e.py": "real `medfuzz run` / `medfuzz validate` runs on the planted models",
    # lm-eval's whole built-in task index (thousands of YAML files) read from scratch: 7-18 s each
    "tests/core/test_cli.py::test_lm_eval_wrapper_adds_our_folder_before_user_paths": "lm-eval's full task index",
    "tests/core/test_names.py::test_lm_eval_task_group_and_tag_names_are_disjoint_from_builtins":
        "lm-eval's full task index",
}


def slow_reason(item: pytest.Item) -> str | None:
    """Why ``item`` is in the slow class (None: it is in the fast loop)."""
    node = item.nodeid  # relative to the repository root (pyproject.toml's folder), e.g. tests/e2e/test_x.py::test
    for place, reason in SLOW_PLACES.items():
        if node.startswith(place if place.endswith("/") else (place + "::", place + "[")) or node == place:
            return reason
    if item.get_closest_marker("e2e"):
        return "a real run through the harnesses (marked e2e)"
    return None


def pytest_itemcollected(item: pytest.Item) -> None:
    if not item.get_closest_marker("slow") and slow_reason(item):
        item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _test_backoff() -> Iterator[None]:
    """Retry waits set for the test, not real seconds (tests/faults/backoff.py): the same retries, 0.05 s apart."""
    with short_backoff():
        yield


@pytest.fixture(autouse=True)
def _own_signal_handlers() -> Iterator[None]:
    """A test that runs a medfuzz command in-process (``medfuzz run``, ``demo``, ``serve``) installs its SIGTERM /
    SIGHUP handlers (``medfuzz.cli.serve.stop_servers_on_signals``) for the rest of the process: a later test's
    ``multiprocessing.Pool`` (lm-eval's bootstrap standard errors) then inherits them in its workers, which no longer
    die on ``Pool.terminate()``'s SIGTERM, and the test hangs (seen: test_fuzzed_file_through_lm_eval). Each test
    leaves them as it found them."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:  # None: set outside Python, nothing to restore
                signal.signal(signum, handler)


@pytest.fixture(autouse=True)
def _no_call_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model-call cache is off in tests unless a test turns it on with its own folders: a reply cached by
    one test (or an earlier session) must not answer another's scripted call."""
    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "off")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def shared_data() -> Path:
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip(f"../shared/data is absent ({data}); this test reads the shared benchmark files")
    return data


@pytest.fixture(scope="module")
def planted() -> Iterator[PlantedServer]:
    """The planted (known-truth) models behind an OpenAI-compatible server on 127.0.0.1, one per test module."""
    server = launch()
    try:
        yield server
    finally:
        server.stop()
