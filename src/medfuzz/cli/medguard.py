"""``medfuzz medguard``: build a MedGuard benchmark file, or show what one holds.

    medfuzz medguard build --out medguard.jsonl                      # bundled demo sources
    medfuzz medguard build --out mg.jsonl --medqa ../shared/data/medqa_us_4options/dev.jsonl \\
        --pubmedqa ../shared/data/pubmedqa/test_set.json --equity my_mimic_cases.jsonl \\
        --generator-model gpt-4o --generator-base-url https://api.openai.com/v1      # LLM rewrites
    medfuzz medguard build --out mg.jsonl --generator-model local    # the embedded SmolLM2
    medfuzz medguard show mg.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import typing
from collections import Counter

from medfuzz.models import ChatModel
from medfuzz.options import ConfigError
from medfuzz.solvers.medguard import builders
from medfuzz.solvers.medguard.config import MedGuardConfig

# ``defer_generation`` is Inspect's (a run-time generator role); a build writes its items now
BUILD_OPTIONS = tuple(f for f in dataclasses.fields(builders.BuildConfig) if f.name != "defer_generation")


def _build(args: argparse.Namespace) -> int:
    config = builders.BuildConfig.from_options(**{f.name: getattr(args, f.name) for f in BUILD_OPTIONS})
    with contextlib.ExitStack() as stack:
        generator: ChatModel | None = None
        if args.generator_model == "local":
            from medfuzz.models.local import LOCAL_API_KEY, MODEL_ALIAS, start_server
            from medfuzz.models.openai_compat import OpenAIChatModel

            server = stack.enter_context(start_server(threads=args.threads))
            generator = OpenAIChatModel(MODEL_ALIAS, server.base_url, LOCAL_API_KEY, logprobs=False)
        elif args.generator_model:
            from medfuzz.models.openai_compat import OpenAIChatModel

            # the key from the environment only: a key on the command line lands in shell history and `ps`
            key = os.environ.get("MEDFUZZ_GENERATOR_API_KEY") or os.environ.get("OPENAI_API_KEY")
            generator = OpenAIChatModel(args.generator_model, args.generator_base_url, key, logprobs=False)
        bench = builders.build(config, args.aspects, generator)
    path = builders.write(bench, args.out)
    print(f"wrote {path}: {len(bench.items)} items {bench.header['counts']}; "
          f"{len(bench.header['failures'])} generation failures recorded in the header")
    return 0


def _show(args: argparse.Namespace) -> int:
    bench = builders.read(args.path)
    header = bench.header
    print(f"{args.path}: {header['format']} v{header['version']}, seed {header['config']['seed']}, "
          f"generator {header.get('generator')}")
    for pool, count in Counter(i.metadata["pool"] for i in bench.items).items():
        recipes = Counter(i.metadata.get("recipe") for i in bench.pool(pool))
        keys = Counter(i.answer for i in bench.pool(pool))
        print(f"  {pool:16s} {count:4d} items  {dict(recipes)}  keys {dict(sorted(keys.items()))}")
    for failure in header.get("failures", [])[:20]:
        print(f"  failure: {failure}")
    return 0


def _add_options(parser: argparse.ArgumentParser, cls: type, options: tuple[dataclasses.Field, ...]) -> None:
    """One ``--name`` per dataclass field, with its default and help from the dataclass (its one owner): a bool is
    a switch, a tuple a comma list, an int is checked by argparse; ``from_options`` converts and checks the rest."""
    hints = typing.get_type_hints(cls)
    for f in options:
        flag, kind, help_text = f"--{f.name.replace('_', '-')}", hints[f.name], cls.DOCS.get(f.name, "")
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action="store_true", default=f.default, help=help_text)
        elif typing.get_origin(kind) is tuple:
            parser.add_argument(flag, dest=f.name, default=",".join(f.default),
                                help=f"{help_text} (default {','.join(f.default)})")
        else:
            parser.add_argument(flag, dest=f.name, type=int if kind is int else str, default=f.default,
                                help=f"{help_text} (default {f.default})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medfuzz medguard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a versioned benchmark file")
    build.add_argument("--out", required=True)
    build.add_argument("--aspects", default=MedGuardConfig.aspects,
                       help=f"{MedGuardConfig.DOCS['aspects']} (default {MedGuardConfig.aspects})")
    _add_options(build, builders.BuildConfig, BUILD_OPTIONS)
    build.add_argument("--generator-model", help="generator role: a model name at an OpenAI-compatible endpoint, "
                                                 "or 'local' for the embedded SmolLM2")
    build.add_argument("--generator-base-url", default=None)
    build.add_argument("--threads", type=int, default=2)
    build.set_defaults(func=_build)
    show = commands.add_parser("show", help="summarise a benchmark file")
    show.add_argument("path")
    show.set_defaults(func=_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as err:  # a value out of range (e.g. --n 0): the usage line and the reason, exit 2
        parser.error(str(err))


if __name__ == "__main__":
    sys.exit(main())
