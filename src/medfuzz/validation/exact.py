"""Exact checks of the statistics whose truth is a hand value: each medfuzz function on a planted input
against an implementation written here from the definition (not the library medfuzz calls), so that a swapped
method or a wrong normaliser cannot pass.

- Gini-Simpson η = 1 - Σ q_j² on planted multisets (hand values: {a, a, a, b, b, c} gives 11/18);
- Holm and Benjamini-Hochberg adjusted p-values as whole vectors on a family of distinct non-zero p-values
  on which every other adjustment statsmodels offers gives a different vector;
- the significance decision p <= alpha at the boundary (p = alpha exactly, and a Holm-adjusted 3 × 1/60);
- the Wilson interval (closed form), McNemar's exact (binomial sum) and continuity-corrected chi-square
  (erfc) p-values, and the chance level of a uniform guesser over items with different option counts;
- McNemar's automatic choice (``exact=None``, what the MedGuard ranking of ``medfuzz compare`` uses): exact
  below 25 discordant pairs, chi-square from 25 on, on tables either side of the switch against statsmodels'
  ``mcnemar`` for the branch the rule takes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from medfuzz import stats
from medfuzz.validation.checks import Check, count_check, exact_check
from medfuzz.validation.medfuzz import adjustment_checks

METHOD = "stats"

# distinct, non-zero, not all below alpha, with ties of neither rank nor value; Holm, Hommel, Bonferroni,
# Sidak, Holm-Sidak, Hochberg, BH, BY and the two-stage FDR methods all give different vectors here
# (tests/validation/test_validate_exact.py checks that)
FAMILY = (0.001, 0.008, 0.012, 0.02, 0.041, 0.3, 0.6, 0.9, 0.0045, 0.027)
MULTISETS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("a", "a", "a", "b", "b", "c"), 1 - (9 + 4 + 1) / 36),  # 11/18
    (("x", "y", "z", "w"), 0.75),  # four distinct: 1 - 4 (1/4)^2
    (("only",) * 5, 0.0),
)


def gini_simpson_checks() -> list[Check]:
    worst = max(abs(stats.gini_simpson(list(entities)) - value) for entities, value in MULTISETS)
    return [exact_check(METHOD, "Gini-Simpson on planted multisets (hand values, max |diff|)", 0.0, worst,
                        len(MULTISETS), note="{a,a,a,b,b,c}: 11/18; 4 distinct: 3/4; one entity: 0")]


def significance_checks(alpha: float = 0.05) -> list[Check]:
    """The decision at the boundary: p = alpha is significant (p <= alpha), so is a float-rounded alpha."""
    planted: Sequence[tuple[float, bool]] = ((alpha, True), (1 / 20, True), (3 * (1 / 60), True), (0.049, True),
                                             (0.0501, False), (1.0, False))
    wrong = sum(stats.significant(p, alpha) != expected for p, expected in planted)
    return [count_check(METHOD, f"significant(p, {alpha}) at the boundary (decisions differing)", wrong,
                        len(planted), note="p = alpha and 3 x 1/60 are significant; 0.0501 is not")]


def wilson(k: int, n: int, z: float) -> tuple[float, float]:
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
    return centre - half, centre + half


def wilson_checks() -> list[Check]:
    z = 1.959963984540054  # the 97.5 % normal quantile
    worst = 0.0
    for k, n in ((7, 20), (0, 10), (19, 19), (3, 250)):
        got = stats.proportion(k, n)
        low, high = wilson(k, n, z)
        worst = max(worst, abs(got.low - low), abs(got.high - high))
    return [exact_check(METHOD, "Wilson 95% interval, closed form (max |diff|)", 0.0, worst, 4, tolerance=0.0),
            wilson_range_check()]


def wilson_range_check(largest: int = 80) -> Check:
    """Every k <= n <= ``largest``: 0 <= low <= k/n <= high <= 1 with low exactly 0 at k = 0 and high exactly 1 at
    k = n. Rounding breaks this for hundreds of n in statsmodels' own bounds, and a plot's error bar then refuses
    a negative length (the report crash of issue 26)."""
    pairs = [(k, n) for n in range(1, largest + 1) for k in range(n + 1)]
    bad = 0
    for k, n in pairs:
        got = stats.proportion(k, n)
        holds = 0.0 <= got.low <= got.value <= got.high <= 1.0
        ends = (k > 0 or got.low == 0.0) and (k < n or got.high == 1.0)
        bad += not (holds and ends)
    return count_check(METHOD, f"Wilson interval within [0, 1] and around its point, exact ends (k <= n <= {largest})",
                       bad, len(pairs), note="intervals violating the range, the point or the exact ends")


def mcnemar_checks() -> list[Check]:
    first_b, first_c = 3, 12  # exact: 2 P(X <= 3), X ~ Binomial(15, 1/2), summed by hand
    exact = min(1.0, 2 * sum(math.comb(15, i) for i in range(first_b + 1)) / 2**15)
    got = stats.mcnemar([True] * first_b + [False] * first_c, [False] * first_b + [True] * first_c, exact=True)
    b, c = 30, 12  # chi-square with continuity correction, 1 df: P(X > x) = erfc(sqrt(x / 2))
    x = (abs(b - c) - 1) ** 2 / (b + c)
    chi = stats.mcnemar([True] * b + [False] * c, [False] * b + [True] * c, exact=False)
    return [exact_check(METHOD, "McNemar exact p-value, b=3 c=12 (binomial sum)", exact, got.pvalue, 15),
            exact_check(METHOD, "McNemar chi-square p-value, b=30 c=12 (continuity-corrected)",
                        math.erfc(math.sqrt(x / 2)), chi.pvalue, 42, tolerance=1e-9)]


# (a, b, c, d): both concordant cells non-zero; b + c = 12 and 24 (exact), 25 and 60 (chi-square). At 24 and 25
# the two branches differ (0.0639 vs 0.0665 at 24), so a switch moved by one pair changes a printed p-value
SWITCH_TABLES: tuple[tuple[int, int, int, int], ...] = ((3, 5, 7, 9), (40, 7, 17, 36), (40, 7, 18, 35),
                                                        (12, 21, 39, 28))
SWITCH_AT = 25  # the documented rule: exact when b + c < 25


def mcnemar_switch_checks() -> list[Check]:
    """``stats.mcnemar(..., exact=None)`` against statsmodels' ``mcnemar`` with the branch the documented rule
    picks (exact binomial below 25 discordant pairs, else chi-square with continuity correction)."""
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    worst, wrong_branch = 0.0, 0
    for a, b, c, d in SWITCH_TABLES:
        first = [True] * (a + b) + [False] * (c + d)
        second = [True] * a + [False] * b + [True] * c + [False] * d
        exact = b + c < SWITCH_AT
        reference = float(sm_mcnemar([[a, b], [c, d]], exact=exact, correction=True).pvalue)
        got = stats.mcnemar(first, second)
        worst = max(worst, abs(got.pvalue - reference))
        wrong_branch += got.exact != exact
    sizes = ", ".join(str(b + c) for _, b, c, _ in SWITCH_TABLES)
    return [exact_check(METHOD, f"McNemar automatic exact/chi-square choice, b+c = {sizes} (statsmodels, max |diff|)",
                        0.0, worst, len(SWITCH_TABLES), tolerance=0.0,
                        note=f"exact below {SWITCH_AT} discordant pairs, chi-square (corrected) from {SWITCH_AT}"),
            count_check(METHOD, "McNemar automatic choice: tables on the wrong branch (result.exact)", wrong_branch,
                        len(SWITCH_TABLES), note=f"b+c = {sizes}")]


def guess_checks() -> list[Check]:
    counts = (4, 5, 5, 3, 2)
    value = (1 / 4 + 1 / 5 + 1 / 5 + 1 / 3 + 1 / 2) / 5  # the mean of 1/k, not 1/mean(k) = 1/3.8
    return [exact_check(METHOD, "chance level of a uniform guess, options 4,5,5,3,2 = mean of 1/k", value,
                        stats.guess_accuracy(counts) or math.nan, len(counts))]


def exact_checks(alpha: float = 0.05) -> list[Check]:
    return (gini_simpson_checks()
            + adjustment_checks("", FAMILY, note="planted family of 10 distinct p-values")
            + significance_checks(alpha) + wilson_checks() + mcnemar_checks() + mcnemar_switch_checks()
            + guess_checks())
