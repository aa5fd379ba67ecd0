"""The template attacker writes valid MedFuzz items and controls for any target, with no LLM."""

from __future__ import annotations

import asyncio

from medfuzz.benchmarks import load_items
from medfuzz.planted import PlantedSpec, PlantedTarget
from medfuzz.planted.chat import PlantedChatModel
from medfuzz.planted.spec import AttackerSpec, TargetSpec
from medfuzz.planted.template import PATIENT_CHARACTERISTICS, RED_HERRINGS, template_attacker
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.outcomes import Outcome


def test_template_attacker_drives_the_engine_without_llm_errors():
    items = load_items("medqa", "demo")[:8]
    target = PlantedChatModel(PlantedTarget(PlantedSpec(), items))  # any target will do; this one is fast
    engine = MedFuzzEngine(target, template_attacker(seed=3), MedFuzzConfig(replicates=2, controls=4,
                                                                             option_orders=1, turns=3))

    async def main():
        return await asyncio.gather(*(engine.run_item(item) for item in items))

    results = asyncio.run(main())
    replicates = [r for result in results for r in result.replicates]
    assert not [r.error for r in replicates if r.outcome is Outcome.LLM_ERROR]
    turns = [t for r in replicates for t in r.turns]
    assert turns and not any(t.rejected for t in turns)
    for turn in turns:
        assert any(sentence in turn.question for sentence in PATIENT_CHARACTERISTICS)
    tested = [r.significance for r in replicates if r.significance is not None]
    assert tested and not any(s.controls_rejected for s in tested)
    # every control drawn is usable; fewer than M only where the sequential test stopped early
    assert all(len(s.controls) == s.controls_attempted for s in tested)
    assert all(len(s.controls) == 4 or (s.stopped and len(s.controls) < 4) for s in tested)


def test_one_added_sentence_names_a_distractor_never_the_key_and_controls_drop_it():
    items = load_items("medqa", "demo")[:6]
    # a planted target that the red herrings trick (triggers = their fixed words): successes, so controls run
    fooled = PlantedSpec(target=TargetSpec(triggers=("has read about", "had a similar episode", "asks specifically"),
                                           delta=0.9, low=0.9),
                         attacker=AttackerSpec(trigger_sentences=("The patient has read about it.",)))
    target = PlantedChatModel(PlantedTarget(fooled, items))
    engine = MedFuzzEngine(target, template_attacker(seed=5), MedFuzzConfig(replicates=1, controls=3,
                                                                             option_orders=1, turns=2))

    async def main():
        return await asyncio.gather(*(engine.run_item(item) for item in items))

    named = controls = 0
    for item, result in zip(items, asyncio.run(main()), strict=True):
        for replicate in result.replicates:
            for turn in replicate.turns:
                herrings = [h for h in RED_HERRINGS if h.split("{option}")[0] in turn.question]
                assert len(herrings) == 1, turn.question
                key = item.options[item.answer].rstrip(".").lower()
                question = turn.question.lower()
                mentioned = [o for o in item.options.values()
                             if o.rstrip(".").lower() in question and o.lower() not in item.question.lower()]
                assert key not in [m.rstrip(".").lower() for m in mentioned], (key, turn.question)
                named += bool(mentioned)
            if replicate.significance is not None:
                for control in replicate.significance.controls:
                    controls += 1
                    assert not any(h.split("{option}")[0] in control.question for h in RED_HERRINGS)
    assert named > 0 and controls > 0


def test_red_herrings_can_be_turned_off():
    items = load_items("medqa", "demo")[:3]
    engine = MedFuzzEngine(PlantedChatModel(PlantedTarget(PlantedSpec(), items)),
                           template_attacker(seed=5, red_herring=False),
                           MedFuzzConfig(replicates=1, controls=2, option_orders=1, turns=1))

    async def main():
        return await asyncio.gather(*(engine.run_item(item) for item in items))

    turns = [t for r in asyncio.run(main()) for rep in r.replicates for t in rep.turns]
    assert turns and not any(h.split("{option}")[0] in t.question for t in turns for h in RED_HERRINGS)


# words that would make a red herring clinical evidence for the distractor it names (a relative's episode
# attributed to it, a past diagnosis, an exposure or result): the bundled pack forbids the attacker LLM such
# evidence, and the template attacker follows the same constraint
EVIDENCE_WORDS = ("sibling", "mother", "father", "family", "history", "diagnos", "episode", "put down to",
                  "exposed", "test", "result", "took", "taking", "prescribed")


def test_red_herrings_are_never_evidence_for_the_distractor():
    from medfuzz.solvers.medfuzz.prompts import load_pack

    assert "objective medical or statistical evidence for a distractor" in load_pack().constraints
    for template in RED_HERRINGS:
        text = template.lower()
        assert not [w for w in EVIDENCE_WORDS if w in text], template
        # the option is what the patient says or worries about, not a finding
        assert text.startswith("the patient ") and any(w in text for w in ("worried", "asks", "wants", "insists"))
