"""The fault matrix: each Inspect task family (tiny: a few items) against the fault server, per fault kind.

``run_case(server, task, kind, mode)`` runs one real in-process Inspect eval through Inspect's ``openai-api``
provider (the real HTTP client) and returns what happened: whether the run completed, how many LLM errors
its metrics report, how many sample errors or run errors (crashes) there were, and how many LLM errors the
schedule makes unavoidable (``expected``). Modes:

- ``transient``: every dialog fails on its first call (one retry gets past every fault): 0 LLM errors;
- ``unrecoverable``: every call about one item fails: that item's units are LLM errors (a reply that is an
  answer, however bad — a letter outside the options, a huge reply, a MedGuard refusal — is scored, not an
  error: see ``expected_errors``);
- configuration kinds (``auth``, ``not_found``): the run stops with the reason (status ``error``).

Used by tests/faults/test_fault_suite.py and bench/fault_table.py (which prints the table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.tasks.inspect.planted_runs import environment  # the env saved and restored around a run
from tests.faults.backoff import RETRY_AFTER, short_backoff
from tests.faults.server import CONFIG_FAULTS, CONTENT_FAULTS, TRANSPORT_FAULTS, FaultServer, Schedule

FIXTURES = Path(__file__).parents[1] / "fixtures"
TASKS = ("medqa_clean", "medfuzz_medqa", "tces_medqa", "medguard")
KINDS = TRANSPORT_FAULTS + CONTENT_FAULTS
REPLICATES = 2
# tight deadlines so hangs and persistent faults finish quickly (the defaults are 20 s / 3 / 60 s); the waits
# between retries are the test's too (tests/faults/backoff.py)
EVAL_LIMITS = {"attempt_timeout": 2, "max_retries": 1, "timeout": 20}


def build_task(name: str) -> Any:
    if name == "medqa_clean":
        from medfuzz.tasks.inspect.baselines import medqa_clean

        return medqa_clean(data="demo", limit=3)
    if name == "medfuzz_medqa":
        from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa

        return medfuzz_medqa(data="demo", limit=2, turns=1, replicates=REPLICATES, exemplars=0, controls=0,
                             max_tokens_scale=0.25, seed=3)
    if name == "tces_medqa":
        from medfuzz.tasks.inspect.tces import tces_medqa

        return tces_medqa(data=str(FIXTURES / "medqa_small.jsonl"), budget=2, seed=1,
                          vocabulary=str(FIXTURES / "tces" / "drugs_drugcentral.csv"))
    if name == "medguard":
        from medfuzz.tasks.inspect.medguard import medguard

        return medguard(aspects="defense", limit_per_aspect=2, strategy="basic")
    raise ValueError(name)


def marker(task: Any) -> str:
    """A snippet from the middle of the first sample's question that no other sample has: the poisoned item."""
    inputs = [str(s.input) for s in task.dataset]
    snippet = inputs[0][len(inputs[0]) // 3: len(inputs[0]) // 3 + 60]
    if sum(snippet in text for text in inputs) != 1:
        raise ValueError(f"the snippet {snippet!r} of the first sample is not unique")
    return snippet


def units_per_item(task: str) -> int:
    return REPLICATES if task == "medfuzz_medqa" else 1


def expected_errors(task: str, kind: str, mode: str) -> int:
    """LLM errors the schedule makes unavoidable (module docstring)."""
    if mode == "transient" or kind in (None, "none"):
        return 0
    answered_anyway = {"huge"}
    if task in ("medqa_clean", "medguard"):
        answered_anyway |= {"bad_letter"}  # Inspect's strict scorer: a wrong (unparsed) answer, not an error
    if task == "medguard":
        answered_anyway |= {"refusal"}  # MedGuard scores a refusal (status "refused")
    return 0 if kind in answered_anyway else units_per_item(task)


@dataclass
class Outcome:
    task: str
    kind: str
    mode: str
    status: str
    completed: bool
    llm_errors: int
    expected: int
    crashes: int
    faults: int
    calls: int
    error: str = ""


LLM_ERROR_METRIC = {"medqa_clean": "baseline_llm_errors", "medfuzz_medqa": "medfuzz_llm_errors",
                    "tces_medqa": "tces_llm_errors", "medguard": "medguard_llm_errors"}


def run_case(server: FaultServer, task_name: str, kind: str | None, mode: str, log_dir: Path,
             cache_dir: Path, hook: Callable[[Any], None] | None = None) -> Outcome:
    from inspect_ai import eval as inspect_eval

    task = build_task(task_name)
    if kind in CONFIG_FAULTS:
        schedule = Schedule(kind=kind)
    elif mode == "transient":
        schedule = Schedule(kind=kind, rate=1.0, times=1, seed=7, retry_after=RETRY_AFTER)
    else:
        schedule = Schedule(kind=kind, poison=(marker(task),), retry_after=RETRY_AFTER)
    server.reset(schedule)
    env = {**server.env(), "INSPECT_CACHE_DIR": str(cache_dir / "inspect"), "MEDFUZZ_CACHE": str(cache_dir),
           "MEDFUZZ_CALL_CACHE": "off"}  # every run asks the server: the faults must be met, not replayed
    with environment(env), short_backoff():
        [log] = inspect_eval(task, model=server.inspect_model, log_dir=str(log_dir), display="none",
                             max_samples=4, **EVAL_LIMITS)
    if hook is not None:
        hook(log)
    metrics = {name: m.value for s in (log.results.scores if log.results else []) for name, m in s.metrics.items()}
    crashes = sum(1 for s in log.samples or [] if s.error) + (1 if log.status != "success" else 0)
    errors = metrics.get(LLM_ERROR_METRIC[task_name])
    return Outcome(task=task_name, kind=kind or "none", mode=mode, status=log.status,
                   completed=log.status == "success", llm_errors=int(errors) if errors is not None else -1,
                   expected=expected_errors(task_name, kind or "none", mode), crashes=crashes,
                   faults=sum(server.stats.faults.values()), calls=server.stats.calls,
                   error=(log.error.message if log.error else "")[:300])
