"""``medfuzz serve`` (the embedded SmolLM2 server) and ``medfuzz planted serve`` (the known-truth models)."""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any


def stop_on_signal(signum: int, frame: object) -> None:
    """SIGTERM / SIGHUP as Ctrl-C: they would otherwise end this process without leaving the ``with`` block that
    stops a server, orphaning it (it runs in its own session so a terminal's Ctrl-C reaches us, not it)."""
    raise KeyboardInterrupt


def stop_servers_on_signals() -> None:
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, stop_on_signal)


def _serve(args: argparse.Namespace) -> int:
    from medfuzz.models.local import start_server

    stop_servers_on_signals()
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
    from medfuzz.planted.server import TransientFaults, launch
    from medfuzz.planted.spec import PlantedSpec

    spec = PlantedSpec.load(args.spec)
    if args.data:
        spec = spec.with_target(data=args.data)
    if args.columns:
        spec = spec.with_target(columns=args.columns)
    try:
        faults = TransientFaults.parse(args.faults) if args.faults else None
    except ValueError as err:
        raise SystemExit(f"medfuzz planted serve: {err}") from None
    stop_servers_on_signals()
    server = launch(spec, port=args.port or 0, latency_ms=args.latency_ms, faults=faults)
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


def add_parsers(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve the embedded SmolLM2 model (OpenAI-compatible)")
    serve.add_argument("--port", type=int, default=None, help="default: a free port")
    serve.add_argument("--threads", type=int, default=2,
                       help="CPU threads for prompt evaluation (default 2); the embedded model generates on one")
    serve.add_argument("--context", type=int, default=4096)
    serve.set_defaults(func=_serve)

    planted = commands.add_parser("planted", help="known-truth planted models (docs/validation.md)")
    planted_commands = planted.add_subparsers(dest="planted_command", required=True)
    planted_serve = planted_commands.add_parser("serve", help="serve the planted target and attacker "
                                                              "(OpenAI-compatible, 127.0.0.1)")
    planted_serve.add_argument("--spec", default="default", help="a bundled spec name or a YAML path")
    planted_serve.add_argument("--data", default=None, help="override the spec's target.data: demo or a file in any "
                                                            "layout medfuzz reads (your own benchmark)")
    planted_serve.add_argument("--columns", default=None, help="a column mapping for --data in another layout "
                                                               "(question:COL,options:COL|COL|...,answer:COL)")
    planted_serve.add_argument("--port", type=int, default=None, help="default: a free port")
    planted_serve.add_argument("--latency-ms", type=float, default=0.0,
                               help="fixed delay before every model call's reply (imitate a real endpoint)")
    planted_serve.add_argument("--faults", default=None, metavar="RATE[:KINDS]",
                               help="transient faults like a busy endpoint's: a seeded share of distinct calls fail "
                                    "on their first attempt with 500, 429 or a hang (e.g. 0.1 or 0.1:500+429)")
    planted_serve.set_defaults(func=_planted_serve)
