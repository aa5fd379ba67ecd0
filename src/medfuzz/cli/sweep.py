"""``medfuzz sweep tces``: the TCES n-sweep and DiscreteZOO M study as one resumable Inspect eval set
(``medfuzz.cli.suite.sweep``); ``medfuzz.cli`` registers this parser."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from medfuzz.errors import MedfuzzError


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise MedfuzzError(f"{flag} {value!r}: expected NAME=VALUE")
        pairs[name.strip().replace("-", "_")] = rest.strip()
    return pairs


def _run(args: argparse.Namespace) -> int:
    from medfuzz.cli.suite.sweep import TCESSweep, cli_value, parse_grid

    options = {name: cli_value(value) for name, value in _pairs(args.task_args, "-T").items()}
    for name in ("data", "split", "limit", "columns", "data_name"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    sweep = TCESSweep(
        name=args.name, benchmark=args.benchmark,
        entities=tuple(e.strip() for e in args.entity.split(",") if e.strip()),
        n_grid=parse_grid(args.n_grid, "--n-grid"), zoo_m=parse_grid(args.zoo_m, "--zoo-m", int),
        options=options, vocabularies=_pairs(args.vocabulary, "--vocabulary"), zoo_budget=args.zoo_budget)
    if args.print_commands:
        roles = [f"{k}={v}" for k, v in _pairs(args.model_role, "--model-role").items()]
        print("\n".join(sweep.commands(args.model, args.log_dir, roles)))
        return 0
    from medfuzz.cli.suite.sweep import run_sweep

    runs = sweep.runs()
    print(f"sweep {sweep.name}: {len(runs)} runs ({len(sweep.entities)} entity type(s) × "
          f"{len(sweep.n_grid)} PDWS n + {len(sweep.zoo_m)} DiscreteZOO M) in {args.log_dir}", flush=True)
    for note in sweep.warnings():
        print(f"note: {note}", flush=True)
    extra = {"retry_attempts": args.retry_attempts, "max_tasks": args.max_tasks, "max_samples": args.max_samples,
             "log_dir_allow_dirty": args.log_dir_allow_dirty, "display": args.display}
    outcome = run_sweep(sweep, args.model, args.log_dir, _pairs(args.model_role, "--model-role"),
                        **{k: v for k, v in extra.items() if v is not None})
    done = sum(entry.status == "success" for entry in outcome.logs)
    print(f"sweep {sweep.name}: {done}/{len(runs)} runs finished ({outcome.reused} found finished in the folder and "
          f"reused, {len(outcome.logs) - outcome.reused} run now)")
    if args.report:
        from medfuzz.report import render_all

        written = render_all([Path(args.log_dir)], Path(args.report))
        for path in written.get("index", []):
            print(f"report: {path}")
    if not outcome.success:
        print("some runs did not finish: run the same command again to resume them", file=sys.stderr)
        return 1
    return 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``medfuzz sweep tces ...``"""
    sweep = commands.add_parser("sweep", help="parameter sweeps as one resumable Inspect eval set (docs/tces.md)")
    kinds = sweep.add_subparsers(dest="sweep_command", required=True)
    tces = kinds.add_parser(
        "tces", help="TCES: PDWS n-sweep (paper Fig. 2) and DiscreteZOO gradient points M (App. E)",
        description="Run the TCES n grid (PDWS) and the DiscreteZOO M grid for each entity type as one Inspect "
                    "eval_set in --log-dir. Run the same command again to resume: finished runs are reused. "
                    "Then `medfuzz report LOG_DIR` draws the two-regime figure and the M study.")
    # `--n-grid -50,-20,0` must read "-50,-20,0" as a value: argparse takes a word that starts with "-" for an
    # option unless it looks like a negative number, so comma lists of numbers are made to look like one
    tces._negative_number_matcher = re.compile(r"^-\d*\.?\d+([eE][-+]?\d+)?(,\s*-?\d*\.?\d+([eE][-+]?\d+)?)*,?$")
    tces.add_argument("--model", required=True, help="the target, any Inspect model (e.g. openai/gpt-4o-mini)")
    tces.add_argument("--model-role", action="append", default=[], metavar="ROLE=MODEL",
                      help="an Inspect model role (TCES itself uses only the target)")
    tces.add_argument("--log-dir", required=True, help="the eval set's folder (one sweep per folder)")
    tces.add_argument("--name", default="tces", help="the sweep's name, recorded in each log's metadata")
    from medfuzz.benchmarks.registry import BENCHMARKS, DEFAULT_BENCHMARK

    tces.add_argument("--benchmark", default=DEFAULT_BENCHMARK, choices=tuple(BENCHMARKS),
                      help="a benchmark of benchmarks.registry (mcq: your own data, given with --data)")
    tces.add_argument("--entity", default="drugs,diseases", help="entity types, comma-separated")
    tces.add_argument("--n-grid", default="-50,-20,-5,0,5,20,50", help="PDWS exponents n (paper: -50..50); "
                                                                       "empty for none")
    tces.add_argument("--zoo-m", default="2,5,10", help="DiscreteZOO gradient points M (paper: 2,5,10); "
                                                         "empty for none")
    tces.add_argument("--zoo-budget", type=int, default=None,
                      help="query budget of the DiscreteZOO runs (default: the -T budget)")
    tces.add_argument("--vocabulary", action="append", default=[], metavar="ENTITY=PATH",
                      help="vocabulary file for one entity type (default: builtin)")
    tces.add_argument("--data", default=None, help="hf (default), demo, a file in any layout medfuzz reads or "
                                                   "hf:OWNER/NAME")
    tces.add_argument("--columns", default=None, help="a column mapping for a file in another layout "
                                                      "(question:COL,options:COL|COL|...,answer:COL)")
    tces.add_argument("--data-name", default=None, help="the data's name in the logs (default: the file's stem)")
    tces.add_argument("--split", default=None)
    tces.add_argument("--limit", type=int, default=None, help="items per run (the first N)")
    tces.add_argument("-T", dest="task_args", action="append", default=[], metavar="NAME=VALUE",
                      help="any other TCES option for every run (budget, embedding, seed, temperature, ...)")
    tces.add_argument("--retry-attempts", type=int, default=None, help="eval_set retries of failed runs")
    tces.add_argument("--max-tasks", type=int, default=None, help="runs in parallel")
    tces.add_argument("--max-samples", type=int, default=None, help="samples in parallel per run")
    tces.add_argument("--log-dir-allow-dirty", action="store_true", default=None,
                      help="allow logs of other runs in --log-dir")
    tces.add_argument("--display", default=None, help="Inspect display (full, rich, plain, none)")
    tces.add_argument("--report", default=None, metavar="OUT", help="then write `medfuzz report` here")
    tces.add_argument("--print-commands", action="store_true",
                      help="print the equivalent `inspect eval-set` command lines and exit")
    tces.set_defaults(func=_run)
