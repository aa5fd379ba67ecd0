"""Command-line entry points of ``medfuzz review import`` and the MedFuzz / TCES part of ``medfuzz compare``
(kept out of ``medfuzz.cli`` so that module stays a list of commands; heavy imports happen on use)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def add_review(commands: argparse._SubParsersAction) -> None:
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


def compare(args: argparse.Namespace, medguard: Callable[[argparse.Namespace], int]) -> int:
    """``medfuzz compare``: the MedGuard comparison (``medguard``) when MedGuard runs are among the paths, and
    the MedFuzz / TCES comparison (``medfuzz.report.compare``) when those are."""
    from medfuzz.report import compare as attacks
    from medfuzz.report.medguard import load_runs as medguard_runs

    paths = [Path(p) for p in args.paths]
    found = False
    if medguard_runs(paths):
        found = True
        medguard(args)
    runs = attacks.load_runs(paths)
    if runs:
        found = True
        result = attacks.compare(paths, alpha=args.alpha, runs=runs)
        print("\nMedFuzz / TCES: attacked accuracy ± bootstrap SE per model, pairwise exact McNemar (Holm), transfer\n")
        print(result.markdown())
        if args.out:
            for written in attacks.write(result, Path(args.out)):
                print(f"wrote {written}")
    if not found:
        raise SystemExit(f"medfuzz compare: no MedGuard, MedFuzz or TCES run under {', '.join(args.paths)}")
    return 0
