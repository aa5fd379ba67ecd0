"""``medfuzz``: the command line, one module per command (heavy imports happen when a command runs).

``run`` is the main job (the robustness suite on a model); ``demo`` is ``run`` on the embedded model with the
template attacker. The rest: ``serve`` / ``planted serve`` (models), ``validate`` (planted known-truth checks),
``report`` / ``compare`` / ``review`` (reading results), ``sweep`` and ``explain`` (TCES studies), ``medguard``
(building a MedGuard benchmark) and ``tasks-path`` (the lm-eval task folder). ``medfuzz-lm-eval`` is
``medfuzz.cli.lm_eval``.
"""

from __future__ import annotations

import argparse
import sys

from medfuzz.tasks import LM_EVAL_TASKS_PATH


def _tasks_path(_: argparse.Namespace) -> int:
    print(LM_EVAL_TASKS_PATH)
    return 0


def _version() -> str:
    """medfuzz's installed version and the harness versions beside it (what a bug report needs)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"{of('medfuzz')} (inspect-ai {of('inspect-ai')}, lm-eval {of('lm-eval')})"


def build_parser() -> argparse.ArgumentParser:
    from medfuzz.cli import demo, explain, report, review, run, serve, sweep, validate

    parser = argparse.ArgumentParser(prog="medfuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print medfuzz's version, with the harnesses' it runs on, and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    run.add_parser(commands)
    demo.add_parser(commands)
    paths = commands.add_parser("tasks-path", help="print the lm-eval task folder (for --include_path)")
    paths.set_defaults(func=_tasks_path)
    serve.add_parsers(commands)
    validate.add_parser(commands)
    report.add_parsers(commands)
    review.add_parser(commands)
    sweep.add_parser(commands)
    explain.add_parser(commands)
    # the MedGuard builder has its own argument parser (medfuzz.cli.medguard); main() hands it the rest
    commands.add_parser("medguard", help="build a MedGuard benchmark file, or show what one holds "
                                         "(medfuzz medguard build|show --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["medguard"]:
        from medfuzz.cli.medguard import main as medguard_main

        return medguard_main(argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
