"""A cancelled MedFuzz item (Ctrl-C in ``inspect eval``, a sample limit) leaves nothing calling the model: the
p-hat of the original that the replicates share is shielded from one replicate's cancellation, so it must be
cancelled with the item. Before, it went on calling the model after Inspect had ended the sample, and Inspect
logged a warning with a traceback per call ("ModelEvent ... arrived after complete_sample"): 350 warnings and
9,959 lines for one Ctrl-C at --limit 40 against the planted server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from medfuzz.models import ChatMessage
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, models, probability_table


class Slow:
    """A model whose every call takes a while, counting the calls that start and those that complete (Inspect
    logs a call's event when it completes)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.started, self.completed = inner, inner.name, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(self, messages: Sequence[ChatMessage], **kwargs: Any):
        self.started += 1
        await asyncio.sleep(0.01)
        reply = await self.inner.generate(messages, **kwargs)
        self.completed += 1
        return reply


async def _cancel_after(calls: int) -> tuple[int, int]:
    """Cancel an item after its ``calls``-th target call; (calls completed when it ended, calls completed 20 call
    lengths later)."""
    target, attacker = models(Target(weak_spots=("clue1",), probabilities=probability_table), Attacker())
    slow_target, slow_attacker = Slow(target), Slow(attacker)
    config = MedFuzzConfig(turns=2, replicates=3, exemplars=0, controls=30, option_orders=8,
                           pvalue_prompt="direct")
    task = asyncio.ensure_future(MedFuzzEngine(slow_target, slow_attacker, config).run_item(ITEM))
    while slow_target.started < calls and not task.done():
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    ended = slow_target.completed + slow_attacker.completed
    await asyncio.sleep(0.2)
    return ended, slow_target.completed + slow_attacker.completed


async def test_a_cancelled_item_makes_no_call_after_it_ended() -> None:
    """Cancelled at every point of its first 60 target calls (the attack, the shared p-hat of the original, the
    controls): no call completes after it ended."""
    for calls in range(1, 61):
        ended, later = await _cancel_after(calls)
        assert later == ended, (calls, ended, later)
