"""``medfuzz validate``: every statistic checked against planted known-truth models (docs/validation.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _validate(args: argparse.Namespace) -> int:
    from medfuzz.validation.run import main as validate_main

    return validate_main(args.size, Path(args.out), seed=args.seed, spec=args.spec, fail_fast=args.fail_fast)


def add_parser(commands: Any) -> None:
    validate = commands.add_parser("validate", help="check every statistic against planted known-truth models")
    validate.add_argument("--size", choices=("ci", "full"), default="full", help="ci: seconds; full: minutes")
    validate.add_argument("--out", default="medfuzz-validation", help="folder for validation.json and the plot")
    validate.add_argument("--seed", type=int, default=0)
    validate.add_argument("--spec", default=None, help="a planted spec YAML (default: the bundled one)")
    validate.add_argument("--fail-fast", action="store_true",
                          help="run the cheapest checks first and stop at the first failing one (exit 1); for "
                               "checking a change quickly: a passing run still runs every check")
    validate.set_defaults(func=_validate)
