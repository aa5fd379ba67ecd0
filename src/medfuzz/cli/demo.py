"""``medfuzz demo``: a short robustness evaluation on the embedded model and the bundled data, through both
harnesses, ending with the report page. It is ``medfuzz run --model embedded --attacker template --level demo
--data demo --lm-eval embedded`` (``suite_plan``; the same run as ``medfuzz run --model embedded --level demo
--lm-eval embedded``), which ends with a summary in words (``medfuzz.cli.summary``).

1. Inspect, one eval set against the embedded SmolLM2 server: the clean baseline (strict and lenient scoring); TCES on
   drugs and diseases with RandS and PDWS (n = -20), budget 8; MedGuard on the balanced bundled build; MedFuzz
   with SmolLM2 as the target and the deterministic *template attacker* (no LLM: a 135M model cannot write
   valid rewrites, so the attacks come from a bank of patient-characteristic sentences and one red herring
   that names a distractor).
2. lm-eval, the same GGUF in-process (``medfuzz-local``): the clean baseline, the single-query TCES tasks,
   the MedGuard group and MedFuzz on the items the Inspect run fuzzed.
3. ``medfuzz report`` on every log; the page's path is printed last.

Ctrl-C stops the server; running the same command again finishes what was interrupted without paying twice.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class DemoPlan:
    out: Path
    threads: int = 2
    limit: int | None = 10  # clean-baseline items (the attacks pick their own subsets)
    quick: bool = False  # a smaller run for the end-to-end test: drugs and RandS only, fewer items


def suite_plan(plan: DemoPlan) -> Any:
    """The demo as a ``medfuzz run``: the embedded model, the template attacker, level demo (quick: level
    quick) on the bundled items; ``--limit`` sets the clean baseline's items."""
    from medfuzz.cli.suite.plan import EMBEDDED, TEMPLATE_ATTACKER, SuitePlan

    return SuitePlan(model=EMBEDDED, out=plan.out, attacker=TEMPLATE_ATTACKER, level="quick" if plan.quick else "demo",
                     data="demo", limits={"baseline": plan.limit} if plan.limit else {})


def run_demo(plan: DemoPlan) -> int:
    """``medfuzz run`` with the demo's plan; it prints the summary in words and the report's path last."""
    from medfuzz.cli.run import execute

    done = execute(suite_plan(plan), lm_eval="embedded", threads=plan.threads)
    if done.error is not None:  # a busy folder, a bad data file: one line
        raise SystemExit(f"medfuzz demo: {done.error}")
    if done.index is not None:
        print(f"report: {done.index}")
    return done.code


def _demo(args: argparse.Namespace) -> int:
    from medfuzz.cli.suite import stop as run_stop

    # one interrupt stops the demo as it stops medfuzz run (and its server: no orphan)
    plan = DemoPlan(out=Path(args.out).resolve(), threads=args.threads, limit=args.limit, quick=args.quick)
    return run_stop.run_stoppable(lambda: run_demo(plan), "medfuzz demo")


def add_parser(commands: Any) -> None:
    demo = commands.add_parser("demo", help="a short robustness evaluation (clean, TCES, MedGuard, MedFuzz) on the "
                                            "embedded model through Inspect and lm-eval, then the report page")
    demo.add_argument("--out", default="medfuzz-demo", help="folder for logs and results")
    demo.add_argument("--limit", type=int, default=10, help="clean-baseline items (of the 50 bundled)")
    demo.add_argument("--threads", type=int, default=2)
    demo.add_argument("--quick", action="store_true", help="a smaller run (drugs and RandS only, fewer items)")
    demo.set_defaults(func=_demo)
