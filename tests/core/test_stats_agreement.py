"""``stats.cohen_kappa`` / ``proportion`` / ``pair_items`` against hand values and scikit-learn."""

from __future__ import annotations

import math

import pytest

from medfuzz.scorers.stats import cohen_kappa, pair_items, proportion

LABELS = ("yes", "no", "unsure")


def test_kappa_hand_case_and_sklearn():
    sklearn = pytest.importorskip("sklearn.metrics")
    first = ["yes"] * 4 + ["no"] * 3 + ["unsure"] * 3
    second = ["yes", "yes", "yes", "no", "no", "no", "unsure", "yes", "unsure", "unsure"]
    # table rows=first: yes (3, 1, 0), no (0, 2, 1), unsure (1, 0, 2); p_o = 7/10, p_e = (4*4 + 3*3 + 3*3)/100
    result = cohen_kappa(first, second, LABELS)
    assert result.agreement == pytest.approx(0.7)
    assert result.kappa == pytest.approx((0.7 - 0.34) / (1 - 0.34))
    assert result.kappa == pytest.approx(sklearn.cohen_kappa_score(first, second, labels=list(LABELS)))
    assert result.low < result.kappa < result.high and result.n == 10


def test_kappa_undefined_with_one_category_and_errors():
    result = cohen_kappa(["yes"] * 4, ["yes"] * 4, LABELS)
    assert math.isnan(result.kappa) and result.agreement == 1.0
    assert math.isnan(cohen_kappa([], [], LABELS).kappa)
    with pytest.raises(ValueError, match="'maybe' is not one of"):
        cohen_kappa(["maybe"], ["yes"], LABELS)
    with pytest.raises(ValueError, match="different numbers"):
        cohen_kappa(["yes"], [], LABELS)


def test_proportion_wilson_by_hand():
    z = 1.959963984540054
    centre = (7 + z * z / 2) / (10 + z * z)
    half = z / (10 + z * z) * math.sqrt(7 * 3 / 10 + z * z / 4)
    p = proportion(7, 10)
    assert (p.value, p.low, p.high) == pytest.approx((0.7, centre - half, centre + half))
    assert math.isnan(proportion(0, 0).value)
    with pytest.raises(ValueError):
        proportion(3, 2)


def test_pair_items_reports_ids_of_one_run():
    paired = pair_items({"a": True, "b": False, "c": True}, {"b": True, "c": True, "d": False})
    assert paired.ids == ["b", "c"] and paired.first == [False, True] and paired.second == [True, True]
    assert paired.only_first == ["a"] and paired.only_second == ["d"]


def test_guess_accuracy_is_the_mean_of_one_over_the_option_counts() -> None:
    from medfuzz.scorers.stats import guess_accuracy

    assert guess_accuracy([4, 4, 4]) == 0.25
    # two 4-option items and one 5-option item: (1/4 + 1/4 + 1/5) / 3 = 0.2333..., not 1 / mean(4, 4, 5) = 0.2308
    assert guess_accuracy([4, 4, 5]) == pytest.approx(7 / 30)
    assert guess_accuracy([]) is None
