"""``stats.adjust(..., "holm")`` (Holm's step-down written out, issue 28) against statsmodels' ``multipletests``."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from medfuzz.stats import adjust, holm, holm_step_down


def _random_family(rng: np.random.Generator, length: int) -> list[float | None]:
    """p-values of one family: continuous ones, ties (a coarse grid, as (b + 1) / (M + 1) p-values are), 0 and 1,
    NaN (counted in the family by statsmodels) and None (untested: out of the family)."""
    grid = rng.integers(1, 21, size=length) / 20
    values = np.where(rng.random(length) < 0.5, grid, rng.random(length) ** 3)
    family: list[float | None] = [float(v) for v in values]
    for i in range(length):
        roll = rng.random()
        if roll < 0.05:
            family[i] = None
        elif roll < 0.10:
            family[i] = float("nan")
        elif roll < 0.13:
            family[i] = float(rng.choice([0.0, 1.0]))
    return family


@pytest.mark.parametrize("length", range(1, 51))
def test_holm_equals_statsmodels_on_random_families(length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # statsmodels' reference forces a full garbage collection per call (the reason for holm_step_down): skipped
    # here, where it would cost minutes and changes no value
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(length)
    for _ in range(20):
        family = _random_family(rng, length)
        tested = [p for p in family if p is not None]
        got = adjust(family, "holm")
        assert [g is None for g in got] == [p is None for p in family]
        if not tested:
            continue
        expected = multipletests(np.asarray(tested, dtype=np.float64), method="holm")[1]
        mine = np.asarray([g for g in got if g is not None], dtype=np.float64)
        np.testing.assert_array_equal(mine, expected)  # to the bit, NaN where statsmodels has NaN


def test_holm_by_hand_with_ties_and_the_cap() -> None:
    # sorted 0.01, 0.02, 0.02, 0.4 (m = 4): 0.04, 0.06, max(0.06, 0.04) = 0.06, max(0.06, 0.4) = 0.4
    assert holm([0.02, 0.4, 0.01, 0.02]) == pytest.approx([0.06, 0.4, 0.04, 0.06])
    # 0.3 x 3 = 0.9; 0.5 x 2 = 1.0; 0.6 x 1 -> max 1.0; 0.9 x 3 > 1 is capped
    assert holm([0.5, 0.3, 0.6]) == pytest.approx([1.0, 0.9, 1.0])
    assert holm([0.9, 0.95]) == [1.0, 1.0]
    assert holm([0.03]) == [0.03]


def test_holm_forces_no_garbage_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    def collect(*args: object) -> int:
        raise AssertionError("gc.collect() called")

    monkeypatch.setattr(gc, "collect", collect)
    assert adjust([0.01, None, 0.04], "holm") == [pytest.approx(0.02), None, pytest.approx(0.04)]
    assert holm_step_down(np.array([0.2])).tolist() == [0.2]
