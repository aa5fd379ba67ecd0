"""What every medfuzz lm-eval hook shares: reading options, loading items, turning an item into a doc.

lm-eval calls a task's ``custom_dataset`` hook with ``--metadata`` merged with ``--model_args`` and the
task's own ``dataset_kwargs`` (which fix the benchmark, the entity type or the aspect per task). The options
are read by ``medfuzz.tasks.lm_eval._options.read_options`` (known names only; prefixes aim an option at one
task family or benchmark). Method parameters go through the method's config (``*.from_options``), with the
same names and defaults as the Inspect tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.benchmarks.prompts import completion_prompt, letter_prompt
from medfuzz.options import as_bool


def benchmark_items(benchmark: str, options: Mapping[str, Any]) -> list[MCQItem]:
    """Items of ``benchmark`` from ``data`` (hf | demo | a file) and ``split``, options shuffled per item when
    ``shuffle_choices`` (seeded by item id with ``seed``, as in Inspect)."""
    items = load_items(benchmark, str(options.get("data", "hf")), options.get("split") or None)
    if as_bool(options.get("shuffle_choices", False), "shuffle_choices"):
        seed = int(options.get("seed", 0))
        items = [item.shuffled(item_seed(seed, item.id)) for item in items]
    return items


def item_to_doc(item: MCQItem) -> dict[str, Any]:
    """A flat lm-eval doc; prompts are built here so every variant shows the same cleaned text."""
    return {
        "id": item.id,
        "question": item.clean_question(),
        "choices": list(item.clean_options().values()),
        "letters": item.letters,
        "answer": item.answer,
        "answer_index": item.answer_index,
        "prompt": completion_prompt(item),
        "generate_prompt": letter_prompt(item),
    }


def dataset(docs: list[dict[str, Any]]):
    """A ``DatasetDict`` with one ``test`` split, as every medfuzz YAML expects."""
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
