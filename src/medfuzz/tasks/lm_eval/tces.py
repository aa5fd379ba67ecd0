"""lm-eval hooks of the single-query (B = 1) TCES transform tasks ``tces_{medqa,medmcqa}_{drugs,diseases}``.

lm-eval cannot query the model while it builds a dataset, so the transform is model-free: for every item with
an entity of the type in a distractor, the dataset holds the clean item and, right after it, the item with the
victim replaced by the entity RandS/PDWS draws first (the same draw as the Inspect attack's first query with
the same seed). The two docs share an ``id``; the custom aggregations pair them, so one run reports clean
accuracy, attacked accuracy and the flip rate among items answered correctly clean (ASR@1). Items without an
entity are left out (the paper's drug-/disease-mention subsets); their count is logged.

Options (``--metadata``; ``--model_args`` arrive too): ``data`` (hf | demo | path), ``split``, ``limit`` (items,
not docs: use it rather than ``--limit``, which can cut a pair), ``seed``, ``sampler`` (rands | pdws), ``n``,
``embedding``, ``vocabulary`` (builtin | path) or ``drugs_vocabulary`` / ``diseases_vocabulary``,
``shuffle_choices``. ``data``, ``split``, ``limit``, ``seed`` and ``shuffle_choices`` also take a
``medqa_`` / ``medmcqa_`` prefix, as the baseline tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.solvers.tces.attack import TCESConfig, TCESResources, clean_item, first_substitution
from medfuzz.tasks.lm_eval.baselines import _as_bool, _option, item_to_doc

log = logging.getLogger(__name__)


def tces_docs(benchmark: str, entity: str, **kwargs: Any):
    import datasets

    data = str(_option(kwargs, benchmark, "data", "hf"))
    split = _option(kwargs, benchmark, "split", None)
    limit = _option(kwargs, benchmark, "limit", None)
    seed = int(_option(kwargs, benchmark, "seed", 0))
    config = TCESConfig(entity_type=entity, sampler=str(kwargs.get("sampler", "pdws")),
                        n=float(kwargs.get("n", -20.0)), budget=1, seed=seed)
    vocabulary = kwargs.get(f"{entity}_vocabulary", kwargs.get("vocabulary"))
    resources = TCESResources.build(entity, vocabulary, str(kwargs.get("embedding", "default")))
    items = load_items(benchmark, data, split)
    if _as_bool(_option(kwargs, benchmark, "shuffle_choices", False)):
        items = [item.shuffled(item_seed(seed, item.id)) for item in items]
    docs: list[dict[str, Any]] = []
    skipped = 0
    for item in items:
        if limit is not None and len(docs) // 2 >= int(limit):
            break
        plan = first_substitution(item, resources, config)
        if isinstance(plan, str):
            skipped += 1
            continue
        evidence = {"victim": plan.victim.text, "victim_letter": plan.victim.letter, "replacement":
                    plan.replacement, "distance": plan.distance_to_key, "anchor": str(plan.anchor["text"])}
        docs.append({**item_to_doc(clean_item(item)), "variant": "clean", **evidence})
        docs.append({**item_to_doc(plan.item), "variant": "attacked", **evidence})
    log.info("tces %s/%s: %d items with a %s entity in a distractor, %d without (left out)", benchmark, entity,
             len(docs) // 2, entity, skipped)
    if not docs:
        raise ValueError(f"tces {benchmark}/{entity}: no item has a {entity} entity in a distractor")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def tces_medqa_drugs_docs(**kwargs: Any):
    return tces_docs("medqa", "drugs", **kwargs)


def tces_medqa_diseases_docs(**kwargs: Any):
    return tces_docs("medqa", "diseases", **kwargs)


def tces_medmcqa_drugs_docs(**kwargs: Any):
    return tces_docs("medmcqa", "drugs", **kwargs)


def tces_medmcqa_diseases_docs(**kwargs: Any):
    return tces_docs("medmcqa", "diseases", **kwargs)


def process_results(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    """The model's pick is the letter with the highest log-likelihood; every metric gets the same record and its
    aggregation selects what it needs."""
    loglikelihoods = [float(result[0]) for result in results]
    predicted = max(range(len(loglikelihoods)), key=loglikelihoods.__getitem__)
    record = {"id": doc["id"], "variant": doc["variant"], "correct": predicted == doc["answer_index"]}
    return {"clean_acc": record, "attacked_acc": record, "flip_rate": record}


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def clean_accuracy(records: list[dict[str, Any]]) -> float:
    return _mean([r["correct"] for r in records if r["variant"] == "clean"])


def attacked_accuracy(records: list[dict[str, Any]]) -> float:
    return _mean([r["correct"] for r in records if r["variant"] == "attacked"])


def flip_rate(records: list[dict[str, Any]]) -> float:
    """ASR@1: among items answered correctly clean (and present in both variants), the share answered wrongly
    after the substitution."""
    clean = {r["id"]: r["correct"] for r in records if r["variant"] == "clean"}
    attacked = {r["id"]: r["correct"] for r in records if r["variant"] == "attacked"}
    paired = [item for item, correct in clean.items() if correct and item in attacked]
    return _mean([not attacked[item] for item in paired])
