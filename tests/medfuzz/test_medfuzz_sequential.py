"""Fewer calls for the same decisions: the sequential (Besag-Clifford) permutation test, p-hat of the original
shared by an item's replicates, the in-run request cache, and the attacker-is-target record."""

from __future__ import annotations

import asyncio
import logging
import math

import numpy as np
import pytest
from scipy import stats

from medfuzz.models import Generation
from medfuzz.scorers.medfuzz import score_item, significance_test
from medfuzz.solvers.medfuzz.cache import RequestCache
from medfuzz.solvers.medfuzz.controls import TARGET_ROLE
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import load_pack
from medfuzz.solvers.medfuzz.results import Outcome
from medfuzz.stats import permutation_p_value, sequential_decision, significant, stop_exceedances
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models

# ------------------------------------------------------------------------------------------ statistics


def test_stop_exceedances_by_hand():
    # fewest b >= 1 with (b + 1) / (M + 1) > alpha: 2/31 > 0.05 -> 1; 2/40 = 0.05 is not > -> 3/40 -> 2;
    # alpha 0.1, M 30: 4/31 -> 3; M 199: 11/200 -> 10
    assert stop_exceedances(0.05, 30) == 1 and stop_exceedances(0.05, 39) == 2 and stop_exceedances(0.05, 19) == 1
    assert stop_exceedances(0.1, 30) == 3 and stop_exceedances(0.01, 30) == 1 and stop_exceedances(0.05, 199) == 10
    assert stop_exceedances(0.05, 3) == 1
    with pytest.raises(ValueError):
        stop_exceedances(0.05, 0)


def test_besag_clifford_p_value_by_hand():
    # p0 = 0.9, pa = 0.3 -> d = 0.6; distances 0.1, 0.6 (tie: exceeds), 0.7, 0.2 -> exceedances at 2 and 3
    controls = [0.8, 0.3, 0.2, 0.7]
    seq = permutation_p_value(0.9, 0.3, controls, stop_at=2)
    assert (seq.exceedances, seq.controls, seq.scored) == (2, 3, 4) and seq.stopped_early
    # h / l; the paper's b / M over all M is not observed after a stop (the fourth control was never counted)
    assert seq.p_value == pytest.approx(2 / 3) and seq.p_value_paper is None
    assert seq.to_dict()["p_value_paper"] is None and seq.to_dict()["stopped_early"]
    # h not reached: (b + 1) / (M + 1) over the controls drawn; the paper's b / M beside it
    seq = permutation_p_value(0.9, 0.3, [0.8, None, 0.85, 0.2], stop_at=2)
    assert (seq.exceedances, seq.controls) == (1, 3) and not seq.stopped_early
    assert seq.p_value == pytest.approx(2 / 4) and seq.p_value_paper == pytest.approx(1 / 3)
    # same controls without stop_at: (2 + 1) / (4 + 1), paper 2 / 4
    fixed = permutation_p_value(0.9, 0.3, controls)
    assert fixed.p_value == pytest.approx(3 / 5) and fixed.p_value_paper == pytest.approx(2 / 4)
    with pytest.raises(ValueError):
        permutation_p_value(0.9, 0.3, controls, stop_at=0)


@pytest.mark.parametrize("g, usable, remaining, h, expected", [
    (1, 3, 27, 1, "h_exceedances"),  # Besag-Clifford stop: p = 1 / 3
    (0, 10, 20, 1, None),
    (0, 29, 1, 1, None),  # no early stop for a significant-looking attack: its p-value enters Holm/BH
    (0, 5, 18, 1, None),  # 24 usable are out of reach, but one exceedance would still make it tested
    (0, 20, 0, 1, "untested"),  # neither 24 usable nor h exceedances reachable
    (2, 5, 3, 3, None),
    (1, 5, 0, 3, "untested"),
])
def test_sequential_decision(g, usable, remaining, h, expected):
    assert sequential_decision(g, usable, remaining, h, 24) == expected


def test_significance_is_p_at_most_alpha():
    assert significant(0.05, 0.05) and significant(1 / 20, 0.05) and not significant(0.0501, 0.05)
    assert significant(3 * (1 / 60), 0.05)  # 0.05000000000000001 after rounding: still at alpha
    assert not significant(None, 0.05) and not significant(math.nan, 0.05)


def test_sequential_gives_the_fixed_p_value_whenever_the_fixed_test_rejects():
    """Exhaustive over small streams: every fixed rejection is a sequential rejection with the same p-value;
    the sequential test may also reject when its h-th exceedance comes after draw h / alpha."""
    import itertools

    for m, alpha in ((8, 0.3), (19, 0.1), (12, 0.25)):
        h = stop_exceedances(alpha, m)
        extra = 0
        for stream in itertools.product([0.85, 0.2], repeat=m):  # 0.2: exceeds d = 0.5 from p0 = 0.9, pa = 0.4
            fixed = permutation_p_value(0.9, 0.4, stream)
            seq = permutation_p_value(0.9, 0.4, stream, stop_at=h)
            if significant(fixed.p_value, alpha):
                assert not seq.stopped_early and seq.p_value == fixed.p_value, stream
            elif significant(seq.p_value, alpha):
                assert seq.stopped_early and seq.controls >= h / alpha - 1e-9, stream
                extra += 1
        # extra rejections exist exactly when draw h / alpha lies inside the stream (not at M = 19, alpha = 0.1,
        # where M + 1 = 20 = 1 / alpha and both tests coincide); so the comparison above is not vacuous
        assert (extra > 0) == (math.ceil(h / alpha - 1e-9) <= m), (m, alpha)


def exact_null_rejection(m: int, alpha: float, rule: str, h: int = 1) -> float:
    """P(significant) under a continuous null, computed exactly: the attack's rank among the M + 1 values is
    uniform, so R (controls at least as far as the attack) is uniform on 0..M and the exceedances sit at
    uniformly random positions of the stream (negative hypergeometric position of the h-th one)."""
    from math import comb

    total = 0.0
    for r in range(m + 1):
        if rule == "paper":
            total += significant(r / m, alpha)
        elif rule == "fixed":
            total += significant((r + 1) / (m + 1), alpha)
        else:  # Besag-Clifford with stop at h
            if r < h:
                total += significant((r + 1) / (m + 1), alpha)
            else:
                total += sum(comb(pos - 1, h - 1) * comb(m - pos, r - h) / comb(m, r)
                             for pos in range(h, m + 1) if significant(h / pos, alpha))
    return total / (m + 1)


@pytest.mark.parametrize("m, alpha", [(30, 0.05), (30, 0.01), (10, 0.05), (39, 0.05), (99, 0.05), (30, 0.1),
                                      (199, 0.05), (500, 0.01)])
def test_valid_p_values_reject_a_true_null_at_most_alpha_exactly(m, alpha):
    h = stop_exceedances(alpha, m)
    fixed, sequential = exact_null_rejection(m, alpha, "fixed"), exact_null_rejection(m, alpha, "bc", h)
    assert fixed <= alpha + 1e-12 and sequential <= alpha + 1e-12
    assert exact_null_rejection(m, alpha, "bc", 1) <= alpha + 1e-12  # every h is valid (holm_family keeps h)


def test_the_papers_b_over_m_is_anti_conservative_by_the_stated_amount():
    assert exact_null_rejection(30, 0.05, "paper") == pytest.approx(2 / 31)  # b <= 1 of 30
    assert exact_null_rejection(10, 0.05, "paper") == pytest.approx(1 / 11)
    assert exact_null_rejection(30, 0.05, "fixed") == pytest.approx(1 / 31)
    assert exact_null_rejection(30, 0.05, "bc", 1) == pytest.approx(1 / 20)  # first exceedance at draw >= 20


def test_null_rejection_by_simulation_matches_the_exact_values():
    """The code itself (``permutation_p_value``) on simulated null streams, continuous and with ties."""
    rng = np.random.default_rng(7)
    m, alpha, n = 30, 0.05, 20_000
    h = stop_exceedances(alpha, m)
    for discrete in (False, True):
        values = rng.integers(0, 6, size=(n, m + 1)) / 5 if discrete else rng.random((n, m + 1))
        hits = {"fixed": 0, "bc": 0, "paper": 0}
        for row in values:
            attack, controls = row[0], list(row[1:])  # p0 = 0: distances are the values themselves
            fixed = permutation_p_value(0.0, attack, controls)
            hits["fixed"] += significant(fixed.p_value, alpha)
            hits["paper"] += significant(fixed.p_value_paper, alpha)
            hits["bc"] += significant(permutation_p_value(0.0, attack, controls, stop_at=h).p_value, alpha)
        for rule, count in hits.items():
            low, high = stats.binom.interval(0.999, n, exact_null_rejection(m, alpha, rule, h))
            if discrete:  # ties count as exceedances: conservative, never above the continuous rate
                assert count <= high, (rule, count)
            else:
                assert low <= count <= high, (rule, count)
        if not discrete:
            assert hits["paper"] > stats.binom.interval(0.999, n, alpha)[1]  # 2/31 is detectably above 0.05


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
    # h = 1 exceedance (control 2, the second drawn) reached in the first batch of 5: stop there
    assert calls == 5 and sig.controls_attempted == 5 and sig.stopped == "h_exceedances" and sig.stop_at == 1
    assert scored.evidence[0].p_value == pytest.approx(1 / 2)  # Besag-Clifford h / l, l = 2
    # the paper's b / M over all 30 controls was never observed (28 not drawn): None, counted as such
    assert scored.evidence[0].p_value_paper is None
    assert scored.value["paper_observed"] == 0 and scored.value["significant_paper"] == 0
    assert scored.explanation.endswith("p=0.5 (paper's b/M not observed (stopped early))")
    assert sig.target_calls == 2 * (1 + 1 + 5)  # p0, attack, 5 controls; 2 orders, 1 call each (direct)
    fixed_calls, fixed_sig, fixed_scored = outcomes["fixed"]
    assert fixed_calls == 30 and fixed_sig.stopped == "" and fixed_sig.stop_at == 1
    assert fixed_scored.evidence[0].p_value == pytest.approx(3 / 31)  # (b + 1) / (M + 1), b = 2
    assert fixed_scored.evidence[0].p_value_paper == pytest.approx(2 / 30)
    assert fixed_sig.target_calls == 2 * (1 + 1 + 30)
    # same decision at alpha = 0.05: not significant either way, and the same family
    assert scored.value["significant"] == fixed_scored.value["significant"] == 0
    assert scored.value["tested"] == fixed_scored.value["tested"] == 1


async def test_sequential_runs_to_m_when_no_control_exceeds():
    attacker = Attacker(controls=control_writer(set()))
    result = await engine_for(attacker).run_item(ITEM)
    sig = result.replicates[0].significance
    assert attacker.control_calls == 30 and sig.stopped == ""
    test, untested = significance_test(sig)
    assert untested is None and test.p_value == pytest.approx(1 / 31) and test.p_value_paper == 0.0
    scored = await score_item(result, turns=1, pack=engine_for(attacker).pack)
    assert scored.value["significant"] == 1 and scored.value["significant_paper"] == 1
    assert scored.value["paper_observed"] == 1  # all 30 drawn: b / M observed
    # one line per replicate for `inspect view`: outcome, turn, valid p-value and the paper's
    assert scored.explanation == "r0 success at turn 1, p=0.0323 (paper's b/M 0)"


async def test_a_late_first_exceedance_is_significant_sequentially_but_not_with_fixed_m():
    # first exceedance at draw 26: Besag-Clifford p = 1/26 <= 0.05; the fixed test has b = 1: 2/31 > 0.05
    values = {}
    for policy in ("sequential", "fixed"):
        result = await engine_for(Attacker(controls=control_writer({26})), controls_policy=policy).run_item(ITEM)
        values[policy] = await score_item(result, turns=1, pack=load_pack())
    assert values["sequential"].evidence[0].p_value == pytest.approx(1 / 26)
    assert values["fixed"].evidence[0].p_value == pytest.approx(2 / 31)
    assert values["sequential"].value["significant"] == 1 and values["fixed"].value["significant"] == 0


async def test_alpha_of_the_run_reaches_the_counts():
    # no exceedance in 30: p = 1/31 = 0.032 is significant at 0.05, not at 0.01 (the run's alpha, not a constant)
    for alpha, expected in ((0.05, 1), (0.01, 0)):
        result = await engine_for(Attacker(controls=control_writer(set())), alpha=alpha).run_item(ITEM)
        assert result.config["alpha"] == alpha
        assert (await score_item(result, turns=1, pack=load_pack())).value["significant"] == expected


async def test_sequential_draws_on_while_an_exceedance_can_still_make_the_attack_tested():
    attacker = Attacker(controls=lambda n: "nonsense")
    result = await engine_for(attacker, control_tries=1).run_item(ITEM)
    sig = result.replicates[0].significance
    # 24 usable (min_controls) are out of reach after 10 failures, but the fixed policy would still test the
    # attack if one of the remaining controls exceeded: both policies draw the whole stream
    assert sig.stopped == "" and sig.controls_attempted == 30 and attacker.control_calls == 30
    assert significance_test(sig)[1].startswith("too few controls: 0 usable of 30")


async def test_holm_family_sizes_m_and_keeps_h():
    config = MedFuzzConfig(controls=30, holm_family=10)
    assert config.max_controls == 199 and config.stop_exceedances == 1  # 1/200 <= 0.05/10
    assert config.min_usable_controls == 160
    assert MedFuzzConfig(controls=30, holm_family=1).max_controls == 30  # already attainable
    assert MedFuzzConfig(controls=30, holm_family=10, alpha=0.01).max_controls == 999
    bound = MedFuzzConfig(controls=30, holm_family=10).max_calls(1)["attacker_controls"]
    assert bound == 199 * 3 * 5  # control_tries x replicates
    # a null attack still stops at its first exceedance; one that never meets one draws all 199
    attacker = Attacker(controls=control_writer({2}))
    result = await engine_for(attacker, holm_family=10).run_item(ITEM)
    assert attacker.control_calls == 5 and result.replicates[0].significance.controls_requested == 199


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
