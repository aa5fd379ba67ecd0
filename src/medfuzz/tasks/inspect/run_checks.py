"""Checks on the whole run that a per-sample solver or scorer cannot make, through Inspect's own per-task hook
object (``Task(early_stopping=...)``: Inspect calls ``start_task`` with the samples and epochs the run really
has, after ``--limit``, ``--sample-id`` and ``--epochs``; ``complete_sample`` with every sample's scores, reused
ones of ``inspect eval-retry`` included; ``complete_task`` before the metrics). It never stops a sample early.

- At the start: ``on_start(spec, samples)`` (e.g. the up-front bound on model calls for the run's samples,
  ``call_bound.announce_max_calls``), so what is printed and recorded is for the run as it will happen, not for the
  task's whole dataset.
- At the end: a run in which *no* sample got an answer and some ended as LLM errors (the failure policy records
  those as scores so nothing is lost) ends with status ``error`` and the cause (``AllLLMErrors``), instead of
  ``success`` with all-NaN metrics. Every sample is already in the log by then (Inspect writes each as it
  completes), so the log still reads and reports. A run with *some* LLM errors stays ``success``: the
  ``*_llm_errors`` metrics count them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Literal

from inspect_ai.dataset import Sample
from inspect_ai.log import EvalSpec
from inspect_ai.scorer import SampleScore
from pydantic import JsonValue

from medfuzz.errors import MedfuzzError

ANSWERED: Literal["answered"] = "answered"
NOT_ASKED: Literal["not_asked"] = "not_asked"
# what a sample's scores say: answered (right or wrong), never asked (nothing to ask, e.g. a TCES item without
# an entity), or the reason of its LLM error
Verdict = str
Classify = Callable[[dict[str, SampleScore]], Verdict]
OnStart = Callable[[EvalSpec, int], None]


_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")  # "<Future at 0x7f..>": one cause, a new address each time


def reason(text: object) -> Verdict:
    """An LLM-error reason as a verdict: one line's worth, object addresses dropped so equal causes count
    together in the message."""
    return _ADDRESS.sub("at 0x…", str(text))[:300] or "LLM error"


class AllLLMErrors(MedfuzzError, RuntimeError):
    """No sample of the run got an answer: every asked one ended as an LLM error."""


def failure_message(verdicts: list[Verdict]) -> str | None:
    """The cause of a run in which no sample got an answer and some ended as LLM errors, else ``None``."""
    errors = Counter(v for v in verdicts if v not in (ANSWERED, NOT_ASKED))
    if not errors or ANSWERED in verdicts:
        return None
    failed, total = sum(errors.values()), len(verdicts)
    reason, times = errors.most_common(1)[0]
    common = f"most common: {reason}" + (f" ({times} of {failed})" if len(errors) > 1 else "")
    if failed == total:
        return f"every sample ended as an LLM error ({failed} of {total}; {common})"
    return (f"no sample got an answer: {failed} of {total} ended as LLM errors and the other {total - failed} had "
            f"nothing to ask ({common})")


class RunChecks:
    """Inspect's ``EarlyStopping`` protocol used for the checks of the module docstring (stops nothing)."""

    def __init__(self, classify: Classify, on_start: OnStart | None = None) -> None:
        self.classify = classify
        self.on_start = on_start
        self.verdicts: dict[tuple[int | str, int], Verdict] = {}

    async def start_task(self, task: EvalSpec, samples: list[Sample], epochs: int) -> str:
        self.verdicts = {}  # one object per Task; a Task may be evaluated more than once
        if self.on_start is not None:
            self.on_start(task, len(samples) * epochs)
        return "medfuzz_run_checks"

    async def schedule_sample(self, id: int | str, epoch: int) -> None:
        return None

    async def complete_sample(self, id: int | str, epoch: int, scores: dict[str, SampleScore]) -> None:
        # keyed: a requeued sample's fresh scores replace its earlier ones, as in Inspect's own results
        self.verdicts[(id, epoch)] = self.classify(scores)

    async def complete_task(self) -> dict[str, JsonValue]:
        verdicts = list(self.verdicts.values())
        message = failure_message(verdicts)
        if message is not None:
            raise AllLLMErrors(f"medfuzz: {message}. Every sample is in the log; fix the cause (server, model, "
                               f"time-outs) and run again")
        return {"samples": len(verdicts), "llm_errors": sum(v not in (ANSWERED, NOT_ASKED) for v in verdicts)}


def first_reason(scores: dict[str, SampleScore], key: str) -> Verdict:
    """``ANSWERED`` unless a score's metadata holds an LLM-error reason under ``key`` (the baselines, MedGuard)."""
    for score in scores.values():
        found = (score.score.metadata or {}).get(key)
        if found:
            return reason(found)
    return ANSWERED
