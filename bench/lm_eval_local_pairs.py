"""Issue 11: what ``medfuzz-local`` pays to score lm-eval's ``medfuzz_medqa`` pair docs, before and after.

A ``medfuzz_medqa`` doc holds the original and the fuzzed question; both are in the *continuation* of each of
its 2 x k choices (lm-eval's multiple_choice needs one context per doc). Before, every continuation token cost
one llama.cpp decode (a doc took 156 s where a ``medqa_clean`` doc took 2.9 s); after, a request is one decode
that asks llama.cpp for the logits at exactly the positions scored, and the other letters of the same question
reuse the kept distribution. Pair docs here: the first N bundled MedQA dev items, fuzzed by adding one sentence
(as the template attacker does). Both variants run in this process on the same requests; the table gives
decodes, tokens, seconds and the largest difference of the scores (batched and token-by-token llama.cpp
evaluation of a Q4_1 model differ in the last digits, never in the alignment: tests/e2e check it).

    PYTHONPATH=src .venv/bin/python bench/lm_eval_local_pairs.py --items 5
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from lm_eval.api.instance import Instance

sys.path.insert(0, str(Path(__file__).parent))
from _local_before import TokenByToken

from medfuzz.adapters.llama_cpp_lm import LlamaCppLM
from medfuzz.benchmarks import load_items
from medfuzz.tasks.lm_eval.medfuzz import CONTEXT, pair_to_doc

ADDED = " The patient keeps bees in his back garden and plays the bagpipes in a band on weekends."


def requests(items: int) -> list[Instance]:
    out = []
    for doc_id, item in enumerate(load_items("medqa", "demo")[:items]):
        fuzzed = replace(item, question=item.question.replace(". ", "." + ADDED + " ", 1))
        doc = pair_to_doc(f"pair-{doc_id}", item, fuzzed)
        out += [Instance("loglikelihood", doc, (CONTEXT, f" {choice}"), i, metadata=("medfuzz_medqa", doc_id, 1))
                for i, choice in enumerate(doc["choices"])]
    return out


class After(LlamaCppLM):
    counts: dict[str, float]

    def _decode(self, tokens, start, end, outputs):
        self.counts["decodes"] += 1
        self.counts["tokens"] += end - start
        return super()._decode(tokens, start, end, outputs)


def run(cls, batch: list[Instance], threads: int) -> tuple[dict[str, float], list[tuple[float, bool]]]:
    lm = cls(n_threads=threads)
    lm.counts = defaultdict(float)
    began = time.perf_counter()
    scores = lm.loglikelihood(batch, disable_tqdm=True)
    lm.counts["seconds"] = time.perf_counter() - began
    return dict(lm.counts), scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    batch = requests(args.items)
    before, old = run(TokenByToken, batch, args.threads)
    after, new = run(After, batch, args.threads)
    docs = args.items
    diff = max(abs(a[0] - b[0]) for a, b in zip(old, new, strict=True))
    picks = 0
    for d in range(docs):
        rows = [i for i, r in enumerate(batch) if r.doc_id == d]
        n = len(rows) // 2
        for half in (rows[:n], rows[n:]):
            picks += max(half, key=lambda i: old[i][0]) == max(half, key=lambda i: new[i][0])
    print(f"\nmedfuzz-local (SmolLM2-135M Q4_1, n_threads={args.threads}) scoring {docs} medfuzz_medqa pair docs "
          f"({len(batch)} loglikelihood requests)\n")
    header = f"{'variant':8s} {'decodes':>8s} {'tokens':>8s} {'seconds':>8s} {'s per doc':>9s}"
    print(header)
    print("-" * len(header))
    for name, row in (("before", before), ("after", after)):
        print(f"{name:8s} {int(row['decodes']):8d} {int(row['tokens']):8d} {row['seconds']:8.1f} "
              f"{row['seconds'] / docs:9.1f}")
    print(f"\nspeed-up {before['seconds'] / after['seconds']:.1f}x; largest |score difference| {diff:.3f} nats; "
          f"same pick on {picks}/{2 * docs} question versions")


if __name__ == "__main__":
    main()
