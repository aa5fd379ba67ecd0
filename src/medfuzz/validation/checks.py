"""The shape of a validation check and the confidence intervals that decide pass/fail."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

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

    @property
    def passed(self) -> bool:
        return (not math.isnan(self.measured)) and self.low - 1e-12 <= self.measured <= self.high + 1e-12

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


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
                 min(1.0, hi_count / n + widen) if n else math.nan, n, note, expect_fail)


def mean_check(method: str, statistic: str, planted: float, measured: float, se: float, n: int, note: str = "",
               level: float = LEVEL, expect_fail: bool = False) -> Check:
    half = z(level) * se
    return Check(method, statistic, planted, measured, planted - half, planted + half, n, note, expect_fail)


def exact_check(method: str, statistic: str, planted: float, measured: float, n: int = 0, note: str = "",
                tolerance: float = 1e-9, expect_fail: bool = False) -> Check:
    """Equal up to floating point: relative ``tolerance`` (absolute 1e-12 around 0)."""
    half = max(1e-12, tolerance * abs(planted))
    return Check(method, statistic, planted, measured, planted - half, planted + half, n, note, expect_fail)


def format_table(checks: list[Check]) -> str:
    rows = [("method", "statistic", "planted", "measured", f"{LEVEL:.1%} interval", "n", "result")]
    for c in checks:
        verdict = "pass" if c.passed else ("xfail" if c.expect_fail else "FAIL")
        rows.append((c.method, c.statistic, f"{c.planted:.4g}", f"{c.measured:.4g}",
                     f"[{c.low:.4g}, {c.high:.4g}]", str(c.n), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
