"""Gini-Simpson diversity, reuse ranking and the run summary."""

from __future__ import annotations

import math

import pytest

from medfuzz.scorers.tces import asr_by_budget, gini_simpson, summarise, top_entities


def test_gini_simpson_by_hand() -> None:
    assert gini_simpson(["a", "a", "a"]) == 0.0  # one entity reused every time
    assert gini_simpson(["a", "b", "c", "d"]) == pytest.approx(0.75)  # 1 - 4 * (1/4)^2
    assert gini_simpson(["a", "a", "b"]) == pytest.approx(1 - (4 / 9 + 1 / 9))
    assert math.isnan(gini_simpson([]))


def test_top_entities_order_is_stable() -> None:
    assert top_entities(["b", "a", "b", "c", "a", "b"], k=2) == [("b", 3), ("a", 2)]
    assert top_entities(["z", "y"], k=5) == [("y", 1), ("z", 1)]


def record(outcome: str, q: int | None = None, replacement: str | None = None) -> dict:
    return {"outcome": outcome, "queries_to_success": q, "replacement": replacement}


def test_summary_drops_errors_and_unattackable_items() -> None:
    records = [record("success", 1, "x"), record("success", 3, "x"), record("attack_failed"), record("already_wrong"),
               record("llm_error"), record("no_entity")]
    summary = summarise(records)
    assert summary.items == 6 and summary.evaluated == 4 and summary.llm_errors == 1 and summary.no_entity == 1
    assert summary.clean_accuracy == 0.75 and summary.attacked_accuracy == 0.25
    assert summary.asr == pytest.approx(2 / 3) and summary.mean_queries_to_success == 2.0
    assert summary.top_entities == [("x", 2)] and summary.gini_simpson == 0.0
    assert asr_by_budget(records, 4) == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])


def test_empty_summary_is_nan_not_a_crash() -> None:
    summary = summarise([record("no_entity")])
    assert math.isnan(summary.asr) and math.isnan(summary.clean_accuracy) and summary.top_entities == []
