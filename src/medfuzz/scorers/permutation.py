"""The MedFuzz permutation test (paper Algorithm 2, lines 3 and 9) on estimated probabilities.

    d_a = |p_a - p_0|,   d_i = |p_c,i - p_0|,   p = #{i : d_i >= d_a} / M

This is a Monte Carlo test against a fixed reference (p_0) with control fuzzes as the null samples, not a
two-sample relabelling test, so ``scipy.stats.permutation_test`` does not fit; the arithmetic is three lines
and is checked by hand in the tests. We also give ``(b + 1) / (M + 1)``, the version that counts the attack
itself among the permutations and so can never be 0 (Phipson & Smyth 2010); the paper reports the first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# p-hats are means of floats: treat ties within this tolerance as ties (d_i >= d_a counts them)
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PermutationResult:
    p_value: float  # b / M (paper)
    p_value_plus1: float  # (b + 1) / (M + 1)
    statistic: float  # d_a
    exceedances: int  # b
    controls: int  # M (controls with a usable p-hat)
    null: tuple[float, ...]  # d_i

    def to_dict(self) -> dict[str, object]:
        return {"p_value": self.p_value, "p_value_plus1": self.p_value_plus1, "statistic": self.statistic,
                "exceedances": self.exceedances, "controls": self.controls, "null": list(self.null)}


def permutation_p_value(p0: float, pa: float, controls: Sequence[float | None]) -> PermutationResult | None:
    """Algorithm 2's p-value; ``None`` entries (controls without a usable p-hat) are left out.

    Returns ``None`` when no control is usable.
    """
    for name, value in (("p0", p0), ("pa", pa)):
        if not 0.0 <= value <= 1.0 or math.isnan(value):
            raise ValueError(f"{name} must be a probability, got {value}")
    usable = [c for c in controls if c is not None]
    if not usable:
        return None
    statistic = abs(pa - p0)
    null = tuple(abs(c - p0) for c in usable)
    exceedances = sum(d >= statistic - TIE_TOLERANCE for d in null)
    return PermutationResult(
        p_value=exceedances / len(null),
        p_value_plus1=(exceedances + 1) / (len(null) + 1),
        statistic=statistic,
        exceedances=exceedances,
        controls=len(null),
        null=null,
    )
