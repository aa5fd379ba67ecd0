"""Inspect shell around the TCES engine: one ``@solver`` that attacks the sample's item with the task's model."""

from __future__ import annotations

from functools import cache

from inspect_ai.model import ModelOutput, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medfuzz.adapters.inspect_model import InspectChatModel
from medfuzz.benchmarks.items import MCQItem
from medfuzz.solvers.tces import TCESConfig, TCESResources, attack_item

METADATA_KEY = "tces"


@cache
def shared_resources(entity_type: str, vocabulary: str | None, embedding: str) -> TCESResources:
    """Vocabulary, matcher and vectors, built once per process for each combination."""
    return TCESResources.build(entity_type, vocabulary, embedding)


@solver
def tces_attack(
    entity_type: str = "drugs",
    sampler: str = "pdws",
    n: float = -20.0,
    budget: int = 8,
    zoo_m: int = 5,
    zoo_step: float = 1.0,
    embedding: str = "default",
    vocabulary: str | None = None,
    seed: int = 0,
    max_tokens: int = 16,
) -> Solver:
    """Attack the sample's item (``metadata["item"]``) and leave the full result in ``metadata["tces"]``."""
    config = TCESConfig(entity_type=entity_type, sampler=sampler, n=float(n), budget=int(budget), zoo_m=int(zoo_m),
                        zoo_step=float(zoo_step), seed=int(seed), max_tokens=int(max_tokens))
    resources = shared_resources(entity_type, vocabulary, embedding)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        result = await attack_item(MCQItem.from_record(state.metadata["item"]), InspectChatModel(model), resources,
                                   config)
        state.metadata[METADATA_KEY] = result.to_dict()
        final = result.target_answers[-1] or ""
        state.output = ModelOutput.from_content(model=str(model), content=final)
        return state

    return solve
