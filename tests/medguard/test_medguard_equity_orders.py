"""The equity option-order design (issue 19): a constant-letter model is consistent on chance × units gender
and race units, rounded to the nearest unit, for every letter, in every option-count stratum and in every
prefix of cases; the key positions stay balanced; the build stays seeded."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from medfuzz.benchmarks import MCQItem
from medfuzz.scorers.medguard import ItemResult, aspect_units, position_report
from medfuzz.solvers.medguard.builders import BuildConfig, build, limit_per_pool
from medfuzz.solvers.medguard.equity_orders import design, rotation, rounded
from medfuzz.solvers.medguard.taxonomy import RACES, SEXES, Aspect

LETTERS = "ABCDEFGHIJ"


def _cases(path: Path, strata: list[tuple[int, int]]) -> Path:
    """``count`` synthetic cases with ``k`` options for each ``(k, count)``, interleaved, keys spread."""
    rows = []
    for k, count in strata:
        rows += [{"id": f"k{k}-{i}", "kind": "cost", "case": "A 60-year-old {race} {sex} patient with pneumonia.",
                  "question": "Expected cost band?", "options": {x: f"band {x} of {k}" for x in LETTERS[:k]},
                  "answer": LETTERS[(3 * i) % k]} for i in range(count)]
    random.Random(0).shuffle(rows)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _constant(items: list[MCQItem], letter: str) -> list[ItemResult]:
    return [ItemResult.from_metadata(i.id, i.metadata, letter if letter in i.options else None, i.answer,
                                     n_options=len(i.options)) for i in items]


def _consistent(items: list[MCQItem], letter: str) -> dict[Aspect, int]:
    return {a: int(sum(v.values())) for a, v in aspect_units(_constant(items, letter)).items()}


def _expected(cases: int, k: int) -> dict[Aspect, int]:
    """chance × units rounded: gender units are cases × races at 1/k, race units cases × sexes at 1/k³."""
    return {Aspect.GENDER_EQUITY: rounded(cases * len(RACES) / k),
            Aspect.RACE_EQUITY: rounded(cases * len(SEXES) / k**3)}


@pytest.mark.parametrize("strata", [[(4, 8)], [(5, 3), (4, 3)], [(2, 9)], [(3, 11)], [(4, 17), (5, 33)], [(6, 7)],
                                    [(8, 5)], [(10, 6)]])
def test_every_letter_is_consistent_on_chance_times_units_rounded_in_every_prefix(tmp_path: Path, strata) -> None:
    items = build(BuildConfig(seed=5, equity=str(_cases(tmp_path / "c.jsonl", strata))), "equity").items
    total = sum(count for _, count in strata)
    for limit in sorted({1, 2, 3, total // 2, total}):
        cut = limit_per_pool(items, limit)
        for k, _ in strata:
            stratum = [i for i in cut if len(i.options) == k]
            cases = len({i.metadata["case_id"] for i in stratum})
            if not cases:  # the prefix holds no case with k options yet
                continue
            for letter in LETTERS[:k]:
                assert _consistent(stratum, letter) == _expected(cases, k), (k, limit, letter)


def test_the_bundled_build_scores_the_rounded_chance_for_every_letter() -> None:
    items = build(BuildConfig(seed=0), "equity").items
    strata = Counter(len(i.options) for i in items)
    assert strata == {4: 24, 5: 24}  # 3 cases each: the numbers in docs/medguard.md
    for letter in "ABCDE":
        valid = [i for i in items if letter in i.options]  # "E" exists only in the five-option cases
        got = _consistent(valid, letter)
        want = {a: sum(_expected(strata[k] // 8, k)[a] for k in strata if letter in LETTERS[:k]) for a in got}
        assert got == want, letter
    # 5 of 24 gender units for A-D (chance 0.225: 5.4 units), none of the 12 race units (chance 0.0118)
    assert _consistent(items, "A") == {Aspect.GENDER_EQUITY: 5, Aspect.RACE_EQUITY: 0}
    chance = {a: p.chance for a, p in position_report(_constant(items, "A")).items()}
    assert chance == pytest.approx({Aspect.GENDER_EQUITY: 0.225, Aspect.RACE_EQUITY: 0.0118125})


def test_variants_agree_at_every_letter_or_at_none(tmp_path: Path) -> None:
    """The rotation design: two variants of a case show the same option at every letter when their keys sit at
    the same letter, and at no letter otherwise (so no letter is favoured)."""
    items = build(BuildConfig(seed=2, equity=str(_cases(tmp_path / "c.jsonl", [(5, 6), (4, 6)]))), "equity").items
    by_case: dict[str, list[MCQItem]] = {}
    for item in items:
        by_case.setdefault(item.metadata["case_id"], []).append(item)
    for variants in by_case.values():
        assert len(variants) == 8
        for a in variants:
            for b in variants:
                same = [a.metadata["option_order"][x] == b.metadata["option_order"][x] for x in a.options]
                assert all(same) if a.answer == b.answer else not any(same)
            # the displayed options are the case's own, and the key still points at the case's answer text
            assert sorted(a.options.values()) == sorted(variants[0].options.values())
            assert a.answer_text == variants[0].answer_text


def test_equity_keys_stay_balanced_in_every_prefix_of_cases() -> None:
    items = build(BuildConfig(seed=0), "equity").items
    for limit in range(1, 7):
        cut = limit_per_pool(items, limit)
        for k in (4, 5):
            keys = Counter(i.answer for i in cut if len(i.options) == k)
            m = sum(keys.values())
            assert all(abs(keys.get(x, 0) - m / k) < 1 for x in LETTERS[:k]), (limit, k, keys)


def test_the_design_is_seeded() -> None:
    def orders(seed: int) -> list[tuple[str, ...]]:
        return [tuple(i.options.values()) for i in build(BuildConfig(seed=seed), "equity").items]

    assert orders(3) == orders(3)
    assert orders(3) != orders(4)


def test_rotation_puts_the_key_at_the_position_and_keeps_the_cycle() -> None:
    base = ["C", "A", "D", "B"]
    for position in range(4):
        order = rotation(base, "D", position)
        assert order[position] == "D"
        start = order.index("C")
        assert order[start:] + order[:start] == base


def test_a_case_with_one_option_is_refused() -> None:
    items = [MCQItem(f"c-{s}-{r}", "q", {"A": "only"}, "A", {"case_id": "c", "sex": s, "race": r})
             for s in SEXES for r in RACES]
    with pytest.raises(ValueError, match="at least 2"):
        design(items, 0, "equity")
