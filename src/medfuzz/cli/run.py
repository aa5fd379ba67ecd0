"""``medfuzz run``: the robustness suite on any model the harnesses support (``medfuzz.tasks.suite``).

    medfuzz run --model embedded --attacker template --level demo --data demo --out medfuzz-demo
    medfuzz run --model openai-api/vllm/my-model --attacker openai/gpt-4o --data hf --limit 100 --out runs/my-model

Running the same command again finishes what an interruption left: finished runs and samples are reused and
finished model calls come from the cache, so nothing is paid twice.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.errors import MedfuzzError


def _pairs(values: list[str]) -> dict[str, Any]:
    from medfuzz.options import cli_value

    pairs: dict[str, Any] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip():
            raise MedfuzzError(f"--option {value!r}: expected NAME=VALUE (e.g. medfuzz_turns=3)")
        pairs[name.strip().replace("-", "_")] = cli_value(rest.strip())
    return pairs


def plan_from(args: argparse.Namespace) -> Any:
    from medfuzz.tasks.suite import SuitePlan

    plan = SuitePlan(  # the level's data and the embedded model's template attacker are the plan's defaults
        model=args.model, out=Path(args.out).resolve(), attacker=args.attacker,
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()), level=args.level,
        data=args.data,
        limit=args.limit, options=_pairs(args.option), max_connections=args.max_connections,
        attempt_timeout=args.attempt_timeout, max_samples=args.max_samples, max_tasks=args.max_tasks,
        retry_attempts=args.retry_attempts, display=args.display, shard=_shard(args.shard),
        log_realtime=args.log_realtime)
    plan.check_options()
    return plan


def _shard(text: str | None) -> tuple[int, int] | None:
    from medfuzz.cli.shard import parse_shard

    shard = parse_shard(text)
    if shard is None:
        return None
    if shard.source != "given":
        print(f"--shard {text.strip()}: shard {shard.index}/{shard.count} ({shard.source})", flush=True)
    return shard.as_pair()


@dataclass
class Executed:
    code: int  # exit code: 0 done, 1 some run (or the lm-eval half) did not finish, 130 interrupted
    logs: dict[str, Any] = field(default_factory=dict)  # label -> EvalLog header
    lm_eval_out: Path | None = None
    index: Path | None = None  # the report page
    problems: list[str] = field(default_factory=list)  # what did not finish, one line each


def phase(name: str, text: str = "") -> None:
    """A phase's first line (``medfuzz run: <phase> ...``): what the command is doing now, and the marker tests
    and wrappers read to know which phase an interrupt landed in."""
    print(f"medfuzz run: {name}{': ' + text if text else ''}", flush=True)


def execute(plan: Any, lm_eval: str | None = None, threads: int = 2, report: bool = True,
            lm_eval_limits: dict[str, int] | None = None, dry_run: bool = False, preflight: bool = True) -> Executed:
    """Run the suite, then lm-eval when asked, then the report. The embedded server is started here and stopped on
    leaving (also on Ctrl-C / SIGTERM / SIGHUP: ``medfuzz.tasks.run_stop``)."""
    from medfuzz.tasks import suite
    from medfuzz.tasks.run_stop import folder_lock

    started = time.monotonic()
    lm = suite.LmEvalPlan.parse(lm_eval, threads) if lm_eval else None
    try:  # from the first step: Ctrl-C while the tasks load (TCES embeds its vocabulary) ends as cleanly
        if dry_run:
            return _dry_run(plan, lm)
        with folder_lock(plan.out):
            return _execute(plan, lm, threads, report, lm_eval_limits, preflight, started)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM / SIGHUP (turned into it); the server is stopped
        return _interrupted(plan, started, err)


def _header(plan: Any) -> None:
    from medfuzz.tasks import suite

    settings = plan.settings()
    backend = plan.backend
    print(f"medfuzz run: {plan.model} ({backend.kind}); level {plan.level}: {suite.LEVELS[plan.level].summary}",
          flush=True)
    if plan.model_roles():
        print(f"  attacker: {plan.model_roles()['attacker']}", flush=True)
    elif "medfuzz" in plan.methods:
        print("  attacker: the target itself (no --attacker; the paper's attacker was GPT-4)", flush=True)
    print(f"  max_connections {settings['max_connections'] or 'Inspect default'}, attempt_timeout "
          f"{settings['attempt_timeout']} s, max_samples {settings['max_samples'] or 'Inspect default'}, "
          f"max_tasks {settings['max_tasks'] or 'eval_set default'} ({backend.why})", flush=True)


def _dry_run(plan: Any, lm: Any) -> Executed:
    """The plan and its bound, with no model called and nothing written."""
    from medfuzz.tasks import suite

    _header(plan)
    built = suite.build_tasks(plan)
    bound = suite.bound(built, plan.models)
    print("dry run: the runs, their items and the most model calls each can make (attacks that stop early make "
          "fewer):", flush=True)
    for line in bound.lines():
        print(line, flush=True)
    generate = suite.LEVELS[plan.level].generate
    if generate.get("max_tokens"):
        tokens = (f"at most {generate['max_tokens']:,} output tokens per plain answer (the level's max_tokens); "
                  "the attack engines cap their own calls")
    else:
        tokens = "not bounded up front (no max_tokens at this level: a reply is as long as the model makes it)"
    print(f"  tokens: {tokens}", flush=True)
    if lm is not None:
        tasks, _ = suite.lm_eval_tasks(plan, None)
        print(f"  lm-eval half: {lm.model} {lm.model_args} on {', '.join(tasks)} (MedFuzz's lm-eval task "
              "scores the items the Inspect run fuzzed)", flush=True)
    print(f"dry run: no model was called and nothing was written; run without --dry-run to start (into "
          f"{plan.out})", flush=True)
    return Executed(0)


def _preflight(plan: Any, lm: Any) -> None:
    from medfuzz.tasks import preflight, suite

    models = [m for m in (*plan.models, *plan.model_roles().values()) if m != suite.EMBEDDED]
    lines = preflight.check_inspect_models(models)
    if lm is not None and lm.model != suite.LM_EVAL_EMBEDDED:
        lines += preflight.check_lm_eval(lm.model, lm.model_args)
    for line in lines:
        print(f"  checked: {line}", flush=True)


def _execute(plan: Any, lm: Any, threads: int, report: bool, lm_eval_limits: dict[str, int] | None,
             preflight: bool, started: float) -> Executed:
    import contextlib

    from medfuzz.tasks import suite
    from medfuzz.tasks.run_stop import STOP
    from medfuzz.tasks.suite_progress import SuiteProgress, run_methods

    phase("start-up", f"{plan.out}")
    _header(plan)
    if preflight:
        phase("checking the models before the first paid call")
        _preflight(plan, lm)
    print("  building the tasks (TCES embeds its vocabularies once; later runs read them from the cache)", flush=True)
    built = suite.build_tasks(plan)
    suite.embed_anchor_texts(built)
    bound = suite.bound(built, plan.models)
    settings_path = suite.write_settings(plan, bound)
    print(f"Upper bound on model calls before the first call (attacks that stop early make fewer; settings and "
          f"bound in {settings_path}):", flush=True)
    for line in bound.lines():
        print(line, flush=True)
    with contextlib.ExitStack() as stack:
        models = list(plan.models)
        if plan.model == suite.EMBEDDED:
            from medfuzz.models.local import start_server

            server = stack.enter_context(start_server(threads=threads, log_path=plan.out / "server.log"))
            os.environ.update(server.inspect_env())
            models = [server.inspect_model]
            print(f"embedded model serving at {server.base_url} (stopped when this run ends)", flush=True)
        progress = stack.enter_context(SuiteProgress(bound, show=plan.display == "none",
                                                     several_models=len(models) > 1,
                                                     methods=run_methods((run for run, _ in built), models)))
        progress.reusing(suite.samples_done_before(plan.out / "inspect", built, models))
        phase("Inspect half", f"{len(built)} runs into {plan.out / 'inspect'}")
        outcome = suite.run_suite(plan, built, models, progress)
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
    out_lm = _lm_eval_half(plan, lm, outcome, models, lm_eval_limits, problems)
    _summaries(plan, outcome, out_lm)
    if STOP.signum is not None:  # a signal while the summaries read the logs was only recorded (run_stop)
        raise KeyboardInterrupt
    index = None
    if report:
        phase("writing the report", str(plan.out / "report"))
        from medfuzz.report import render_all

        folders = [plan.out / "inspect", *([out_lm] if out_lm else [])]
        written = render_all(folders, plan.out / "report")  # prints each of its problems as it finds them
        index = written.index
        problems += [f"report: {problem.line()}" for problem in written.problems]
    if STOP.signum is not None:
        raise KeyboardInterrupt
    for line in problems:
        print(f"medfuzz run: {line}", file=sys.stderr, flush=True)
    if not outcome.success:
        unfinished = [label for label, entry in outcome.logs.items() if entry.status != "success"]
        print(f"medfuzz run: {', '.join(unfinished) or 'some runs'} did not finish; run the same command again to "
              "resume them", file=sys.stderr, flush=True)
    return Executed(0 if not problems and outcome.success else 1, outcome.logs, out_lm, index, problems)


def _unfinished(outcome: Any) -> None:
    """One line per run that did not finish, its error as text (Inspect records ``repr(exception)``)."""
    from medfuzz.tasks.run_stop import error_text

    for key, entry in outcome.logs.items():
        if entry.status != "success":
            reason = error_text(entry.error.message) if entry.error else ""
            print(f"  {key}: {entry.status}{': ' + reason if reason else ''}", flush=True)


def _config_stop(outcome: Any) -> Executed:
    """A configuration failure ended the eval set: say what to fix; resuming before that cannot help."""
    print(f"medfuzz run: stopped: {outcome.config_failure}", file=sys.stderr, flush=True)
    print("medfuzz run: fix the model's URL, key or name above, then run the same command again (finished runs "
          "and samples are reused)", file=sys.stderr, flush=True)
    return Executed(1, outcome.logs, problems=[outcome.config_failure])


def _lm_eval_half(plan: Any, lm: Any, outcome: Any, models: list[str], lm_eval_limits: dict[str, int] | None,
                  problems: list[str]) -> Path | None:
    """The lm-eval half, when asked: its output folder, or ``None`` (skipped, or failed: the failure is printed
    as one block and recorded in ``problems``, and the Inspect half's summary and report are still written)."""
    from medfuzz.tasks import suite
    from medfuzz.tasks.run_stop import STOP

    if lm is None:
        return None
    if plan.shard is not None:
        print("--lm-eval: skipped with --shard (lm-eval runs have no shards to merge; run it once, unsharded)",
              flush=True)
        return None
    if len(models) > 1:
        print("--lm-eval: skipped with several --model values (one lm-eval model per run)", flush=True)
        return None
    from medfuzz.report._logs import local_path
    from medfuzz.solvers.medfuzz.store import ATTACKED

    fuzzed = outcome.logs.get("medfuzz")
    fuzzed_path = local_path(fuzzed.location) if fuzzed is not None and fuzzed.status == "success" else None
    if fuzzed_path is not None and not _has_fuzzed(fuzzed_path, ATTACKED):
        fuzzed_path = None
    phase("lm-eval half", f"{lm.model} into {plan.out / 'lm-eval'}")
    try:
        return suite.run_lm_eval(plan, lm, fuzzed_path, plan.out / "lm-eval.out",
                                 {**suite.LEVELS[plan.level].lm_eval, **(lm_eval_limits or {})},
                                 model_label=models[0], children=STOP.children)
    except suite.LmEvalFailed as failed:
        if STOP.signum is not None:
            raise KeyboardInterrupt from None
        for line in failed.block():
            print(line, file=sys.stderr, flush=True)
        problems.append(f"{failed} (log {failed.log_file})")
        return None


def _summaries(plan: Any, outcome: Any, out_lm: Path | None) -> None:
    from medfuzz.cli.summary import summary_lines
    from medfuzz.tasks.suite import SUITE_KEY

    finished: dict[str, dict[str, Any]] = {}  # model -> label -> log header
    for entry in outcome.logs.values():
        if entry.status == "success":
            finished.setdefault(entry.eval.model, {})[entry.eval.metadata[SUITE_KEY]] = entry
    for model, logs in finished.items():
        for line in summary_lines(plan, logs, out_lm, model):
            print(line, flush=True)


def _interrupted(plan: Any, started: float, err: BaseException) -> Executed:
    """What an interrupt leaves: the finished runs, and how to go on."""
    from medfuzz.tasks.run_stop import STOP, interrupted_by
    from medfuzz.tasks.suite import finished_labels

    interrupted_by(err)
    try:
        done = finished_labels(plan.out / "inspect")
    except Exception as read_err:  # a half-written log must not turn a clean stop into a traceback
        done = []
        print(f"  (finished runs not listed: {read_err})", flush=True)
    lm_done = any((plan.out / "lm-eval").rglob("results_*.json")) if (plan.out / "lm-eval").is_dir() else False
    finished = ", ".join(done) if done else "no run"
    print(f"\n[{time.monotonic() - started:6.1f}s] medfuzz run: stopped by {STOP.name or 'SIGINT'}; finished: "
          f"{finished}{' and the lm-eval half' if lm_done else ''} (logs in {plan.out}). Run the same command again "
          "to finish: finished runs, samples and model calls are not paid again.", flush=True)
    return Executed(130)


def _has_fuzzed(log: Path, outcomes: tuple[str, ...]) -> bool:
    from medfuzz.tasks.inspect.medfuzz import fuzzed_from_log

    return any(r["outcome"] in outcomes for r in fuzzed_from_log(log))


def _run(args: argparse.Namespace) -> int:
    from medfuzz.tasks import run_stop

    run_stop.install()  # first: an interrupt while the rest loads ends as cleanly as one mid-run
    try:
        code = _run_installed(args)
    except KeyboardInterrupt:  # before the plan exists (imports, argument checks): nothing ran yet
        run_stop.interrupted_by(KeyboardInterrupt())
        print(f"\nmedfuzz run: stopped by {run_stop.STOP.name} before any run started", flush=True)
        code = run_stop.INTERRUPTED
    if run_stop.STOP.signum is not None:  # stopping: what finished is written and said; exit now, so that no
        run_stop.exit_now(code)  # interpreter shutdown (thread joins, atexit writers) runs after the stop
    return code


def _run_installed(args: argparse.Namespace) -> int:
    from inspect_ai._util.error import PrerequisiteError

    from medfuzz.tasks.inspect._errors import USER_ERRORS

    try:
        plan = plan_from(args)
        done = execute(plan, lm_eval=args.lm_eval, threads=args.threads, report=not args.no_report,
                       dry_run=args.dry_run, preflight=not args.no_preflight)
    except (*USER_ERRORS, MedfuzzError) as err:
        raise SystemExit(f"medfuzz run: {err}") from None
    except PrerequisiteError as err:  # Inspect's own (a missing API key, an unknown provider): its message alone
        text = re.sub(r"\[/?[a-z ]+\]", "", str(getattr(err, "message", err)))  # rich markup off
        raise SystemExit(f"medfuzz run: {text.strip()}") from None
    if done.index is not None:
        print(f"report: {done.index}", flush=True)
    return done.code


def add_parser(commands: Any) -> None:
    from medfuzz.tasks.suite import LEVELS, METHODS

    run = commands.add_parser(
        "run", help="the robustness suite (clean, TCES, MedGuard, MedFuzz) on one model as one resumable "
                    "Inspect eval set, optionally lm-eval too, then the report", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--model", required=True, help="any Inspect model (openai/gpt-4o, openai-api/vllm/NAME, "
                                                     "anthropic/...), several comma-separated (one eval set; the "
                                                     "report compares them), or 'embedded' (SmolLM2, started here)")
    run.add_argument("--attacker", default=None,
                     help="MedFuzz's attacker: an Inspect model, or 'template' (no LLM; the demo's). Default: the "
                          "target attacks itself; with --model embedded, the template (a 135M model cannot write "
                          "valid rewrites)")
    run.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    run.add_argument("--level", default="paper", choices=tuple(LEVELS),
                     help="named settings of every method, printed with their bound before the first call "
                          "(docs/medfuzz.md, Cost levels): " + ", ".join(LEVELS))
    run.add_argument("--data", default=None, help="MedQA source: hf (the test split), demo (50 bundled items) or a "
                                                   "file in the release or HF layout. Default: the level's (demo "
                                                   "for --level demo / quick, else hf)")
    run.add_argument("--limit", type=int, default=None, help="items per method (MedGuard: per aspect); default: the "
                                                              "level's, else every item")
    run.add_argument("--option", "-T", action="append", default=[], metavar="NAME=VALUE",
                     help="a task option for every method that has it (seed=1), or for one method with its name "
                          "as prefix (medfuzz_turns=3, tces_budget=1, medguard_aspects=privacy)")
    run.add_argument("--lm-eval", default=None, metavar="MODEL[:MODEL_ARGS]",
                     help="also run the methods through lm-eval with this model ('embedded', hf:pretrained=NAME, "
                          "local-completions:model=NAME,base_url=URL,...)")
    run.add_argument("--out", required=True, help="folder for logs, results, settings and the report")
    run.add_argument("--max-connections", type=int, default=None, help="default: per backend (run.json says)")
    run.add_argument("--attempt-timeout", type=int, default=None, help="seconds per model call attempt")
    run.add_argument("--max-samples", type=int, default=None)
    run.add_argument("--max-tasks", type=int, default=None,
                     help="runs in parallel (default: 1 for the embedded model, else eval_set's: at least 10)")
    run.add_argument("--retry-attempts", type=int, default=None, help="eval_set's retries of a failed run")
    run.add_argument("--display", default="none",
                     help="Inspect's display (none: medfuzz's progress line with the bound and the ETA)")
    run.add_argument("--log-realtime", action=argparse.BooleanOptionalAction, default=False,
                     help="keep Inspect's realtime sample buffer, so that inspect view shows samples while they run "
                          "(off by default: medfuzz run prints its own progress; the logs are the same, and the "
                          "buffer costs 11-42 %% of the client's CPU per call: 19 %% in docs/performance.md P9). "
                          "--no-log-realtime, the default now, is still accepted")
    run.add_argument("--shard", default=None, metavar="K/N|auto|auto/N",
                     help="run the K-th of N contiguous slices of every run's items (one process or machine per "
                          "shard, each with its own --out); medfuzz report / compare merge the N shards of a run "
                          "into one run before any statistic. auto: K and N from a Slurm job array "
                          "(SLURM_ARRAY_TASK_ID/_MIN/_COUNT) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX; "
                          "N from auto/N or MEDFUZZ_SHARD_COUNT); docs/performance.md P8")
    from medfuzz.models.local import default_threads

    run.add_argument("--threads", type=int, default=default_threads(),
                     help="CPU threads of the embedded model (default: 2, or fewer where this process may use "
                          "fewer cores); its OpenMP threads wait passively unless OMP_WAIT_POLICY says otherwise")
    run.add_argument("--no-report", action="store_true", help="skip medfuzz report at the end")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan (runs, items, the most model calls each can make) and stop: no model is "
                          "called, nothing is written")
    run.add_argument("--no-preflight", action="store_true",
                     help="skip the checks before the first paid call (endpoint reachable, key accepted, lm-eval "
                          "model arguments and tokenizer)")
    run.set_defaults(func=_run)
