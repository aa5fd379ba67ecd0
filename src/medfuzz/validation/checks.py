"""The shape of a validation check and the confidence intervals that decide pass/fail."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
from scipy import stats

Size = Literal["ci", "full"]
# each statistical check's interval: Bonferroni over the ~50 checks of a full run, so that a correct
# implementation passes them all with probability >= 95 % (at 99 % per check, one in two full runs would
# show a false failure somewhere)
LEVEL = 0.999


@dataclass(frozen=True)
class Check:
    """One statistic: the value planted (computed from the rule), the value medfuzz measured, the interval
    the measured value may fall in if medfuzz is right (``low``..``high``), and the verdict."""

    method: str
    statistic: str
    planted: float
    measured: float
    low: float
    high: float
    n: int = 0
    note: str = ""
    expect_fail: bool = False  # a known gap (e.g. fixed on another branch): reported, not counted
    # the range the statistic can take (a share: 0..1; a count of n: 0..n). An interval that covers all of it
    # accepts every value, so the check could never fail: an error of the suite, not a pass
    lowest: float = -math.inf
    highest: float = math.inf
    # the defect this statistical check exists for, and the probability that it fails under that defect at this
    # n (``binomial_power`` / ``normal_power``); empty / NaN where not stated
    defect: str = ""
    power: float = math.nan

    @property
    def vacuous(self) -> bool:
        """The acceptance interval covers the statistic's whole range: the check cannot fail."""
        return self.low - 1e-12 <= self.lowest and self.high + 1e-12 >= self.highest

    @property
    def within(self) -> bool:
        """The measured value lies in the interval (whether or not the interval means anything)."""
        return (not math.isnan(self.measured)) and self.low - 1e-12 <= self.measured <= self.high + 1e-12

    @property
    def passed(self) -> bool:
        return self.within and not self.vacuous

    @property
    def verdict(self) -> str:
        if self.vacuous:
            return "VACUOUS"
        if self.within:
            return "pass"
        return "xfail" if self.expect_fail else "FAIL"

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed, "vacuous": self.vacuous}


def suite_errors(checks: list[Check]) -> list[Check]:
    """Checks whose interval covers the statistic's whole range: they would pass whatever medfuzz printed,
    so the suite itself is wrong (too few units for the statistic, or a badly built interval). A known gap
    (``expect_fail``) does not excuse it."""
    return [c for c in checks if c.vacuous]


def z(level: float = LEVEL) -> float:
    return float(stats.norm.ppf(0.5 + level / 2))


def proportion_check(method: str, statistic: str, planted: float, hits: int, n: int, note: str = "",
                     level: float = LEVEL, extra_sd: float = 0.0, expect_fail: bool = False) -> Check:
    """Measured share ``hits / n`` against the planted probability: the interval holds the central ``level``
    of Binomial(n, planted) (exact, scipy), widened by ``extra_sd`` (e.g. Monte-Carlo error of the planted
    value) on the proportion scale."""
    measured = hits / n if n else math.nan
    lo_count, hi_count = stats.binom.interval(level, n, min(1.0, max(0.0, planted))) if n else (math.nan, math.nan)
    widen = z(level) * extra_sd
    # a share lies in [0, 1]: widening by the Monte-Carlo error must not print intervals outside it
    return Check(method, statistic, planted, measured, max(0.0, lo_count / n - widen) if n else math.nan,
                 min(1.0, hi_count / n + widen) if n else math.nan, n, note, expect_fail, lowest=0.0, highest=1.0)


def at_most_check(method: str, statistic: str, planted: float, bound: float, hits: int, n: int, note: str = "",
                  level: float = LEVEL) -> Check:
    """One-sided: the share ``hits / n`` must not exceed ``bound`` beyond sampling error, i.e. ``hits`` is at
    most the ``level`` quantile of Binomial(n, bound) (exact, scipy). ``planted`` is the value expected (e.g.
    the exact null rejection rate, <= ``bound``); the interval is [0, that quantile / n]."""
    measured = hits / n if n else math.nan
    high = float(stats.binom.ppf(level, n, bound)) / n if n else math.nan
    return Check(method, statistic, planted, measured, 0.0, high, n, note, lowest=0.0, highest=1.0)


def count_check(method: str, statistic: str, wrong: int, n: int, note: str = "") -> Check:
    """Exact: none of ``n`` recomputed values may differ (``wrong`` of them do). Over no values at all the
    check proves nothing, and is reported as vacuous."""
    return Check(method, statistic, 0.0, float(wrong), 0.0, 0.0, n, note, lowest=0.0, highest=float(n))


def mean_check(method: str, statistic: str, planted: float, measured: float, se: float, n: int, note: str = "",
               level: float = LEVEL, expect_fail: bool = False, lowest: float = -math.inf,
               highest: float = math.inf) -> Check:
    half = z(level) * se
    return Check(method, statistic, planted, measured, planted - half, planted + half, n, note, expect_fail,
                 lowest=lowest, highest=highest)


def exact_check(method: str, statistic: str, planted: float, measured: float, n: int = 0, note: str = "",
                tolerance: float = 1e-9, expect_fail: bool = False) -> Check:
    """Equal up to floating point: relative ``tolerance`` (absolute 1e-12 around 0)."""
    half = max(1e-12, tolerance * abs(planted))
    return Check(method, statistic, planted, measured, planted - half, planted + half, n, note, expect_fail)


def fields_differing(expected: dict[str, float], shown: dict[str, Any], tolerance: float) -> list[str]:
    """The names whose shown number is missing or further than ``tolerance`` from the expected one."""
    out = []
    for name, value in expected.items():
        got = shown.get(name)
        if not isinstance(got, int | float) or not math.isclose(float(got), value, rel_tol=0, abs_tol=tolerance):
            out.append(f"{name}={got!r} (expected {value:.6g})")
    return out


def differing_check(method: str, statistic: str, differing: list[str], n: int) -> Check:
    """Exact: no field of a surface differs from its expected value (the first four named in the note)."""
    return exact_check(method, f"{statistic} (fields differing)", 0.0, float(len(differing)), n,
                       note="; ".join(differing[:4]), tolerance=0.0)


def binomial_power(check: Check, rate: float) -> float:
    """P(the check fails) when its count is Binomial(n, ``rate``) (the statistic under a defect): exact, the
    mass of the counts k whose share k / n lies outside [low, high]."""
    if not check.n:
        return math.nan
    k = np.arange(check.n + 1)
    share = k / check.n
    outside = (share < check.low - 1e-12) | (share > check.high + 1e-12)
    return float(stats.binom.pmf(k[outside], check.n, min(1.0, max(0.0, rate))).sum())


def normal_power(check: Check, mean: float, sd: float) -> float:
    """P(the check fails) when the measured mean of n values has mean ``mean`` and per-value standard deviation
    ``sd`` under a defect (normal approximation, as the check's own interval)."""
    if not check.n:
        return math.nan
    se = sd / math.sqrt(check.n)
    return float(stats.norm.cdf(check.low, mean, se) + stats.norm.sf(check.high, mean, se))


def with_power(check: Check, defect: str, power: float) -> Check:
    return replace(check, defect=defect, power=power)


def power_table(checks: list[Check]) -> str:
    """The statistical checks with a named defect: n, the defect and P(the check fails | defect)."""
    rows = [c for c in checks if c.defect]
    lines = [f"{'power against a named defect':<72} {'n':>5}  {'P(fail)':>7}  defect"]
    lines += [f"{c.statistic[:72]:<72} {c.n:>5}  {c.power:>7.3f}  {c.defect}" for c in rows]
    return "\n".join(lines)


def format_table(checks: list[Check]) -> str:
    rows = [("method", "statistic", "planted", "measured", f"{LEVEL:.1%} interval", "n", "result")]
    for c in checks:
        rows.append((c.method, c.statistic, f"{c.planted:.4g}", f"{c.measured:.4g}",
                     f"[{c.low:.4g}, {c.high:.4g}]", str(c.n), c.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
