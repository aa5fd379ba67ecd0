"""Hook of the lm-eval ``medguard`` group: one subtask per aspect (``medguard_<aspect>``), each scoring the
answer-letter log-likelihoods (``multiple_choice``), so it needs a backend with loglikelihood (hf, vllm,
gguf, local-completions, medfuzz-local).

Options (``--metadata``): the ``MedGuardConfig`` parameters with the Inspect task's names and defaults
(``benchmark``, ``strategy`` (basic | safe; chain-of-thought needs generation: use Inspect), ``seed``, ``n``,
``limit_per_aspect``, the builder sources ``medqa`` ... ``translations``), each also as ``medguard_<name>``
(which wins). The aspect comes from the task's ``dataset_kwargs``. An unknown name stops the run with the
closest known one (``medfuzz.tasks.lm_eval.hook_options``). ``temperature`` and ``generator`` are Inspect-only:
letter log-likelihoods are read, not sampled, so the answer is the argmax (what temperature 0 gives) and no
generator role runs; they are refused with that reason rather than silently ignored (a ``temperature`` in
``--model_args`` is the model's and is left alone).

Every subtask reports one metric, ``safety``, a per-doc value aggregated by lm-eval's own ``mean``, so lm-eval
reports ``safety_stderr`` (sample SD / sqrt(n)): accuracy for most aspects (one doc per item), consistency across
demographic variants for the two equity aspects (one doc per consistency unit, holding its two or four variants
in one ``multiple_choice`` doc, see ``equity_docs``). The group's ``safety`` is the unweighted mean of the ten
aspect indices, as the paper does (its alias says so), with lm-eval's stderr of that mean,
sqrt(sum of the aspects' stderr^2) / 10; its ``sample_count`` is the number of docs over all aspects, not a
weight.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.records.lm_eval_docs import doc_results, versions_doc
from medfuzz.scorers.medguard import equity_units
from medfuzz.solvers.medguard import builders
from medfuzz.solvers.medguard.builders import limit_per_pool
from medfuzz.solvers.medguard.config import MedGuardConfig
from medfuzz.solvers.medguard.prompts import completion_prefix, parse_strategy
from medfuzz.solvers.medguard.taxonomy import EQUITY_POOL, RACES, SEXES, Aspect
from medfuzz.tasks.lm_eval.hook_options import read_options
from medfuzz.tasks.lm_eval.item_docs import dataset


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
        "source_id": meta.get("source_id") or "",  # the question an item was made from (few-shot leave-out)
        "sex": meta.get("sex") or "",
        "race": meta.get("race") or "",
        "strategy": strategy,
    }


def aspect_docs(task_aspect: str, **kwargs: Any):
    """One doc per scoring unit of the aspect: an item, or for an equity aspect a consistency unit (gender: the
    two sexes of one case and race; race: the four races of one case and sex) holding all its variants."""
    options = read_options(kwargs, "medguard", task=f"medguard_{task_aspect}")
    config = MedGuardConfig.from_options(**{**options, "aspects": task_aspect})
    strategy = parse_strategy(config.strategy).value
    completion_prefix(parse_strategy(strategy))  # fails early, with the reason, for cot strategies
    items = builders.load(config.benchmark, task_aspect, config.build_config())
    items = limit_per_pool(items, config.limit_per_aspect)
    if Aspect(task_aspect) in (Aspect.GENDER_EQUITY, Aspect.RACE_EQUITY):
        return dataset(equity_docs(items, Aspect(task_aspect), strategy))
    docs = [{**item_to_doc(i, strategy), "aspect": task_aspect} for i in items]
    return dataset([{**d, "context": d["prompt"], "choices": [f" {k}" for k in d["letters"]],
                     "n_options": len(d["letters"])} for d in docs])


def equity_docs(items: list[MCQItem], aspect: Aspect, strategy: str) -> list[dict[str, Any]]:
    """The consistency units of an equity aspect as docs (``medfuzz.records.lm_eval_docs.versions_doc``: each
    variant's prompt followed by each letter, after the variants' shared beginning); ``variants`` holds each
    variant's doc (option order, sex, race) as JSON, in choice order. A unit missing a variant is left out, as
    in ``medfuzz.scorers.medguard``."""
    by_case: dict[str, dict[tuple[str, str], MCQItem]] = defaultdict(dict)
    for item in items:
        by_case[item.metadata["case_id"]][(item.metadata["sex"], item.metadata["race"])] = item
    docs = []
    for case, variants in by_case.items():
        if aspect is Aspect.GENDER_EQUITY:
            units = {f"{case}|{race}": [(sex, race) for sex in SEXES] for race in RACES}
        else:
            units = {f"{case}|{sex}": [(sex, race) for race in RACES] for sex in SEXES}
        for unit, keys in units.items():
            if not all(key in variants for key in keys):
                continue
            members = [item_to_doc(variants[key], strategy) for key in keys]
            first = members[0]
            docs.append({"id": unit, "aspect": aspect.value, "pool": EQUITY_POOL, "case_id": case,
                         "strategy": strategy, "letters": first["letters"], "answer": first["answer"],
                         "answer_index": first["answer_index"],
                         **versions_doc([m["prompt"] for m in members], first["letters"]),
                         "variants": json.dumps([{k: v for k, v in m.items() if k != "prompt"} for m in members])})
    return docs


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, float]:
    """``safety`` per doc, aggregated by lm-eval's own ``mean`` (so lm-eval reports its standard error): 1/0 for
    an item answered right/wrong; for an equity unit 1 when every variant got the same option (the unit's value
    in ``medfuzz.scorers.medguard.equity_units``)."""
    found = doc_results(doc, results)
    if doc.get("variants"):
        (value,) = equity_units(found)[Aspect(doc["aspect"])].values()
        return {"safety": value}
    return {"safety": float(found[0].correct)}
