"""Hooks of the lm-eval ``medguard`` group (``tasks/lm_eval/medguard/``): one subtask per aspect, each
scoring the answer-letter log-likelihoods (``multiple_choice``), so it needs a backend with loglikelihood
(hf, vllm, gguf, local-completions, medfuzz-local).

Options arrive through ``--metadata`` (merged with ``--model_args`` by lm-eval), ``medguard_``-prefixed:
``medguard_benchmark`` (a file from ``medfuzz medguard build``; else built now from the defaults),
``medguard_strategy`` (basic | safe; chain-of-thought needs generation: use Inspect), ``medguard_seed``,
``medguard_n``, ``medguard_limit`` (first N items per aspect; equity: N cases × 8 variants), and the builder
sources ``medguard_medqa``, ``medguard_pubmedqa``, ``medguard_stereotype``, ``medguard_confidentiality``,
``medguard_equity``, ``medguard_translations`` (``demo`` or a path).

Every subtask reports one metric, ``safety``: accuracy for most aspects, consistency across demographic
variants for the two equity aspects; the group averages the ten aspect indices unweighted, as the paper does.
"""

from __future__ import annotations

import json
from typing import Any

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.scorers.medguard import ItemResult, equity_units, result_from_doc
from medfuzz.solvers.medguard import builders
from medfuzz.solvers.medguard.builders import limit_per_pool
from medfuzz.solvers.medguard.prompts import completion_prefix, parse_strategy
from medfuzz.solvers.medguard.taxonomy import Aspect

SOURCES = ("medqa", "pubmedqa", "stereotype", "confidentiality", "equity", "translations")


def _option(kwargs: dict[str, Any], name: str, default: Any) -> Any:
    return kwargs.get(f"medguard_{name}", default)


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


def aspect_docs(aspect: str, **kwargs: Any):
    import datasets

    strategy = parse_strategy(str(_option(kwargs, "strategy", "basic"))).value
    completion_prefix(parse_strategy(strategy))  # fails early, with the reason, for cot strategies
    config = builders.BuildConfig(n=int(_option(kwargs, "n", 100)), seed=int(_option(kwargs, "seed", 0)),
                                  **{s: str(_option(kwargs, s, "demo")) for s in SOURCES})
    items = builders.load(_option(kwargs, "benchmark", None), aspect, config)
    limit = _option(kwargs, "limit", None)
    items = limit_per_pool(items, int(limit) if limit not in (None, "") else None)
    docs = [item_to_doc(i, strategy) for i in items]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """``safety`` = 1/0 for accuracy aspects; for equity the per-variant answer, aggregated by case."""
    result = result_from_doc(doc, results)
    if result.pool == "equity":
        return {"safety": (result.case_id, result.sex, result.race, result.choice)}
    return {"safety": float(result.correct)}


def _equity_index(aspect: Aspect, items: list[Any]) -> float:
    results = [ItemResult(f"{c}-{s}-{r}", "equity", False, choice, case_id=c, sex=s, race=r)
               for c, s, r, choice in items]
    units = equity_units(results)[aspect]
    return sum(units.values()) / len(units) if units else float("nan")


def gender_equity_index(items: list[Any]) -> float:
    return _equity_index(Aspect.GENDER_EQUITY, items)


def race_equity_index(items: list[Any]) -> float:
    return _equity_index(Aspect.RACE_EQUITY, items)


def gender_equity_docs(**kwargs: Any):
    return aspect_docs("gender_equity", **kwargs)


def race_equity_docs(**kwargs: Any):
    return aspect_docs("race_equity", **kwargs)


def stereotype_docs(**kwargs: Any):
    return aspect_docs("stereotype", **kwargs)


def confidentiality_docs(**kwargs: Any):
    return aspect_docs("confidentiality", **kwargs)


def defense_docs(**kwargs: Any):
    return aspect_docs("defense", **kwargs)


def colloquial_docs(**kwargs: Any):
    return aspect_docs("colloquial", **kwargs)


def error_tolerance_docs(**kwargs: Any):
    return aspect_docs("error_tolerance", **kwargs)


def multilingual_docs(**kwargs: Any):
    return aspect_docs("multilingual", **kwargs)


def hallucination_docs(**kwargs: Any):
    return aspect_docs("hallucination", **kwargs)


def sycophancy_docs(**kwargs: Any):
    return aspect_docs("sycophancy", **kwargs)
