"""``medfuzz run``: the robustness suite on any model the harnesses support (``medfuzz.cli.suite.plan``).

    medfuzz run --model embedded --attacker template --level demo --data demo --out medfuzz-demo
    medfuzz run --model openai-api/vllm/my-model --attacker openai/gpt-4o --data hf --limit 100 --out runs/my-model

Running the same command again finishes what an interruption left: finished runs and samples are reused and
finished model calls come from the cache, so only the calls in flight at the interrupt are paid again.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from medfuzz.errors import MedfuzzError


def plan_from(args: argparse.Namespace) -> Any:
    from medfuzz.cli.suite.plan import SuitePlan

    return SuitePlan.from_arguments(args)


def execute(plan: Any, **how: Any) -> Any:
    """``run_suite_plan`` with ``RunOptions(**how)``, this command's summary and its report page (``report``)."""
    from medfuzz.cli.suite.run import RunOptions, run_suite_plan

    return run_suite_plan(plan, RunOptions(**how), summary_lines=_summary_lines, write_report=_write_report)


def _summary_lines(plan: Any, logs: Any, lm_eval_out: Path | None, model: str) -> list[str]:
    from medfuzz.cli.summary import summary_lines

    return summary_lines(plan, logs, lm_eval_out, model)


def _write_report(folders: list[Path], out: Path) -> tuple[Path | None, list[str]]:
    from medfuzz.report import render_all

    written = render_all(folders, out)  # prints each of its problems as it finds them
    return written.index, [problem.line() for problem in written.problems]


def _run(args: argparse.Namespace) -> int:
    from medfuzz.cli.suite import stop as run_stop

    return run_stop.run_stoppable(lambda: _run_installed(args), "medfuzz run")


def _run_installed(args: argparse.Namespace) -> int:
    from medfuzz.cli.suite.run import RunOptions
    from medfuzz.options import flag_values

    try:
        plan = plan_from(args)
        how = flag_values(RunOptions, args)  # --price and --expect are read here: a typo is one line
    except MedfuzzError as err:
        raise SystemExit(f"medfuzz run: {err}") from None
    done = execute(plan, **how)
    if done.error is not None:
        raise SystemExit(f"medfuzz run: {done.error}")
    if done.index is not None:
        print(f"report: {done.index}", flush=True)
    return done.code


def add_parser(commands: Any) -> None:
    """What to run (``SuitePlan``'s fields), then how (``RunOptions``'): every option is declared on its field."""
    from medfuzz.cli.suite.plan import SuitePlan
    from medfuzz.cli.suite.run import RunOptions
    from medfuzz.options import add_flags

    run = commands.add_parser(
        "run", help="the robustness suite (clean, TCES, MedGuard, MedFuzz) on one model as one resumable "
                    "Inspect eval set, optionally lm-eval too, then the report", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(run, SuitePlan)
    add_flags(run, RunOptions)
    run.set_defaults(func=_run)
