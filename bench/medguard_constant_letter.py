"""What a model that always answers the same letter scores on each MedGuard aspect of a build (a measurement,
not a test): the chance level, the score of "always A" .. "always E" for one seed (each letter asked only the
items that have it: "E" exists only on five-option items), and the mean over many seeds. With balanced keys
every accuracy aspect is within 1/n of its chance level; on the equity aspects the option-order design makes
every letter consistent on chance x units rounded per option count, for every seed. Before key balancing
"always A" scored 0.38-0.47 on six aspects of the bundled build; before the equity design (independent
per-variant shuffles) one build's gender equity ranged from 0.083 (always A) to 0.375 (always D).

    PYTHONPATH=src python bench/medguard_constant_letter.py [--seed 0] [--seeds 100] [--n 100]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from medfuzz.scorers.medguard import ItemResult, aspect_units, position_report
from medfuzz.solvers.medguard.builders import BuildConfig, build

LETTERS = "ABCDE"


def constant_scores(seed: int, n: int) -> tuple[dict, dict]:
    """{aspect: {letter: score}} and {aspect: {letter: chance}} on the items that have the letter."""
    bench = build(BuildConfig(n=n, seed=seed))
    scores: dict = defaultdict(dict)
    chance: dict = defaultdict(dict)
    for letter in LETTERS:
        items = [i for i in bench.items if letter in i.options]
        results = [ItemResult.from_metadata(i.id, i.metadata, letter, i.answer, n_options=len(i.options))
                   for i in items]
        positions = position_report(results)
        for aspect, units in aspect_units(results).items():
            scores[aspect][letter] = sum(units.values()) / len(units)
            chance[aspect][letter] = positions[aspect].chance
    return scores, chance


def _cell(values: dict, letter: str) -> str:
    return f"{values[letter]:.3f}" if letter in values else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=100, help="seeds to average over (0 to skip)")
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    one, chance = constant_scores(args.seed, args.n)
    pooled: dict = defaultdict(lambda: defaultdict(list))
    for seed in range(args.seeds):
        scores, _ = constant_scores(seed, args.n)
        for aspect, per_letter in scores.items():
            for letter, value in per_letter.items():
                pooled[aspect][letter].append(value)
    print(f"seed {args.seed}; in brackets: the mean over {args.seeds} seeds (min-max)")
    print("| aspect | chance (A-D; E) | " + " | ".join(f"always {x}" for x in LETTERS) + " |")
    print("|---|---|" + "---|" * len(LETTERS))
    for aspect, per_letter in one.items():
        chances = chance[aspect]
        stated = f"{chances['A']:.4f}" + (f"; {chances['E']:.4f}" if "E" in chances and chances["E"] != chances["A"]
                                          else "")
        cells = []
        for letter in LETTERS:
            cell = _cell(per_letter, letter)
            runs = pooled[aspect].get(letter)
            if runs and letter in per_letter:
                cell += f" ({statistics.mean(runs):.3f}, {min(runs):.3f}-{max(runs):.3f})"
            cells.append(cell)
        print(f"| {aspect.value} | {stated} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
