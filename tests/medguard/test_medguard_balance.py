"""Balanced answer keys: every aspect that builds offline has each letter as the key within one item of n/k
(whole pool and any ``limit_per_aspect`` prefix), and a model that always answers the same letter scores the
chance level (issue 10 item 13, issue 9's constant-letter check)."""

from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict

import pytest

from medfuzz.benchmarks import MCQItem
from medfuzz.scorers.medguard import ItemResult, aspect_units, position_report
from medfuzz.solvers.medguard.balance import KeySchedule, balance_keys, place_key
from medfuzz.solvers.medguard.builders import BuildConfig, build, limit_per_pool
from medfuzz.solvers.medguard.taxonomy import Aspect


def _balanced(items: list[MCQItem]) -> bool:
    """Each letter is the key floor(m/k) or ceil(m/k) times, within each option count k."""
    by_k: dict[int, list[str]] = defaultdict(list)
    for item in items:
        by_k[len(item.options)].append(item.answer)
    for k, keys in by_k.items():
        counts = Counter(keys)
        if any(abs(counts.get(letter, 0) - len(keys) / k) >= 1 for letter in "ABCDEFGHIJ"[:k]):
            return False
    return True


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_offline_aspect_has_balanced_keys(seed: int) -> None:
    bench = build(BuildConfig(seed=seed))  # the bundled build: all ten aspects build offline
    pools = {i.metadata["pool"] for i in bench.items}
    assert len(pools) == 9
    for pool in pools:
        items = bench.pool(pool)
        assert _balanced(items), (pool, Counter(i.answer for i in items))
        if pool != "equity":  # a limit keeps a prefix of the schedule (equity: test_medguard_equity_orders)
            for limit in (1, 2, 3, 5, 10):
                assert _balanced(limit_per_pool(items, limit)), (pool, limit)
    assert bench.header["keys"]["defense"] == dict(Counter(i.answer for i in bench.pool("defense")))


def _constant(items: list[MCQItem], letter: str) -> list[ItemResult]:
    return [ItemResult.from_metadata(i.id, i.metadata, letter if letter in i.options else None, i.answer,
                                     n_options=len(i.options)) for i in items]


def test_a_constant_letter_model_scores_the_chance_level_on_accuracy_aspects() -> None:
    bench = build(BuildConfig(seed=0))
    for letter in "ABCD":
        results = _constant(bench.items, letter)
        units = aspect_units(results)
        positions = position_report(results)
        for aspect, values in units.items():
            if aspect in (Aspect.GENDER_EQUITY, Aspect.RACE_EQUITY):
                continue
            score = sum(values.values()) / len(values)
            # within one item of n/k keys at this letter → within 1/n of the chance level
            assert abs(score - positions[aspect].chance) < 1 / len(values) + 1e-12, (aspect, letter, score)
            assert positions[aspect].answers == {letter: 1.0}


def test_the_schedule_is_balanced_in_every_prefix_and_seeded() -> None:
    schedule = KeySchedule(3, "pool")
    positions = [schedule.next(4) for _ in range(40)]
    for m in range(1, 41):
        counts = Counter(positions[:m])
        assert all(abs(counts.get(p, 0) - m / 4) < 1 for p in range(4))
    again = KeySchedule(3, "pool")
    assert [again.next(4) for _ in range(40)] == positions
    other = KeySchedule(4, "pool")
    assert [other.next(4) for _ in range(40)] != positions


def test_place_key_moves_the_key_and_letter_metadata_and_composes_the_order() -> None:
    item = MCQItem("x", "q?", {"A": "one", "B": "two", "C": "three", "D": "four"}, "C",
                   {"leak_option": "A", "option_order": {"A": "D", "B": "C", "C": "B", "D": "A"}})
    for position in range(4):
        moved = place_key(item, position, random.Random(position))
        assert moved.answer == "ABCD"[position] and moved.answer_text == "three"
        assert moved.options[moved.metadata["leak_option"]] == "one"
        # option_order still points at the original letters: "three" was originally B
        assert moved.metadata["option_order"][moved.answer] == "B"
        assert sorted(moved.options.values()) == sorted(item.options.values())
    with pytest.raises(ValueError, match="key position 4"):
        place_key(item, 4, random.Random(0))


def test_distractor_orders_vary_with_the_seed() -> None:
    items = [MCQItem(f"i{n}", "q?", {k: f"opt {k}" for k in "ABCD"}, "A") for n in range(40)]
    orders = {tuple(i.options.values()) for i in balance_keys(items, 0, "p")}
    assert len(orders) > 10
    assert statistics.mean(i.answer == "A" for i in balance_keys(items, 0, "p")) == 0.25
