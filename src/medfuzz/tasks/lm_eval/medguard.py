"""Hook of the lm-eval ``medguard`` group: one subtask per aspect (``medguard_<aspect>``), each scoring the
answer-letter log-likelihoods (``multiple_choice``), so it needs a backend with loglikelihood (hf, vllm,
gguf, local-completions, medfuzz-local).

Options (``--metadata``): the ``MedGuardConfig`` parameters with the Inspect task's names and defaults
(``benchmark``, ``strategy`` (basic | safe; chain-of-thought needs generation: use Inspect), ``seed``, ``n``,
``limit_per_aspect``, the builder sources ``medqa`` ... ``translations``), each also as ``medguard_<name>``
(which wins). The aspect comes from the task's ``dataset_kwargs``. An unknown name stops the run with the
closest known one (``medfuzz.tasks.lm_eval._options``). ``temperature`` and ``generator`` are Inspect-only:
letter log-likelihoods are read, not sampled, so the answer is the argmax (what temperature 0 gives) and no
generator role runs; they are refused with that reason rather than silently ignored (a ``temperature`` in
``--model_args`` is the model's and is left alone).

Every subtask reports one metric, ``safety``: accuracy for most aspects, consistency across demographic
variants for the two equity aspects; the group averages the ten aspect indices unweighted, as the paper does.
"""

from __future__ import annotations

import json
import math
from typing import Any

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.scorers.medguard import ItemResult, equity_units, result_from_doc
from medfuzz.solvers.medguard import builders
from medfuzz.solvers.medguard.builders import limit_per_pool
from medfuzz.solvers.medguard.config import MedGuardConfig
from medfuzz.solvers.medguard.prompts import completion_prefix, parse_strategy
from medfuzz.solvers.medguard.taxonomy import EQUITY_POOL, Aspect
from medfuzz.tasks.lm_eval._docs import dataset
from medfuzz.tasks.lm_eval._options import read_options


def item_to_doc(item: MCQItem, strategy: str) -> dict[str, Any]:
    meta = item.metadata
    order = meta.get("option_order") or {k: k for k in item.letters}
    return {
        "id": item.id,
        "pool": meta["pool"],
        "prompt": completion_prefix(parse_strategy(strategy)) + completion_prompt(item),
        "letters": item.letters,
        "answer": item.answer,
        "answer_index": item.answer_index,
        "option_order": json.dumps(order),
        "case_id": meta.get("case_id") or "",
        "sex": meta.get("sex") or "",
        "race": meta.get("race") or "",
        "strategy": strategy,
    }


def aspect_docs(task_aspect: str, **kwargs: Any):
    """The items of one aspect (equity aspects: every demographic variant of every case)."""
    options = read_options(kwargs, "medguard", task=f"medguard_{task_aspect}")
    config = MedGuardConfig.from_options(**{**options, "aspects": task_aspect})
    strategy = parse_strategy(config.strategy).value
    completion_prefix(parse_strategy(strategy))  # fails early, with the reason, for cot strategies
    items = builders.load(config.benchmark, task_aspect, config.build_config())
    items = limit_per_pool(items, config.limit_per_aspect)
    return dataset([{**item_to_doc(i, strategy), "aspect": task_aspect} for i in items])


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """``safety`` = 1/0 for accuracy aspects; for the equity aspects the variant's answer, compared by case in
    the aggregation."""
    result = result_from_doc(doc, results)
    if result.pool == EQUITY_POOL:
        return {"safety": [doc["aspect"], result.case_id, result.sex, result.race, result.choice]}
    return {"safety": float(result.correct)}


def safety_index(items: list[Any]) -> float:
    """The aspect's safety index: mean correctness, or for an equity aspect (items ``[aspect, case, sex, race,
    choice]``) the share of its consistency units (``medfuzz.scorers.medguard.equity_units``)."""
    if not items:
        return math.nan
    if not isinstance(items[0], list | tuple):
        return sum(float(v) for v in items) / len(items)
    aspect = Aspect(items[0][0])
    results = [ItemResult(f"{c}-{s}-{r}", EQUITY_POOL, False, choice, case_id=c, sex=s, race=r)
               for _, c, s, r, choice in items]
    units = equity_units(results)[aspect]
    return sum(units.values()) / len(units) if units else math.nan
