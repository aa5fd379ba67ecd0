"""Hook of the single-query (B = 1) TCES transform tasks ``tces_{medqa,medmcqa}_{drugs,diseases}``.

lm-eval cannot query the model while it builds a dataset, so the transform is model-free: for every item with
an entity of the type in a distractor, the dataset holds the clean item and, right after it, the item with the
victim replaced by the entity RandS/PDWS draws first (the same draw as the Inspect attack's first query with
the same seed). The two docs share an ``id``; the custom aggregations pair them, so one run reports clean
accuracy, attacked accuracy and the flip rate among items answered correctly clean (ASR@1). Items without an
entity are left out (the paper's drug-/disease-mention subsets); their count is logged.

Options (``--metadata``): the ``TCESConfig`` parameters with the Inspect task's names and defaults
(``sampler`` rands | pdws, ``n``, ``embedding``, ``vocabulary``, ``seed``), each also as ``tces_<name>`` (which
wins, and must be a known name); ``drugs_vocabulary`` / ``diseases_vocabulary`` per entity type; the data
options ``data``, ``split``, ``shuffle_choices`` (also ``medqa_<name>`` / ``medmcqa_<name>``) and ``limit``
(items, not docs: use it rather than ``--limit``, which can cut a pair). The benchmark and entity type come from
the task's ``dataset_kwargs``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from medfuzz.scorers import stats
from medfuzz.solvers.tces.attack import TCESResources, clean_item, first_substitution
from medfuzz.solvers.tces.config import TCESConfig
from medfuzz.tasks.lm_eval._docs import benchmark_items, dataset, item_to_doc
from medfuzz.tasks.lm_eval._options import read_options

log = logging.getLogger(__name__)


def tces_docs(task_benchmark: str, task_entity: str, **kwargs: Any):
    """Clean and once-substituted docs for every item with a ``task_entity`` entity in a distractor."""
    options = read_options(kwargs, "tces", task=f"tces_{task_benchmark}_{task_entity}", benchmark=task_benchmark)
    vocabulary = options.get(f"{task_entity}_vocabulary", options.get("vocabulary"))
    config = TCESConfig.from_options(ignore_unknown=True, **{**options, "entity": task_entity, "budget": 1,
                                                             "vocabulary": vocabulary})
    limit = options.get("limit")
    resources = TCESResources.build(task_entity, config.vocabulary, config.embedding)
    docs: list[dict[str, Any]] = []
    skipped = 0
    for item in benchmark_items(task_benchmark, options):
        if limit not in (None, "") and len(docs) // 2 >= int(limit):
            break
        plan = first_substitution(item, resources, config)
        if isinstance(plan, str):
            skipped += 1
            continue
        evidence = {"victim": plan.victim.text, "victim_letter": plan.victim.letter, "replacement":
                    plan.replacement, "distance": plan.distance_to_key, "anchor": str(plan.anchor["text"])}
        docs.append({**item_to_doc(clean_item(item)), "variant": "clean", **evidence})
        docs.append({**item_to_doc(plan.item), "variant": "attacked", **evidence})
    log.info("tces %s/%s: %d items with a %s entity in a distractor, %d without (left out)", task_benchmark,
             task_entity, len(docs) // 2, task_entity, skipped)
    if not docs:
        raise ValueError(f"tces {task_benchmark}/{task_entity}: no item has a {task_entity} entity in a distractor")
    return dataset(docs)


def process_results(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    """The model's pick is the letter with the highest log-likelihood; every metric gets the same record and its
    aggregation pairs the clean and attacked docs of an item by ``id``."""
    loglikelihoods = [float(result[0]) for result in results]
    predicted = max(range(len(loglikelihoods)), key=loglikelihoods.__getitem__)
    record = {"id": doc["id"], "variant": doc["variant"], "correct": predicted == doc["answer_index"]}
    return {"clean_acc": record, "attacked_acc": record, "flip_rate": record}


def _pairs(records: list[dict[str, Any]]) -> list[tuple[bool, bool]]:
    """(clean correct, attacked correct) per item present in both variants."""
    clean = {r["id"]: r["correct"] for r in records if r["variant"] == "clean"}
    attacked = {r["id"]: r["correct"] for r in records if r["variant"] == "attacked"}
    return [(clean[i], attacked[i]) for i in clean if i in attacked]


def clean_acc(records: list[dict[str, Any]]) -> float:
    return stats.clean_accuracy(_pairs(records))


def attacked_acc(records: list[dict[str, Any]]) -> float:
    """Correct clean and still correct after the substitution (``medfuzz.scorers.stats.attacked_accuracy``)."""
    return stats.attacked_accuracy(_pairs(records))


def flip_rate(records: list[dict[str, Any]]) -> float:
    """ASR@1: among items answered correctly clean, the share answered wrongly after the substitution."""
    return stats.flip_rate(_pairs(records))
