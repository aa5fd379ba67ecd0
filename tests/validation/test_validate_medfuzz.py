"""CI-sized known-truth checks of MedFuzz (``medfuzz validate --size ci``) and proof that they can fail."""

from __future__ import annotations

import dataclasses

import pytest

import medfuzz.scorers.medfuzz as scorer_module
from medfuzz.models.planted import PlantedSpec
from medfuzz.scorers import stats
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.validation import medfuzz as vm
from medfuzz.validation.checks import format_table
from medfuzz.validation.items import synthetic_items
from medfuzz.validation.run import PLANS, medfuzz_config, validate_medfuzz


@pytest.fixture(scope="module")
def ci_outcome():
    return validate_medfuzz("ci", seed=0)


def test_every_medfuzz_check_passes_at_ci_size(ci_outcome):
    assert not ci_outcome.failed, "\n" + format_table(ci_outcome.checks)
    names = {c.statistic for c in ci_outcome.checks}
    assert {"clean accuracy", "post-attack accuracy", "attack success rate"} <= names
    assert any("null calibration" in n for n in names) and any("power" in n for n in names)


def test_expected_accuracy_matches_a_hand_computation():
    spec = PlantedSpec().with_target(data="none", noise=0.0, delta=0.5).with_attacker(
        trigger_rate=1.0, trigger_gain=0.0, malformed_rate=0.0)
    config = MedFuzzConfig(turns=2, replicates=1)
    e = vm.expected_item(0.8, spec, config)
    # original right 0.8; each turn carries a trigger, so right with 0.3
    assert e.correct_after == pytest.approx((0.8, 0.8 * 0.3, 0.8 * 0.09))
    assert e.success == pytest.approx(0.8 * 0.7 + 0.8 * 0.3 * 0.7)
    assert e.valid == 1.0


@pytest.fixture(scope="module")
def null_run():
    plan = PLANS["ci"]
    spec = PlantedSpec.load().with_target(data="none", delta=0.0)
    items = synthetic_items(30, seed=5)
    config = medfuzz_config(10, plan, 0)
    results = vm.run_engine(items, spec, config)
    return spec, items, config, results


def test_pvalue_denominator_off_by_one_fails_a_check(null_run, monkeypatch):
    spec, items, config, results = null_run
    checks, _ = vm.pvalue_checks("null", spec, config, items, results, vm.score(results, config))
    assert all(c.passed for c in checks)
    original = stats.permutation_p_value

    def off_by_one(p0, pa, controls, **options):
        result = original(p0, pa, controls, **options)
        if result is None:
            return None
        return dataclasses.replace(result, p_value=result.exceedances / (result.controls + 1))

    monkeypatch.setattr(scorer_module, "permutation_p_value", off_by_one)
    checks, _ = vm.pvalue_checks("null", spec, config, items, results, vm.score(results, config))
    failed = [c.statistic for c in checks if not c.passed]
    assert "null: p-value = recomputed (b+1)/(M+1) (max |diff|)" in failed


def test_accuracy_after_k_off_by_one_fails_the_accuracy_checks(monkeypatch):
    from medfuzz.solvers.medfuzz.results import Outcome, ReplicateResult

    spec = PlantedSpec.load().with_target(data="none")
    items = synthetic_items(30, seed=7)
    config = medfuzz_config(10, PLANS["ci"], 0)
    results = vm.run_engine(items, spec, config)
    checks = vm.accuracy_checks(items, spec, config, results, vm.score(results, config))
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    original = ReplicateResult.correct_after

    def off_by_one(self, k):  # a success at turn i counted as correct through k = i
        if self.outcome is Outcome.SUCCESS:
            return k <= self.success_turn
        return original(self, k)

    monkeypatch.setattr(ReplicateResult, "correct_after", off_by_one)
    checks = vm.accuracy_checks(items, spec, config, results, vm.score(results, config))
    assert {c.statistic for c in checks if not c.passed} >= {"accuracy after 1", "accuracy after 2"}
