"""Which benchmark items a run uses: the one owner of the data-selection parameters (names, types, defaults,
meaning) that every Inspect task (``-T data=... -T split=... -T limit=... -T shuffle_choices=... -T columns=...
-T data_name=...``), every lm-eval hook (``--metadata``) and the docs tables read.
``DataSelection.from_options(**raw)`` converts and checks raw values like the method configs do
(``medfuzz.options``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from medfuzz.benchmarks.columns import columns_text, parse_columns
from medfuzz.benchmarks.items import MCQItem, item_seed
from medfuzz.benchmarks.loaders import LoadedData, load_data
from medfuzz.options import MethodConfig, check


@dataclass(frozen=True)
class DataSelection(MethodConfig):
    """The items of one benchmark a run uses."""

    LABEL: ClassVar[str] = "data selection"
    DOCS: ClassVar[dict[str, str]] = {
        "data": "hf (the benchmark's Hugging Face release) | demo (50 bundled dev items) | a .jsonl/.json/.csv/"
                ".parquet file in any layout medfuzz reads (docs/usage.md, Your own benchmark) | hf:OWNER/NAME (a "
                "Hugging Face dataset)",
        "split": "the Hugging Face split to read (none: the benchmark's own, MedQA test, MedMCQA validation)",
        "limit": "the first N items (none: all)",
        "shuffle_choices": "shuffle each item's options, seeded by the item id and the run's seed (the same order "
                           "in both harnesses)",
        "columns": "a column mapping for a file in another layout: question:COL,options:COL|COL|...,answer:COL"
                   "[,answer_format:letter|index0|index1|text|auto][,id:COL][,metadata:COL|...] or the same as JSON "
                   "(none: the layout is found from the first row)",
        "data_name": "the data's name in the logs, the report and the card (none: the file's stem, the Hub "
                     "dataset's name, or the benchmark's)",
    }

    data: str = "hf"
    split: str | None = None
    limit: int | None = None
    shuffle_choices: bool = False
    columns: str | None = None
    data_name: str | None = None

    def __post_init__(self) -> None:
        check(bool(self.data.strip()), "data must name a source: hf, demo or a file")
        # checked (a bad mapping stops the run before any item is read) and kept in its text form (the task args)
        object.__setattr__(self, "columns", columns_text(self.columns))
        check(self.data_name is None or bool(self.data_name.strip()), "data_name must not be empty")

    def load(self, benchmark: str, seed: int, *, apply_limit: bool = True) -> LoadedData:
        """The selected items (options shuffled per item when ``shuffle_choices``) and their ``DataRecord``.
        ``apply_limit=False``: all of them, for a caller whose ``limit`` counts something else (lm-eval TCES
        counts docs with an entity)."""
        loaded = load_data(benchmark, self.data, self.split, self.limit if apply_limit else None,
                           parse_columns(self.columns), self.data_name)
        if self.shuffle_choices:
            loaded = replace(loaded, items=[item.shuffled(item_seed(seed, item.id)) for item in loaded.items])
        return loaded

    def pool(self, benchmark: str, data: str) -> list[MCQItem]:
        """Every item of another source of the benchmark (MedFuzz's exemplars: ``exemplar_data``). ``demo`` on a
        benchmark without bundled items (your own data, ``mcq``) is this selection's own data, whole (a draw
        never shows an item itself); this selection's columns apply to its own data only."""
        from medfuzz.benchmarks import registry

        own = data == self.data or (data == "demo" and registry.get(benchmark).demo is None)
        if own:
            return load_data(benchmark, self.data, self.split, None, parse_columns(self.columns)).items
        return load_data(benchmark, data).items

    def items(self, benchmark: str, seed: int, *, apply_limit: bool = True) -> list[MCQItem]:
        """``load``'s items."""
        return self.load(benchmark, seed, apply_limit=apply_limit).items


DEFAULT = DataSelection()  # the defaults the task signatures show (Inspect reads a task's parameters from them)
