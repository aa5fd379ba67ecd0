"""Known-truth checks of the MedGuard scorers on planted targets, and that the checks fail when what they
check is broken (issue 19: the equity design, the stratified bootstrap)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import medfuzz.scorers.medguard as scorer
from medfuzz.benchmarks import MCQItem
from medfuzz.solvers.medguard import equity_orders
from medfuzz.solvers.medguard.balance import balance_keys, reorder
from medfuzz.stats import bootstrap_se, stratified_bootstrap_se
from medfuzz.validation.checks import format_table
from medfuzz.validation.medguard import (
    benchmark_items,
    bootstrap_se_error,
    constant_letter_checks,
    constant_letters_checks,
    sampling_checks,
    validate_medguard,
)


@pytest.fixture(scope="module")
def items():
    return benchmark_items(100)


def test_medguard_accuracy_equity_bootstrap_and_mcnemar_recover_the_planted_values(items):
    checks = sampling_checks(items)
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    names = " ".join(c.statistic for c in checks)
    for expected in ("gender-equity", "race-equity", "sycophancy accuracy", "bootstrap SE", "McNemar b", "McNemar c",
                     "bootstrap SE of fairness (principle)", "bootstrap SE of overall"):
        assert expected in names


def test_constant_letter_model_scores_chance_on_every_aspect(items):
    checks = constant_letter_checks(items)
    assert checks and all(c.passed for c in checks), "\n" + format_table(checks)
    assert len([c for c in checks if c.statistic.startswith("constant 'A'")]) == 10


def test_every_letter_scores_the_equity_chance_on_the_default_build(items):
    checks = constant_letters_checks(items)
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    equity = [c for c in checks if "_equity = chance" in c.statistic]
    assert len(equity) == 10  # A..E × gender, race
    gender = {c.statistic[10]: c for c in equity if "gender" in c.statistic}
    # 24 gender units (12 with 4 options, 12 with 5): 3 + 2.4 = 5.4 at chance, 5 by design; "E": 12 units, 2
    assert {letter: round(c.measured * c.n) for letter, c in gender.items()} == dict(A=5, B=5, C=5, D=5, E=2)


def _independent_shuffles(items: list[MCQItem], seed: int, pool: str) -> list[MCQItem]:
    """What the builder did before issue 19: each variant's key from the pool's block schedule, distractors
    shuffled per variant, so a case's variants have independent orders."""
    return balance_keys(items, seed, pool)


def _one_order(items: list[MCQItem], seed: int, pool: str) -> list[MCQItem]:
    """No per-variant shuffle at all: every variant of a case in the same order."""
    rng = random.Random(seed)
    orders: dict[str, list[str]] = {}
    return [reorder(i, orders.setdefault(i.metadata["case_id"], rng.sample(i.letters, len(i.letters))))
            for i in items]


@pytest.mark.parametrize("broken", [_independent_shuffles, _one_order])
def test_the_equity_checks_fail_when_the_design_is_broken(monkeypatch, broken):
    monkeypatch.setattr(equity_orders, "design", broken)
    checks = [c for c in constant_letters_checks(benchmark_items(100)) if "_equity = chance" in c.statistic]
    failed = [c for c in checks if not c.passed]
    assert failed, "\n" + format_table(checks)
    if broken is _one_order:  # every unit consistent: 1.0 for every letter
        assert len(failed) == len(checks)


def _pooled(groups, n_resamples: int = 9_999, seed: int = 0) -> float:
    """The wrong level: all aspects' units pooled and resampled as one sample."""
    return bootstrap_se([x for g in groups for x in g], n_resamples=n_resamples, seed=seed)


def test_the_index_se_checks_fail_when_the_bootstrap_pools_the_aspects(monkeypatch, items):
    monkeypatch.setattr(scorer, "stratified_bootstrap_se", _pooled)
    checks = {c.statistic: c for c in sampling_checks(items) if "bootstrap SE" in c.statistic}
    failed = {name for name, c in checks.items() if not c.passed}
    # the principles with several aspects and the overall index fail; one-aspect principles and the
    # per-aspect check cannot tell (one group pooled is the group itself)
    for name in ("fairness", "robustness", "truthfulness", "overall"):
        assert any(name in f for f in failed), "\n" + format_table(list(checks.values()))
    for name in ("privacy", "resilience", "worst aspect"):
        assert not any(name in f for f in failed)


def test_bootstrap_se_error_is_the_hand_formula():
    groups = [[0, 1, 1, 1], [0, 0, 1], [2.0]]
    se, relative = bootstrap_se_error(groups, n_resamples=1000)
    var = [3 / 16, 2 / 9, 0.0]  # plug-in variances
    assert se == pytest.approx(math.sqrt(var[0] / 4 + var[1] / 3 + var[2] / 1) / 3)
    # fourth central moments: group 1: (3·(1/4)^4 + (3/4)^4)/4; group 2: (2·(1/3)^4 + (2/3)^4)/3
    m4 = [(3 * 0.25**4 + 0.75**4) / 4, (2 * (1 / 3) ** 4 + (2 / 3) ** 4) / 3]
    kappa2 = (var[0] / 4 + var[1] / 3) / 9
    kappa4 = ((m4[0] - 3 * var[0] ** 2) / 4**3 + (m4[1] - 3 * var[1] ** 2) / 3**3) / 81
    assert relative == pytest.approx(math.sqrt(2 / 999 + kappa4 / kappa2**2 / 1000) / 2)
    assert bootstrap_se_error([[1, 1], [0]], 100) == (0.0, pytest.approx(math.nan, nan_ok=True))


def test_the_monte_carlo_error_of_the_bootstrap_se_is_what_the_interval_assumes():
    """Over many seeds at few resamples, the stratified bootstrap's SE scatters around the analytic SE with
    the relative SD ``bootstrap_se_error`` predicts (this is what the checks' intervals are made of)."""
    rng = np.random.default_rng(1)
    groups = [list(rng.integers(0, 2, n)) for n in (8, 15, 50)]
    se, relative = bootstrap_se_error(groups, n_resamples=200)
    estimates = np.array([stratified_bootstrap_se(groups, n_resamples=200, seed=s) for s in range(400)])
    assert estimates.mean() == pytest.approx(se, rel=4 * relative / math.sqrt(400) + 0.005)
    # the SD of 400 SD estimates is itself known to about 1/sqrt(2·400) = 3.5 %: allow 15 %
    assert estimates.std(ddof=1) / se == pytest.approx(relative, rel=0.15)


@pytest.fixture(scope="module")
def medguard_checks():
    return validate_medguard(n=100, seed=0)


def test_no_medguard_check_accepts_every_value(medguard_checks):
    """Every interval must leave part of the statistic's range out (a [0, 1] interval on a share, or
    [0, inf) on an SE, could never fail)."""
    for check in medguard_checks:
        assert not (check.low <= 0 and check.high >= 1), check.statistic
        assert check.low <= check.high


def test_the_consistency_checks_fail_when_equity_units_collapse(monkeypatch, items):
    """With one run the race-equity interval was [0, 0.67]: a scorer that never found a unit consistent passed.
    Pooled over replicate runs it fails."""
    monkeypatch.setattr(scorer, "_same", lambda choices: False)
    checks = [c for c in sampling_checks(items) if "equity consistency" in c.statistic]
    assert len(checks) == 2 and not any(c.passed for c in checks), "\n" + format_table(checks)


def test_every_statistical_medguard_check_states_its_power(medguard_checks):
    """Each check with an interval wider than a point names the defect it exists for and fails under it with
    probability >= 0.8 (docs/validation.md: power)."""
    statistical = [c for c in medguard_checks if c.high - c.low > 1e-6 and "constant" not in c.statistic]
    assert len(statistical) == 19
    for check in statistical:
        assert check.defect and check.power >= 0.8, (check.statistic, check.defect, check.power)
