"""Where the few-shot examples of every medfuzz lm-eval task come from: never the evaluated item itself.

lm-eval 0.4.13 draws ``--num_fewshot`` examples from a task's ``fewshot_split``; with none declared (and no
training or validation split) it draws from the evaluated docs, and it leaves the evaluated doc out only when
the few-shot split *is* the test split (``api/task.py``, ``fewshot_context``). A doc is one item's question in
the clean baselines and TCES, but one *replicate* of an item in MedFuzz and one consistency *unit* of a case in
MedGuard's equity aspects, so leaving out the doc itself still shows a model its own question and answer
through a sibling doc. Every medfuzz YAML therefore declares ``fewshot_split: test`` (so lm-eval hands the
evaluated doc to the sampler) and this sampler (``fewshot_config.sampler``), which

- draws from a split disjoint from the evaluated items where the benchmark has one, as lm-eval's own
  ``medqa_4options`` does (``data=hf``: the benchmark's ``fewshot_split`` in ``benchmarks.registry``, MedQA and
  MedMCQA ``train``, when the run evaluates another split; the hook names it in each doc's ``fewshot_source``,
  and the split is read only when a run asks for examples), built into docs of the task's own shape;
- else draws from the evaluated docs, one per item (``leak_key``: the item id, MedFuzz's ``item_id`` over its
  replicates, MedGuard's ``case_id`` over a case's units and ``source_id`` over the items made from one
  question), leaving out every doc of the evaluated item and the docs that hold no answered question (a MedFuzz
  replicate that ended as an LLM error).

The draw is lm-eval's own: ``rnd.sample`` with the task's few-shot seed (``--seed``'s third value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from lm_eval.api.samplers import ContextSampler

from medfuzz.benchmarks import registry
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.errors import MedfuzzError

FEWSHOT_SOURCE = "fewshot_source"  # the doc field naming a disjoint split ("" for the evaluated docs)


def leak_key(doc: Mapping[str, Any]) -> str:
    """The item a doc shows: docs with one key must never be each other's examples."""
    for field in ("case_id", "source_id", "item_id"):
        if doc.get(field):
            return str(doc[field])
    return str(doc["id"])


def usable(doc: Mapping[str, Any]) -> bool:
    """Whether a doc holds an answered question (a MedFuzz replicate that was not scored holds none)."""
    return bool(doc.get("scored", True)) and int(doc.get("n_options", 1)) > 0


def source(family: str, benchmark: str, selection: DataSelection, seed: int) -> str:
    """A doc's ``fewshot_source``: the disjoint split examples come from, as JSON, or "" (the evaluated docs)
    when the data has none (the bundled demo rows, a user's file) or the run evaluates that split itself."""
    declared = registry.get(benchmark)
    split, evaluated = declared.fewshot_split, selection.split or declared.default_split
    if selection.data != "hf" or split is None or split == evaluated:
        return ""
    return json.dumps({"family": family, "benchmark": benchmark, "split": split,
                       "shuffle_choices": selection.shuffle_choices, "seed": seed}, sort_keys=True)


def with_source(docs: Sequence[dict[str, Any]], value: str) -> list[dict[str, Any]]:
    return [{**doc, FEWSHOT_SOURCE: value} for doc in docs]


@cache
def _split_docs(value: str) -> tuple[dict[str, Any], ...]:
    """The docs of a disjoint split, in the shape of the task family's docs (read once per process)."""
    spec = json.loads(value)
    chosen = DataSelection(data="hf", split=spec["split"], shuffle_choices=bool(spec["shuffle_choices"]))
    items = chosen.items(spec["benchmark"], int(spec["seed"]))
    return tuple(_shape(spec["family"], item) for item in items)


def _shape(family: str, item: Any) -> dict[str, Any]:
    from medfuzz.benchmarks.prompts import completion_prompt
    from medfuzz.records.lm_eval_docs import versions_doc
    from medfuzz.tasks.lm_eval.item_docs import item_to_doc

    doc = item_to_doc(item)
    if family == "clean":
        return doc
    if family == "tces":  # one version: the shot reads "prompt letter", as the clean version of a TCES doc does
        return {**doc, **versions_doc([completion_prompt(item)], item.letters)}
    raise MedfuzzError(f"no disjoint few-shot split for task family {family!r}")


class ItemDisjointSampler(ContextSampler):
    """lm-eval's default sampler with the evaluated *item* left out (see the module docstring)."""

    def __init__(self, df: Sequence[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(df, **kwargs)
        self._pool: list[dict[str, Any]] | None = None
        self._keys: set[str] = set()

    def fewshot_docs(self) -> list[dict[str, Any]]:
        if self._pool is None:
            docs = list(self.df)
            split = next((str(d.get(FEWSHOT_SOURCE) or "") for d in docs), "")
            candidates = list(_split_docs(split)) if split else [d for d in docs if usable(d)]
            self._pool = []
            for doc in candidates:  # one doc per item: an item's replicates or units are one example
                if (key := leak_key(doc)) not in self._keys:
                    self._keys.add(key)
                    self._pool.append(doc)
        return self._pool

    def sample(self, n: int, eval_doc: dict[str, Any] | None = None, df: Any = None,
               **kwargs: Any) -> list[dict[str, Any]]:
        if n <= 0:
            return []
        pool = self.fewshot_docs()
        # at most one pool doc has the evaluated item's key (one per item), so n + 1 draws leave n others:
        # lm-eval's own way of leaving out the evaluated doc, at the item level
        key = leak_key(eval_doc) if eval_doc is not None else None
        available = len(pool) - (key in self._keys)
        if n > available:
            raise MedfuzzError(f"--num_fewshot {n}: only {available} other item(s) can be examples here "
                               "(an item is never an example for itself)")
        drawn = self.rnd.sample(pool, min(n + 1, len(pool)))
        return [d for d in drawn if key is None or leak_key(d) != key][:n]
