"""Algorithm 1 with scripted attacker and target: every branch of the loop and every outcome class."""

from __future__ import annotations

import json

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.models import Generation
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome, ReplicateResult
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models, stem_of

BASE = MedFuzzConfig(turns=5, replicates=1, controls=0, exemplars=0, max_retries=1)


async def run(target: Target, attacker: Attacker, config: MedFuzzConfig = BASE, **kwargs) -> ReplicateResult:
    t, a = models(target, attacker)
    engine = MedFuzzEngine(t, a, config, **kwargs)
    result = await engine.run_item(ITEM)
    return result.replicates[0]


@pytest.mark.parametrize("turn", [1, 3, 5])
async def test_success_at_turn_i(turn):
    target, attacker = Target(weak_spots=(f"clue{turn}",)), Attacker()
    r = await run(target, attacker)
    assert r.outcome is Outcome.SUCCESS and r.success_turn == turn and r.turns_used == turn
    assert r.original.answer == "C" and r.original.confidences == {"A": 1, "B": 1, "C": 5, "D": 1}
    final = r.final_turn
    assert final.target.answer == "A" and final.question.endswith(f"enjoys clue{turn}.")
    assert final.added_spans == [f"The patient enjoys clue{turn}."] and final.added_words == 4
    assert [t.postmortem is not None for t in r.turns] == [False] + [True] * (turn - 1)
    assert all(t.plan for t in r.turns)
    assert r.confidence_drop("C") == 4
    # per-role usage: the original pass (3 target calls) plus 3 per turn; attacker 2 + 3 per later turn
    assert r.usage["target"]["calls"] == 3 * (turn + 1)
    assert r.usage["attacker"]["calls"] == 2 + 3 * (turn - 1)
    assert [r.correct_after(k) for k in range(6)] == [k < turn for k in range(6)]


async def test_target_never_sees_earlier_turns_and_attacker_keeps_its_dialog():
    target, attacker = Target(weak_spots=("clue3",)), Attacker()
    t, a = models(target, attacker)
    await MedFuzzEngine(t, a, BASE).run_item(ITEM)
    reasoning_calls = [c for c in t.calls if len(c.messages) == 2]
    assert [stem_of(c.messages).split("enjoys")[-1] for c in reasoning_calls] == [
        ITEM.question.split("enjoys")[-1], " clue1.", " clue2.", " clue3."]
    assert all(len(c.messages) <= 6 for c in t.calls)  # system + 3 user/2 assistant at most: a fresh dialog
    history = [len(c.messages) for c in a.calls]
    assert history == sorted(history) and history[0] == 2  # the attacker's dialog only grows
    last = a.calls[-1].messages
    assert "enjoys clue1" in " ".join(m.content for m in last) and "enjoys clue2" in " ".join(m.content for m in last)
    assert "Correct answer: C: Ceftriaxone" in a.calls[0].messages[1].content
    assert not any("Correct answer" in m.content for c in t.calls for m in c.messages)


async def test_attack_failed_after_k_turns():
    r = await run(Target(), Attacker(), MedFuzzConfig(turns=3, replicates=1, controls=0, exemplars=0))
    assert r.outcome is Outcome.ATTACK_FAILED and r.turns_used == 3 and r.success_turn is None
    assert r.fuzzed_question.endswith("enjoys clue3.")
    assert [r.correct_after(k) for k in range(4)] == [True] * 4


async def test_wrong_on_original_means_no_attack():
    attacker = Attacker()
    r = await run(Target(answer_text="Gentamicin"), attacker)
    assert r.outcome is Outcome.ALREADY_WRONG and r.turns == [] and attacker.log == []
    assert r.correct_after(0) is False


@pytest.mark.parametrize("step", ["reasoning", "confidences", "answer"])
@pytest.mark.parametrize("failure", [RuntimeError("HTTP 500"), Generation(text="", error="refusal: content filter")])
async def test_target_error_on_original_at_each_step(step, failure):
    target = Target(fail={step: [failure, failure]})  # max_retries=1: two tries, both fail
    r = await run(target, Attacker())
    assert r.outcome is Outcome.LLM_ERROR and r.error_step == "target on the original item"
    assert r.error.startswith(step) and r.correct_after(0) is None
    assert target.log.count(step) == 2


async def test_transient_error_is_retried_and_recovered():
    target = Target(weak_spots=("clue1",), fail={"answer": [RuntimeError("timeout")]})
    r = await run(target, Attacker())
    assert r.outcome is Outcome.SUCCESS and r.original.retries == 1
    assert r.usage["target"]["errors"] == 1


@pytest.mark.parametrize("reply", ["I think it is C", "C is most likely; others unlikely", "A: 1\nB: 9\nC: 5\nD: 1"])
async def test_unparseable_confidences_are_an_llm_error(reply):
    r = await run(Target(fail={"confidences": [reply, reply]}), Attacker())
    assert r.outcome is Outcome.LLM_ERROR and "unparseable confidences" in r.error


async def test_unparseable_confidences_allowed_when_not_required():
    config = MedFuzzConfig(turns=2, replicates=1, controls=0, exemplars=0, require_confidences=False)
    attacker = Attacker()
    r = await run(Target(weak_spots=("clue1",), fail={"confidences": ["pretty sure about C"]}), attacker, config)
    assert r.outcome is Outcome.SUCCESS and r.original.confidences is None
    assert r.original.confidences_raw == "pretty sure about C"


async def test_unparseable_final_answer_is_an_llm_error():
    r = await run(Target(fail={"answer": ["Hmm, hard to say", "It depends"]}), Attacker())
    assert r.outcome is Outcome.LLM_ERROR and "no option letter" in r.error


async def test_target_error_during_an_attack_turn():
    target = Target(fail={})
    attacker = Attacker()
    t, a = models(target, attacker)
    engine = MedFuzzEngine(t, a, BASE)
    calls = {"n": 0}

    def fail_on_turn_two(messages, options):
        calls["n"] += 1
        if "clue2" in stem_of(messages):
            return RuntimeError("connection reset")
        return target(messages, options)

    t.responder = fail_on_turn_two
    r = (await engine.run_item(ITEM)).replicates[0]
    assert r.outcome is Outcome.LLM_ERROR and r.error_step == "target at turn 2"
    assert r.turns[1].error and r.turns_used == 2


@pytest.mark.parametrize("step", ["plan", "item"])
async def test_attacker_error_at_cold_start(step):
    attacker = Attacker(**{f"{step}s": [RuntimeError("rate limit"), RuntimeError("rate limit")]})
    r = await run(Target(), attacker)
    assert r.outcome is Outcome.LLM_ERROR
    assert r.error_step == ("attacker plan" if step == "plan" else "attacker modified item")


async def test_attacker_error_at_post_mortem():
    attacker = Attacker()
    original = attacker.__call__

    def responder(messages, options):
        if messages[-1].content.startswith("That did not work"):
            return RuntimeError("overloaded")
        return original(messages, options)

    t, a = models(Target(), attacker)
    a.responder = responder
    r = (await MedFuzzEngine(t, a, BASE).run_item(ITEM)).replicates[0]
    assert r.outcome is Outcome.LLM_ERROR and r.error_step == "attacker post-mortem" and r.turns_used == 2


async def test_attacker_refusal_is_an_llm_error():
    refusal = "I'm sorry, but I can't help with making exam questions misleading."
    r = await run(Target(), Attacker(plans=[refusal, refusal]))
    assert r.outcome is Outcome.LLM_ERROR and r.error.startswith("refusal")
    r = await run(Target(), Attacker(items=[refusal, refusal]))
    assert r.outcome is Outcome.LLM_ERROR and r.turns[0].rejected[0].kind == "refusal"


async def test_tampered_options_are_sent_back_then_accepted():
    tampered = item_text(ITEM.question + " He loves clue1.", options={**ITEM.options, "D": "Doxycycline"})
    attacker = Attacker(items=[tampered])
    t, a = models(Target(weak_spots=("clue2",)), attacker)
    r = (await MedFuzzEngine(t, a, BASE).run_item(ITEM)).replicates[0]
    assert r.outcome is Outcome.SUCCESS and r.success_turn == 2
    assert [x.kind for x in r.turns[0].rejected] == ["tampered_options"] and r.turns[1].rejected == []
    assert "He loves clue1" not in r.turns[0].question
    fix = a.calls[2].messages  # cold-start plan, bad item, corrected item
    assert fix[-2].content == tampered and fix[-1].content.startswith("Your modified question could not be used")
    later = a.calls[-1].messages
    assert len(later) > len(fix) and all(m.content != tampered for m in later)  # not kept in the dialog


@pytest.mark.parametrize("bad, kind", [
    (item_text(ITEM.question + " He likes clue1.", options={**ITEM.options, "B": "Penicillin"}), "tampered_options"),
    (item_text(ITEM.question + " He likes clue1.") + "\nCorrect answer: B", "changed_answer"),
    (item_text(ITEM.question + " He likes clue1.",
               options={"A": "Ceftriaxone", "B": "Ciprofloxacin", "C": "Gentamicin", "D": "Trimethoprim"}),
     "changed_answer"),
    ("Sure! Here you go.", "dropped_original"),
])
async def test_persistently_invalid_item_is_an_llm_error(bad, kind):
    r = await run(Target(weak_spots=("clue1",)), Attacker(items=[bad, bad]))
    assert r.outcome is Outcome.LLM_ERROR and r.error_step == "attacker modified item"
    assert [x.kind for x in r.turns[0].rejected] == [kind, kind]
    assert r.error.startswith(kind)


async def test_replicates_draw_exemplars_and_are_reproducible(fixtures):
    pool = load_items("medqa", fixtures / "medqa_small.jsonl")
    config = MedFuzzConfig(turns=2, replicates=5, controls=0, exemplars=2, seed=7)

    async def once() -> ItemResult:
        t, a = models(Target(weak_spots=("clue2",)), Attacker())
        return await MedFuzzEngine(t, a, config, exemplar_pool=pool).run_item(ITEM)

    first, second = await once(), await once()
    assert json.dumps(first.to_dict(), sort_keys=True) == json.dumps(second.to_dict(), sort_keys=True)
    draws = [tuple(r.exemplar_ids) for r in first.replicates]
    assert all(len(d) == 2 for d in draws) and len(set(draws)) > 1
    assert len({r.seed for r in first.replicates}) == 5
    assert first.counts()["success"] == 5
    restored = ItemResult.from_dict(json.loads(json.dumps(first.to_dict())))
    assert restored.to_dict() == first.to_dict()


async def test_exemplars_reach_the_target_prompt(fixtures):
    pool = load_items("medqa", fixtures / "medqa_small.jsonl")
    t, a = models(Target(), Attacker())
    config = MedFuzzConfig(turns=1, replicates=1, controls=0, exemplars=1)
    r = (await MedFuzzEngine(t, a, config, exemplar_pool=pool).run_item(ITEM)).replicates[0]
    exemplar = next(p for p in pool if p.id == r.exemplar_ids[0])
    system = t.calls[0].messages[0].content
    assert exemplar.clean_question()[:60] in system and f"Answer: {exemplar.answer}" in system


async def test_user_pack_reaches_the_attacker(tmp_path):
    pack = tmp_path / "p.yaml"
    pack.write_text("name: p\nassumption: a\ndefinitions: DEFS-XYZ\ngoal: GOAL-XYZ\nconstraints: RULES-XYZ\n"
                    "examples: EX-XYZ\nreminder: REMIND-XYZ\nadded_kind: widgets\ncontrol_constraints: CTRL-XYZ\n")
    t, a = models(Target(), Attacker())
    result = await MedFuzzEngine(t, a, MedFuzzConfig(turns=2, replicates=1, controls=0, exemplars=0),
                                 pack=str(pack)).run_item(ITEM)
    cold = a.calls[0].messages[1].content
    assert all(s in cold for s in ("DEFS-XYZ", "GOAL-XYZ", "RULES-XYZ", "EX-XYZ"))
    replan = next(c.messages[-1].content for c in a.calls if c.messages[-1].content.startswith("Building on"))
    assert "widgets" in replan and "REMIND-XYZ" in replan
    assert result.config["pack"] == "p"


async def test_target_text_refusal_is_an_llm_error():
    refusal = "I'm sorry, but I can't provide medical advice."
    r = await run(Target(fail={"reasoning": [refusal, refusal]}), Attacker())
    assert r.outcome is Outcome.LLM_ERROR and r.error.startswith("reasoning: refusal")
