"""Items to Inspect samples (the only place the baseline tasks touch Inspect's dataset types)."""

from __future__ import annotations

from inspect_ai.dataset import MemoryDataset, Sample

from medfuzz.benchmarks import MCQItem
from medfuzz.benchmarks.selection import DataSelection


def item_to_sample(item: MCQItem) -> Sample:
    options = item.clean_options()
    return Sample(
        id=item.id,
        input=item.clean_question(),
        choices=list(options.values()),
        target=item.answer,
        metadata={"item": item.to_record()},
    )


def mcq_dataset(benchmark: str, selection: DataSelection, seed: int) -> MemoryDataset:
    """The selected items as samples (options shuffled per item when asked, seeded by item id: the same order in
    every harness)."""
    return MemoryDataset([item_to_sample(item) for item in selection.items(benchmark, seed)],
                         name=f"{benchmark}:{selection.data}")
