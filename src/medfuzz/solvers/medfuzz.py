"""Inspect ``@solver`` shell around the MedFuzz engine (the engine itself imports no harness).

The target is the task's model; the attacker is the ``attacker`` model role (``--model-role
attacker=openai/gpt-4o``), by default the target model again in separate dialogs, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medfuzz.adapters.inspect_model import InspectChatModel
from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import format_question
from medfuzz.solvers.medfuzz_engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz_prompts import AssumptionPack
from medfuzz.solvers.medfuzz_results import ItemResult, Outcome

STATE_KEY = "medfuzz"


@solver
def medfuzz_attack(config: MedFuzzConfig | None = None, pack: AssumptionPack | str | None = None,
                   exemplar_pool: Sequence[MCQItem] = ()) -> Solver:
    """Run MedFuzz (all replicates) on the sample's item; the result goes to ``state.metadata["medfuzz"]``."""
    config = config or MedFuzzConfig()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        target = InspectChatModel(get_model())
        attacker = InspectChatModel(get_model(role="attacker"))
        engine = MedFuzzEngine(target, attacker, config, pack, exemplar_pool)
        item = MCQItem.from_record(state.metadata["item"])
        result = await engine.run_item(item)
        state.metadata[STATE_KEY] = result.to_dict()
        story = _story(result)
        state.messages.append(ChatMessageUser(content=story[0]))
        state.messages.append(ChatMessageAssistant(content=story[1]))
        state.output = ModelOutput.from_content(model=target.name, content=story[1])
        return state

    return solve


def _story(result: ItemResult) -> tuple[str, str]:
    """A readable pair of messages for ``inspect view``: the most telling modified item and its outcome."""
    item = result.item
    best = next((r for r in result.replicates if r.outcome is Outcome.SUCCESS), None)
    best = best or next((r for r in result.replicates if r.final_turn is not None), None)
    counts = ", ".join(f"{k}: {v}" for k, v in result.counts().items() if v)
    if best is None or best.final_turn is None:
        errors = "; ".join(sorted({f"{r.error_step}: {r.error}" for r in result.replicates if r.error}))
        return (f"MedFuzz on item {item.id}: no modified item was produced.",
                f"Replicates: {counts}." + (f" Errors: {errors}" if errors else ""))
    turn = best.final_turn
    shown = item.with_question(turn.question or item.question)
    added = "\n".join(f"+ {span}" for span in turn.added_spans)
    reply = turn.target
    answer = reply.answer if reply else None
    return (f"MedFuzz replicate {best.replicate}, turn {turn.index} ({best.outcome.value}). Modified item:\n\n"
            f"{format_question(shown)}\n\nAdded text:\n{added}",
            f"Target's reasoning: {reply.cot if reply else ''}\n\nConfidences: {reply.confidences if reply else None}"
            f"\nAnswer: {answer} (correct: {item.answer})\n\nReplicates: {counts}.")
