"""Hook of the clean baseline tasks ``<benchmark>_clean`` (``medqa_clean``, ``medmcqa_clean``, ``mcq_clean`` for
your own data: every benchmark of ``benchmarks.registry``) and their ``_generate`` variants.

Options (``--metadata``): ``data`` (hf | demo | a file | hf:OWNER/NAME), ``split``, ``columns`` (a column
mapping), ``data_name``, ``shuffle_choices``, ``seed``, ``limit`` (first N items), each also as
``<benchmark>_<name>`` for one benchmark or ``clean_<name>`` for the clean baselines only; an unknown name stops
the run (``medfuzz.tasks.lm_eval.hook_options``). The benchmark itself comes from the task's ``dataset_kwargs``
(``task_benchmark``).
"""

from __future__ import annotations

from typing import Any

from medfuzz.tasks.lm_eval import fewshot
from medfuzz.tasks.lm_eval.hook_options import read_options
from medfuzz.tasks.lm_eval.item_docs import benchmark_data, dataset, item_to_doc, selection


def clean_docs(task_benchmark: str, **kwargs: Any):
    """Every item of the task's benchmark as one doc (the first ``limit`` items when given; ``clean_limit``
    aims it at the baselines only, unlike lm-eval's ``--limit``, which cuts every task of the run)."""
    options = read_options(kwargs, "clean", task=f"{task_benchmark}_clean", benchmark=task_benchmark)
    shots = fewshot.source("clean", task_benchmark, selection(options), int(options.get("seed") or 0))
    loaded = benchmark_data(task_benchmark, options)
    return dataset(fewshot.with_source([item_to_doc(item, loaded.source.name) for item in loaded.items], shots))
