"""``run_checks.failure_message``: when a run with no answered sample is an error, and what it says."""

from __future__ import annotations

import asyncio

import pytest

from medfuzz.tasks.inspect.run_checks import ANSWERED, NOT_ASKED, AllLLMErrors, RunChecks, failure_message, reason


def test_only_llm_errors_fail_the_run_with_the_most_common_reason() -> None:
    verdicts = ["attempt timed out after 20 s"] * 2 + ["HTTP 500"]
    assert failure_message(verdicts) == ("every sample ended as an LLM error (3 of 3; most common: attempt timed "
                                         "out after 20 s (2 of 3))")
    assert failure_message(["HTTP 500"] * 4) == "every sample ended as an LLM error (4 of 4; most common: HTTP 500)"


def test_some_answers_or_nothing_asked_keep_the_run_a_success() -> None:
    assert failure_message(["HTTP 500", ANSWERED]) is None
    assert failure_message([NOT_ASKED, NOT_ASKED]) is None
    assert failure_message([]) is None
    assert failure_message(["HTTP 500", NOT_ASKED]).startswith("no sample got an answer: 1 of 2 ended as LLM errors")


def test_addresses_do_not_split_one_cause() -> None:
    first, second = "RetryError[<Future at 0x7f1 state=done>]", "RetryError[<Future at 0xabc state=done>]"
    assert reason(first) == reason(second) == "RetryError[<Future at 0x… state=done>]"


def test_complete_task_raises_and_a_requeued_sample_replaces_its_verdict() -> None:
    checks = RunChecks(lambda scores: scores["v"])

    async def run(verdicts: list[tuple[str, str]]) -> dict:
        await checks.start_task(None, [], 1)  # type: ignore[arg-type]
        for sample, verdict in verdicts:
            await checks.complete_sample(sample, 1, {"v": verdict})  # type: ignore[dict-item]
        return await checks.complete_task()

    assert asyncio.run(run([("a", "HTTP 500"), ("a", ANSWERED)])) == {"samples": 1, "llm_errors": 0}
    with pytest.raises(AllLLMErrors, match=r"every sample ended as an LLM error \(2 of 2; most common: HTTP 500"):
        asyncio.run(run([("a", "HTTP 500"), ("b", "HTTP 500")]))
