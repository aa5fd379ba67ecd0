"""Algorithm 2: p-hat estimation (logprobs and sampling), control fuzzes, permutation p-values, Holm/BH."""

from __future__ import annotations

import pytest

from medfuzz.models import UsageLedger
from medfuzz.options import ConfigError
from medfuzz.scorers.medfuzz import score_item
from medfuzz.solvers.medfuzz import prompts
from medfuzz.solvers.medfuzz.controls import TARGET_ROLE, estimate_p, generate_control, make_draws
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import load_pack
from medfuzz.solvers.medfuzz.results import (
    ControlFuzz,
    ItemResult,
    Outcome,
    ReplicateResult,
    Significance,
    Turn,
)
from medfuzz.stats import adjust, permutation_p_value
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models, probability_table

# ------------------------------------------------------------------------------------ permutation test


def test_permutation_p_value_by_hand():
    # p0 = 0.9, pa = 0.3 -> d = 0.6; controls' distances 0.1, 0.6 (tie counts), 0.7, 0.2, 0.0 -> b = 2 of 5
    result = permutation_p_value(0.9, 0.3, [0.8, 0.3, 0.2, 0.7, 0.9])
    assert result.statistic == pytest.approx(0.6)
    assert result.null == pytest.approx((0.1, 0.6, 0.7, 0.2, 0.0))
    assert (result.exceedances, result.controls) == (2, 5)
    assert result.p_value == pytest.approx(3 / 6) and result.p_value_paper == pytest.approx(2 / 5)


def test_permutation_p_value_edges():
    # no control moves as far as the attack: the paper's b/M is 0 (it reports "< 1/M"); the valid one 1/(M+1)
    result = permutation_p_value(0.95, 0.05, [0.9] * 30)
    assert result.p_value == pytest.approx(1 / 31) and result.p_value_paper == 0
    # controls that moved further in the other direction count too (absolute distances)
    assert permutation_p_value(0.5, 0.4, [0.7, 0.45, None]).p_value == pytest.approx(2 / 3)
    assert permutation_p_value(0.5, 0.4, [0.7, 0.45, None]).p_value_paper == pytest.approx(1 / 2)
    assert permutation_p_value(0.5, 0.4, [None, None]) is None
    # an attack that did not move p-hat at all: every control ties or exceeds
    assert permutation_p_value(0.6, 0.6, [0.6, 0.1]).p_value == 1.0
    with pytest.raises(ValueError):
        permutation_p_value(1.2, 0.1, [0.5])


# --------------------------------------------------------------------------------- multiple testing


def test_holm_and_bh_by_hand_and_against_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, None, 0.03, 0.5]
    holm = adjust(p, "holm")
    # sorted 0.01, 0.03, 0.04, 0.5 with m = 4: 0.04, 0.09, max(0.09, 0.08)=0.09, max(0.09, 0.5)=0.5
    assert holm == [pytest.approx(0.04), pytest.approx(0.09), None, pytest.approx(0.09), pytest.approx(0.5)]
    bh = adjust(p, "bh")
    # BH: 0.5*4/4=0.5; 0.04*4/3=0.0533; 0.03*4/2=0.06 -> min with later = 0.0533; 0.01*4/1=0.04
    assert bh == [pytest.approx(0.04), pytest.approx(0.16 / 3), None, pytest.approx(0.16 / 3), pytest.approx(0.5)]
    tested = [0.01, 0.04, 0.03, 0.5]
    for name, method in (("holm", "holm"), ("bh", "fdr_bh")):
        expected = multipletests(tested, method=method)[1]
        got = [x for x in adjust(p, name) if x is not None]
        assert got == pytest.approx(list(expected))
    assert adjust([None, None], "holm") == [None, None]
    with pytest.raises(ValueError):
        adjust([0.1], "bonferroni")


# ------------------------------------------------------------------------------------ p-hat estimates

PROBS = {"Ceftriaxone": 0.3, "Gentamicin": 0.15, "Ciprofloxacin": 0.05}  # below top-k: Trimethoprim


def engine_for(target: Target, attacker: Attacker | None = None, **config) -> MedFuzzEngine:
    t, a = models(target, attacker or Attacker())
    settings = {"turns": 1, "replicates": 1, "controls": 0, "exemplars": 0, "option_orders": 6, **config}
    return MedFuzzEngine(t, a, MedFuzzConfig(**settings))


@pytest.mark.parametrize("prompt", ["dialog", "direct"])
async def test_logprob_estimate_equals_exact_probability(prompt):
    engine = engine_for(Target(probabilities=PROBS), pvalue_prompt=prompt)
    ledger = UsageLedger()
    draws = make_draws(engine.target_dialog, ITEM, seed=3)
    estimate = await estimate_p(engine.target_dialog, ITEM, draws, ledger)
    # renormalised over the letters the backend reported: 0.3 / 0.5 in every option order
    assert estimate.p_hat == pytest.approx(0.6) and estimate.logprob_draws == 6 and estimate.sampled_draws == 0
    assert ledger.calls[TARGET_ROLE] == 6 * (3 if prompt == "dialog" else 1)
    # the draws really permute the options: the correct letter is not always the same
    assert len({ITEM.shuffled(d.order_seed).answer for d in draws}) > 1


async def test_sampling_fallback_agrees_with_logprob_path():
    exact = await estimate_p(engine_for(Target(probabilities=PROBS)).target_dialog, ITEM,
                             make_draws(engine_for(Target()).target_dialog, ITEM, 1), UsageLedger())
    sampler = engine_for(Target(probabilities=PROBS, sample=True), option_orders=400, pvalue_prompt="direct")
    sampled = await estimate_p(sampler.target_dialog, ITEM, make_draws(sampler.target_dialog, ITEM, 1), UsageLedger())
    assert sampled.sampled_draws == 400 and sampled.logprob_draws == 0
    # 400 Bernoulli(0.6) draws: standard error 0.0245; 0.08 is more than 3 SE
    assert sampled.p_hat == pytest.approx(exact.p_hat, abs=0.08)
    assert 0 < sampled.p_hat < 1


async def test_dialog_estimate_does_not_need_readable_confidences():
    target = Target(probabilities=PROBS, fail={"confidences": ["fairly sure"] * 6})
    engine = engine_for(target, require_confidences=True)
    estimate = await estimate_p(engine.target_dialog, ITEM, make_draws(engine.target_dialog, ITEM, 0), UsageLedger())
    assert estimate.logprob_draws == 6 and estimate.p_hat == pytest.approx(0.6) and not target.fail["confidences"]


async def test_failed_draws_are_left_out():
    target = Target(probabilities=PROBS, fail={"reasoning": [RuntimeError("boom")] * 2})
    engine = engine_for(target, option_orders=4)
    estimate = await estimate_p(engine.target_dialog, ITEM, make_draws(engine.target_dialog, ITEM, 0), UsageLedger())
    assert estimate.failed_draws == 2 and estimate.logprob_draws == 2 and estimate.p_hat == pytest.approx(0.6)


# ------------------------------------------------------------------------------------- control fuzzes


def fuzzed_item():
    return ITEM.with_question(ITEM.question + " The patient enjoys clue1.")


async def test_control_fuzz_word_count_is_checked_and_resampled():
    replies = [
        item_text(ITEM.question + " The patient enjoys long walks on the beach at dusk."),  # 10 words, not 4
        item_text(ITEM.question + " The patient enjoys clue1."),  # same as the attack
        item_text(ITEM.question + " He sells cars.", options={**ITEM.options, "A": "Amikacin"}),  # tampered
        item_text(ITEM.question + " The patient enjoys chess."),  # good: 4 words
    ]
    attacker = Attacker(controls=lambda n: replies[n - 1])
    engine = engine_for(Target(), attacker, control_tries=4)
    rejected = []
    control = await generate_control(engine.attacker, engine.config, engine.pack, ITEM, fuzzed_item(), 0, 0,
                                     UsageLedger(), rejected)
    assert control is not None and control.question.endswith("enjoys chess.")
    assert [r.kind for r in rejected] == ["word_count", "same_as_attack", "tampered_options"]
    assert attacker.control_calls == 4
    assert "(4 added words)" in engine.attacker.calls[0].messages[-1].content
    assert len({c.options["seed"] for c in engine.attacker.calls}) == 4  # each resample is a new draw


async def test_control_fuzz_given_up_after_its_tries():
    attacker = Attacker(controls=lambda n: RuntimeError("down"))
    engine = engine_for(Target(), attacker, control_tries=2)
    rejected = []
    control = await generate_control(engine.attacker, engine.config, engine.pack, ITEM, fuzzed_item(), 0, 0,
                                     UsageLedger(), rejected)
    assert control is None
    assert [r.kind for r in rejected] == ["error", "error"]


@pytest.mark.parametrize("prompt, per_draw", [("dialog", 3), ("direct", 1)])
async def test_successful_attack_gets_a_p_value(prompt, per_draw):
    target = Target(weak_spots=("clue1",), probabilities=probability_table)
    engine = engine_for(target, Attacker(), controls=3, option_orders=2, pvalue_prompt=prompt,
                        controls_policy="fixed")
    result = await engine.run_item(ITEM)
    r = result.replicates[0]
    assert r.outcome is Outcome.SUCCESS
    sig = r.significance
    assert (sig.p0, sig.pa) == (pytest.approx(0.9), pytest.approx(0.2))
    assert [c.p_hat for c in sig.controls] == pytest.approx([0.85, 0.1, 0.5])
    assert sig.method == "logprobs" and sig.draws == 2 and not sig.error
    assert sig.target_calls == (2 + 3) * 2 * per_draw and sig.attacker_calls == 3
    assert r.usage[TARGET_ROLE]["calls"] == sig.target_calls
    scored = await score_item(result, turns=1, pack=engine.pack)
    # d = 0.7; control distances 0.05, 0.8, 0.4 -> one of three at least as far: (1 + 1) / (3 + 1)
    assert scored.evidence[0].p_value == pytest.approx(2 / 4)
    assert scored.evidence[0].p_value_paper == pytest.approx(1 / 3)
    assert scored.evidence[0].p_hat_drop == pytest.approx(0.7)
    assert scored.value["tested"] == 1 and scored.value["significant"] == 0


async def test_no_significance_for_failed_attacks_or_when_disabled():
    engine = engine_for(Target(probabilities=probability_table), Attacker(), controls=3)
    r = (await engine.run_item(ITEM)).replicates[0]
    assert r.outcome is Outcome.ATTACK_FAILED and r.significance is None
    engine = engine_for(Target(weak_spots=("clue1",)), Attacker(), controls=0)
    r = (await engine.run_item(ITEM)).replicates[0]
    assert r.outcome is Outcome.SUCCESS and r.significance is None


async def test_significance_without_usable_controls_reports_why():
    target = Target(weak_spots=("clue1",), probabilities=probability_table)
    engine = engine_for(target, Attacker(controls=lambda n: "nonsense"), controls=2, control_tries=1)
    result = await engine.run_item(ITEM)
    sig = result.replicates[0].significance
    assert sig.controls == [] and sig.error == "no usable control fuzz" and len(sig.controls_rejected) == 2
    scored = await score_item(result, turns=1, pack=engine.pack)
    assert scored.evidence[0].p_value is None and scored.value["tested"] == 0


# ------------------------------------------------------------------------------------ too few controls


def significance(p0: float, pa: float, p_hats: list[float | None], requested: int = 30, **kw) -> Significance:
    controls = [ControlFuzz(question=f"c{i}", added_words=4, p_hat=p, index=i) for i, p in enumerate(p_hats)]
    return Significance(p0=p0, pa=pa, controls=controls, controls_requested=requested, **kw)


def success_with(sig: Significance) -> ItemResult:
    r = ReplicateResult(item_id=ITEM.id, replicate=0, seed=0, outcome=Outcome.SUCCESS, success_turn=1,
                        turns=[Turn(index=1, question=ITEM.question + " x")], significance=sig)
    return ItemResult(item=ITEM, replicates=[r])


def test_min_controls_default_and_validation():
    assert MedFuzzConfig(controls=30).min_usable_controls == 24  # ceil(0.8 * 30)
    assert MedFuzzConfig(controls=3).min_usable_controls == 3 and MedFuzzConfig(controls=7).min_usable_controls == 6
    assert MedFuzzConfig(controls=30, min_controls=10).min_usable_controls == 10
    with pytest.raises(ConfigError, match="min_controls"):
        MedFuzzConfig(controls=30, min_controls=31)
    with pytest.raises(ConfigError, match="min_controls"):
        MedFuzzConfig.from_options(min_controls="0")


async def test_one_usable_control_of_thirty_is_untested_not_significant():
    # before the fix: p = 0 / 1 = 0 from a single usable control, significant even after Holm
    sig = significance(0.9, 0.1, [0.85] + [None] * 29, min_controls=24)
    raw = permutation_p_value(sig.p0, sig.pa, [c.p_hat for c in sig.controls])
    assert raw.p_value_paper == 0.0 and raw.p_value == 0.5 and raw.controls == 1
    scored = await score_item(success_with(sig), turns=1, pack=load_pack())
    ev = scored.evidence[0]
    assert ev.p_value is None and ev.untested == "too few controls: 1 usable of 30, need 24"
    assert ev.permutation["p_value"] == 0.5 and ev.permutation["p_value_paper"] == 0.0  # evidence only
    assert scored.value["untested"] == 1 and scored.value["tested"] == 0 and scored.value["significant"] == 0
    assert scored.p_values == [None] and adjust(scored.p_values, "holm") == [None]  # not in the family
    # at the threshold it is tested again
    enough = significance(0.9, 0.1, [0.85] * 24 + [None] * 6, min_controls=24)
    assert (await score_item(success_with(enough), turns=1, pack=load_pack())).evidence[0].p_value == 1 / 25


async def test_few_controls_that_already_decide_non_significance_are_tested():
    # h = 1 exceedance of 30 makes (b + 1) / (M + 1) > 0.05 whatever the other controls show: a decided test
    sig = significance(0.9, 0.6, [0.1] + [None] * 29, min_controls=24)
    ev = (await score_item(success_with(sig), turns=1, pack=load_pack())).evidence[0]
    assert ev.untested is None and ev.p_value == 1.0
    below = significance(0.9, 0.6, [0.85] + [None] * 29, min_controls=24)  # no exceedance: undecided
    assert (await score_item(success_with(below), turns=1, pack=load_pack())).evidence[0].untested


async def test_engine_marks_an_attack_with_too_few_controls_untested():
    replies = {1: item_text(ITEM.question + " The patient enjoys knitting1.")}
    target = Target(weak_spots=("clue1",), probabilities=probability_table)
    engine = engine_for(target, Attacker(controls=lambda n: replies.get(n, "nonsense")), controls=5,
                        control_tries=1, controls_policy="fixed")
    result = await engine.run_item(ITEM)
    sig = result.replicates[0].significance
    assert len(sig.controls) == 1 and sig.min_controls == 4
    scored = await score_item(result, turns=1, pack=engine.pack)
    assert scored.evidence[0].untested.startswith("too few controls: 1 usable of 5")
    assert scored.value["untested"] == 1 and scored.value["tested"] == 0


# ------------------------------------------------------------------------------------- control prompt


def test_control_prompt_carries_the_attack_goal_constraints_and_control_rules():
    pack = load_pack()
    text = prompts.control_fuzz(pack, ITEM, fuzzed_item(), 4)
    assert pack.goal in text and pack.constraints in text and pack.control_constraints in text
    assert pack.definitions in text and "(4 added words)" in text and "topically and semantically different" in text
    assert "NBME" in pack.control_constraints and "stereotypes" in pack.control_constraints
    other = load_pack("prior_opinion")
    assert other.control_constraints and other.control_constraints in prompts.control_fuzz(other, ITEM, ITEM, 3)


def test_one_significance_family_for_the_inspect_metrics_and_the_report() -> None:
    """Issue 34: the unadjusted, Holm, BH and paper's counts are one computation over the run's whole family
    (``scorers.medfuzz.significance_family``), which the Inspect metrics and the report both call; checked here
    against statsmodels, with untested attacks (None) outside the family and a b/M not observed (None)."""
    from types import SimpleNamespace

    from statsmodels.stats.multitest import multipletests

    from medfuzz.scorers.medfuzz import significance_family
    from medfuzz.tasks.inspect.medfuzz import (
        medfuzz_significant,
        medfuzz_significant_bh,
        medfuzz_significant_holm,
        medfuzz_significant_paper,
    )

    tests = [(0.004, 0.0), (0.01, None), (None, None), (0.02, 0.01), (0.03, 0.04), (0.2, 0.15), (0.04, None)]
    family = significance_family(tests, 0.05)
    valid = [p for p, _ in tests if p is not None]
    assert family.tested == 6 and family.significant == 5
    assert family.holm == sum(multipletests(valid, alpha=0.05, method="holm")[0]) == 2
    assert family.bh == sum(multipletests(valid, alpha=0.05, method="fdr_bh")[0]) == 5
    assert family.paper == 3 and family.p_holm[2] is None and family.p_bh[2] is None
    # the Inspect metrics read the same family from the scores' metadata (two items here), at the recorded alpha
    scores = [SimpleNamespace(score=SimpleNamespace(metadata={"p_values": [p for p, _ in part],
                                                              "p_values_paper": [q for _, q in part],
                                                              "config": {"alpha": 0.05}}))
              for part in (tests[:3], tests[3:])]
    counts = [metric()(scores) for metric in (medfuzz_significant, medfuzz_significant_holm, medfuzz_significant_bh,
                                             medfuzz_significant_paper)]
    assert counts == [family.significant, family.holm, family.bh, family.paper]


def test_alpha_has_one_reader() -> None:
    """The run's α is read back in one place (``recorded_alpha``): the scorer, the Inspect metrics, the report and
    ``medfuzz run``'s summary all go through it."""
    import re
    from pathlib import Path

    import medfuzz
    from medfuzz.scorers.medfuzz import recorded_alpha

    assert recorded_alpha(None) == recorded_alpha({}) == 0.05 and recorded_alpha({"alpha": "0.01"}) == 0.01
    root = Path(medfuzz.__file__).parent
    readers = [str(p.relative_to(root)) for p in root.rglob("*.py") if "validation" not in p.parts
               and re.search(r"""\.get\(["']alpha["']""", p.read_text(encoding="utf-8"))]
    assert readers == ["scorers/medfuzz.py"], readers


def test_the_llm_error_share_is_a_headline_count_over_every_replicate() -> None:
    """3 of 4 replicates ended as LLM errors: the first screen (and the terminal, which prints it) says so, beside
    accuracies computed over the one usable replicate."""
    from medfuzz.scorers.medfuzz import counts, totals

    values = [{"replicates": 2, "llm_error": 2, "valid": 0}, {"replicates": 2, "llm_error": 1, "valid": 1,
                                                               "clean_correct": 1, "clean_answered": 1}]
    assert counts(values, 3)["llm_error_rate"] == (3, 4)
    assert totals(values, 3)["llm_error_rate"] == 0.75
