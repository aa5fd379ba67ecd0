"""Hook of the single-query (B = 1) TCES transform tasks ``tces_<benchmark>_{drugs,diseases}`` (every benchmark of
``benchmarks.registry``: ``tces_medqa_drugs``, ``tces_mcq_diseases`` for your own data, ...).

lm-eval cannot query the model while it builds a dataset, so the transform is model-free: for every item with
an entity of the type in a distractor, the victim is replaced by the entity RandS/PDWS draws first (the same
draw as the Inspect attack's first query with the same seed). Each such item is one doc holding both versions
(``medfuzz.records.lm_eval_docs.versions_doc``: the clean and the attacked prompt, each followed by every
letter, after their shared beginning), so one doc gives the pair (correct clean, correct attacked) and the
metrics are per-doc values that lm-eval's own ``mean`` aggregates, with lm-eval's standard errors:
``clean_acc`` (mean of c), ``attacked_acc`` (mean of c and a: an item answered wrongly clean is not attacked
and stays wrong, as in the Inspect task) and ``flip_rate`` (ASR@1: not a, returned only where c).
Items without an entity are left out (the paper's drug-/disease-mention subsets): how many were attackable is
logged, and why each other item was not (``solvers.tces.attack.log_attackable``).
lm-eval's ``--limit`` counts items (one doc each).

Options (``--metadata``): the ``TCESConfig`` parameters lm-eval can use, with the Inspect task's names and
defaults (``sampler`` rands | pdws, ``n``, ``embedding``, ``vocabulary``, ``seed``), each also as ``tces_<name>``
(which wins); ``drugs_vocabulary`` / ``diseases_vocabulary`` per entity type; the data options ``data``,
``split``, ``columns``, ``data_name``, ``shuffle_choices`` (also ``<benchmark>_<name>``) and ``limit`` (items).
Names that exist only in Inspect (``budget``, ``zoo_*``, ``max_tokens``, ...) are refused with the reason, unknown names
stop the run (``medfuzz.tasks.lm_eval.hook_options``). The benchmark and entity type come from the task's
``dataset_kwargs``.

Building a doc runs ``first_substitution`` (embedding and sampling) on an item, so the hook builds only the docs a
run evaluates: ``limit`` when given, else lm-eval's own integer ``--limit`` (read from the ``simple_evaluate``
call, since lm-eval does not pass it to a ``custom_dataset`` hook and keeps the first N built docs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.records.lm_eval_docs import versions_correct, versions_doc
from medfuzz.solvers.tces.attack import TCESResources, clean_item, first_substitution, log_attackable
from medfuzz.solvers.tces.config import TCESConfig
from medfuzz.tasks.lm_eval import fewshot
from medfuzz.tasks.lm_eval.hook_options import lm_eval_doc_limit, read_options
from medfuzz.tasks.lm_eval.item_docs import benchmark_data, dataset, item_to_doc, selection

log = logging.getLogger(__name__)


def tces_docs(task_benchmark: str, task_entity: str, **kwargs: Any):
    """One doc (clean and once-substituted version) per item with a ``task_entity`` entity in a distractor."""
    options = read_options(kwargs, "tces", task=f"tces_{task_benchmark}_{task_entity}", benchmark=task_benchmark)
    vocabulary = options.get(f"{task_entity}_vocabulary", options.get("vocabulary"))
    config = TCESConfig.from_options(ignore_unknown=True, **{**options, "entity": task_entity, "budget": 1,
                                                             "vocabulary": vocabulary})
    # counts docs (items with an entity), not the file's items; lm-eval's own --limit keeps the first N docs, so
    # building more would be paid for and thrown away (each doc embeds and samples a substitution)
    limit = selection(options).limit
    if limit is None:
        limit = lm_eval_doc_limit()
    resources = TCESResources.build(task_entity, config.vocabulary, config.embedding)
    docs: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    loaded = benchmark_data(task_benchmark, options, apply_limit=False)
    for item in loaded.items:
        if limit is not None and len(docs) >= limit:
            break
        plan = first_substitution(item, resources, config)
        if isinstance(plan, str):
            skipped[item.id] = plan
            continue
        clean = clean_item(item)
        prompts = [completion_prompt(clean), completion_prompt(plan.item)]
        docs.append({**item_to_doc(clean, loaded.source.name), "options": list(clean.clean_options().values()),
                     **versions_doc(prompts, clean.letters), "attacked_prompt": prompts[1],
                     "attacked_choices": list(plan.item.clean_options().values()), "victim": plan.victim.text,
                     "victim_letter": plan.victim.letter, "replacement": plan.replacement,
                     "distance": plan.distance_to_key, "anchor": str(plan.anchor["text"])})
    log_attackable(f"tces_{task_benchmark}_{task_entity} ({loaded.source.name})", len(docs) + len(skipped), skipped,
                   task_entity)
    if not docs:
        first = f"; the first: {next(iter(skipped.values()))}" if skipped else ""
        raise ValueError(f"tces_{task_benchmark}_{task_entity}: no item has a {task_entity} entity in a distractor "
                         f"({loaded.source.name}: {len(skipped)} items read{first})")
    return dataset(fewshot.with_source(docs, fewshot.source("tces", task_benchmark, selection(options),
                                                                 int(options.get("seed") or 0))))


def process_results(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, float]:
    """Per-doc values for lm-eval's ``mean``: ``clean_acc`` and ``attacked_acc`` on every doc, ``flip_rate`` only
    on the docs in its denominator (answered correctly clean; lm-eval 0.4.13 aggregates each metric over the docs
    that return it). Their means are ``medfuzz.stats.clean_accuracy`` / ``attacked_accuracy`` / ``flip_rate`` over
    the items' (clean, attacked) pairs, and each gets lm-eval's closed-form standard error, sd / sqrt(n) over its
    own docs: a ``nanmean`` over NaN placeholders had none as soon as one doc was outside the denominator (a
    bootstrap resample of only such docs is NaN, and so is the SD of the resamples)."""
    clean, attacked = versions_correct(doc, results)
    values = {"clean_acc": float(clean), "attacked_acc": float(clean and attacked)}
    if clean:
        values["flip_rate"] = float(not attacked)
    return values
