"""Items to Inspect samples (the only place the baseline tasks touch Inspect's dataset types)."""

from __future__ import annotations

from inspect_ai.dataset import MemoryDataset, Sample

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.items import item_seed


def item_to_sample(item: MCQItem) -> Sample:
    options = item.clean_options()
    return Sample(
        id=item.id,
        input=item.clean_question(),
        choices=list(options.values()),
        target=item.answer,
        metadata={"item": item.to_record()},
    )


def mcq_dataset(
    benchmark: str,
    data: str,
    split: str | None,
    limit: int | None,
    shuffle_choices: bool,
    seed: int,
) -> MemoryDataset:
    """Load, optionally shuffle options per item (seeded by item id, so the same in every harness)."""
    items = load_items(benchmark, data, split, limit)
    if shuffle_choices:
        items = [item.shuffled(item_seed(seed, item.id)) for item in items]
    return MemoryDataset([item_to_sample(item) for item in items], name=f"{benchmark}:{data}")
