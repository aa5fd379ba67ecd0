"""Items to Inspect samples (the only place the question-based tasks touch Inspect's dataset types), and what a
task records about its data."""

from __future__ import annotations

from typing import Any

from inspect_ai.dataset import MemoryDataset, Sample

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.records.keys import DATA_SOURCE


def item_to_sample(item: MCQItem) -> Sample:
    options = item.clean_options()
    return Sample(
        id=item.id,
        input=item.clean_question(),
        choices=list(options.values()),
        target=item.answer,
        metadata={"item": item.to_record()},
    )


def selected_dataset(benchmark: str, selection: DataSelection, seed: int) -> tuple[MemoryDataset, dict[str, Any]]:
    """The selected items as samples (options shuffled per item when asked, seeded by item id: the same order in
    every harness), and the task metadata that says what they are: the benchmark, the selection as given, the
    data's name and its ``DataRecord`` record (``data_source``: title, Hub id, licence, split, layout, items)."""
    loaded = selection.load(benchmark, seed)
    source = loaded.source
    dataset = MemoryDataset([item_to_sample(item) for item in loaded.items], name=f"{benchmark}:{source.name}")
    metadata = {"benchmark": benchmark, "data": selection.data, "split": selection.split,
                "shuffle_choices": selection.shuffle_choices, "columns": selection.columns,
                "data_name": source.name, DATA_SOURCE: source.record()}
    return dataset, metadata


def mcq_dataset(benchmark: str, selection: DataSelection, seed: int) -> MemoryDataset:
    """``selected_dataset``'s samples."""
    return selected_dataset(benchmark, selection, seed)[0]
