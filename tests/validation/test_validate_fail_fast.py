"""``medfuzz validate --fail-fast``: cheapest sections first, stop at the first failing check, exit 1.

The expensive sections are replaced by stand-ins where only the control flow is under test (seconds, not the
~20 s of a ci run); the defect planted in the exact section is a real one (chance level as 1/mean(k), the
mutation ``guess_accuracy_one_over_mean_k``) caught by the real exact checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medfuzz import stats
from medfuzz.cli import main as cli_main
from medfuzz.validation import exact, medguard, phat, surfaces, tces
from medfuzz.validation import run as validation_run
from medfuzz.validation.checks import Check, exact_check
from medfuzz.validation.run import Outcome, StopValidation, validate

SECTIONS = ("MedFuzz δ run", "MedFuzz null runs", "p-hat", "TCES", "MedGuard", "exact", "surfaces")
CHEAPEST_FIRST = ["exact", "p-hat", "MedGuard", "MedFuzz δ run", "TCES", "MedFuzz null runs", "surfaces"]
# the surfaces section's parts, as the stand-ins record them
TABLE_CALLS = [*SECTIONS[:-1], *(f"surfaces: {part}" for part in surfaces.PARTS)]
CHEAPEST_CALLS = [*CHEAPEST_FIRST[:-1], *(f"surfaces: {part}" for part in surfaces.CHEAPEST_FIRST)]


def _check(section: str, measured: float) -> Check:
    """A check of ``section`` that passes when ``measured`` is 1 (and fails otherwise)."""
    return exact_check(section, f"{section} stand-in", 1.0, measured)


@pytest.fixture
def sections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every section but the exact one replaced by a passing stand-in that records its call; returns the calls."""
    calls: list[str] = []

    def medfuzz_section(size, seed, spec, outcome: Outcome, parts: tuple[str, ...]) -> Outcome:
        name = {("delta",): "MedFuzz δ run", ("null",): "MedFuzz null runs"}[parts]
        calls.append(name)
        outcome.add([_check(name, 1.0)])
        return outcome

    def stand_in(name: str):
        def section(*args, **kwargs) -> list[Check]:
            calls.append(name)
            return [_check(name, 1.0)]
        return section

    monkeypatch.setattr(validation_run, "validate_medfuzz", medfuzz_section)
    monkeypatch.setattr(phat, "phat_checks", stand_in("p-hat"))
    monkeypatch.setattr(tces, "validate_tces", stand_in("TCES"))
    monkeypatch.setattr(medguard, "validate_medguard", stand_in("MedGuard"))
    monkeypatch.setattr(surfaces, "surface_parts", lambda *a, **k: {part: stand_in(f"surfaces: {part}")
                                                                     for part in surfaces.PARTS})
    real_exact = exact.exact_checks

    def exact_section(alpha: float) -> list[Check]:
        calls.append("exact")
        return real_exact(alpha)

    monkeypatch.setattr(exact, "exact_checks", exact_section)
    return calls


def _mean_of_one_over_k_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted defect: chance level as 1 / mean(k) instead of the mean of 1/k."""
    monkeypatch.setattr(stats, "guess_accuracy", lambda counts: len(counts) / sum(counts))


def test_without_fail_fast_every_section_runs_in_the_tables_order(sections):
    outcome = validate("ci")
    assert sections == TABLE_CALLS
    assert not outcome.failed and not outcome.stopped_in and not outcome.skipped


def test_a_passing_run_with_fail_fast_still_runs_every_section_cheapest_first(sections):
    outcome = validate("ci", fail_fast=True)
    assert sections == CHEAPEST_CALLS
    assert not outcome.failed and not outcome.stopped_in and not outcome.skipped
    assert {c.method for c in outcome.checks} >= set(TABLE_CALLS) - {"exact"}


def test_fail_fast_stops_in_the_section_of_the_first_failing_check(sections, monkeypatch):
    _mean_of_one_over_k_swapped(monkeypatch)
    outcome = validate("ci", fail_fast=True)
    assert sections == ["exact"]
    assert outcome.stopped_in == "exact" and outcome.skipped == CHEAPEST_FIRST[1:]
    assert [c.statistic for c in outcome.failed] == ["chance level of a uniform guess, options 4,5,5,3,2 = mean of 1/k"]
    # the same defect without --fail-fast: every section runs, the same check fails
    sections.clear()
    outcome = validate("ci")
    assert sections == TABLE_CALLS and not outcome.stopped_in
    assert len(outcome.failed) == 1


def test_a_later_section_failing_stops_after_it(sections, monkeypatch):
    monkeypatch.setattr(tces, "validate_tces", lambda *a, **k: sections.append("TCES") or [_check("TCES", 0.5)])
    outcome = validate("ci", fail_fast=True)
    assert sections == CHEAPEST_FIRST[:5]
    assert outcome.stopped_in == "TCES" and outcome.skipped == ["MedFuzz null runs", "surfaces"]
    assert [c.method for c in outcome.failed] == ["TCES"]


def test_a_failing_surface_part_stops_the_parts_after_it(sections, monkeypatch):
    stand_ins = {part: (lambda part=part: sections.append(f"surfaces: {part}")
                        or [_check("surfaces", 0.5 if part == "TCES" else 1.0)]) for part in surfaces.PARTS}
    monkeypatch.setattr(surfaces, "surface_parts", lambda *a, **k: stand_ins)
    outcome = validate("ci", fail_fast=True)
    tces_at = CHEAPEST_CALLS.index("surfaces: TCES")
    assert sections == CHEAPEST_CALLS[:tces_at + 1] and outcome.stopped_in == "surfaces"
    assert len(outcome.failed) == 1
    sections.clear()  # without --fail-fast every part runs, in the table's order
    assert len(validate("ci").failed) == 1 and sections == TABLE_CALLS


def test_the_surface_parts_are_one_set_in_both_orders():
    from medfuzz.validation.surfaces import surface_parts

    assert tuple(surface_parts("ci")) == surfaces.PARTS
    assert sorted(surfaces.CHEAPEST_FIRST) == sorted(surfaces.PARTS)


def test_outcome_add_raises_only_with_fail_fast_and_keeps_the_failing_check():
    failing = _check("x", 0.0)
    relaxed = Outcome()
    relaxed.add([failing])
    assert relaxed.failed == [failing]
    strict = Outcome(fail_fast=True)
    strict.add([_check("x", 1.0)])
    with pytest.raises(StopValidation):
        strict.add([failing])
    assert strict.failed == [failing] and len(strict.checks) == 2


def test_the_cli_option_exits_1_and_says_where_it_stopped(sections, monkeypatch, tmp_path: Path, capsys):
    _mean_of_one_over_k_swapped(monkeypatch)
    assert cli_main(["validate", "--size", "ci", "--fail-fast", "--out", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    assert "stopped at the first failing check (--fail-fast), in the exact checks; not run: p-hat, MedGuard, " \
           "MedFuzz δ run, TCES, MedFuzz null runs, surfaces" in printed
    assert "FAIL" in printed
    written = json.loads((tmp_path / "validation.json").read_text())
    assert written["fail_fast"] == {"stopped_in": "exact", "not_run": CHEAPEST_FIRST[1:]}
    assert written["failed"] == 1
    assert not (tmp_path / "calibration.png").exists()  # nothing to plot: the null runs did not run
    assert "no calibration plot: the run stopped before the MedFuzz null runs" in printed
