"""``medfuzz report`` (plots, tables and the page from Inspect logs / lm-eval results) and ``medfuzz compare``
(MedGuard, MedFuzz and TCES across models)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from medfuzz.stats import DEFAULT_ALPHA


def _report(args: argparse.Namespace) -> int:
    """Exit 0 when every section was drawn and every input used; 1 when any section failed or any input could
    not be used (each already named on stderr as it was found), or when nothing could be reported."""
    import sys

    from medfuzz.report import render_all

    _check_out(args.out, "medfuzz report")
    try:
        done = render_all([Path(p) for p in args.logs], Path(args.out))
    except FileNotFoundError as err:  # a log path that does not exist: one line, nothing written
        raise SystemExit(f"medfuzz report: {err}") from None
    files = [path for paths in done.values() for path in paths]
    for method, paths in done.items():
        for path in paths:
            print(f"{method}: {path}")
    if not files:
        print("medfuzz report: no MedFuzz, TCES or MedGuard results found in", ", ".join(args.logs), file=sys.stderr)
        return 1
    if done.problems:
        where = f"; the page lists them: {done.index}" if done.index is not None else ""
        print(f"medfuzz report: {len(done.problems)} problem(s) above{where}", file=sys.stderr)
        return 1
    return 0


def _check_out(out: str | None, command: str) -> None:
    """``--out`` must be a folder (or not exist yet): one line, not a traceback from mkdir."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise SystemExit(f"{command}: --out {out} is a file; name a folder (it is created if missing)")


def _compare_medguard(args: argparse.Namespace, paths: list[Path]) -> None:
    """MedGuard model comparison over Inspect logs / lm-eval results (see medfuzz.report.medguard)."""
    from medfuzz.report.medguard import compare, render

    result = compare(paths, alpha=args.alpha)
    print("Safety indices (± bootstrap SE, 9,999 resamples); chance = a uniform random guesser's score\n")
    print(result.table())
    print("\nAnswer letters per aspect (position bias; the keys are balanced)\n")
    print(result.position_table())
    print("\nPairwise two-sided McNemar: raw p (the paper's criterion) and Holm-adjusted p\n")
    print(result.mcnemar_table())
    print("\nRankings\n")
    print(result.ranking_text())
    if args.out:
        for written in render(paths, Path(args.out)):
            print(f"wrote {written}")


def _compare(args: argparse.Namespace) -> int:
    """The MedGuard comparison when MedGuard runs are among the paths, and the MedFuzz / TCES comparison
    (``medfuzz.report.compare``) when those are; exit 1 when an input could not be used (named on stderr)."""
    import tempfile

    from medfuzz.report import collect_logs, usable_logs
    from medfuzz.report.log_reader import read_once
    from medfuzz.report.problems import Problems
    from medfuzz.report.shards import merge_shards

    # as in medfuzz report: unreadable logs, missing shards and mixed shards are named, and the exit is 1
    _check_out(args.out, "medfuzz compare")
    problems = Problems(command="medfuzz compare")
    with read_once(), tempfile.TemporaryDirectory(prefix="medfuzz-compare-") as scratch:
        # shards of one run are merged into it first (written under --out, else a scratch folder)
        logs = usable_logs(collect_logs([Path(p) for p in args.paths]), Path(args.out or "."), problems)
        paths = merge_shards(logs, Path(args.out or scratch), problems)
        code = _compare_paths(args, paths)
    return 1 if problems else code


def _compare_paths(args: argparse.Namespace, paths: list[Path]) -> int:
    from medfuzz.report import compare as attacks
    from medfuzz.report.medguard import load_runs as medguard_runs

    found = False
    if medguard_runs(paths):
        found = True
        _compare_medguard(args, paths)
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


def add_parsers(commands: Any) -> None:
    comp = commands.add_parser("compare", help="compare models on MedGuard, MedFuzz and TCES from Inspect logs / "
                                               "lm-eval results")
    comp.add_argument("paths", nargs="+", help="log files or folders (other runs are ignored)")
    comp.add_argument("--out", default=None, help="also write charts, tables, JSON and HTML here")
    comp.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                      help="significance level (p <= alpha) after Holm correction")
    comp.set_defaults(func=_compare)

    report = commands.add_parser("report", help="plots and tables from Inspect logs / lm-eval results")
    report.add_argument("logs", nargs="+", help="log files or folders (searched recursively)")
    report.add_argument("--out", default="report", help="folder for the plots and tables")
    report.set_defaults(func=_report)
