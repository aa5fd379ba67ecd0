"""One failure policy for the Inspect tasks whose solver is a plain ``generate()`` (the clean baselines and
MedGuard), the same as the attack engines follow (``medfuzz.models.failures``, docs/foundation.md):

- Inspect retries transient errors itself (429, 5xx, time-outs; ``default_generate_config`` bounds them);
- ``answer_or_llm_error`` wraps the solver's ``generate``: what still escapes (e.g. a truncated JSON body, which
  Inspect does not retry), an error output, an empty reply and a refusal are tried again (``retries`` times,
  with back-off); after that the sample is an *LLM error* (reason in ``state.metadata["llm_error"]``), never
  an exception that fails the run and never an answer scored as wrong;
- a configuration failure (401/403/404) is re-raised as ``ModelConfigError``: the run stops with that reason;
- the provider's errors are redacted of the API key before Inspect logs them (``redact_provider_errors``);
- the metrics report accuracy over the answered samples plus the LLM-error count and rate.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from inspect_ai.model import get_model
from inspect_ai.scorer import (
    NOANSWER,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    choice,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import LimitExceededError

from medfuzz.adapters.inspect_model import redact_provider_errors
from medfuzz.models.failures import cap_reply, config_failure, describe
from medfuzz.tasks.inspect.rescoring import marks_from_reply, rescorable

LLM_ERROR = "llm_error"  # state.metadata / score.metadata key holding the reason
RETRIES = 2
BACKOFF = 2.0  # seconds before the first retry, doubled each time


class _NoAnswer(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _problem(state: TaskState, refusal_is_answer: bool) -> str | None:
    """Why the reply just generated is no answer at all (``None``: it is an answer, right or wrong)."""
    output = state.output
    if output.error:
        return f"model error: {str(output.error)[:500]}"
    if output.stop_reason == "content_filter":
        if refusal_is_answer:
            return None
        return f"refusal: {cap_reply(output.completion.strip())[:200] or 'content filter'}"
    if not output.completion.strip():
        return "empty reply"
    return None


@solver
def answer_or_llm_error(inner: Solver, retries: int | None = None, backoff: float | None = None,
                        refusal_is_answer: bool = False) -> Solver:
    """Run ``inner`` (e.g. ``multiple_choice()``) with the failure policy of the module docstring
    (``retries``/``backoff`` default to the module's ``RETRIES``/``BACKOFF``). ``refusal_is_answer``: a
    content-filter stop is the model's answer (MedGuard scores refusals as such) rather than a retry."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        redact_provider_errors(get_model())  # the model generate() calls: no API key in any error it logs
        tries = 1 + (RETRIES if retries is None else retries)
        wait = BACKOFF if backoff is None else backoff

        async def guarded(state: TaskState, *args: Any, **kwargs: Any) -> TaskState:
            problem = ""
            for attempt in range(tries):
                if attempt:
                    await asyncio.sleep(wait * 2 ** (attempt - 1))
                kept = len(state.messages)
                try:
                    state = await generate(state, *args, **kwargs)
                except LimitExceededError:
                    raise
                except Exception as err:  # what Inspect's own retries let through
                    secrets = (getattr(get_model().api, "api_key", None),)  # never kept in a reason or raised
                    fatal = config_failure(err, secrets)
                    if fatal is not None:
                        raise fatal from None
                    problem = describe(err, secrets)
                    continue
                problem = _problem(state, refusal_is_answer) or ""
                if not problem:
                    return state
                del state.messages[kept:]  # the failed reply is not part of the conversation
            raise _NoAnswer(problem)

        try:
            return await inner(state, guarded)
        except _NoAnswer as err:
            state.metadata[LLM_ERROR] = err.reason
            state.completed = True
            return state

    return solve


def llm_error_of(score: SampleScore) -> str | None:
    return (score.score.metadata or {}).get(LLM_ERROR)


def answered(scores: list[SampleScore]) -> list[SampleScore]:
    return [s for s in scores if not llm_error_of(s)]


def llm_error_count() -> Callable[[list[SampleScore]], float]:
    """A new metric function (Inspect's registry tags the function object, so each metric needs its own)."""
    def count(scores: list[SampleScore]) -> float:
        return float(sum(bool(llm_error_of(s)) for s in scores))
    return count


def llm_error_rate() -> Callable[[list[SampleScore]], float]:
    def rate(scores: list[SampleScore]) -> float:
        return llm_error_count()(scores) / len(scores) if scores else math.nan
    return rate


def over_answered(compute: Callable[[list[SampleScore]], Any]) -> Callable[[list[SampleScore]], Any]:
    """``compute`` (e.g. Inspect's ``accuracy()``) over the answered samples only; NaN when there are none."""
    def over(scores: list[SampleScore]) -> Any:
        kept = answered(scores)
        return compute(kept) if kept else math.nan
    return over


@metric
def baseline_acc() -> Metric:
    """Accuracy over the answered samples (Inspect's ``accuracy`` on them; LLM errors left out)."""
    return over_answered(accuracy())


@metric
def baseline_stderr() -> Metric:
    """Standard error of ``baseline_acc`` (Inspect's ``stderr`` on the answered samples)."""
    return over_answered(stderr())


@metric
def baseline_llm_errors() -> Metric:
    """Samples that got no answer after the retries (transport errors, empty replies, refusals)."""
    return llm_error_count()


@metric
def baseline_llm_error_rate() -> Metric:
    return llm_error_rate()


@rescorable
@scorer(metrics=[baseline_acc(), baseline_stderr(), baseline_llm_errors(), baseline_llm_error_rate()])
def baseline_choice() -> Scorer:
    """Inspect's strict ``choice()`` on answered samples; an LLM-error sample is scored ``NOANSWER`` with the
    reason in ``metadata["llm_error"]`` (the metrics leave it out)."""
    strict = choice()

    async def score(state: TaskState, target: Target) -> Score:
        reason = state.metadata.get(LLM_ERROR)
        if reason:
            return Score(value=NOANSWER, answer=None, explanation=f"LLM error: {reason}",
                         metadata={LLM_ERROR: reason})
        marks_from_reply(state)  # a state rebuilt from a log by `inspect score`
        result = await strict(state, target)
        if result is None:  # choice() always scores; keep the type checker and a future Inspect honest
            raise RuntimeError("Inspect's choice() scorer returned no score")
        result.metadata = {**(result.metadata or {}), LLM_ERROR: None}
        if result.explanation:  # choice() quotes the whole reply: a key an endpoint echoed in it is redacted
            result.explanation = cap_reply(result.explanation)
        return result

    return score
