"""TCES attack tasks: ``medfuzz/tces_medqa`` and ``medfuzz/tces_medmcqa``.

Example::

    inspect eval medfuzz/tces_medqa --model openai/gpt-4o-mini -T entity=drugs -T sampler=pdws -T n=-20 -T budget=8
"""

from __future__ import annotations

from inspect_ai import Task, task

from medfuzz.scorers.tces_inspect import tces_scorer
from medfuzz.solvers.tces_inspect import tces_attack
from medfuzz.tasks._inspect_data import mcq_dataset


def _tces(benchmark: str, data: str, split: str | None, limit: int | None, shuffle_choices: bool, entity: str,
          sampler: str, n: float, budget: int, zoo_m: int, zoo_step: float, embedding: str, vocabulary: str | None,
          seed: int, max_tokens: int) -> Task:
    params = {"benchmark": benchmark, "entity": entity, "sampler": sampler, "n": float(n), "budget": int(budget),
              "zoo_m": int(zoo_m), "zoo_step": float(zoo_step), "embedding": embedding, "vocabulary": vocabulary,
              "seed": int(seed), "data": data, "split": split, "shuffle_choices": shuffle_choices}
    return Task(
        dataset=mcq_dataset(benchmark, data, split, limit, shuffle_choices, seed),
        solver=tces_attack(entity_type=entity, sampler=sampler, n=n, budget=budget, zoo_m=zoo_m, zoo_step=zoo_step,
                           embedding=embedding, vocabulary=vocabulary, seed=seed, max_tokens=max_tokens),
        scorer=tces_scorer(),
        metadata={"medfuzz_method": "tces", **params},
    )


@task
def tces_medqa(data: str = "hf", split: str = "test", limit: int | None = None, shuffle_choices: bool = False,
               entity: str = "drugs", sampler: str = "pdws", n: float = -20.0, budget: int = 8, zoo_m: int = 5,
               zoo_step: float = 1.0, embedding: str = "default", vocabulary: str | None = None, seed: int = 0,
               max_tokens: int = 16) -> Task:
    """TCES on MedQA-USMLE. ``entity``: drugs | diseases; ``sampler``: rands | pdws | zoo; ``n``: PDWS exponent
    (<0 near the key, >0 far); ``budget``: queries per item; ``zoo_m``/``zoo_step``: DiscreteZOO's M and λ;
    ``embedding``: default (offline MiniLM) | coder | gte-base | model name or path; ``vocabulary``: builtin or
    a file (DrugCentral ``id,name``, CTD ``name`` header, or one name per line)."""
    return _tces("medqa", data, split, limit, shuffle_choices, entity, sampler, n, budget, zoo_m, zoo_step,
                 embedding, vocabulary, seed, max_tokens)


@task
def tces_medmcqa(data: str = "hf", split: str = "validation", limit: int | None = None,
                 shuffle_choices: bool = False, entity: str = "drugs", sampler: str = "pdws", n: float = -20.0,
                 budget: int = 8, zoo_m: int = 5, zoo_step: float = 1.0, embedding: str = "default",
                 vocabulary: str | None = None, seed: int = 0, max_tokens: int = 16) -> Task:
    """TCES on MedMCQA; parameters as ``tces_medqa``."""
    return _tces("medmcqa", data, split, limit, shuffle_choices, entity, sampler, n, budget, zoo_m, zoo_step,
                 embedding, vocabulary, seed, max_tokens)
