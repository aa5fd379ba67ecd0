"""Fewer calls for the same decisions: the sequential (Besag-Clifford) permutation test, p-hat of the original
shared by an item's replicates, the in-run request cache, and the attacker-is-target record."""

from __future__ import annotations

import asyncio
import logging

import pytest

from medfuzz.models import Generation
from medfuzz.scorers.medfuzz import score_item, significance_test
from medfuzz.scorers.stats import permutation_p_value, sequential_decision, stop_exceedances
from medfuzz.solvers.medfuzz.cache import RequestCache
from medfuzz.solvers.medfuzz.controls import TARGET_ROLE
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.results import Outcome
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models

# ------------------------------------------------------------------------------------------ statistics


def test_stop_exceedances_by_hand():
    # fewest b with b / M >= alpha: 0.05 * 30 = 1.5 -> 2; 0.05 * 20 = 1 -> 1; 0.1 * 30 = 3 -> 3 (not 4)
    assert stop_exceedances(0.05, 30) == 2 and stop_exceedances(0.05, 20) == 1
    assert stop_exceedances(0.1, 30) == 3 and stop_exceedances(0.01, 30) == 1
    assert stop_exceedances(0.05, 3) == 1
    with pytest.raises(ValueError):
        stop_exceedances(0.05, 0)


def test_besag_clifford_p_value_by_hand():
    # p0 = 0.9, pa = 0.3 -> d = 0.6; distances 0.1, 0.6 (tie: exceeds), 0.7, 0.2 -> exceedances at 2 and 3
    controls = [0.8, 0.3, 0.2, 0.7]
    seq = permutation_p_value(0.9, 0.3, controls, stop_at=2)
    assert (seq.exceedances, seq.controls, seq.scored) == (2, 3, 4) and seq.stopped_early
    assert seq.p_value == pytest.approx(2 / 3) and seq.p_value_plus1 == pytest.approx(2 / 3)  # h / l
    # h not reached: the fixed estimators over the controls drawn
    seq = permutation_p_value(0.9, 0.3, [0.8, None, 0.85, 0.2], stop_at=2)
    assert (seq.exceedances, seq.controls) == (1, 3) and not seq.stopped_early
    assert seq.p_value == pytest.approx(1 / 3) and seq.p_value_plus1 == pytest.approx(2 / 4)
    # same controls without stop_at: the paper's b / M over all of them
    assert permutation_p_value(0.9, 0.3, controls).p_value == pytest.approx(2 / 4)
    with pytest.raises(ValueError):
        permutation_p_value(0.9, 0.3, controls, stop_at=0)


@pytest.mark.parametrize("g, usable, remaining, expected", [
    (2, 3, 27, "not_significant"),  # h = 2 exceedances: b / 30 >= 0.05 whatever follows
    (1, 10, 20, None),  # undecided
    (0, 29, 1, "significant"),  # even if the last one exceeds: 1 / 30 < 0.05
    (1, 29, 1, None),  # the last one decides
    (1, 28, 0, "significant"),  # 1 / 28 < 0.05
    (1, 20, 4, None),  # 24 usable still reachable
    (0, 5, 18, "untested"),  # 5 + 18 < min_controls = 24: it can no longer become significant
    (1, 20, 0, "untested"),
])
def test_sequential_decision(g, usable, remaining, expected):
    assert sequential_decision(g, usable, remaining, 2, 0.05, 24) == expected


def test_sequential_and_fixed_decide_alike_on_the_same_control_stream():
    """Exhaustive over small streams: the sequential p-value is significant exactly when the fixed one is."""
    import itertools

    m, alpha = 8, 0.3  # h = 3
    h = stop_exceedances(alpha, m)
    for stream in itertools.product([0.85, 0.2], repeat=m):  # 0.2: exceeds d = 0.5 from p0 = 0.9, pa = 0.4
        fixed = permutation_p_value(0.9, 0.4, stream)
        seq = permutation_p_value(0.9, 0.4, stream, stop_at=h)
        assert (fixed.p_value < alpha) == (seq.p_value < alpha), stream
        if seq.stopped_early:
            assert seq.p_value >= alpha


# -------------------------------------------------------------------------------------------- engine


def probabilities(stem: str) -> dict[str, float]:
    """Original 0.9, the attack (clue1) 0.3; controls that mention 'far' 0.1 (exceed), others 0.88."""
    p = 0.3 if "clue1" in stem else 0.1 if "far" in stem else 0.88 if "knit" in stem else 0.9
    return {"Ceftriaxone": p, "Gentamicin": 1 - p}


def control_writer(exceeding: set[int]):
    def write(n: int) -> str:
        word = "far" if n in exceeding else "knit"
        return item_text(ITEM.question + f" The patient enjoys {word}{n:02d}.")

    return write


def engine_for(attacker: Attacker, **config) -> MedFuzzEngine:
    t, a = models(Target(weak_spots=("clue1",), probabilities=probabilities), attacker)
    settings = {"turns": 1, "replicates": 1, "exemplars": 0, "option_orders": 2, "pvalue_prompt": "direct",
                "controls": 30, "control_batch": 5, **config}
    return MedFuzzEngine(t, a, MedFuzzConfig(**settings))


async def test_sequential_stops_at_h_exceedances_and_agrees_with_fixed():
    outcomes = {}
    for policy in ("sequential", "fixed"):
        attacker = Attacker(controls=control_writer({2, 4}))
        engine = engine_for(attacker, controls_policy=policy)
        result = await engine.run_item(ITEM)
        sig = result.replicates[0].significance
        scored = await score_item(result, turns=1, pack=engine.pack)
        outcomes[policy] = (attacker.control_calls, sig, scored)
    calls, sig, scored = outcomes["sequential"]
    # h = 2 exceedances (controls 2 and 4) reached in the first batch of 5: stop there
    assert calls == 5 and sig.controls_attempted == 5 and sig.stopped == "not_significant" and sig.stop_at == 2
    assert scored.evidence[0].p_value == pytest.approx(2 / 4)  # Besag-Clifford h / l, l = 4
    assert sig.target_calls == 2 * (1 + 1 + 5)  # p0, attack, 5 controls; 2 orders, 1 call each (direct)
    fixed_calls, fixed_sig, fixed_scored = outcomes["fixed"]
    assert fixed_calls == 30 and fixed_sig.stopped == "" and fixed_scored.evidence[0].p_value == pytest.approx(2 / 30)
    assert fixed_sig.target_calls == 2 * (1 + 1 + 30)
    # same decision at alpha = 0.05: not significant either way
    assert scored.value["significant"] == fixed_scored.value["significant"] == 0
    assert scored.value["tested"] == fixed_scored.value["tested"] == 1


async def test_sequential_runs_to_m_when_the_attack_is_significant():
    attacker = Attacker(controls=control_writer({7}))
    result = await engine_for(attacker).run_item(ITEM)
    sig = result.replicates[0].significance
    assert attacker.control_calls == 30 and sig.stopped == ""  # one exceedance never decides
    test, untested = significance_test(sig)
    assert untested is None and test.p_value == pytest.approx(1 / 30) and test.controls == 30


async def test_sequential_stops_when_min_controls_is_out_of_reach():
    attacker = Attacker(controls=lambda n: "nonsense")
    result = await engine_for(attacker, control_tries=1).run_item(ITEM)
    sig = result.replicates[0].significance
    # after 10 failed controls only 20 remain: 24 usable (min_controls) are out of reach, so it stops
    assert sig.stopped == "untested" and sig.controls_attempted == 10 and attacker.control_calls == 10
    assert significance_test(sig)[1].startswith("too few controls: 0 usable of 30")


async def test_p0_is_estimated_once_per_item():
    replicates, orders = 4, 2
    target = Target(weak_spots=("clue1",), probabilities=probabilities)
    t, a = models(target, Attacker(controls=control_writer(set())))
    config = MedFuzzConfig(turns=1, replicates=replicates, exemplars=0, option_orders=orders, pvalue_prompt="direct",
                           controls=2, controls_policy="fixed")
    result = await MedFuzzEngine(t, a, config).run_item(ITEM)
    sigs = [r.significance for r in result.replicates]
    assert all(r.outcome is Outcome.SUCCESS for r in result.replicates)
    assert sorted(s.p0_shared for s in sigs) == [False] + [True] * (replicates - 1)
    assert len({s.p0 for s in sigs}) == 1
    paid = sum(r.usage[TARGET_ROLE]["calls"] for r in result.replicates)
    # the same attack text in every replicate: its p-hat is paid once too (request cache); controls differ
    controls = replicates * 2 * orders
    assert paid == orders + orders + controls
    assert result.cache_hits == {TARGET_ROLE: (replicates - 1) * orders}
    # without sharing it would be replicates x orders for p0 alone: (replicates - 1) x orders saved
    asked_original = [c for c in t.calls if "enjoys" not in c.messages[-1].content and len(c.messages) == 2
                      and "Reply with only the letter" in c.messages[-1].content]
    assert len(asked_original) == orders


# --------------------------------------------------------------------------------------- request cache


async def test_request_cache_replays_identical_requests_but_not_errors():
    cache = RequestCache()
    calls = []

    async def call(reply: Generation):
        calls.append(reply)
        await asyncio.sleep(0)
        return reply

    ok = Generation(text="A")
    first = await asyncio.gather(cache.get(("k",), "target", lambda: call(ok)),
                                 cache.get(("k",), "target", lambda: call(ok)))
    assert [hit for _, hit in first] == [False, True] and len(calls) == 1  # in flight: shared
    assert (await cache.get(("k",), "target", lambda: call(ok)))[1] and cache.hits["target"] == 2
    bad = Generation(text="", error="HTTP 500")
    assert not (await cache.get(("e",), "target", lambda: call(bad)))[1]
    assert not (await cache.get(("e",), "target", lambda: call(ok)))[1]  # the error was not kept
    assert len(calls) == 3


async def test_repeated_control_text_is_paid_once():
    same = item_text(ITEM.question + " The patient enjoys knit01.")
    other = item_text(ITEM.question + " The patient enjoys knit03.")
    attacker = Attacker(controls=lambda n: same if n <= 2 else other)
    result = await engine_for(attacker, controls=3, controls_policy="fixed").run_item(ITEM)
    sig = result.replicates[0].significance
    assert [c.p_hat for c in sig.controls] == pytest.approx([0.88] * 3)
    assert sig.target_calls == 2 * (1 + 1 + 2) and result.cache_hits == {TARGET_ROLE: 2}


# ------------------------------------------------------------------------------------ attacker = target


async def test_attacker_is_target_recorded_and_warned_once(caplog):
    target = Target(weak_spots=("clue1",))
    model = models(target, Attacker())[0]
    model.name = "self-attacking-model"
    config = MedFuzzConfig(turns=1, replicates=1, controls=0, exemplars=0)
    with caplog.at_level(logging.WARNING, logger="medfuzz.solvers.medfuzz.engine"):
        engine = MedFuzzEngine(model, model, config)
        MedFuzzEngine(model, model, config)  # a second engine of the same run: no second line
    assert engine.attacker_is_target
    lines = [r.getMessage() for r in caplog.records if "self-attacking-model" in r.getMessage()]
    assert len(lines) == 1 and "own attacker" in lines[0] and "GPT-4" in lines[0]
    t, a = models(Target(), Attacker())
    separate = MedFuzzEngine(t, a, config)
    assert not separate.attacker_is_target
    assert (await separate.run_item(ITEM)).config["attacker_is_target"] is False
