"""``medfuzz`` command line: serve the embedded model, run the demo, print the lm-eval task folder."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from medfuzz.scorers.stats import DEFAULT_ALPHA
from medfuzz.tasks import LM_EVAL_TASKS_PATH


def _tasks_path(_: argparse.Namespace) -> int:
    print(LM_EVAL_TASKS_PATH)
    return 0


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # SIGTERM would otherwise end this process without leaving the ``with`` block, orphaning the server
    # (it runs in its own session so a terminal's Ctrl-C reaches us, not it)
    raise KeyboardInterrupt


def _serve(args: argparse.Namespace) -> int:
    import signal

    from medfuzz.models.local import start_server

    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _stop_on_sigterm)
    with start_server(port=args.port, threads=args.threads, context=args.context) as server:
        print(server.usage_text(), flush=True)
        print("\nPress Ctrl-C to stop.", flush=True)
        try:
            while server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


def _planted_serve(args: argparse.Namespace) -> int:
    """Serve the planted (known-truth) models until Ctrl-C / SIGTERM (see docs/validation.md)."""
    import signal

    from medfuzz.models.planted.server import launch
    from medfuzz.models.planted.spec import PlantedSpec

    spec = PlantedSpec.load(args.spec)
    if args.data:
        spec = spec.with_target(data=args.data)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    server = launch(spec, port=args.port or 0, latency_ms=args.latency_ms)
    print(server.usage_text(), flush=True)
    print("\nPress Ctrl-C to stop.", flush=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _validate(args: argparse.Namespace) -> int:
    """Known-truth validation on planted models (docs/validation.md)."""
    from medfuzz.validation.run import main as validate_main

    return validate_main(args.size, Path(args.out), seed=args.seed, spec=args.spec)


def _script(name: str) -> str:
    """A console script of this environment (the one medfuzz runs in), falling back to PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def _run(command: list[str], env: dict[str, str], log: Path) -> None:
    print(f"$ {' '.join(command)}", flush=True)
    with log.open("w") as handle:
        result = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"command failed with exit code {result.returncode}; log {log}:\n{tail}")


def _demo(args: argparse.Namespace) -> int:
    import signal

    from medfuzz.tasks.demo import DemoPlan, run_demo

    for stop in (signal.SIGTERM, signal.SIGHUP):  # leave the server's ``with`` block instead of orphaning it
        signal.signal(stop, _stop_on_sigterm)
    return run_demo(DemoPlan(out=Path(args.out).resolve(), threads=args.threads, limit=args.limit, quick=args.quick))


def _compare(args: argparse.Namespace) -> int:
    from medfuzz.report.commands import compare

    return compare(args, medguard=_compare_medguard)


def _compare_medguard(args: argparse.Namespace) -> int:
    """MedGuard model comparison over Inspect logs / lm-eval results (see medfuzz.report.medguard)."""
    from medfuzz.report.medguard import compare, render

    paths = [Path(p) for p in args.paths]
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
    return 0


def _report(args: argparse.Namespace) -> int:
    from medfuzz.report import render_all

    written = render_all([Path(p) for p in args.logs], Path(args.out))
    files = [path for paths in written.values() for path in paths]
    for method, paths in written.items():
        for path in paths:
            print(f"{method}: {path}")
    if not files:
        print("medfuzz report: no MedFuzz, TCES or MedGuard results found in", ", ".join(args.logs))
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medfuzz", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    paths = commands.add_parser("tasks-path", help="print the lm-eval task folder (for --include_path)")
    paths.set_defaults(func=_tasks_path)

    serve = commands.add_parser("serve", help="serve the embedded SmolLM2 model (OpenAI-compatible)")
    serve.add_argument("--port", type=int, default=None, help="default: a free port")
    serve.add_argument("--threads", type=int, default=2)
    serve.add_argument("--context", type=int, default=4096)
    serve.set_defaults(func=_serve)

    planted = commands.add_parser("planted", help="known-truth planted models (docs/validation.md)")
    planted_commands = planted.add_subparsers(dest="planted_command", required=True)
    planted_serve = planted_commands.add_parser("serve", help="serve the planted target and attacker "
                                                              "(OpenAI-compatible, 127.0.0.1)")
    planted_serve.add_argument("--spec", default="default", help="a bundled spec name or a YAML path")
    planted_serve.add_argument("--data", default=None, help="override the spec's target.data (demo or a file)")
    planted_serve.add_argument("--port", type=int, default=None, help="default: a free port")
    planted_serve.add_argument("--latency-ms", type=float, default=0.0,
                               help="fixed delay before every model call's reply (imitate a real endpoint)")
    planted_serve.set_defaults(func=_planted_serve)

    validate = commands.add_parser("validate", help="check every statistic against planted known-truth models")
    validate.add_argument("--size", choices=("ci", "full"), default="full", help="ci: seconds; full: minutes")
    validate.add_argument("--out", default="medfuzz-validation", help="folder for validation.json and the plot")
    validate.add_argument("--seed", type=int, default=0)
    validate.add_argument("--spec", default=None, help="a planted spec YAML (default: the bundled one)")
    validate.set_defaults(func=_validate)

    demo = commands.add_parser("demo", help="a short robustness evaluation (clean, TCES, MedGuard, MedFuzz) on the "
                                            "embedded model through Inspect and lm-eval, then the report page")
    demo.add_argument("--out", default="medfuzz-demo", help="folder for logs and results")
    demo.add_argument("--limit", type=int, default=10, help="clean-baseline items (of the 50 bundled)")
    demo.add_argument("--threads", type=int, default=2)
    demo.add_argument("--quick", action="store_true", help="a smaller run (drugs and RandS only, fewer items)")
    demo.set_defaults(func=_demo)

    comp = commands.add_parser("compare", help="compare models on MedGuard, MedFuzz and TCES from Inspect logs / "
                                               "lm-eval results")
    comp.add_argument("paths", nargs="+", help="log files or folders (other runs are ignored)")
    comp.add_argument("--out", default=None, help="also write charts, tables, JSON and HTML here")
    comp.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                      help="significance level (p <= alpha) after Holm correction")
    comp.set_defaults(func=_compare)

    from medfuzz.report.commands import add_review
    from medfuzz.sweep_cli import add_parser as add_sweep_parser

    add_review(commands)
    add_sweep_parser(commands)

    report = commands.add_parser("report", help="plots and tables from Inspect logs / lm-eval results")
    report.add_argument("logs", nargs="+", help="log files or folders (searched recursively)")
    report.add_argument("--out", default="report", help="folder for the plots and tables")
    report.set_defaults(func=_report)

    from medfuzz.explain_cli import add_parser as add_explain_parser

    add_explain_parser(commands)

    # the MedGuard builder has its own argument parser (medfuzz.medguard_cli); main() hands it the rest
    commands.add_parser("medguard", help="build a MedGuard benchmark file, or show what one holds "
                                         "(medfuzz medguard build|show --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["medguard"]:
        from medfuzz.medguard_cli import main as medguard_main

        return medguard_main(argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
