"""The template attacker writes valid MedFuzz items and controls for any target, with no LLM."""

from __future__ import annotations

import asyncio

from medfuzz.benchmarks import load_items
from medfuzz.models.planted import PlantedSpec, PlantedTarget
from medfuzz.models.planted.chat import PlantedChatModel
from medfuzz.models.planted.template import PATIENT_CHARACTERISTICS, template_attacker
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
    assert tested and all(len(s.controls) == 4 and not s.controls_rejected for s in tested)
