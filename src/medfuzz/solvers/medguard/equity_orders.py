"""Option orders of the equity variants: a design under which a constant-letter model scores the chance level.

Equity is scored by consistency of the *option* chosen across a case's demographic variants (gender unit: the
two sexes of one race; race unit: the four races of one sex). A constant-letter model picks, in each variant,
whatever option its letter shows, so its score depends only on which options the variants' orders put at each
letter. Independent random orders give the uniform random guesser's chance (1/k per gender pair, 1/k³ per race
quadruple) only *in expectation*: on the bundled demo (3 cases per option count) one build's "always A" scored
0.083 and "always D" 0.375 on gender equity against a chance of 0.225.

The design here makes it exact up to rounding. Each case gets one seeded cyclic order of its options; every
variant shows that cycle rotated so that the key sits at the variant's key position. Two variants then show the
same option at *every* letter when their key positions are equal and at *no* letter otherwise, so a constant-
letter model, whatever its letter, is consistent on exactly the units whose variants share one key position.
The key positions of a case form a sexes × races grid, chosen (seeded search) so that:

- within each option count k, the number of gender units with equal key positions after the first i cases is
  ``round(i · races / k)`` (chance × units, rounded; the race units likewise with ``round(i · sexes / k³)``),
  so every letter's constant model is consistent on chance × units rounded to the nearest unit, in the whole
  pool and in every prefix of cases (a ``limit_per_aspect`` cut);
- the key positions stay balanced over the letters: after each case every letter is the key as often as the
  counts allow (floor or ceil of the mean whenever the equalities above permit it).

A uniform random guesser's answers do not depend on the order at all, so its expected consistency (the chance
level the scorer reports) is unchanged; so is that of any model whose choice depends on the options' content.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import chain, combinations_with_replacement

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.items import item_seed
from medfuzz.solvers.medguard.balance import reorder
from medfuzz.solvers.medguard.taxonomy import RACES, SEXES

Grid = list[list[int]]  # key position per (sex index, race index)


def rounded(x: float) -> int:
    """Nearest integer, halves up (deterministic; Python's ``round`` rounds halves to even)."""
    return math.floor(x + 0.5)


def _increment(i: int, rate: float) -> int:
    """Equal-unit count the ``i``-th case (1-based) of a stratum adds, so that the first ``i`` cases hold
    ``rounded(i · rate)`` of them (cumulative rounding keeps every prefix within half a unit)."""
    return rounded(i * rate) - rounded((i - 1) * rate)


def _greedy_counts(k: int, cells: int, running: Sequence[int], rng: random.Random) -> list[int]:
    """Key counts per letter for the next case that keep the stratum's running counts as even as possible
    (each cell to a least-used letter, ties broken at random): the minimum of the sum of squares."""
    counts = [0] * k
    for _ in range(cells):
        low = min(running[j] + counts[j] for j in range(k))
        counts[rng.choice([j for j in range(k) if running[j] + counts[j] == low])] += 1
    return counts


def _all_counts(k: int, cells: int, running: Sequence[int], rng: random.Random) -> Iterator[list[int]]:
    """Every split of ``cells`` keys over ``k`` letters, most even running counts first (fallback when the
    greedy split admits no grid, e.g. a constant race row needs one letter ``races`` times)."""
    splits = []
    for combo in combinations_with_replacement(range(k), cells):
        tally = Counter(combo)
        counts = [tally.get(j, 0) for j in range(k)]
        splits.append((sum((running[j] + counts[j]) ** 2 for j in range(k)), rng.random(), counts))
    for _, _, counts in sorted(splits):
        yield counts


def _possible(counts: Sequence[int], equal_columns: int, constant_rows: int) -> bool:
    """Necessary conditions on a split (a constant row needs one letter ``races`` times, an equal column one
    letter ``sexes`` times), so that hopeless splits skip the search."""
    rows, columns = len(SEXES), len(RACES)
    top = sorted(counts, reverse=True)[:constant_rows]
    return all(c >= columns for c in top) and sum(c // rows for c in counts) >= equal_columns


def _search(k: int, counts: list[int], equal_columns: set[int], constant_rows: set[int],
            rng: random.Random) -> Grid | None:
    """A grid with exactly these key counts, these columns (gender units) all-equal and the others not, these
    rows (race units) all-equal and the others not; depth-first over the cells in random value order."""
    rows, columns = len(SEXES), len(RACES)
    grid: Grid = [[-1] * columns for _ in range(rows)]
    left = list(counts)

    def allowed(s: int, r: int, v: int) -> bool:
        if left[v] == 0:
            return False
        row, column = grid[s][:r], [grid[i][r] for i in range(s)]
        # a constant row (equal column) needs its first value ``columns`` (``rows``) times: prune early
        if s in constant_rows and (v != row[0] if row else left[v] < columns):
            return False
        if r in equal_columns and not column and left[v] < rows:
            return False
        if s not in constant_rows and r == columns - 1 and all(x == v for x in row):
            return False
        if r in equal_columns and column and v != column[0]:
            return False
        return not (r not in equal_columns and s == rows - 1 and all(x == v for x in column))

    def fill(cell: int) -> bool:
        if cell == rows * columns:
            return True
        s, r = divmod(cell, columns)
        for v in rng.sample(range(k), k):
            if allowed(s, r, v):
                grid[s][r], left[v] = v, left[v] - 1
                if fill(cell + 1):
                    return True
                grid[s][r], left[v] = -1, left[v] + 1
        return False

    return grid if fill(0) else None


def case_grid(k: int, equal_columns: int, constant_rows: int, running: Sequence[int], rng: random.Random) -> Grid:
    """Key positions of one case's variants: ``equal_columns`` gender units and ``constant_rows`` race units
    with one shared key position (which ones: at random), key counts as even as the stratum allows."""
    rows, columns = len(SEXES), len(RACES)
    chosen_columns = set(rng.sample(range(columns), equal_columns))
    chosen_rows = set(rng.sample(range(rows), constant_rows))
    cells = rows * columns
    first = _greedy_counts(k, cells, running, rng)
    # the fallback splits are enumerated only when the greedy one admits no grid
    for counts in chain([first], (c for c in _all_counts(k, cells, running, rng) if c != first)):
        if not _possible(counts, equal_columns, constant_rows):
            continue
        grid = _search(k, counts, chosen_columns, chosen_rows, rng)
        if grid is not None:
            return grid
    raise ValueError(f"no equity design with {equal_columns} equal gender pairs and {constant_rows} equal race "
                     f"quadruples for {k} options")  # unreachable for k >= 2: a case adds at most 2 equal pairs
    # (rate 4/k) and 1 equal quadruple (rate 2/k³), and every such pattern has a grid (tests: k = 2..10)


def rotation(base: Sequence[str], answer: str, position: int) -> list[str]:
    """The cyclic order ``base`` rotated so that ``answer`` is shown at ``position``."""
    k, at = len(base), base.index(answer)
    return [base[(p - position + at) % k] for p in range(k)]


def design(items: Sequence[MCQItem], seed: int, pool: str) -> list[MCQItem]:
    """The equity variants (``case_id``, ``sex``, ``race`` in metadata) with their options in the design's
    orders (see module doc); deterministic for ``seed`` and the cases' order, and a case's orders depend only
    on the cases before it in its option-count stratum (a ``limit_per_aspect`` prefix keeps its design)."""
    cases: dict[str, list[MCQItem]] = {}
    for item in items:
        cases.setdefault(item.metadata["case_id"], []).append(item)
    done: dict[str, MCQItem] = {}
    strata: dict[int, list[str]] = {}
    for case_id, variants in cases.items():
        strata.setdefault(len(variants[0].options), []).append(case_id)
    for k, case_ids in strata.items():
        if k < 2:
            raise ValueError(f"equity cases {case_ids[:3]} have {k} option: consistency needs at least 2")
        rng = random.Random(item_seed(seed, f"equity-design:{pool}:{k}"))
        gender_rate, race_rate = len(RACES) / k ** (len(SEXES) - 1), len(SEXES) / k ** (len(RACES) - 1)
        running = [0] * k
        for i, case_id in enumerate(case_ids, start=1):
            grid = case_grid(k, _increment(i, gender_rate), _increment(i, race_rate), running, rng)
            for row in grid:
                for position in row:
                    running[position] += 1
            variants = cases[case_id]
            base = list(variants[0].options)
            rng.shuffle(base)
            for item in variants:
                if len(item.options) != k:
                    raise ValueError(f"equity case {case_id}: its variants differ in option count")
                position = grid[SEXES.index(item.metadata["sex"])][RACES.index(item.metadata["race"])]
                done[item.id] = reorder(item, rotation(base, item.answer, position))
    return [done[item.id] for item in items]
