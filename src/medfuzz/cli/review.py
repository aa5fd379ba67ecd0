"""``medfuzz review import``: completed expert-review sheets of MedFuzz attacks read back (share validated,
agreement between two reviewers)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    review = commands.add_parser("review", help="expert review of MedFuzz attacks (sheets from medfuzz report)")
    review_commands = review.add_subparsers(dest="review_command", required=True)
    read = review_commands.add_parser(
        "import", help="read one or two completed review sheets back: share validated, kappa between reviewers")
    read.add_argument("sheets", nargs="+", metavar="SHEET", help="completed medfuzz_review.csv (one per reviewer, "
                                                                 "at most two)")
    read.add_argument("--log", nargs="+", required=True, help="the MedFuzz Inspect logs (files or folders) the "
                                                              "sheet was written from")
    read.add_argument("--out", default="medfuzz_review.json", help="JSON report (default medfuzz_review.json)")
    read.set_defaults(func=_review_import)


def _review_import(args: argparse.Namespace) -> int:
    from medfuzz.report.review import import_reviews

    report = import_reviews([Path(s) for s in args.sheets], [Path(p) for p in args.log], Path(args.out))
    print(report.text())
    print(f"\nwrote {args.out}")
    return 0
