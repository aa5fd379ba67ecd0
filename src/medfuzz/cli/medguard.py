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
import os
import sys
from collections import Counter

from medfuzz.models import ChatModel
from medfuzz.solvers.medguard import builders


def _build(args: argparse.Namespace) -> int:
    config = builders.BuildConfig(
        n=args.n, seed=args.seed, medqa=args.medqa, pubmedqa=args.pubmedqa, stereotype=args.stereotype,
        confidentiality=args.confidentiality, equity=args.equity, translations=args.translations,
        languages=tuple(args.languages.split(",")), generate_sycophancy=args.generate_sycophancy,
    )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medfuzz medguard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a versioned benchmark file")
    build.add_argument("--out", required=True)
    build.add_argument("--aspects", default="all", help="comma list of aspects or principles (default all)")
    build.add_argument("--n", type=int, default=100, help="items per aspect (equity: cases × 8 variants)")
    build.add_argument("--seed", type=int, default=0)
    for name, what in [("medqa", "MedQA: demo | hf | path (error tolerance, defense, sycophancy, colloquial, "
                                  "multilingual)"),
                       ("pubmedqa", "PubMedQA PQA-L file or demo (hallucination)"),
                       ("stereotype", "stereotype cases file or demo"),
                       ("confidentiality", "patient-record extract (e.g. MIMIC-III) or demo"),
                       ("equity", "equity cases with demographic placeholders or demo"),
                       ("translations", "translated items used for multilingual without a generator, or demo")]:
        build.add_argument(f"--{name}", default="demo", help=what)
    build.add_argument("--languages", default="es,zh")
    build.add_argument("--generator-model", help="generator role: a model name at an OpenAI-compatible endpoint, "
                                                 "or 'local' for the embedded SmolLM2")
    build.add_argument("--generator-base-url", default=None)
    build.add_argument("--generate-sycophancy", action="store_true",
                       help="let the generator write the sycophancy arguments (templates otherwise)")
    build.add_argument("--threads", type=int, default=2)
    build.set_defaults(func=_build)
    show = commands.add_parser("show", help="summarise a benchmark file")
    show.add_argument("path")
    show.set_defaults(func=_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
