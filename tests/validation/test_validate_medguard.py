"""Known-truth checks of the MedGuard scorers on planted targets."""

from __future__ import annotations

import pytest

from medfuzz.validation.checks import format_table
from medfuzz.validation.medguard import benchmark_items, constant_letter_checks, sampling_checks


@pytest.fixture(scope="module")
def items():
    return benchmark_items(100)


def test_medguard_accuracy_equity_bootstrap_and_mcnemar_recover_the_planted_values(items):
    checks = sampling_checks(items)
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    names = " ".join(c.statistic for c in checks)
    for expected in ("gender-equity", "race-equity", "sycophancy accuracy", "bootstrap SE", "McNemar b", "McNemar c"):
        assert expected in names


def test_constant_letter_model_scores_chance_on_every_aspect(items):
    checks = constant_letter_checks(items)
    assert checks and all(c.passed for c in checks), "\n" + format_table(checks)
