"""CI-sized known-truth checks of MedFuzz (``medfuzz validate --size ci``), the independent recompute of the
p-values and the exact null distributions by hand, and proof that the checks can fail."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

import medfuzz.scorers.medfuzz as scorer_module
from medfuzz import stats
from medfuzz.planted import PlantedSpec
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.validation import medfuzz as vm
from medfuzz.validation.checks import (
    Check,
    at_most_check,
    binomial_power,
    format_table,
    mean_check,
    normal_power,
    proportion_check,
    suite_errors,
)
from medfuzz.validation.exact import FAMILY, exact_checks
from medfuzz.validation.items import synthetic_items
from medfuzz.validation.run import PLANS, Outcome, medfuzz_config, validate_medfuzz


@pytest.fixture(scope="module")
def ci_outcome():
    return validate_medfuzz("ci", seed=0)


def test_every_medfuzz_check_passes_at_ci_size(ci_outcome):
    assert not ci_outcome.failed, "\n" + format_table(ci_outcome.checks)
    names = " | ".join(c.statistic for c in ci_outcome.checks)
    for expected in ("clean accuracy", "post-attack accuracy (LLM errors dropped)", "attack success rate",
                     "sequential (default): p-values recomputed", "fixed: p-values recomputed",
                     "sequential (default): share significant <= 0.05 (null, one-sided)",
                     "power", "holm adjusted p-values",
                     "sequential (default): share with the paper's b/M observed (all M drawn; null)",
                     "sequential controls = prefix of the fixed stream"):
        assert expected in names, expected
    # the default configuration is what runs: sequential policy, M = 30, alpha = 0.05
    config = medfuzz_config(PLANS["ci"], 0)
    assert (config.controls_policy, config.controls, config.alpha) == ("sequential", 30, 0.05)
    defaults = MedFuzzConfig()
    assert (defaults.controls_policy, defaults.controls, defaults.alpha) == ("sequential", 30, 0.05)
    # every statistical check at ci states its defect, and the checks of each defect fail under it with
    # probability >= 0.8 (each check alone, except the accuracy curve's rows, one defect for all of them)
    powered = [c for c in ci_outcome.checks if c.defect]
    assert len(powered) == sum(not c.statistic.endswith(("(attacks differing)", "= recomputed", "max |diff|)"))
                               for c in ci_outcome.checks), [c.statistic for c in powered]
    by_defect: dict[str, float] = {}
    for c in powered:
        by_defect[c.defect] = max(by_defect.get(c.defect, 0.0), c.power)
    assert all(power >= 0.8 for power in by_defect.values()), by_defect
    assert {row.label for row in ci_outcome.calibration} == {
        "sequential h/l (default), M=30", "sequential: paper's b/M observed, M=30", "fixed (b+1)/(M+1), M=30",
        "fixed b/M (paper), M=30"}


def test_the_power_of_a_check_by_hand():
    # one-sided: n = 20, bound 0.05 -> accept at most ppf(0.999) = 5 hits; P(X >= 6), X ~ Binomial(20, 0.3)
    check = at_most_check("m", "s", 0.05, 0.05, 0, 20)
    assert check.high * 20 == 5
    by_hand = sum(math.comb(20, k) * 0.3**k * 0.7 ** (20 - k) for k in range(6, 21))
    assert binomial_power(check, 0.3) == pytest.approx(by_hand, rel=1e-12)
    assert binomial_power(check, 0.0) == 0.0 and binomial_power(check, 1.0) == pytest.approx(1.0)
    # two-sided normal: interval planted ± z se; a defect one se above the upper end fails with Φ(1)
    mean = mean_check("m", "s", 0.5, 0.5, se=0.1, n=4)
    assert normal_power(mean, mean.high + 0.1, 0.2) == pytest.approx(scipy_stats.norm.cdf(1.0) + scipy_stats.norm.sf(
        (mean.high + 0.1 - mean.low) / 0.1), rel=1e-9)
    # the defect distribution h/(l+1): every stopped p moves below h/l
    off = vm.null_distribution(30, 0.05, "sequential_off_by_one")
    assert sum(off.values()) == pytest.approx(1.0) and off[1 / 2] == pytest.approx(1 / 2)  # l = 1: 1/(1*2)


def test_expected_accuracy_matches_a_hand_computation():
    spec = PlantedSpec().with_target(data="none", noise=0.0, delta=0.5).with_attacker(
        trigger_rate=1.0, trigger_gain=0.0, malformed_rate=0.0)
    config = MedFuzzConfig(turns=2, replicates=1)
    e = vm.expected_item(0.8, spec, config)
    # original right 0.8; each turn carries a trigger, so right with 0.3
    assert e.correct_after == pytest.approx((0.8, 0.8 * 0.3, 0.8 * 0.09))
    assert e.success == pytest.approx(0.8 * 0.7 + 0.8 * 0.3 * 0.7)
    assert e.valid == 1.0


# ---------------------------------------------------------------------------- the independent recompute


def test_recompute_by_hand():
    # p0 = 0.9, pa = 0.3 -> d = 0.6; control distances in draw order: 0.1, 0.6 (tie: counts), 0.7, 0.2, None
    hats = [0.8, 0.3, 0.2, 0.7, None]
    fixed = vm.recompute(0.9, 0.3, hats, "fixed", h=1, min_controls=3)
    assert (fixed.p_value, fixed.p_value_paper, fixed.usable, fixed.stopped) == (3 / 5, 2 / 4, 4, False)
    seq = vm.recompute(0.9, 0.3, hats, "sequential", h=1, min_controls=3)
    assert (seq.p_value, seq.used, seq.stopped) == (1 / 2, 2, True)  # first exceedance at draw 2: h/l = 1/2
    assert seq.p_value_paper is None  # b over all the controls: never observed after the stop
    seq2 = vm.recompute(0.9, 0.3, hats, "sequential", h=2, min_controls=3)
    assert (seq2.p_value, seq2.used) == (2 / 3, 3)
    # no exceedance: (0 + 1) / (n + 1), tested only with enough usable controls
    assert vm.recompute(0.9, 0.3, [0.85] * 24, "sequential", 1, 24).p_value == 1 / 25
    assert vm.recompute(0.9, 0.3, [0.85] * 23, "sequential", 1, 24).p_value is None
    assert vm.recompute(0.9, 0.3, [0.85] * 23 + [0.1], "fixed", 1, 24).p_value == 2 / 25  # h reached: tested
    assert vm.recompute(None, 0.3, hats, "fixed", 1, 1).p_value is None


def test_rule_h_and_min_controls_match_the_config():
    for m, alpha in ((30, 0.05), (30, 0.01), (99, 0.05), (10, 0.05), (199, 0.05)):
        assert vm.rule_h(alpha, m) == stats.stop_exceedances(alpha, m), (m, alpha)
    for options in ({}, {"controls": 10}, {"holm_family": 40}, {"min_controls": 5}):
        config = MedFuzzConfig(**options)
        assert vm.rule_min_controls(config) == config.min_usable_controls, options


def test_exact_null_distributions_by_hand():
    seq = vm.null_distribution(30, 0.05, "sequential")
    assert sum(seq.values()) == pytest.approx(1.0)
    # h = 1: first exceedance at draw l with probability 1/(l(l+1)); none with 1/31
    assert seq[1 / 5] == pytest.approx(1 / 30)
    assert seq[1 / 31] == pytest.approx(1 / 31)
    assert vm.null_rate(30, 0.05, "sequential") == pytest.approx(1 / 20)
    assert vm.null_rate(30, 0.05, "fixed") == pytest.approx(1 / 31)
    assert vm.null_rate(30, 0.05, "paper") == pytest.approx(2 / 31)
    mean, _ = vm.null_moments(30, 0.05, "sequential")
    assert mean == pytest.approx(sum(1 / (k * (k + 1)) / k for k in range(1, 31)) + 1 / 31**2)
    assert vm.null_moments(30, 0.05, "paper")[0] == pytest.approx(0.5)


def test_the_exact_distribution_matches_a_simulation_of_the_definition():
    rng = np.random.default_rng(3)
    values = rng.random((20_000, 31))
    hits = 0
    for row in values:
        hits += vm.is_significant(vm.recompute(0.0, row[0], list(row[1:]), "sequential", 1, 24).p_value, 0.05)
    assert hits / len(values) == pytest.approx(vm.null_rate(30, 0.05, "sequential"), abs=0.005)


def test_holm_and_bh_vectors_match_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    for family in (list(FAMILY), list(rng.random(25) ** 3), [0.01, 0.01, 0.04, 0.2]):
        assert vm.holm_vector(family) == pytest.approx(list(multipletests(family, method="holm")[1]))
        assert vm.bh_vector(family) == pytest.approx(list(multipletests(family, method="fdr_bh")[1]))


def test_the_planted_family_tells_every_adjustment_apart():
    from statsmodels.stats.multitest import multipletests

    methods = ("holm", "hommel", "bonferroni", "sidak", "holm-sidak", "simes-hochberg", "fdr_bh", "fdr_by",
               "fdr_tsbh", "fdr_tsbky")
    vectors = {m: multipletests(FAMILY, method=m)[1] for m in methods}
    for a in methods:
        for b in methods:
            if a < b:
                assert not np.allclose(vectors[a], vectors[b]), (a, b)
    assert len(set(FAMILY)) == len(FAMILY) and min(FAMILY) > 0
    assert all(c.passed for c in exact_checks()), "\n" + format_table(exact_checks())


# ------------------------------------------------------------------------------------- the checks can fail


def test_a_check_that_cannot_fail_is_a_suite_error():
    vacuous = proportion_check("X", "share", 0.4, 3, 6, level=0.99999)  # n = 6: the interval is [0, 1]
    assert (vacuous.low, vacuous.high) == (0.0, 1.0) and vacuous.vacuous and not vacuous.passed
    assert vacuous.verdict == "VACUOUS" and suite_errors([vacuous]) == [vacuous]
    known_gap = dataclasses.replace(vacuous, expect_fail=True)
    assert Outcome(checks=[known_gap]).failed == [known_gap]  # a known gap does not excuse it
    fine = proportion_check("X", "share", 0.4, 40, 100)
    assert fine.passed and not fine.vacuous
    assert not Check("X", "unbounded", 0, 0, -1, 1).vacuous  # no range given: never vacuous


def test_the_one_sided_calibration_check():
    ok = at_most_check("X", "null share", 0.05, 0.05, 100, 2000)
    assert ok.passed and ok.low == 0.0 and 0.05 < ok.high < 0.07
    anti = at_most_check("X", "null share", 0.05, 0.05, round(2000 * 2 / 31 * 1.15), 2000)
    assert not anti.passed


@pytest.fixture(scope="module")
def null_run():
    spec = PlantedSpec.load().with_target(data="none", delta=0.0)
    items = synthetic_items(30, seed=5)
    config = medfuzz_config(PLANS["ci"], 0)
    results = vm.run_engine(items, spec, config)
    return spec, items, config, results


def test_sequential_off_by_one_fails_the_recompute(null_run, monkeypatch):
    _, _, config, results = null_run
    scores = vm.score(results, config)
    checks = vm.recompute_checks("null", vm.tested_attacks(results, scores, config), scores, config)
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    original = stats.permutation_p_value

    def off_by_one(p0, pa, controls, **options):  # h / (l + 1) when stopped
        result = original(p0, pa, controls, **options)
        if result is None or not result.stopped_early:
            return result
        return dataclasses.replace(result, p_value=result.exceedances / (result.controls + 1))

    monkeypatch.setattr(scorer_module, "permutation_p_value", off_by_one)
    scores = vm.score(results, config)
    checks = vm.recompute_checks("null", vm.tested_attacks(results, scores, config), scores, config)
    assert "null: p-values recomputed from the controls (attacks differing)" in [c.statistic for c in checks
                                                                                  if not c.passed]


def test_accuracy_after_k_off_by_one_fails_the_accuracy_checks(monkeypatch):
    from medfuzz.solvers.medfuzz.results import Outcome as ReplicateOutcome
    from medfuzz.solvers.medfuzz.results import ReplicateResult

    spec = PlantedSpec.load().with_target(data="none")
    items = synthetic_items(30, seed=7)
    config = medfuzz_config(PLANS["ci"], 0)
    results = vm.run_engine(items, spec, config)
    checks = vm.accuracy_checks(items, spec, config, results, vm.score(results, config))
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    original = ReplicateResult.correct_after

    def off_by_one(self, k):  # a success at turn i counted as correct through k = i
        if self.outcome is ReplicateOutcome.SUCCESS:
            return k <= self.success_turn
        return original(self, k)

    monkeypatch.setattr(ReplicateResult, "correct_after", off_by_one)
    checks = vm.accuracy_checks(items, spec, config, results, vm.score(results, config))
    assert {c.statistic for c in checks if not c.passed} >= {"accuracy after 1", "accuracy after 2"}


def test_calibration_rows_have_exact_intervals():
    row = vm.Calibration("x", 100, 2000, 0.05, 0.05)
    low, high = row.interval()
    assert low < 0.05 < high and math.isclose(row.share, 0.05)


def test_the_fixed_policy_statistical_null_checks_state_their_power():
    """At full size (not ci) the fixed policy's null rows are checks, each with its defect and power."""
    spec = PlantedSpec.load().with_target(data="none", delta=0.0)
    config = medfuzz_config(PLANS["ci"], 0, "fixed")
    results = vm.run_engine(synthetic_items(20, seed=6), spec, config)
    scores = vm.score(results, config)
    tested = vm.tested_attacks(results, scores, config)
    checks, rows = vm.null_checks("null, fixed", tested, scores, config, statistical=True)
    assert [c.statistic for c in checks] == ["null, fixed: share significant, (b+1)/(M+1) (null)",
                                             "null, fixed: share significant by the paper's b/M (null)",
                                             "null, fixed: mean of the paper's b/M (null)"]
    assert all(c.defect and 0.0 <= c.power <= 1.0 for c in checks)
    assert len(rows) == 2
    assert vm.null_checks("null, fixed", tested, scores, config, statistical=False) == ([], rows)
