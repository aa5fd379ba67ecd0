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
    from medfuzz.tasks.suite import EMBEDDED, LEVELS, TEMPLATE_ATTACKER, SuitePlan

    # the embedded 135M model cannot write valid rewrites: it is attacked by the template attacker unless told
    attacker = args.attacker or (TEMPLATE_ATTACKER if args.model.strip() == EMBEDDED else None)
    plan = SuitePlan(
        model=args.model, out=Path(args.out).resolve(), attacker=attacker,
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()), level=args.level,
        data=args.data or LEVELS[args.level].data,
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
    code: int  # exit code: 0 done, 1 some run did not finish, 130 interrupted
    logs: dict[str, Any] = field(default_factory=dict)  # label -> EvalLog header
    lm_eval_out: Path | None = None
    index: Path | None = None  # the report page


def execute(plan: Any, lm_eval: str | None = None, threads: int = 2, report: bool = True,
            lm_eval_limits: dict[str, int] | None = None) -> Executed:
    """Run the suite, then lm-eval when asked, then the report. The embedded server is started here and stopped on
    leaving (also on Ctrl-C / SIGTERM / SIGHUP)."""
    import contextlib

    from medfuzz.tasks import suite
    from medfuzz.tasks.suite_progress import SuiteProgress, run_methods

    started = time.monotonic()
    lm = suite.LmEvalPlan.parse(lm_eval, threads) if lm_eval else None
    out_lm: Path | None = None
    try:  # from the first step: Ctrl-C while the tasks load (TCES embeds its vocabulary) ends as cleanly
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
        print("  building the tasks (TCES embeds its vocabularies once; later runs read them from the cache)",
              flush=True)
        built = suite.build_tasks(plan)
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
            outcome = suite.run_suite(plan, built, models, progress)
            if any(entry.status == "cancelled" for entry in outcome.logs.values()):
                raise KeyboardInterrupt  # Inspect ends a run on Ctrl-C and returns what it has
        print(f"Inspect: {len(outcome.logs)} runs in {plan.out / 'inspect'} ({outcome.reused} found finished and "
              f"reused); {progress.calls:,} model calls paid now, {progress.tokens:,} tokens "
              f"[{time.monotonic() - started:.0f} s]", flush=True)
        if lm is not None and plan.shard is not None:
            print("--lm-eval: skipped with --shard (lm-eval runs have no shards to merge; run it once, unsharded)",
                  flush=True)
        elif lm is not None and len(models) > 1:
            print("--lm-eval: skipped with several --model values (one lm-eval model per run)", flush=True)
        elif lm is not None:
            from medfuzz.solvers.medfuzz.store import ATTACKED

            fuzzed = outcome.logs.get("medfuzz")
            from medfuzz.report._logs import local_path

            fuzzed_path = local_path(fuzzed.location) if fuzzed is not None and fuzzed.status == "success" else None
            if fuzzed_path is not None and not _has_fuzzed(fuzzed_path, ATTACKED):
                fuzzed_path = None
            out_lm = suite.run_lm_eval(plan, lm, fuzzed_path, plan.out / "lm-eval.out",
                                       {**suite.LEVELS[plan.level].lm_eval, **(lm_eval_limits or {})},
                                       model_label=models[0])
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM / SIGHUP (turned into this); the server is stopped
        print(f"\n[{time.monotonic() - started:6.1f}s] interrupted; finished logs in {plan.out}. Run the same "
              "command again to finish: finished runs, samples and model calls are not paid again.", flush=True)
        return Executed(130)
    from medfuzz.cli.summary import summary_lines
    from medfuzz.tasks.suite import SUITE_KEY

    finished: dict[str, dict[str, Any]] = {}  # model -> label -> log header
    for key, entry in outcome.logs.items():
        if entry.status == "success":
            finished.setdefault(entry.eval.model, {})[entry.eval.metadata[SUITE_KEY]] = entry
        else:
            print(f"  {key}: {entry.status}: {entry.error.message if entry.error else ''}".rstrip(), flush=True)
    for model, logs in finished.items():
        for line in summary_lines(plan, logs, out_lm, model):
            print(line, flush=True)
    index = None
    if report:
        from medfuzz.report import render_all

        folders = [plan.out / "inspect", *([out_lm] if out_lm else [])]
        written = render_all(folders, plan.out / "report")
        index = next((p for paths in written.values() for p in paths if p.name == "index.html"), None)
    if not outcome.success:
        unfinished = [label for label, entry in outcome.logs.items() if entry.status != "success"]
        print(f"medfuzz run: {', '.join(unfinished) or 'some runs'} did not finish; run the same command again to "
              "resume them", file=sys.stderr)
    return Executed(0 if outcome.success else 1, outcome.logs, out_lm, index)


def _has_fuzzed(log: Path, outcomes: tuple[str, ...]) -> bool:
    from medfuzz.tasks.inspect.medfuzz import fuzzed_from_log

    return any(r["outcome"] in outcomes for r in fuzzed_from_log(log))


def _run(args: argparse.Namespace) -> int:
    from inspect_ai._util.error import PrerequisiteError

    from medfuzz.cli.serve import stop_servers_on_signals
    from medfuzz.tasks.inspect._errors import USER_ERRORS

    stop_servers_on_signals()
    try:
        plan = plan_from(args)
        done = execute(plan, lm_eval=args.lm_eval, threads=args.threads, report=not args.no_report)
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
    run.set_defaults(func=_run)
