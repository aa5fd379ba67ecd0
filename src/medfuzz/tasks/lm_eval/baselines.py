"""Hooks the lm-eval YAML tasks reference by module path (``!function medfuzz.tasks.lm_eval.baselines.x``).

lm-eval calls ``custom_dataset`` with ``--model_args`` merged with ``--metadata`` (and the task's own
metadata), so data options arrive as keyword arguments:

- ``data``: ``hf`` (default), ``demo`` or a file path, for every medfuzz task in the run;
  ``medqa_data`` / ``medmcqa_data`` override it per benchmark;
- ``split``, ``shuffle_choices`` (bool) and ``seed`` (int), likewise with ``medqa_`` / ``medmcqa_`` prefixes.
"""

from __future__ import annotations

from typing import Any

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.items import item_seed
from medfuzz.benchmarks.prompts import completion_prompt, format_question

GENERATE_INSTRUCTION = "Answer the following multiple choice question with the letter of the correct option only."


def _option(kwargs: dict[str, Any], benchmark: str, name: str, default: Any) -> Any:
    return kwargs.get(f"{benchmark}_{name}", kwargs.get(name, default))


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


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
        "generate_prompt": f"{GENERATE_INSTRUCTION}\n\n{format_question(item)}\n\nAnswer:",
    }


def benchmark_docs(benchmark: str, **kwargs: Any):
    """A ``DatasetDict`` with one ``test`` split of docs for ``benchmark``."""
    import datasets

    data = str(_option(kwargs, benchmark, "data", "hf"))
    split = _option(kwargs, benchmark, "split", None)
    items = load_items(benchmark, data, split)
    if _as_bool(_option(kwargs, benchmark, "shuffle_choices", False)):
        seed = int(_option(kwargs, benchmark, "seed", 0))
        items = [item.shuffled(item_seed(seed, item.id)) for item in items]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list([item_to_doc(i) for i in items])})


def medqa_docs(**kwargs: Any):
    return benchmark_docs("medqa", **kwargs)


def medmcqa_docs(**kwargs: Any):
    return benchmark_docs("medmcqa", **kwargs)
