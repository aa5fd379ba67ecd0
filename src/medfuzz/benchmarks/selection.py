"""Which benchmark items a run uses: the one owner of the data-selection parameters (names, types, defaults,
meaning) that every Inspect task (``-T data=... -T split=... -T limit=... -T shuffle_choices=...``), every
lm-eval hook (``--metadata``) and the docs tables read. ``DataSelection.from_options(**raw)`` converts and
checks raw values like the method configs do (``medfuzz.options``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from medfuzz.benchmarks.items import MCQItem, item_seed
from medfuzz.benchmarks.loaders import load_items
from medfuzz.options import MethodConfig, check

# the split a benchmark's clean baseline names in its task signature (what its loader reads without one)
DEFAULT_SPLITS = {"medqa": "test", "medmcqa": "validation"}
# the split of the Hugging Face release that few-shot examples come from when a run evaluates another one (the
# split lm-eval's own medqa_4options / medmcqa tasks draw them from); medfuzz.tasks.lm_eval.fewshot
FEWSHOT_SPLITS = {"medqa": "train", "medmcqa": "train"}


@dataclass(frozen=True)
class DataSelection(MethodConfig):
    """The items of one benchmark a run uses."""

    LABEL: ClassVar[str] = "data selection"
    DOCS: ClassVar[dict[str, str]] = {
        "data": "hf (the Hugging Face release) | demo (50 bundled dev items) | a file in the original release layout",
        "split": "the split to read (none: the benchmark's own, MedQA test, MedMCQA validation)",
        "limit": "the first N items (none: all)",
        "shuffle_choices": "shuffle each item's options, seeded by the item id and the run's seed (the same order "
                           "in both harnesses)",
    }

    data: str = "hf"
    split: str | None = None
    limit: int | None = None
    shuffle_choices: bool = False

    def __post_init__(self) -> None:
        check(bool(self.data.strip()), "data must name a source: hf, demo or a file")

    def items(self, benchmark: str, seed: int, *, apply_limit: bool = True) -> list[MCQItem]:
        """The selected items (options shuffled per item when ``shuffle_choices``). ``apply_limit=False``: all of
        them, for a caller whose ``limit`` counts something else (lm-eval TCES counts docs with an entity)."""
        items = load_items(benchmark, self.data, self.split, self.limit if apply_limit else None)
        if self.shuffle_choices:
            items = [item.shuffled(item_seed(seed, item.id)) for item in items]
        return items


DEFAULT = DataSelection()  # the defaults the task signatures show (Inspect reads a task's parameters from them)
