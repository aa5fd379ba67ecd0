"""``MedFuzzConfig.max_calls``: the upper bound on model calls logged before a run, by hand and against the
engine's own usage ledger in the worst case (success at the last turn, every control tested)."""

from __future__ import annotations

import pytest

from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models


def test_max_calls_by_hand() -> None:
    config = MedFuzzConfig(turns=2, replicates=3, controls=4, option_orders=2, max_retries=1, control_tries=2)
    # per replicate, tries = 2: target 3 steps x 2 tries x (original + 2 turns) = 18; attacker 2 x (3·2 − 1) = 10;
    # controls 4 x 2 = 8 attacker calls; p-hat of the attack and 4 controls x 2 draws x 3 dialog calls = 30 per
    # replicate, plus the original's p-hat once per item (2 draws x 3 calls = 6)
    assert config.max_calls(5) == {"target": 18 * 15, "attacker": 10 * 15, "attacker_controls": 8 * 15,
                                   "target_significance": 30 * 15 + 6 * 5}
    direct = MedFuzzConfig(turns=1, replicates=1, controls=30, option_orders=5, pvalue_prompt="direct",
                           faithfulness="judge", max_retries=0, control_tries=3)
    # target 3 x 1 x 2 = 6; attacker 1 x 2 = 2; controls 90; p-hat (1 + 30 + original) x 5 x 1 = 160; one judge
    assert direct.max_calls(1) == {"target": 6, "attacker": 2, "attacker_controls": 90, "target_significance": 160,
                                   "judge": 1}
    assert MedFuzzConfig(controls=0).max_calls(2) == {"target": 3 * 3 * 6 * 5 * 2, "attacker": 3 * 14 * 5 * 2}
    assert MedFuzzConfig().max_calls(0) == {"target": 0, "attacker": 0, "attacker_controls": 0,
                                            "target_significance": 0}


@pytest.mark.parametrize("prompt", ["dialog", "direct"])
async def test_worst_case_run_makes_exactly_the_bound(prompt: str) -> None:
    config = MedFuzzConfig(turns=3, replicates=2, controls=3, option_orders=2, exemplars=0, max_retries=0,
                           control_tries=1, pvalue_prompt=prompt)
    def probabilities(stem: str) -> dict[str, float]:  # the attack moves p-hat from 0.9 to 0.2, controls do not
        p = 0.2 if "clue3" in stem else 0.9
        return {"Ceftriaxone": p, "Gentamicin": 1 - p}

    target = Target(weak_spots=("clue3",), probabilities=probabilities)  # flips only at the last turn
    # no control moves p-hat as far as the attack (no exceedance), so the sequential test draws all M
    t, a = models(target, Attacker(controls=lambda n: item_text(ITEM.question + f" The patient enjoys knit{n}.")))
    result = await MedFuzzEngine(t, a, config).run_item(ITEM)
    assert [r.success_turn for r in result.replicates] == [3, 3]
    assert [r.significance.controls_attempted for r in result.replicates] == [3, 3]
    used: dict[str, int] = {}
    for replicate in result.replicates:
        for role, usage in replicate.usage.items():
            used[role] = used.get(role, 0) + usage["calls"]
    bound = config.max_calls(1)
    # the dialogs and control fuzzes reach the bound exactly; p-hat requests that two replicates share (the
    # original's, and identical attack/control texts over the item's common draws) are paid once per item
    assert {r: used[r] for r in ("target", "attacker", "attacker_controls")} == \
        {r: bound[r] for r in ("target", "attacker", "attacker_controls")}
    assert used["target_significance"] <= bound["target_significance"]


async def test_retries_stay_within_the_bound() -> None:
    config = MedFuzzConfig(turns=2, replicates=1, controls=2, option_orders=1, exemplars=0, max_retries=2,
                           control_tries=2)
    target = Target(weak_spots=("clue2",), fail={"reasoning": ["", ""], "answer": ["no idea"]})
    def controls(n: int) -> str:  # every other control is unreadable and resampled
        return "nonsense" if n % 2 else item_text(ITEM.question + f" The patient enjoys knitting{n}.")

    t, a = models(target, Attacker(controls=controls))
    result = await MedFuzzEngine(t, a, config).run_item(ITEM)
    usage = result.replicates[0].usage
    bound = config.max_calls(1)
    assert all(usage[role]["calls"] <= bound[role] for role in usage)
    assert usage["target"]["calls"] > 3 * 3 and usage["attacker_controls"]["calls"] == 4  # retries were made


def test_inspect_task_logs_the_bound_when_the_run_starts(caplog: pytest.LogCaptureFixture) -> None:
    """Said and recorded for the samples Inspect hands the run (after --limit / --sample-id / --epochs; the real
    CLI: tests/faults/test_run_checks.py), not for the task's dataset."""
    import asyncio
    from types import SimpleNamespace

    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa

    task = medfuzz_medqa(data="demo", limit=10, turns=2, replicates=1, controls=0, exemplars=0, max_retries=0)
    assert "max_calls" not in task.metadata and len(task.dataset) == 10
    spec = SimpleNamespace(metadata=dict(task.metadata))
    with caplog.at_level("WARNING", logger="medfuzz.tasks.inspect.call_bound"):
        asyncio.run(task.early_stopping.start_task(spec, [None] * 3, 1))
    # per item: target 3 x 3 = 9, attacker 5
    assert spec.metadata["max_calls"] == {"target": 27, "attacker": 15}
    assert "MedFuzz: at most 42 model calls for 3 samples (target 27, attacker 15)" in caplog.text
