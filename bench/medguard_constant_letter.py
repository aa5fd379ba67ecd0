"""What a model that always answers the same letter scores on each MedGuard aspect of a build (a measurement,
not a test): the chance level, the score of "always A" (and B, C, D) for one seed, and the mean over many
seeds. With balanced keys every accuracy aspect is within 1/n of its chance level; the equity aspects
(consistency, not accuracy) match it in expectation. Before key balancing "always A" scored 0.38-0.47 on six
aspects of the bundled build.

    PYTHONPATH=src python bench/medguard_constant_letter.py [--seed 0] [--seeds 200] [--n 100]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from medfuzz.scorers.medguard import ItemResult, aspect_units, position_report
from medfuzz.solvers.medguard.builders import BuildConfig, build


def constant_scores(seed: int, n: int) -> tuple[dict, dict]:
    bench = build(BuildConfig(n=n, seed=seed))
    scores: dict = defaultdict(dict)
    chance: dict = {}
    for letter in "ABCD":
        results = [ItemResult.from_metadata(i.id, i.metadata, letter, i.answer, n_options=len(i.options))
                   for i in bench.items]
        for aspect, units in aspect_units(results).items():
            scores[aspect][letter] = sum(units.values()) / len(units)
        chance = {a: p.chance for a, p in position_report(results).items()}
    return scores, chance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=200, help="seeds to average over (0 to skip)")
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    one, chance = constant_scores(args.seed, args.n)
    pooled: dict = defaultdict(list)
    for seed in range(args.seeds):
        scores, _ = constant_scores(seed, args.n)
        for aspect, per_letter in scores.items():
            pooled[aspect] += list(per_letter.values())
    print(f"| aspect | chance | always A (seed {args.seed}) | B | C | D | mean over {args.seeds} seeds x 4 letters |")
    print("|---|---|---|---|---|---|---|")
    for aspect, per_letter in one.items():
        mean = f"{statistics.mean(pooled[aspect]):.3f}" if pooled[aspect] else "–"
        print(f"| {aspect.value} | {chance[aspect]:.3f} | " + " | ".join(f"{per_letter[k]:.3f}" for k in "ABCD")
              + f" | {mean} |")


if __name__ == "__main__":
    main()
