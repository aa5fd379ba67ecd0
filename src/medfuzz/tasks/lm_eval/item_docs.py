"""What every medfuzz lm-eval hook shares: reading options, loading items, turning an item into a doc.

lm-eval calls a task's ``custom_dataset`` hook with ``--metadata`` merged with ``--model_args`` and the
task's own ``dataset_kwargs`` (which fix the benchmark, the entity type or the aspect per task). The options
are read by ``medfuzz.tasks.lm_eval.hook_options.read_options`` (known names only; prefixes aim an option at one
task family or benchmark). Method parameters go through the method's config (``*.from_options``), with the
same names and defaults as the Inspect tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medfuzz.benchmarks import LoadedData, MCQItem
from medfuzz.benchmarks.prompts import completion_prompt, letter_prompt
from medfuzz.benchmarks.selection import DataSelection


def selection(options: Mapping[str, Any]) -> DataSelection:
    """The ``DataSelection`` of a hook's options (its names, defaults and checks: the Inspect tasks' own)."""
    return DataSelection.from_options(**{k: v for k, v in options.items() if k in DataSelection.names()})


def benchmark_data(benchmark: str, options: Mapping[str, Any], *, apply_limit: bool = True) -> LoadedData:
    """Items of ``benchmark`` selected by the options (``DataSelection``: ``data``, ``split``, ``limit``,
    ``shuffle_choices``, seeded by item id with ``seed``, as in Inspect; ``columns``, ``data_name``) and their
    ``DataRecord``. ``apply_limit=False``: every item, for a hook whose ``limit`` counts its docs."""
    seed = int(options.get("seed") or 0)
    return selection(options).load(benchmark, seed, apply_limit=apply_limit)


def benchmark_items(benchmark: str, options: Mapping[str, Any], *, apply_limit: bool = True) -> list[MCQItem]:
    """``benchmark_data``'s items."""
    return benchmark_data(benchmark, options, apply_limit=apply_limit).items


def item_to_doc(item: MCQItem, data_name: str = "") -> dict[str, Any]:
    """A flat lm-eval doc; prompts are built here so every variant shows the same cleaned text. ``data_name``:
    the data's name (``DataRecord.name``), which ``--log_samples`` records with every doc."""
    return {
        "id": item.id,
        "data_name": data_name,
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
