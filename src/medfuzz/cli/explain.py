"""``medfuzz explain LOG --model PATH_OR_embedded``: token-wise Shapley explanations of TCES successes (the paper's
§5.3 / App. E) from Inspect logs, with an open-weight model run in-process through transformers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from medfuzz.errors import MedfuzzError


def add_parser(commands: Any) -> None:
    """Register the ``explain`` sub-command on ``medfuzz``'s sub-parsers."""
    from medfuzz.solvers.tces.explain.shapley import DEFAULT_MAX_EVALS

    explain = commands.add_parser(
        "explain", help="token-wise Shapley explanations of TCES clean/attacked pairs (needs the explain extra)",
        description=__doc__)
    explain.add_argument("logs", nargs="+", help="Inspect logs of medfuzz/tces* runs (files or folders)")
    explain.add_argument("--model", required=True,
                         help="'embedded' (SmolLM2 of the local extra), a .gguf file or a transformers model folder")
    explain.add_argument("--items", default=None, help="comma-separated item ids (default: every success)")
    explain.add_argument("--limit", type=int, default=None, help="at most this many pairs (after --items)")
    explain.add_argument("--max-evals", type=int, default=DEFAULT_MAX_EVALS,
                         help="model evaluations per prompt for shap's Partition explainer (default: shap's 500)")
    explain.add_argument("--output", choices=("logprob", "logodds"), default="logprob",
                         help="explained score of each letter: log p (default) or log-odds (shap's text-generation "
                              "quantity)")
    explain.add_argument("--batch-size", type=int, default=8, help="prompts per forward pass")
    explain.add_argument("--device", default=None, help="torch device for the model (cuda, cpu; default: cpu)")
    explain.add_argument("--seed", type=int, default=0)
    explain.add_argument("--out", default="explanations", help="folder for the JSON files and figures")
    explain.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from medfuzz.report.explain_pairs import read_pairs
    from medfuzz.solvers.tces.explain import LetterLogprobModel, explain_pair, write_explanation, write_summary

    if args.max_evals < 2:
        raise SystemExit(f"medfuzz explain: --max-evals must be at least 2, got {args.max_evals}")
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"medfuzz explain: --limit must be at least 1, got {args.limit}")
    items = [i.strip() for i in args.items.split(",") if i.strip()] if args.items else None
    try:
        pairs = read_pairs([Path(p) for p in args.logs], items)
        if args.limit is not None:
            pairs = pairs[: args.limit]
        if not pairs:
            print("medfuzz explain: no successful TCES attack in the logs (pick items with --items)",
                  file=sys.stderr)
            return 1
        model = LetterLogprobModel.load(args.model, device=args.device, batch_size=args.batch_size,
                                         output=args.output)
        out = Path(args.out)
        explanations = []
        for number, pair in enumerate(pairs, 1):
            print(f"[{number}/{len(pairs)}] item {pair.item_id}", flush=True)
            explanation = explain_pair(pair, model, max_evals=args.max_evals, seed=args.seed,
                                       batch_size=args.batch_size)
            explanations.append(explanation)
            for path in write_explanation(explanation, out):
                print(f"wrote {path}")
        for path in write_summary(explanations, out):
            print(f"wrote {path}")
    except MedfuzzError as err:
        raise SystemExit(f"medfuzz explain: {err}") from err
    return 0
