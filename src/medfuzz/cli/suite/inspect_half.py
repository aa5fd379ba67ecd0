"""The Inspect half of ``medfuzz run``: the built tasks as one ``eval_set`` in ``OUT/inspect`` (finished runs
reused), the logs it has finished, the settings written beside them."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.cli.suite.build import Bound
from medfuzz.cli.suite.levels import LEVELS
from medfuzz.cli.suite.plan import SuitePlan, SuiteRun, run_key
from medfuzz.records.keys import SUITE_KEY
from medfuzz.records.methods import METHODS as REGISTRY

log = logging.getLogger(__name__)


@dataclass
class SuiteOutcome:
    success: bool
    logs: dict[str, Any]  # label -> EvalLog (header)
    reused: int  # runs eval_set found finished in the folder
    calls: int  # model calls this invocation made (cache hits not counted)
    config_failure: str | None = None  # a configuration failure (bad URL / key / model) ended the eval set


def finished_logs(log_dir: Path) -> set[str]:
    """Locations of the successful logs already in the folder (to tell reused runs from new ones)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    done = set()
    if log_dir.is_dir():
        for info in list_eval_logs(str(log_dir)):
            header = read_eval_log(info, header_only=True)
            if header.status == "success":
                done.add(header.location)
    return done


def finished_labels(log_dir: Path) -> list[str]:
    """The suite labels of the successful runs in the folder (what an interrupted command had finished)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    labels = []
    if log_dir.is_dir():
        for info in list_eval_logs(str(log_dir)):
            header = read_eval_log(info, header_only=True)
            label = (header.eval.metadata or {}).get(SUITE_KEY)
            if header.status == "success" and label:
                labels.append(label)
    return sorted(set(labels))


def samples_done_before(log_dir: Path, built: Sequence[tuple[SuiteRun, Any]], models: Sequence[str]) -> dict[str, int]:
    """Per run (``run_key``), the samples an earlier invocation finished that this one will reuse: every sample
    of a finished log (eval_set skips that run), the samples without error of an unfinished one (eval_set's
    retry reuses them). Inspect's task-start event lists a retried run's every sample and no event fires for a
    reused one, so without this a resumed suite's progress would count them as still to run."""
    from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample_summaries

    if not log_dir.is_dir():
        return {}
    args = {run.label: json.dumps(dict(run.args), sort_keys=True, default=str) for run, _ in built}
    newest: dict[str, tuple[str, int]] = {}
    for info in list_eval_logs(str(log_dir)):
        try:
            header = read_eval_log(info, header_only=True)
            label = (header.eval.metadata or {}).get(SUITE_KEY)
            passed = json.dumps(dict(header.eval.task_args_passed or {}), sort_keys=True, default=str)
            if label not in args or passed != args[label] or header.eval.model not in models:
                continue  # another run's log (other options): eval_set will not reuse it either
            if header.status == "success":
                done = header.results.total_samples if header.results else 0
            else:
                done = sum(1 for s in read_eval_log_sample_summaries(info) if s.error is None and s.completed)
        except (OSError, ValueError) as err:  # a log a killed run left half-written, or listed but gone: the
            log.debug("progress: %s not read (%s)", info.name, err)  # progress counts it as not done
            continue
        key = run_key(label, header.eval.model, several=len(models) > 1)
        if key not in newest or header.eval.created > newest[key][0]:
            newest[key] = (header.eval.created, done)
    return {key: done for key, (_, done) in newest.items()}


def eval_set_args(plan: SuitePlan) -> dict[str, Any]:
    settings = plan.settings()
    args: dict[str, Any] = {"display": plan.display, **LEVELS[plan.level].generate}
    # off unless asked: the buffer costs 11-42 % of the client's CPU per call (19 %: docs/performance.md P9) and
    # medfuzz run's progress line replaces the live view
    args["log_realtime"] = plan.log_realtime
    for name in ("max_connections", "attempt_timeout", "max_samples", "max_tasks", "retry_attempts"):
        if settings[name] is not None:
            args[name] = settings[name]
    import os

    if "INSPECT_EVAL_CTL_SERVER" not in os.environ:
        # Inspect's control server (uvicorn) takes SIGINT and SIGTERM while it serves and raises them again only
        # once it has shut down, so a stop signal would reach medfuzz run's handlers late (run_stop); a user who
        # wants `inspect ctl` turns it on with INSPECT_EVAL_CTL_SERVER=true
        args["ctl_server"] = False
    return args


def run_order(built: Sequence[tuple[SuiteRun, Any]], max_tasks: int | None) -> list[tuple[SuiteRun, Any]]:
    """The order the eval set starts the runs in. With one run at a time (the embedded model) MedFuzz goes
    first: it makes most of the calls, at a rate per item its bound overstates about tenfold, so until one of its
    samples has finished the ETA can only use that bound (issue 26: 8-12x too long at 25 % of the calls with
    MedFuzz last); the other runs' bounds are close to their use. Several runs at a time: the plan's order (the
    eval set starts them together). The order changes no result: each run is seeded by its own items."""
    if max_tasks != 1:
        return list(built)
    # stable: the rest keep their order
    return sorted(built, key=lambda pair: not REGISTRY[pair[0].method].starts_first)


def run_suite(plan: SuitePlan, built: Sequence[tuple[SuiteRun, Any]], models: Sequence[str],
              progress: Any | None = None) -> SuiteOutcome:
    """Run (or resume) the suite's Inspect tasks as one eval set in ``OUT/inspect``; ``models`` are the Inspect
    model strings (the embedded server's, once started)."""
    from inspect_ai import eval_set

    from medfuzz.cli.suite.stop import STOP, register_hooks, restore_sigint

    register_hooks()
    log_dir = plan.out / "inspect"
    before = finished_logs(log_dir)
    # the imports and the built tasks (long-lived: vocabularies, datasets) out of the collector's full passes
    # for the eval set: about 4 % less CPU per MedFuzz call (bench/medfuzz_inspect_cpu.py `+freeze`, P7b)
    gc.collect()
    gc.freeze()
    try:
        success, logs = eval_set([task for _, task in run_order(built, plan.settings()["max_tasks"])],
                                 log_dir=str(log_dir),
                                 model=list(models) if len(models) > 1 else models[0],
                                 model_roles=plan.model_roles() or None, **eval_set_args(plan))
    except KeyboardInterrupt:
        if STOP.config_failure is None or STOP.signum is not None:
            raise
        success, logs = False, _latest_logs(log_dir)  # ended by a configuration failure, not by the user
    finally:
        gc.unfreeze()
        restore_sigint()
    by_label = {}
    for entry in logs:
        label = (entry.eval.metadata or {}).get(SUITE_KEY)
        if label:
            by_label[run_key(label, entry.eval.model, several=len(models) > 1)] = entry
    reused = sum(entry.location in before for entry in logs)
    return SuiteOutcome(success=success, logs=by_label, reused=reused, calls=progress.calls if progress else 0,
                        config_failure=STOP.config_failure)


def _latest_logs(log_dir: Path) -> list[Any]:
    """The newest log header of every run in the folder (oldest first, so a later one replaces it by label)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    headers = [read_eval_log(info, header_only=True) for info in list_eval_logs(str(log_dir))]
    return sorted(headers, key=lambda h: h.eval.created)


def write_settings(plan: SuitePlan, suite_bound: Bound) -> Path:
    plan.out.mkdir(parents=True, exist_ok=True)
    path = plan.out / "run.json"
    settings = plan.settings()
    settings["max_calls"] = {"per_run": suite_bound.per_run, "total": suite_bound.total}
    path.write_text(json.dumps(settings, indent=2, default=str) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ lm-eval

