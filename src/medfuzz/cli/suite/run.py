"""``medfuzz run`` from a ``SuitePlan`` to its outcome, in order: the start-up lines, the checks before the first
paid call, the tasks and their bound, the embedded server when the plan names it, the Inspect half, the lm-eval
half, the summary and the report. ``run_suite_plan`` returns what happened (``RunOutcome``: the exit code, the
logs, what did not finish, a user error as one line) and raises nothing a user can cause; ``medfuzz.cli.run``
is its parser and its exit.

The summary and the report are written by the layers above this one (``medfuzz.cli.summary``,
``medfuzz.report``), which the tasks layer never imports: the caller hands them in (``summary_lines``,
``write_report``), and they run inside the stop handling like every other step, so an interrupt while the report
is written stops the command as one during a run does (``medfuzz.cli.suite.stop``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.cli.suite import build as suite_build
from medfuzz.cli.suite import cost as suite_cost
from medfuzz.cli.suite import cost_model as suite_cost_model
from medfuzz.cli.suite import inspect_half as suite_inspect
from medfuzz.cli.suite import levels as suite_levels
from medfuzz.cli.suite import lm_eval_half as suite_lm_eval
from medfuzz.cli.suite import plan as suite
from medfuzz.cli.suite.plan import SuitePlan
from medfuzz.errors import MedfuzzError
from medfuzz.options import ConfigError, flag
from medfuzz.records.keys import SUITE_KEY
from medfuzz.records.methods import METHODS

# (plan, the suite label -> its finished run's log header, the lm-eval folder or None, the model) -> its lines
SummaryLines = Callable[[SuitePlan, Mapping[str, Any], Path | None, str], list[str]]
# (the log folders, the report folder) -> (the report page or None, one line per problem the report found)
ReportWriter = Callable[[list[Path], Path], tuple[Path | None, list[str]]]


def _default_threads() -> int:
    from medfuzz.models.local import default_threads

    return default_threads()


@dataclass(frozen=True)
class RunOptions:
    """How ``run_suite_plan`` runs a plan (what it runs is the plan): the rest of ``medfuzz run``'s options, each
    declared once on its field as the plan's are (``medfuzz.options.flag``)."""

    lm_eval: str | None = field(default=None, metadata=flag(
        "also run the methods through lm-eval with this model ('embedded', hf:pretrained=NAME, "
        "local-completions:model=NAME,base_url=URL,...)", metavar="MODEL[:MODEL_ARGS]"))
    threads: int = field(default_factory=_default_threads, metadata=flag(
        "CPU threads of the embedded model's prompt evaluation (default: 2, or fewer where this process may use "
        "fewer cores; it generates on one thread, faster for a 135M model); its OpenMP threads wait passively "
        "unless OMP_WAIT_POLICY says otherwise"))
    report: bool = field(default=True, metadata=flag("skip medfuzz report at the end", name="--no-report",
                                                     switch=True))
    dry_run: bool = field(default=False, metadata=flag(
        "print the plan (runs, items, the most model calls each can make, the calls and tokens expected) after the "
        "checks before the first paid call (--no-preflight skips them), and stop: nothing is written and no model "
        "is asked a question (the checks list the endpoints' models)", switch=True))
    preflight: bool = field(default=True, metadata=flag(
        "skip the checks before the first paid call (endpoint reachable, key accepted, lm-eval model arguments "
        "and tokenizer)", name="--no-preflight", switch=True))
    # the cost estimate printed beside the bound (``suite_cost``): prices per model, what is known of the model
    price: Mapping[str, tuple[float, float]] = field(default_factory=dict, metadata=flag(
        "a model's price per 1,000 input and output tokens (once per model: the target, the attacker), so that the "
        "plan and the run's start print the expected and the worst-case cost beside the calls",
        metavar="MODEL=IN/OUT", many=True, parse=suite_cost_model.parse_prices))
    expect: Mapping[str, float] = field(default_factory=dict, metadata=flag(
        "what you know of the model, used by the cost estimate instead of its assumptions: "
        + ", ".join(suite_cost_model.EXPECT_NAMES) + " (e.g. accuracy=0.8,asr=0.2: its clean accuracy and MedFuzz's "
        "attack success rate; docs/usage.md, What a run will cost)",
        metavar="NAME=VALUE[,...]", many=True, parse=suite_cost_model.parse_expect))


@dataclass
class RunOutcome:
    code: int  # exit code: 0 done, 1 some run (or the lm-eval half) did not finish or an error, 130 interrupted
    logs: dict[str, Any] = field(default_factory=dict)  # label -> EvalLog header
    lm_eval_out: Path | None = None
    index: Path | None = None  # the report page
    problems: list[str] = field(default_factory=list)  # what did not finish, one line each
    error: str | None = None  # what stopped the command before or during the runs (bad input, no endpoint): one line


def phase(name: str, text: str = "") -> None:
    """A phase's first line (``medfuzz run: <phase> ...``): what the command is doing now, and the marker tests
    and wrappers read to know which phase an interrupt landed in."""
    print(f"medfuzz run: {name}{': ' + text if text else ''}", flush=True)


# the message of inspect_ai.model.get_model for a provider it does not know (a ValueError, not a PrerequisiteError)
UNKNOWN_PROVIDER = re.compile(r"^Model API \S+ of model '[^']*' not recognized")


def run_suite_plan(plan: SuitePlan, how: RunOptions | None = None, summary_lines: SummaryLines | None = None,
                   write_report: ReportWriter | None = None) -> RunOutcome:
    """Run the suite, then lm-eval when asked, then the summary and the report when given (``write_report`` is
    called unless ``how.report`` is false). The embedded server is started here and stopped on leaving (also on
    Ctrl-C / SIGTERM / SIGHUP: ``medfuzz.cli.suite.stop``). A user error (bad data or options, a model that does
    not answer, a busy folder, Inspect's own prerequisite errors) comes back as ``RunOutcome.error``; an
    interrupt as exit code 130."""
    from inspect_ai._util.error import PrerequisiteError

    from medfuzz.tasks.inspect.user_errors import USER_ERRORS

    how = how or RunOptions()
    try:
        return _stoppable(plan, how, summary_lines, write_report if how.report else None)
    except (*USER_ERRORS, MedfuzzError) as err:
        return RunOutcome(1, error=str(err))
    except OSError as err:  # a read-only, unwritable or full --out: one line (finished work is kept)
        from medfuzz.cli.suite.stop import WRITE_ERRNOS, unwritable

        if err.errno not in WRITE_ERRNOS or not _under(plan.out, err):
            raise
        return RunOutcome(1, error=unwritable(plan.out, err))
    except PrerequisiteError as err:  # Inspect's own (a missing API key, an unknown provider): its message alone
        from medfuzz.cli.suite.preflight import prerequisite_text

        return RunOutcome(1, error=prerequisite_text(err))
    except ValueError as err:  # Inspect's get_model names an unknown provider with a bare ValueError
        if not UNKNOWN_PROVIDER.search(str(err)):
            raise
        return RunOutcome(1, error=f"{err} (--model / --attacker take Inspect's provider/model names, e.g. "
                                   "openai/gpt-4o-mini or openai-api/<service>/<model>: https://inspect.aisi.org.uk/providers.html)")


def _under(out: Path, err: OSError) -> bool:
    """Whether a write error is about ``out`` (a full disk is, wherever it was noticed)."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT) or not err.filename:
        return True
    try:
        return Path(str(err.filename)).resolve().is_relative_to(out.resolve())
    except (OSError, ValueError):
        return False


def _stoppable(plan: SuitePlan, how: RunOptions, summary_lines: SummaryLines | None,
               write_report: ReportWriter | None) -> RunOutcome:
    from medfuzz.cli.suite.stop import folder_lock

    started = time.monotonic()
    lm = suite_lm_eval.LmEvalPlan.parse(how.lm_eval, how.threads) if how.lm_eval else None
    if lm is not None and len(plan.models) > 1:  # refused before any call, not dropped half-way
        raise ConfigError(f"--lm-eval names one lm-eval model, and --model names {len(plan.models)}: run "
                          "medfuzz run once per model, each with its own --lm-eval (and its own --out), or leave "
                          "--lm-eval out to compare the models in Inspect")
    try:  # from the first step: Ctrl-C while the tasks load (TCES embeds its vocabulary) ends as cleanly
        if how.dry_run:
            return _dry_run(plan, lm, how)
        with folder_lock(plan.out):
            return _execute(plan, lm, how, started, summary_lines, write_report)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM / SIGHUP (turned into it); the server is stopped
        return _interrupted(plan, started, err)


def _header(plan: SuitePlan) -> None:
    settings = plan.settings()
    backend = plan.backend
    print(f"medfuzz run: {plan.model} ({backend.kind}); level {plan.level}: {suite_levels.LEVELS[plan.level].summary}",
          flush=True)
    if plan.model_roles():
        print(f"  attacker: {plan.model_roles()['attacker']}", flush=True)
    elif any("attacker" in METHODS[m].roles for m in plan.methods):  # MedFuzz's attacker role
        print("  attacker: the target itself (no --attacker; the paper's attacker was GPT-4)", flush=True)
    print(f"  max_connections {settings['max_connections'] or 'Inspect default'}, attempt_timeout "
          f"{settings['attempt_timeout']} s, max_samples {settings['max_samples'] or 'Inspect default'}, "
          f"max_tasks {settings['max_tasks'] or 'eval_set default'} ({backend.why})", flush=True)


def _dry_run(plan: SuitePlan, lm: suite_lm_eval.LmEvalPlan | None, how: RunOptions) -> RunOutcome:
    """The plan, its bound and its expected cost, after the checks (``--no-preflight`` skips them), with no question
    asked and nothing written. The tasks are built for a plan (``build_tasks(planning=True)``: TCES does not embed
    its vocabulary), with the samples, the configs and so the bound of the real run."""
    _header(plan)
    if how.preflight:
        _preflight(plan, lm)
    built = suite_build.build_tasks(plan, planning=True)
    bound = suite_build.bound(built, plan.models)
    print("dry run: the runs, their items and the most model calls each can make (attacks that stop early make "
          "fewer):", flush=True)
    for line in bound.lines():
        print(line, flush=True)
    _estimate(plan, built, bound, how)
    generate = suite_levels.LEVELS[plan.level].generate
    if generate.get("max_tokens"):
        tokens = (f"at most {generate['max_tokens']:,} output tokens per plain answer (the level's max_tokens); "
                  "the attack engines cap their own calls")
    else:
        tokens = "not bounded up front (no max_tokens at this level: a reply is as long as the model makes it)"
    print(f"  tokens: {tokens}", flush=True)
    if lm is not None:
        tasks, _ = suite_lm_eval.lm_eval_tasks(plan, None)
        print(f"  lm-eval half: {lm.model} {lm.model_args} on {', '.join(tasks)} (MedFuzz's lm-eval task "
              "scores the items the Inspect run fuzzed)", flush=True)
    print(f"dry run: no model was asked a question and nothing was written; run without --dry-run to start (into "
          f"{plan.out})", flush=True)
    return RunOutcome(0)


def _estimate(plan: SuitePlan, built: list[tuple[suite.SuiteRun, Any]], bound: suite_build.Bound,
              how: RunOptions) -> suite_cost.SuiteEstimate:
    """Print the expected calls, tokens and (with ``--price``) cost beside the bound (``suite_cost``)."""
    attacker = plan.model_roles().get("attacker")
    estimate = suite_cost.estimate(built, bound, plan.models, attacker, how.expect,
                                   suite_levels.LEVELS[plan.level].generate.get("max_tokens"))
    for line in estimate.lines(how.price):
        print(line, flush=True)
    return estimate


def _preflight(plan: SuitePlan, lm: suite_lm_eval.LmEvalPlan | None) -> None:
    from medfuzz.cli.suite import preflight

    models = [m for m in (*plan.models, *plan.model_roles().values()) if m != suite.EMBEDDED]
    lines = preflight.check_inspect_models(models)
    if lm is not None and lm.model != suite_lm_eval.LM_EVAL_EMBEDDED:
        lines += preflight.check_lm_eval(lm.model, lm.model_args)
    for line in lines:
        print(f"  checked: {line}", flush=True)


def _execute(plan: SuitePlan, lm: suite_lm_eval.LmEvalPlan | None, how: RunOptions, started: float,
             summary_lines: SummaryLines | None, write_report: ReportWriter | None) -> RunOutcome:
    from medfuzz.cli.suite.heartbeat import Heartbeat, elapsed_line
    from medfuzz.cli.suite.progress import SuiteProgress, run_methods
    from medfuzz.cli.suite.stop import STOP

    phase("start-up", f"{plan.out}")
    _header(plan)
    if how.preflight:
        phase("checking the models before the first paid call")
        _preflight(plan, lm)
    print("  building the tasks (TCES embeds its vocabularies once; later runs read them from the cache)", flush=True)
    with Heartbeat(elapsed_line("building the tasks", time.monotonic(),
                                " (a first run embeds TCES's vocabularies; later runs read them from the cache)")):
        built = suite_build.build_tasks(plan)
        suite_build.before_first_call(built)
    bound = suite_build.bound(built, plan.models)
    settings_path = suite_inspect.write_settings(plan, bound)
    print(f"Upper bound on model calls before the first call (attacks that stop early make fewer; settings and "
          f"bound in {settings_path}):", flush=True)
    for line in bound.lines():
        print(line, flush=True)
    _estimate(plan, built, bound, how)
    with contextlib.ExitStack() as stack:
        models = list(plan.models)
        if plan.model == suite.EMBEDDED:
            from medfuzz.models.local import start_server

            server = stack.enter_context(start_server(threads=how.threads, log_path=plan.out / "server.log"))
            os.environ.update(server.inspect_env())
            models = [server.inspect_model]
            print(f"embedded model serving at {server.base_url} (stopped when this run ends)", flush=True)
        progress = stack.enter_context(SuiteProgress(bound, show=plan.display == "none",
                                                     several_models=len(models) > 1,
                                                     methods=run_methods((run for run, _ in built), models)))
        progress.reusing(suite_inspect.samples_done_before(plan.out / "inspect", built, models))
        phase("Inspect half", f"{len(built)} runs into {plan.out / 'inspect'}")
        outcome = suite_inspect.run_suite(plan, built, models, progress)
        cancelled = any(entry.status == "cancelled" for entry in outcome.logs.values())
        if STOP.signum is not None or (cancelled and outcome.config_failure is None):
            raise KeyboardInterrupt  # Inspect ends a run on Ctrl-C and returns what it has
    if outcome.config_failure is not None:
        return _config_stop(outcome)
    print(f"Inspect: {len(outcome.logs)} runs in {plan.out / 'inspect'} ({outcome.reused} found finished and "
          f"reused); {progress.calls:,} model calls paid now, {progress.tokens:,} tokens "
          f"[{time.monotonic() - started:.0f} s]", flush=True)
    _unfinished(outcome)
    problems: list[str] = []  # what failed besides the runs (the lm-eval half), repeated at the end
    out_lm = _lm_eval_half(plan, lm, outcome, models, problems)
    if summary_lines is not None:
        _summaries(plan, outcome, out_lm, summary_lines)
    if STOP.signum is not None:  # a signal while the summaries read the logs was only recorded (run_stop)
        raise KeyboardInterrupt
    index = None
    if write_report is not None:
        phase("writing the report", str(plan.out / "report"))
        folders = [plan.out / "inspect", *([out_lm] if out_lm else [])]
        with Heartbeat(elapsed_line("writing the report", time.monotonic())):
            index, report_problems = write_report(folders, plan.out / "report")  # prints each problem it finds
        problems += [f"report: {line}" for line in report_problems]
    if STOP.signum is not None:
        raise KeyboardInterrupt
    for line in problems:
        print(f"medfuzz run: {line}", file=sys.stderr, flush=True)
    if not outcome.success:
        unfinished = [label for label, entry in outcome.logs.items() if entry.status != "success"]
        print(f"medfuzz run: {', '.join(unfinished) or 'some runs'} did not finish; run the same command again to "
              "resume them", file=sys.stderr, flush=True)
    return RunOutcome(0 if not problems and outcome.success else 1, outcome.logs, out_lm, index, problems)


def _unfinished(outcome: suite_inspect.SuiteOutcome) -> None:
    """One line per run that did not finish, its error as text (Inspect records ``repr(exception)``)."""
    from medfuzz.cli.suite.stop import error_text

    for key, entry in outcome.logs.items():
        if entry.status != "success":
            reason = error_text(entry.error.message) if entry.error else ""
            print(f"  {key}: {entry.status}{': ' + reason if reason else ''}", flush=True)


def _config_stop(outcome: suite_inspect.SuiteOutcome) -> RunOutcome:
    """A configuration failure ended the eval set: say what to fix; resuming before that cannot help."""
    print(f"medfuzz run: stopped: {outcome.config_failure}", file=sys.stderr, flush=True)
    print("medfuzz run: fix the model's URL, key or name above, then run the same command again (finished runs "
          "and samples are reused)", file=sys.stderr, flush=True)
    return RunOutcome(1, outcome.logs, problems=[outcome.config_failure or ""])


def _lm_eval_half(plan: SuitePlan, lm: suite_lm_eval.LmEvalPlan | None, outcome: suite_inspect.SuiteOutcome,
                  models: list[str], problems: list[str]) -> Path | None:
    """The lm-eval half, when asked: its output folder, or ``None`` (skipped, or failed: the failure is printed
    as one block and recorded in ``problems``, and the Inspect half's summary and report are still written)."""
    from medfuzz.cli.suite.stop import STOP

    if lm is None:
        return None
    if plan.shard is not None:
        print("--lm-eval: skipped with --shard (lm-eval runs have no shards to merge; run it once, unsharded)",
              flush=True)
        return None
    from medfuzz.records.locations import local_path
    from medfuzz.solvers.medfuzz.store import ATTACKED

    fuzzed = outcome.logs.get("medfuzz")
    fuzzed_path = local_path(fuzzed.location) if fuzzed is not None and fuzzed.status == "success" else None
    if fuzzed_path is not None and not _has_fuzzed(fuzzed_path, ATTACKED):
        fuzzed_path = None
    phase("lm-eval half", f"{lm.model} into {plan.out / 'lm-eval'}")
    try:
        return suite_lm_eval.run_lm_eval(plan, lm, fuzzed_path, plan.out / "lm-eval.out",
                                         model_label=models[0], children=STOP.children)
    except suite_lm_eval.LmEvalFailed as failed:
        if STOP.signum is not None:
            raise KeyboardInterrupt from None
        for line in failed.block():
            print(line, file=sys.stderr, flush=True)
        problems.append(f"{failed} (log {failed.log_file})")
        return None


def _summaries(plan: SuitePlan, outcome: suite_inspect.SuiteOutcome, out_lm: Path | None,
               summary_lines: SummaryLines) -> None:
    """The summary of each target model's finished runs, one model after the other."""
    finished: dict[str, dict[str, Any]] = {}  # model -> label -> log header
    for entry in outcome.logs.values():
        if entry.status == "success":
            finished.setdefault(entry.eval.model, {})[entry.eval.metadata[SUITE_KEY]] = entry
    for model, logs in finished.items():
        for line in summary_lines(plan, logs, out_lm, model):
            print(line, flush=True)


def _interrupted(plan: SuitePlan, started: float, err: BaseException) -> RunOutcome:
    """What an interrupt leaves: the finished runs, and how to go on."""
    from medfuzz.cli.suite.stop import INTERRUPTED, STOP, interrupted_by

    interrupted_by(err)
    try:
        done = suite_inspect.finished_labels(plan.out / "inspect")
    except Exception as read_err:  # a half-written log must not turn a clean stop into a traceback
        done = []
        print(f"  (finished runs not listed: {read_err})", flush=True)
    lm_done = any((plan.out / "lm-eval").rglob("results_*.json")) if (plan.out / "lm-eval").is_dir() else False
    finished = ", ".join(done) if done else "no run"
    print(f"\n[{time.monotonic() - started:6.1f}s] medfuzz run: stopped by {STOP.name or 'SIGINT'}; finished: "
          f"{finished}{' and the lm-eval half' if lm_done else ''} (logs in {plan.out}). Run the same command again "
          "to finish: finished runs, samples and model calls are not paid again.", flush=True)
    return RunOutcome(INTERRUPTED)


def _has_fuzzed(log: Path, outcomes: tuple[str, ...]) -> bool:
    from medfuzz.tasks.inspect.medfuzz import fuzzed_from_log

    return any(r["outcome"] in outcomes for r in fuzzed_from_log(log))
