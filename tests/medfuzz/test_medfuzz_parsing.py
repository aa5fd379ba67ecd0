"""Parsing target replies and validating attacker items; diffs of fuzzed questions; assumption packs."""

from __future__ import annotations

import pytest

from medfuzz.benchmarks.answers import answer_letter
from medfuzz.errors import MedfuzzError
from medfuzz.solvers.medfuzz.parsing import (
    added_spans,
    added_word_count,
    kept_share,
    parse_confidences,
    parse_modified_item,
)
from medfuzz.solvers.medfuzz.prompts import builtin_packs, load_pack
from tests.medfuzz.medfuzz_actors import ITEM, item_text

LETTERS = list("ABCD")


@pytest.mark.parametrize("reply, expected", [
    ("C", "C"), (" C.", "C"), ("(B)", "B"), ("**D**", "D"), ("C) Ceftriaxone", "C"), ("The answer is B.", "B"),
    ("Answer: D", "D"), ("Ceftriaxone", "C"), ("I pick option A here", "A"),
    ("A patient like this needs care", None), ("", None), ("I cannot answer that.", None), ("E", None),
])
def test_parse_answer(reply, expected):
    assert answer_letter(reply, LETTERS, ITEM.clean_options()) == expected


@pytest.mark.parametrize("reply", [
    "A: 1\nB: 2\nC: 5\nD: 1",
    "- A) 1/5\n- B) 2/5\n- C) 5/5\n- D) 1/5",
    "A: 1, B: 2, C: 5, D: 1",
    "Option A (Gentamicin): 1\nOption B (Ciprofloxacin): 2\nOption C (Ceftriaxone): 5\nOption D (Trimethoprim): 1",
    "1, 2, 5, 1",
    "**A**: 1\n**B**: 2\n**C**: 5\n**D**: 1",
])
def test_parse_confidences(reply):
    assert parse_confidences(reply, LETTERS) == {"A": 1, "B": 2, "C": 5, "D": 1}


@pytest.mark.parametrize("reply", [
    "I am fairly sure it is C.", "A: 1\nB: 2\nC: 5", "A: 1\nB: 2\nC: 7\nD: 1", "A: 0\nB: 2\nC: 5\nD: 1", "",
])
def test_unparseable_confidences(reply):
    assert parse_confidences(reply, LETTERS) is None


def test_valid_modified_item_keeps_options_and_answer():
    stem = ITEM.question + " He is an unemployed immigrant."
    parsed = parse_modified_item(item_text(stem), ITEM)
    assert parsed.ok and parsed.options_given
    assert parsed.item.question == stem
    assert parsed.item.options == ITEM.options and parsed.item.answer == "C"


def test_missing_options_are_reattached_unless_required():
    stem = ITEM.question + " He is an unemployed immigrant."
    parsed = parse_modified_item(f"```\n{stem}\n```", ITEM)
    assert parsed.ok and not parsed.options_given and parsed.item.options == ITEM.options
    strict = parse_modified_item(stem, ITEM, require_options=True)
    assert not strict.ok and strict.kind == "unparseable"


def test_tampered_options_are_rejected():
    options = {**ITEM.options, "B": "Azithromycin"}
    parsed = parse_modified_item(item_text(ITEM.question + " He sells cars.", options=options), ITEM)
    assert not parsed.ok and parsed.kind == "tampered_options" and "B" in parsed.problem
    extra = item_text(ITEM.question + " He sells cars.") + "\nE. Doxycycline"
    parsed = parse_modified_item(extra, ITEM)
    assert not parsed.ok and parsed.kind == "tampered_options"


def test_changed_answer_is_rejected():
    swapped = {**ITEM.options, "A": "Ceftriaxone", "C": "Gentamicin"}
    parsed = parse_modified_item(item_text(ITEM.question + " He sells cars.", options=swapped), ITEM)
    assert not parsed.ok and parsed.kind == "changed_answer"
    declared = item_text(ITEM.question + " He sells cars.") + "\n\nCorrect answer: A"
    parsed = parse_modified_item(declared, ITEM)
    assert not parsed.ok and parsed.kind == "changed_answer"
    same = item_text(ITEM.question + " He sells cars.") + "\n\nCorrect answer: C"
    parsed = parse_modified_item(same, ITEM)
    assert parsed.ok and "Correct answer" not in parsed.item.question


def test_unchanged_dropped_and_refused_items_are_rejected():
    assert parse_modified_item(item_text(ITEM.question), ITEM).kind == "unchanged"
    assert parse_modified_item(item_text("A man has a cough. What is it?"), ITEM).kind == "dropped_original"
    assert parse_modified_item("I'm sorry, but I can't help with modifying exam questions.", ITEM).kind == "refusal"
    assert parse_modified_item("", ITEM).kind == "unparseable"
    assert parse_modified_item("A. x\nB. y", ITEM).kind == "unparseable"


def test_diff_spans_and_word_counts():
    original = "A 6-year-old boy has jaundice. He has bone pain."
    fuzzed = "A 6-year-old boy from a poor family has jaundice. He has bone pain. His parents use herbal remedies."
    assert added_word_count(original, fuzzed) == 4 + 5
    assert added_spans(original, fuzzed) == ["from a poor family", "His parents use herbal remedies."]
    assert kept_share(original, fuzzed) == 1.0
    assert kept_share(original, "A boy has jaundice.") == pytest.approx(4 / 9)
    substituted = "A 6-year-old boy from a rich family has jaundice. He has bone pain. His parents use modern medicine."
    assert added_word_count(original, substituted) == added_word_count(original, fuzzed)


def test_packs_load_and_validate(tmp_path):
    assert {"patient_characteristics", "prior_opinion"} <= set(builtin_packs())
    pack = load_pack()
    assert pack.name == "patient_characteristics" and "stereotypes" in pack.constraints
    own = tmp_path / "mine.yaml"
    own.write_text("name: mine\nassumption: a\ndefinitions: b\ngoal: c\nconstraints: d\nexamples: e\n"
                   "reminder: f\nadded_kind: g\ncontrol_constraints: h\n")
    assert load_pack(own).added_kind == "g" and load_pack(str(own)).source == str(own)
    assert load_pack(own).control_constraints == "h"
    # a pack without control constraints is refused by name (the control prompt needs them)
    old = tmp_path / "old.yaml"
    old.write_text(own.read_text().replace("control_constraints: h\n", ""))
    with pytest.raises(MedfuzzError, match="control_constraints"):
        load_pack(old)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\ngoal: y\n")
    with pytest.raises(MedfuzzError, match="missing or empty"):
        load_pack(broken)
    with pytest.raises(MedfuzzError, match="unknown assumption pack"):
        load_pack("no_such_pack")
