"""The cost estimate ``medfuzz run`` prints beside its bound (``medfuzz.cli.suite.cost``): its arithmetic pinned
against values computed by hand for small settings, so that an estimate that ignored the control policy, the
replicates, the turns or the p-hat prompt fails here; its options; and the dry run that prints it without paying
for TCES's vocabulary vectors. How close it comes to planted runs is measured by bench/suite_cost_estimate.py
(docs/performance.md, P11)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from medfuzz.benchmarks.items import MCQItem
from medfuzz.cli.suite import cost as suite_cost
from medfuzz.cli.suite import cost_model as suite_cost_model
from medfuzz.cli.suite.cost_model import (
    SCENARIOS,
    MedFuzzShapes,
    controls_scored,
    medfuzz_costs,
    null_controls,
    tces_costs,
    turns_reached,
)
from medfuzz.options import ConfigError
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.prompts import load_pack
from medfuzz.solvers.tces.config import TCESConfig

ITEM = MCQItem(id="q1", question="A 40-year-old man has a cough. Which drug is best?",
               options={"A": "aspirin", "B": "ibuprofen", "C": "metformin", "D": "insulin"}, answer="A")
EXPECTED = SCENARIOS[1]


def assumed(**values: float) -> suite_cost_model.Assumptions:
    return replace(EXPECTED, **values)


def shapes(config: MedFuzzConfig, fill: float = 0.5) -> MedFuzzShapes:
    return MedFuzzShapes(config, ITEM, load_pack(config.pack), 0.0, fill)


def small(**changes: object) -> MedFuzzConfig:
    """K = 1, 2 replicates, M = 3 controls, one option order, direct p-hat: small enough to count by hand."""
    return MedFuzzConfig(**{"turns": 1, "replicates": 2, "controls": 3, "option_orders": 1, "pvalue_prompt": "direct",
                            "exemplars": 0, **changes})


def test_controls_a_null_attack_pays_follow_the_control_policy() -> None:
    """M = 3, h = 1, min_controls 3. Growing batches draw 1, 1, 1: a null attack stops at its first exceedance,
    at control l with probability 1 / (l (l + 1)), none among the 3 with 1/4, so it draws 1/2 + 2/6 + 3/12 + 3/4 =
    H_3 = 11/6 controls; batches of 5 and the fixed policy draw all 3 in one batch."""
    grow = small()
    assert [controls_scored(grow, first) for first in (1, 2, 3, None)] == [(1, 1), (2, 2), (3, 3), (3, 3)]
    assert null_controls(grow) == pytest.approx((11 / 6, 11 / 6))
    for other in (small(control_batch=5), small(controls_policy="fixed")):
        assert null_controls(other)[0] == pytest.approx(3.0)
    # at the paper's M = 30 the decision reads H_30 controls whatever the batches; what is paid differs
    paper, five = MedFuzzConfig(), MedFuzzConfig(control_batch=5)
    harmonic = sum(1 / k for k in range(1, 31))
    assert null_controls(paper)[1] == pytest.approx(harmonic) == null_controls(five)[1]
    assert harmonic < null_controls(paper)[0] < null_controls(five)[0]
    assert suite_cost_model.controls_per_test(paper, 1.0) == 30  # a real effect draws every control


def test_medfuzz_calls_by_hand() -> None:
    """a = 0.5, ASR 0.5, every success null, nothing rejected, 1 item. Per replicate: the target's dialog on the
    original (3 calls) and, answered right (1/2), on one modified item (3): 4.5; the attacker's plan and item on
    the right half: 1; a test with probability 1/4: p-hat of the attack (1 draw) and 11/6 controls (one attacker
    call and one draw each). p-hat of the original: one draw per item when some replicate is tested,
    1 - (3/4)^2 = 7/16."""
    costs = medfuzz_costs(small(), 1, shapes(small()), assumed(accuracy=0.5, asr=0.5, effective=0.0, rejects=0.0))
    calls = {role: cost.calls for role, cost in costs.items()}
    assert calls == pytest.approx({"target": 9.0, "attacker": 2.0, "attacker_controls": 2 * 0.25 * 11 / 6,
                                   "target_significance": 2 * 0.25 * (1 + 11 / 6) + 7 / 16})
    # replicates: 3 instead of 2 (the per-replicate roles by 3/2, p-hat of the original 1 - (3/4)^3)
    three = medfuzz_costs(small(replicates=3), 1, shapes(small()), assumed(accuracy=0.5, asr=0.5, effective=0.0,
                                                                           rejects=0.0))
    assert three["target"].calls == pytest.approx(13.5)
    assert three["target_significance"].calls == pytest.approx(3 * 0.25 * (1 + 11 / 6) + 1 - 0.75 ** 3)
    # the dialog p-hat is 3 calls a draw; the fixed policy draws all 3 controls
    dialog = medfuzz_costs(small(pvalue_prompt="dialog"), 1, shapes(small()),
                           assumed(accuracy=0.5, asr=0.5, effective=0.0, rejects=0.0))
    assert dialog["target_significance"].calls == pytest.approx(3 * calls["target_significance"])
    fixed = medfuzz_costs(small(controls_policy="fixed"), 1, shapes(small()),
                          assumed(accuracy=0.5, asr=0.5, effective=0.0, rejects=0.0))
    assert fixed["attacker_controls"].calls == pytest.approx(2 * 0.25 * 3)
    # a real effect (effective 1) draws every control
    real = medfuzz_costs(small(), 1, shapes(small()), assumed(accuracy=0.5, asr=0.5, effective=1.0, rejects=0.0))
    assert real["attacker_controls"].calls == pytest.approx(fixed["attacker_controls"].calls)


def test_turns_retries_and_items_by_hand() -> None:
    """K = 2, ASR 0.75. Half the attacks flip with a constant chance per turn (1/2: turn 2 reached with
    probability 1/2), half on a turn uniform on {1, 2} (turn 2 reached by the failures and half the flips:
    1/4 + 3/8 = 5/8): turn 2 is reached with probability 9/16, so the attacker pays 2 + 3 x 9/16 calls per
    replicate answered right and the target 3 per turn reached; a reject rate of 1/2 within 3 tries adds
    1/2 + 1/4 item calls per turn reached (3/4 x 25/16)."""
    assert turns_reached(2, 0.75) == pytest.approx([1.0, 9 / 16])
    assert turns_reached(3, 1.0) == pytest.approx([1.0, 1 / 3, 1 / 6])
    assert turns_reached(3, 0.0) == pytest.approx([1.0, 1.0, 1.0])
    config = small(turns=2, replicates=1, controls=0)
    costs = medfuzz_costs(config, 2, shapes(config), assumed(accuracy=1.0, asr=0.75, rejects=0.0))
    assert costs["attacker"].calls == pytest.approx(2 * (2 + 3 * 9 / 16))
    assert costs["target"].calls == pytest.approx(2 * (3 + 3 * 25 / 16))
    assert set(costs) == {"target", "attacker"}  # no controls: no test
    rejected = medfuzz_costs(config, 2, shapes(config), assumed(accuracy=1.0, asr=0.75, rejects=0.5))
    assert rejected["attacker"].calls == pytest.approx(2 * (2 + 3 * 9 / 16 + 0.75 * 25 / 16))


def test_tokens_grow_with_the_dialogs_and_the_fill() -> None:
    """The target's three calls each resend the dialog so far; the attacker's turns resend theirs, so a later turn
    costs more input than the first; a fuller reply costs more of both."""
    config = MedFuzzConfig(exemplars=0)
    half, full = shapes(config, 0.5), shapes(config, 1.0)
    first_prompt = suite_cost_model.tokens("You are a medical AI assistant that supports clinical decision-making.")
    assert half.dialog.calls == 3 and half.dialog.tokens_in > 3 * first_prompt
    assert half.dialog.tokens_out == pytest.approx(0.5 * (400 + 80 + 8))
    assert [t.calls for t in half.turns] == [2, 3, 3, 3, 3]
    assert all(b.tokens_in > a.tokens_in for a, b in zip(half.turns, half.turns[1:], strict=False))
    assert full.dialog.tokens_in > half.dialog.tokens_in and full.turns[-1].tokens_in > half.turns[-1].tokens_in


def test_tces_calls_by_hand() -> None:
    """Budget 2, ASR@2 0.75 (a flip chance of 1/2 per query): 1.5 queries per attacked item; 4 attackable items at
    accuracy 1/2: 4 x (1 + 0.75) = 7 calls. ASR 0: the whole budget."""
    assert tces_costs(TCESConfig(budget=2), 4, 10.0, assumed(accuracy=0.5, tces_asr=0.75))["target"].calls == 7.0
    assert tces_costs(TCESConfig(budget=8), 4, 10.0, assumed(accuracy=0.5, tces_asr=0.0))["target"].calls == 20.0


def test_expect_and_price_options() -> None:
    assert suite_cost_model.parse_expect(["accuracy=0.8,asr=0.2", "free-reply=300"]) == {
        "accuracy": 0.8, "asr": 0.2, "free_reply": 300}
    assert [s.accuracy for s in suite_cost_model.scenarios({"accuracy": 0.8})] == [0.8, 0.8, 0.8]
    for bad in ("accuracy", "accuracy=1.5", "speed=1", "asr=x"):
        with pytest.raises(ConfigError, match="--expect"):
            suite_cost_model.parse_expect([bad])
    assert suite_cost_model.parse_prices(["openai/gpt-4o=0.0025/0.01", "vllm=x=0/0"]) == {
        "openai/gpt-4o": (0.0025, 0.01), "vllm=x": (0.0, 0.0)}
    for bad in ("openai/gpt-4o", "m=1", "m=-1/2", "=1/2"):
        with pytest.raises(ConfigError, match="--price"):
            suite_cost_model.parse_prices([bad])
    # declared once, on RunOptions: the generated parser takes them
    from medfuzz.cli.suite.run import RunOptions
    from medfuzz.options import add_flags, flag_values

    parser = argparse.ArgumentParser()
    add_flags(parser, RunOptions)
    how = RunOptions(**flag_values(RunOptions, parser.parse_args(
        ["--price", "a/m=1/2", "--price", "b/m=0.5/1", "--expect", "accuracy=0.9"])))
    assert how.price == {"a/m": (1.0, 2.0), "b/m": (0.5, 1.0)} and how.expect == {"accuracy": 0.9}


def plan(out: Path, **changes: object) -> object:
    from medfuzz.cli.suite.plan import SuitePlan

    return SuitePlan(**{"model": "openai-api/vllm/m", "out": out, "level": "quick", "data": "demo",
                        "methods": ("baseline", "medfuzz", "medguard"), "limit": 2, **changes})


def test_the_estimate_follows_the_bound_and_prices_the_roles(tmp_path: Path) -> None:
    """Over the plan's built tasks: one estimate per run the bound names; one answer per sample exactly as the
    bound; the attacker's roles priced at the attacker's price, the rest at the target's."""
    from medfuzz.cli.suite import build as suite_build
    from medfuzz.cli.suite import levels as suite_levels

    chosen = plan(tmp_path, attacker="openai-api/vllm/att")
    built = suite_build.build_tasks(chosen, planning=True)
    bound = suite_build.bound(built, chosen.models)
    estimate = suite_cost.estimate(built, bound, chosen.models, "openai-api/vllm/att", {},
                                   suite_levels.LEVELS["quick"].generate.get("max_tokens"))
    assert [run.key for run in estimate.runs] == list(bound.per_run)
    baseline = estimate.runs[0]
    assert {s: baseline.calls(s) for s in ("fewest", "expected", "most")} == dict.fromkeys(
        ("fewest", "expected", "most"), 2.0)
    medfuzz = next(run for run in estimate.runs if run.method == "medfuzz")
    assert 0 < medfuzz.calls("fewest") < medfuzz.calls("expected") < medfuzz.calls("most") < sum(
        bound.per_run["medfuzz"].values())
    target, attacker = (1.0, 2.0), (10.0, 20.0)
    cost, missing = estimate.cost("expected", {"openai-api/vllm/m": target, "openai-api/vllm/att": attacker})
    by_hand = sum(c.tokens_in / 1000 * (attacker if role.startswith("attacker") else target)[0]
                  + c.tokens_out / 1000 * (attacker if role.startswith("attacker") else target)[1]
                  for run in estimate.runs for role, c in run.expected["expected"].items())
    assert (cost, missing) == (pytest.approx(by_hand), [])
    assert estimate.cost("expected", {"openai-api/vllm/m": target})[1] == ["openai-api/vllm/att"]
    worst, _ = estimate.cost(None, {"openai-api/vllm/m": target, "openai-api/vllm/att": attacker})
    assert worst > cost
    lines = estimate.lines({"openai-api/vllm/m": target})
    assert lines[0].startswith("Expected model calls (expected; from fewest to most")
    assert any(line.startswith("  cost (--price, per 1,000 tokens): expected ") and "no price for openai-api/vllm/att"
               in line for line in lines)


def test_a_planned_tces_task_embeds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run builds every task for a plan: the TCES solver does not build its resources (the encoder and the
    vocabulary's vectors: about a minute on an empty cache), the run's samples are the same, and the estimate
    counts the attackable items from the vocabulary alone."""
    from medfuzz.cli.suite import build as suite_build
    from medfuzz.tasks.inspect import tces

    def refuse(*args: object) -> None:
        raise AssertionError("a planned task built the TCES resources")

    monkeypatch.setattr(tces, "shared_resources", refuse)
    chosen = plan(tmp_path, methods=("tces",), limit=5)
    built = suite_build.build_tasks(chosen, planning=True)
    assert [len(task.dataset) for _, task in built] == [5]
    bound = suite_build.bound(built)
    [run] = suite_cost.estimate(built, bound).runs
    assert run.note.startswith("(") and "of 5 items with a drugs distractor" in run.note
