"""Benchmark items, the benchmark registry (``registry``), loaders and prompt-time text cleaning."""

from medfuzz.benchmarks.cleaning import clean_text
from medfuzz.benchmarks.items import LETTERS, MCQItem
from medfuzz.benchmarks.loaders import (
    DEMO_MEDMCQA,
    DEMO_MEDQA,
    ColumnMap,
    LoadedData,
    load_data,
    load_items,
    load_local,
    load_medmcqa,
    load_medqa,
)
from medfuzz.benchmarks.prompts import PromptStyle, format_question

__all__ = [
    "DEMO_MEDMCQA",
    "DEMO_MEDQA",
    "LETTERS",
    "ColumnMap",
    "LoadedData",
    "MCQItem",
    "PromptStyle",
    "clean_text",
    "format_question",
    "load_data",
    "load_items",
    "load_local",
    "load_medmcqa",
    "load_medqa",
]
