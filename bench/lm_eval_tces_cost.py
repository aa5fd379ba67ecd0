"""P4 (issue 13): what lm-eval's single-query TCES task costs with ``medfuzz-local`` next to the plain baseline on
the same items.

The N items are the first N of the bundled MedQA dev sample (or ``--data``) that have a drug entity in a
distractor, written to a temporary file so that ``medqa_clean`` and ``tces_medqa_drugs`` see exactly the same
items (a TCES doc holds each item's clean and attacked version: twice the requests). Each (adapter, task) pair
runs in a fresh process through
``lm_eval.simple_evaluate``; the time inside the model's ``loglikelihood`` is *scoring*, the rest of the
process's wall time is *start-up* (imports, lm-eval's task index, the TCES vocabulary and embeddings, loading
the GGUF). Token and call counts are exact and do not depend on how busy the machine is; seconds do.

- ``given-order``: the adapter as it was up to commit 620c5db (requests in lm-eval's order, the last context
  token re-evaluated for every answer letter);
- ``token-order``: as it was up to 5fd9c2f (token-sequence order, next-token log-probabilities kept per context,
  one decode per continuation token) -- both reproduced in ``bench/_local_before.py``;
- ``per-request``: as it was up to 22e195c (one decode per request from the first unknown position to the end;
  ``bench/_local_before.py``);
- ``after``: the adapter as it is (each trie node of the batch evaluated once, a request's last token never).

The third task row runs both tasks in one ``simple_evaluate``, as a user adding ``tces_*`` to a run that already
scores plain MedQA does: lm-eval hands the model all loglikelihood requests of a run at once, so the clean half of
each TCES doc is the same token sequence as the plain task's doc.

*floor*: the token positions that any exact evaluation must compute for the requests of the run (the prefix trie
of the scored sequences less their last token); no adapter can evaluate fewer, whatever its cache or order.

    PYTHONPATH=src .venv/bin/python bench/lm_eval_tces_cost.py --items 20 --threads 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = ("medqa_clean", "tces_medqa_drugs", "medqa_clean,tces_medqa_drugs")
VARIANTS = ("given-order", "token-order", "per-request", "after")


def select_items(data: str, count: int, out: Path) -> int:
    """Write the first ``count`` items with a drug entity in a distractor (release layout); return how many."""
    from medfuzz.benchmarks import load_items
    from medfuzz.benchmarks.loaders import DEMO_MEDQA
    from medfuzz.solvers.tces.attack import TCESResources, first_substitution
    from medfuzz.solvers.tces.config import TCESConfig

    source = DEMO_MEDQA if data == "demo" else Path(data)
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = load_items("medqa", str(source))
    if len(rows) != len(items):
        raise SystemExit(f"{source}: {len(rows)} rows but {len(items)} items; give a file without blank records")
    config = TCESConfig(budget=1)
    resources = TCESResources.build("drugs", None, config.embedding)
    keep = [row for row, item in zip(rows, items, strict=True)
            if not isinstance(first_substitution(item, resources, config), str)][:count]
    out.write_text("".join(json.dumps(row) + "\n" for row in keep), encoding="utf-8")
    return len(keep)


def _adapter(variant: str):
    """The adapter class of each variant, counting llama.cpp decodes and the tokens they evaluate."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _local_before import PerRequest, TokenByToken

    from medfuzz.adapters.llama_cpp_lm import LlamaCppLM

    class GivenOrder(TokenByToken):
        """Up to 620c5db: requests in lm-eval's order, the last context token re-evaluated for every letter."""

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            results = []
            for request in requests:
                self._after = None
                results.append(self._score(*self._fit(*self._encode_pair(*request.args), request)))
            return results

    class Batched(LlamaCppLM):
        def _decode(self, tokens, start, end, outputs):
            self.counts["evals"] += 1
            self.counts["tokens"] += end - start
            return super()._decode(tokens, start, end, outputs)

    class Counted(TokenByToken):
        def _eval(self, tokens):
            self.counts["evals"] += 1
            self.counts["tokens"] += len(tokens)
            self.llm.eval(tokens)

    class CountedGiven(GivenOrder, Counted):
        pass

    return {"given-order": CountedGiven, "token-order": Counted, "per-request": PerRequest, "after": Batched}[variant]


def evaluation_floor(sequences: list[list[int]]) -> int:
    """Token positions that any exact evaluation of a causal LM must compute to score these requests, with any
    cache and any order: scoring a sequence needs the logits up to its second-to-last position, hence every token
    before its last; a position is shared only by sequences that agree on every token up to it (attention sees the
    whole prefix). So the floor is the number of nodes in the prefix trie of the sequences less their last token."""
    root: dict = {}
    nodes = 0
    for tokens in sequences:
        node = root
        for token in tokens[:-1]:
            child = node.get(token)
            if child is None:
                child = node[token] = {}
                nodes += 1
            node = child
    return nodes


def run_one(variant: str, task: str, data: Path, threads: int) -> dict:
    """One lm-eval run in this process; returns its counts and times."""
    started = time.perf_counter()
    import lm_eval
    import lm_eval.models  # lm-eval's registry before ours
    from lm_eval.tasks import TaskManager

    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    cls = _adapter(variant)
    loaded = time.perf_counter()
    lm = cls(n_threads=threads)
    load_s = time.perf_counter() - loaded
    counts = {"requests": 0, "evals": 0, "tokens": 0, "scoring_s": 0.0}
    lm.counts = counts
    score = lm.loglikelihood
    sequences: list[list[int]] = []

    scores: list[list] = []

    def timed(requests, disable_tqdm: bool = False):
        # the token sequences exactly as the adapter scores them (its own encoding and truncation)
        sequences.extend(lm._fit(*lm._encode_pair(*request.args), request)[0] for request in requests)
        begin = time.perf_counter()
        try:
            results = score(requests, disable_tqdm=True)
            scores.extend([float(value), bool(greedy)] for value, greedy in results)
            return results
        finally:
            counts["scoring_s"] += time.perf_counter() - begin
            counts["requests"] += len(requests)

    lm.loglikelihood = timed
    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), metadata={"data": str(data)})
    tasks = task.split(",")
    results = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=manager, log_samples=False,
                                      verbosity="WARNING")
    wall = time.perf_counter() - started
    metrics = {k.split(",")[0]: v for name in tasks for k, v in results["results"][name].items()
               if "," in k and "stderr" not in k and isinstance(v, float)}
    return {**counts, "scores": scores, "floor": evaluation_floor(sequences), "variant": variant, "task": task,
            "wall_s": wall, "load_s": load_s, "startup_s": wall - counts["scoring_s"], "metrics": metrics}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--data", default="demo", help="demo or a MedQA jsonl in the release layout")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--one", nargs=3, metavar=("VARIANT", "TASK", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one[0], args.one[1], Path(args.one[2]), args.threads)))
        return
    with tempfile.TemporaryDirectory() as folder:
        items = Path(folder) / "items.jsonl"
        n = select_items(args.data, args.items, items)
        rows = []
        for variant in args.variants.split(","):
            for task in TASKS:
                done = subprocess.run([sys.executable, __file__, "--threads", str(args.threads), "--one", variant,
                                       task, str(items)], capture_output=True, text=True, check=False)
                line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
                if line is None:
                    raise SystemExit(f"{variant} {task} failed:\n{done.stderr[-3000:]}")
                rows.append(json.loads(line[len("RESULT "):]))
                print(f"  {variant:11s} {task:28s} done in {rows[-1]['wall_s']:.0f}s", file=sys.stderr, flush=True)
    print(f"\nlm-eval with medfuzz-local (SmolLM2-135M, n_threads={args.threads}) on {n} MedQA items with a drug in "
          f"a distractor ({args.data}); tces_medqa_drugs has {n} docs (clean + attacked version each), "
          f"medqa_clean {n}; tokens/base and floor/base: over medqa_clean's in the same adapter\n")
    header = (f"{'adapter':11s} {'task':28s} {'requests':>8s} {'evals':>6s} {'tokens':>7s} {'start-up s':>10s} "
              f"{'(GGUF load)':>11s} {'scoring s':>9s} {'tokens/base':>11s} {'floor':>6s} {'floor/base':>10s} "
              f"{'scoring/base':>12s}  metrics")
    print(header)
    print("-" * len(header))
    for row in rows:
        base = next(r for r in rows if r["variant"] == row["variant"] and r["task"] == "medqa_clean")
        metrics = " ".join(f"{k}={v:.3f}" for k, v in row["metrics"].items())
        print(f"{row['variant']:11s} {row['task']:28s} {row['requests']:8d} {row['evals']:6d} {row['tokens']:7d} "
              f"{row['startup_s']:10.1f} {row['load_s']:11.1f} {row['scoring_s']:9.1f} "
              f"{row['tokens'] / base['tokens']:11.3f} {row['floor']:6d} {row['floor'] / base['floor']:10.3f} "
              f"{row['scoring_s'] / base['scoring_s']:12.2f}  {metrics}")
    print()
    for row in rows:  # lm-eval builds the same requests in the same order for every adapter
        first = next(r for r in rows if r["task"] == row["task"])
        if first is not row:
            delta = max(abs(a[0] - b[0]) for a, b in zip(first["scores"], row["scores"], strict=True))
            flags = sum(a[1] != b[1] for a, b in zip(first["scores"], row["scores"], strict=True))
            print(f"{row['variant']} vs {first['variant']}, {row['task']}: {len(row['scores'])} log-likelihoods, "
                  f"largest |difference| {delta:.3g} nats, {flags} greedy flags differ")
    print("\nfloor: the token positions any exact evaluation must compute for these requests, with any cache and "
          "any order (the prefix trie of the scored sequences less their last token); tokens/base >= floor/base.")


if __name__ == "__main__":
    main()
