"""``stats.cohen_kappa`` / ``proportion`` / ``pair_items`` against hand values and scikit-learn."""

from __future__ import annotations

import math

import pytest

from medfuzz.stats import cohen_kappa, pair_items, proportion

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
    from medfuzz.stats import guess_accuracy

    assert guess_accuracy([4, 4, 4]) == 0.25
    # two 4-option items and one 5-option item: (1/4 + 1/4 + 1/5) / 3 = 0.2333..., not 1 / mean(4, 4, 5) = 0.2308
    assert guess_accuracy([4, 4, 5]) == pytest.approx(7 / 30)
    assert guess_accuracy([]) is None


def _every_k_and_n(largest: int):
    import numpy as np

    n = np.repeat(np.arange(1, largest + 1), np.arange(2, largest + 2))
    k = np.concatenate([np.arange(m + 1) for m in range(1, largest + 1)])
    return k, n


def test_wilson_interval_holds_its_point_and_range_for_every_k_and_n_to_2000():
    """Over the whole domain k ≤ n ≤ 2,000 (2,003,000 pairs): 0 ≤ low ≤ k/n ≤ high ≤ 1, exactly 0 at k = 0 and 1
    at k = n, and equal to the closed-form Wilson bounds elsewhere. statsmodels alone misses k/n at the ends for
    hundreds of n (0.9999999999999999 at 7/7, 2.8e-17 at 0/7): the plot's error bars refused them."""
    import numpy as np

    from medfuzz.stats import wilson_interval

    k, n = _every_k_and_n(2000)
    low, high = wilson_interval(k, n)
    share = k / n
    assert np.all((low >= 0) & (low <= share) & (share <= high) & (high <= 1))
    assert np.all(low[k == 0] == 0.0) and np.all(high[k == n] == 1.0)
    z = 1.959963984540054  # the closed form, away from the ends where it is exact only up to rounding
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)
    inside = (k > 0) & (k < n)
    assert np.allclose(low[inside], (centre - half)[inside], rtol=0, atol=1e-12)
    assert np.allclose(high[inside], (centre + half)[inside], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 13, 300, 1299])
def test_proportion_is_the_same_interval_with_exact_ends(n: int):
    from medfuzz.stats import wilson_interval

    for k in range(n + 1):
        p = proportion(k, n)
        low, high = wilson_interval(k, n)
        assert (p.low, p.high) == (float(low), float(high))
    assert proportion(0, n).low == 0.0 and proportion(n, n).high == 1.0


def test_the_report_error_bars_accept_every_end_value(tmp_path):
    """The TCES plot's error bars (the crash of issue 26) at 0/n and n/n for the sizes statsmodels rounds wrong."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from medfuzz.report.tces import _errorbar

    fig, ax = plt.subplots()
    _errorbar(ax, [1, 2, 3, 4], [proportion(7, 7), proportion(0, 7), proportion(300, 300), proportion(0, 1299)])
    plt.close(fig)
    assert proportion(7, 7).high == 1.0 and proportion(0, 7).low == 0.0


def test_kappa_interval_stays_within_minus_one_and_one():
    first = ["yes"] * 3 + ["no"] * 3
    result = cohen_kappa(first, first, LABELS)  # perfect agreement on 6 units: the Wald interval passes 1
    assert result.kappa == 1.0 and result.high == 1.0 and -1.0 <= result.low <= 1.0
