"""What every medfuzz lm-eval hook shares: reading options, loading items, turning an item into a doc.

lm-eval calls a task's ``custom_dataset`` hook with ``--metadata`` merged with ``--model_args`` and the
task's own ``dataset_kwargs`` (which fix the benchmark, the entity type or the aspect per task). One
``--metadata`` reaches every task of a run, so an option may be prefixed with the task family or the
benchmark to aim it at one (``medqa_data``, ``tces_sampler``, ``medguard_seed``): the prefixed value wins over
the plain one. Method parameters go through the method's config (``*.from_options``), with the same names
and defaults as the Inspect tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.benchmarks.prompts import completion_prompt, letter_prompt
from medfuzz.options import ConfigError, as_bool


def scoped(kwargs: Mapping[str, Any], *prefixes: str) -> dict[str, Any]:
    """The options with ``<prefix>_name`` folded onto ``name``; later prefixes win over earlier ones."""
    options = {k: v for k, v in kwargs.items()}
    for prefix in prefixes:
        for key, value in kwargs.items():
            if key.startswith(f"{prefix}_"):
                options[key[len(prefix) + 1:]] = value
    return options


def strict_scoped(kwargs: Mapping[str, Any], prefix: str, known: Sequence[str]) -> None:
    """An option aimed at a task family by its prefix must be one it knows (plain names may belong to others)."""
    for key in kwargs:
        if key.startswith(f"{prefix}_") and key[len(prefix) + 1:] not in known:
            raise ConfigError(f"unknown {prefix} option {key!r}; known: {', '.join(sorted(known))}")


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
