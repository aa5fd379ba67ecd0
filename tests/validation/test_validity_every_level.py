"""Validity at every level: the exact null distribution of the p-values medfuzz's own code computes
(``stats.permutation_p_value``, on the controls drawn by the engine's own loop, ``stats.ControlSchedule``),
P(p <= u) <= u at every attainable u, for several M and h. Holm and BH compare each p-value with a different
level (alpha / m, ..., alpha k / m), so validity at alpha alone is not enough.

Under the null the attack and the M controls are exchangeable (continuous p-hats: no ties), so the set of
controls farther from p0 than the attack (the exceedances) has b uniform on 0..M and, given b, is a uniformly
random b-subset of the draw order: a pattern with b exceedances has probability 1 / ((M + 1) C(M, b)).
For M <= 12 every one of the 2^M patterns is run through the code. For larger M the patterns are grouped by
what a correct sequential p can depend on (b < h: b alone; b >= h: the draw l of the h-th exceedance, with
C(l-1, h-1) C(M-l, b-h) patterns) and each group runs through the code twice, with the other exceedances first
and last, and must give one p-value: the grouping is checked, not assumed.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from fractions import Fraction
from math import comb

import pytest

from medfuzz import stats

P0, PA = 0.5, 0.3  # d_a = 0.2
FAR, NEAR = 0.8, 0.45  # a control 0.3 from p0 (an exceedance) or 0.05 (not)
BATCH = None  # the default control_batch: batches that grow with the evidence


def engine_p(pattern: tuple[bool, ...], stop_at: int | None, min_controls: int) -> float | None:
    """The p-value the engine's loop records for one exceedance pattern: the controls ``ControlSchedule``
    draws (sequential: in the default batches, stopped by ``sequential_decision``; fixed: all M at once), then
    ``permutation_p_value`` on them."""
    controls = [FAR if exceeds else NEAR for exceeds in pattern]
    m = len(controls)
    schedule = stats.ControlSchedule(m, stop_at or 1, min_controls, batch=BATCH, sequential=stop_at is not None)
    while drawn := schedule.next_batch():
        schedule.record(P0, PA, controls[drawn.start:drawn.stop])
    result = stats.permutation_p_value(P0, PA, controls[:schedule.attempted], stop_at=stop_at)
    return None if result is None else result.p_value


def enumerated(m: int, stop_at: int | None, min_controls: int) -> dict[float, Fraction]:
    """The exact null distribution over all 2^M patterns."""
    dist: dict[float, Fraction] = defaultdict(Fraction)
    for pattern in itertools.product((False, True), repeat=m):
        b = sum(pattern)
        p = engine_p(pattern, stop_at, min_controls)
        assert p is not None  # every control usable: every attack is tested
        dist[p] += Fraction(1, (m + 1) * comb(m, b))
    return dist


def grouped(m: int, stop_at: int, min_controls: int) -> dict[float, Fraction]:
    """The exact null distribution of the sequential p by groups of patterns; each group's p from the code, on
    two members of the group that must agree."""
    dist: dict[float, Fraction] = defaultdict(Fraction)
    h = stop_at
    for b in range(m + 1):
        if b < h:  # never stopped: b exceedances, early or late
            early = tuple(i < b for i in range(m))
            late = tuple(i >= m - b for i in range(m))
            p = engine_p(early, h, min_controls)
            assert p is not None and p == engine_p(late, h, min_controls), (m, h, b)
            dist[p] += Fraction(1, m + 1)
            continue
        for place in range(h, m - (b - h) + 1):  # the h-th exceedance at draw ``place`` (1-based)
            before, after = h - 1, b - h
            first = tuple(i < before or i == place - 1 or place <= i < place + after for i in range(m))
            last = tuple((place - 1 - before <= i < place - 1) or i == place - 1 or i >= m - after
                         for i in range(m))
            assert sum(first) == sum(last) == b
            p = engine_p(first, h, min_controls)
            assert p is not None and p == engine_p(last, h, min_controls), (m, h, b, place)
            dist[p] += Fraction(comb(place - 1, h - 1) * comb(m - place, b - h), (m + 1) * comb(m, b))
    return dist


def assert_valid_at_every_level(dist: dict[float, Fraction], label: str) -> None:
    assert sum(dist.values()) == 1, label
    cumulative = Fraction(0)
    for u in sorted(dist):  # the CDF only steps at attainable values: checking there covers every u in [0, 1]
        cumulative += dist[u]
        assert cumulative <= Fraction(u) + Fraction(1, 10**12), f"{label}: P(p <= {u}) = {float(cumulative)}"


@pytest.mark.parametrize("m", [1, 2, 5, 9, 12])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.25])
def test_every_pattern_small_m(m, alpha):
    h = stats.stop_exceedances(alpha, m)
    least = max(1, -(-4 * m // 5))  # ceil(0.8 M), the default minimum of usable controls
    fixed = enumerated(m, None, least)
    assert_valid_at_every_level(fixed, f"fixed M={m}")
    # the fixed p is (b + 1)/(M + 1) with b uniform: exactly u at every attainable u
    assert fixed == {(k + 1) / (m + 1): Fraction(1, m + 1) for k in range(m + 1)}
    for stop_at in sorted({1, 2, h}):
        if stop_at <= m:
            assert_valid_at_every_level(enumerated(m, stop_at, least), f"sequential M={m} h={stop_at}")


@pytest.mark.parametrize("m", [19, 30, 39, 99])
@pytest.mark.parametrize("h", [1, 2, 3, 5])
def test_sequential_by_groups(m, h):
    dist = grouped(m, h, max(1, -(-4 * m // 5)))
    assert_valid_at_every_level(dist, f"sequential M={m} h={h}")


def test_the_default_test_spends_alpha_exactly_and_never_more():
    """M = 30, alpha = 0.05, h = 1: P(p <= 0.05) = 1/20 exactly (first exceedance at draw >= 20, or none), and
    P(p <= u) = u exactly wherever u = 1/l (the whole level is used, none exceeded)."""
    h = stats.stop_exceedances(0.05, 30)
    dist = grouped(30, h, 24)
    assert h == 1
    cdf = {u: sum(w for p, w in dist.items() if p <= u) for u in dist}
    assert cdf[1 / 20] == Fraction(1, 20)
    assert all(cdf[1 / draw] == Fraction(1, draw) for draw in range(1, 31))
    assert cdf[1 / 31] == Fraction(1, 31)
