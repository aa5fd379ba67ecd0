"""The benchmark registry: every multiple-choice benchmark medfuzz knows, each declared once.

A ``Benchmark`` holds what every layer may need to know about one benchmark: its key (which names its tasks,
``medfuzz/<key>_clean``, ``medfuzz/tces_<key>``, ``medfuzz/medfuzz_<key>`` in Inspect and ``<key>_clean``,
``tces_<key>_<entity>``, ``medfuzz_<key>`` in lm-eval, and prefixes its lm-eval options, ``<key>_data``), its
display name, its file layout (``benchmarks.columns``), its Hugging Face release (id, licence, splits, where
the Hub copy departs from the release layout), its bundled demo and its answer convention. The loaders
(``benchmarks.loaders``), the data selection and its few-shot split, the Inspect task variants, the lm-eval
hooks and task YAML, ``medfuzz run`` and ``medfuzz sweep`` read it; nothing else lists benchmarks.

``mcq`` is the user's own data: no release, no demo, any layout ``benchmarks.columns`` reads (or a column
mapping), from a file or a Hugging Face dataset id. Adding a benchmark is one ``register(Benchmark(...))`` here
plus the generated lm-eval YAML (docs/contributing.md, "Add a benchmark").

The report and model card read a run's data from the ``data_source`` record every task writes into its
metadata (``DataRecord.record``): the benchmark and its title, the data's name, where it came from (Hub id only
for the Hub), the split, the licence where known, the layout and the item count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medfuzz.options import ConfigError, did_you_mean

_DATA = Path(__file__).with_name("data")
KEY = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# words a benchmark key must not be: the lm-eval option prefixes of the method families, and lm-eval's own keys
RESERVED = frozenset({"clean", "tces", "medfuzz", "medguard", "ignore", "version", "config"})
OWN = "mcq"  # the user's own data
DEFAULT_BENCHMARK = "medqa"  # what a task, ``medfuzz run`` and ``medfuzz sweep`` run when none is named


@dataclass(frozen=True)
class Benchmark:
    """One benchmark, as every layer reads it (see the module docstring)."""

    key: str  # names its tasks and prefixes its lm-eval options
    title: str  # its display name ("MedQA-USMLE (4 options)")
    layout: str | None = None  # its release files' layout (a ``columns.LAYOUTS`` name), tried first on a file
    hub_id: str | None = None  # its Hugging Face copy, read by data=hf
    hub_columns: Mapping[str, Any] = field(default_factory=dict)  # where the Hub copy departs from ``layout``
    licence: str | None = None  # the licence of its release (SPDX id where there is one)
    default_split: str | None = None  # the Hub split read when none is given (its clean baseline's split)
    fewshot_split: str | None = None  # the Hub split few-shot examples come from when a run evaluates another
    demo: Path | None = None  # bundled sample items (data=demo)
    demo_split: str = "dev"  # the split the demo items were taken from
    id_prefix: str = "{key}-{part}"  # item ids without an id column: prefix-00001 (part: split, dev or file stem)
    answers: str = ""  # the answer convention, in words
    url: str = ""  # where the benchmark is described

    def __post_init__(self) -> None:
        if not KEY.match(self.key):
            raise ConfigError(f"benchmark key {self.key!r}: lower-case letters, digits and single underscores, "
                              "starting with a letter")
        if self.key in RESERVED:
            raise ConfigError(f"benchmark key {self.key!r} is reserved (an lm-eval option prefix)")

    def summary(self) -> dict[str, Any]:
        """Its declaration as plain data (JSON-ready: what a report or a listing shows)."""
        data = asdict(self)
        data["demo"] = self.demo.name if self.demo else None
        data["hub_columns"] = dict(self.hub_columns)
        return data


BENCHMARKS: dict[str, Benchmark] = {}
_listeners: list[tuple[Callable[[Benchmark], None], Callable[[Benchmark], None] | None]] = []


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark (or replace one of the same key); the task layers that listen build its tasks."""
    for other in BENCHMARKS:
        if other != benchmark.key and (other.startswith(benchmark.key + "_") or benchmark.key.startswith(other + "_")):
            raise ConfigError(f"benchmark key {benchmark.key!r} would be read as {other!r} plus a suffix in lm-eval "
                              f"option prefixes ({other}_data); choose another key")
    BENCHMARKS[benchmark.key] = benchmark
    for added, _ in list(_listeners):
        added(benchmark)
    return benchmark


def unregister(key: str) -> None:
    """Remove a benchmark (a test's own); the listening task layers drop its tasks."""
    benchmark = BENCHMARKS.pop(key, None)
    if benchmark is not None:
        for _, removed in list(_listeners):
            if removed is not None:
                removed(benchmark)


def on_register(added: Callable[[Benchmark], None], removed: Callable[[Benchmark], None] | None = None) -> None:
    """Call ``added`` for every benchmark registered from now on, ``removed`` for every one unregistered (the
    Inspect tasks layer builds its per-benchmark tasks this way: this layer imports no harness)."""
    _listeners.append((added, removed))


@contextmanager
def registered(benchmark: Benchmark) -> Iterator[Benchmark]:
    """``benchmark`` in the registry for the ``with`` block only (a test's own benchmark)."""
    before = BENCHMARKS.get(benchmark.key)
    register(benchmark)
    try:
        yield benchmark
    finally:
        if before is None:
            unregister(benchmark.key)
        else:
            register(before)


def get(key: str) -> Benchmark:
    """The benchmark ``key``; an unknown key is a ``ConfigError`` naming the known ones."""
    try:
        return BENCHMARKS[key]
    except KeyError:
        raise ConfigError(f"unknown benchmark {key!r}{did_you_mean(key, BENCHMARKS)}; choose from "
                          f"{', '.join(BENCHMARKS)}") from None


def by_hub_id(hub_id: str) -> Benchmark | None:
    """The registered benchmark whose Hugging Face copy is ``hub_id`` (its Hub layout is then known)."""
    return next((b for b in BENCHMARKS.values() if b.hub_id and b.hub_id.lower() == hub_id.lower()), None)


def named_in(name: str) -> str | None:
    """The registered benchmark a task or group name names as one of its words (``medfuzz_mcq``,
    ``tces · medmcqa · drugs``), for records written before they said so; ``None`` when none does."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    return next((key for key in BENCHMARKS if key in words), None)


def table() -> str:
    """A Markdown table of the registered benchmarks (docs/foundation.md's is this one)."""
    rows = ["| key | benchmark | `data=hf` | licence | default split | few-shot split | `data=demo` | answers |",
            "|---|---|---|---|---|---|---|---|"]
    for b in BENCHMARKS.values():
        cells = [f"`{b.key}`", f"[{b.title}]({b.url})" if b.url else b.title, f"`{b.hub_id}`" if b.hub_id else "–",
                 b.licence or "your data's", b.default_split or "–", b.fewshot_split or "–",
                 f"`{b.demo.name}` ({b.demo_split})" if b.demo else "–", b.answers]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------ a run's data


@dataclass(frozen=True)
class DataRecord:
    """What a run's items are, as its task records it (``record``) for the logs, the report and the card."""

    benchmark: str  # the registry key whose task ran
    title: str  # the benchmark's display name
    name: str  # the data's name: data_name, else the file's stem, the Hub dataset or the benchmark key
    kind: str  # hf (the benchmark's Hub copy) | hub (another Hub dataset) | demo | file
    file: str | None = None  # the file's name (never its path: logs are shared)
    hub_id: str | None = None  # only for data from the Hugging Face Hub
    split: str | None = None  # the Hub split, or the split the demo items come from
    licence: str | None = None  # the benchmark's licence for its own release and demo; unknown for a user's file
    layout: str | None = None  # the layout read ("medqa", "mmlu", ..., "columns": a full mapping)
    columns: str | None = None  # the column map used, in the text form of ``columns=``
    items: int | None = None  # how many items the run reads

    @property
    def display(self) -> str:
        """How the report names the data: the benchmark's title for its own release, else the data's name."""
        return self.title if self.kind in ("hf", "demo") and self.name == default_name(self.benchmark, self.kind) \
            else self.name

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "display": self.display}


def default_name(benchmark: str, kind: str, stem: str | None = None) -> str:
    """``data_name``'s default: the file's stem, the Hub dataset's name, the benchmark key (its Hub copy) or
    ``<key>-demo``."""
    if kind in ("file", "hub") and stem:
        return stem
    return f"{benchmark}-demo" if kind == "demo" else benchmark


# ------------------------------------------------------------------------------------------------ the benchmarks

register(Benchmark(
    key="medqa", title="MedQA-USMLE (4 options)", layout="medqa", hub_id="GBaker/MedQA-USMLE-4-options",
    licence="MIT", default_split="test", fewshot_split="train", demo=_DATA / "medqa_demo.jsonl",
    answers="answer_idx is the key's letter; answer (the key's text), when present, must agree with it",
    url="https://github.com/jind11/MedQA"))

register(Benchmark(
    key="medmcqa", title="MedMCQA", layout="medmcqa", hub_id="openlifescienceai/medmcqa",
    hub_columns={"answer_format": "index0"}, licence="MIT", default_split="validation", fewshot_split="train",
    demo=_DATA / "medmcqa_demo.jsonl", id_prefix="medmcqa",
    answers="cop is the key's option index: 1-based in the release files, 0-based in the Hub copy (whose test "
            "split has no answers: cop -1)",
    url="https://medmcqa.github.io"))

register(Benchmark(
    key=OWN, title="Your multiple-choice data", id_prefix="{part}",
    answers="any layout benchmarks.columns reads without options (MedQA, MedMCQA, MMLU-style, question + choices "
            "+ answer), or a column mapping"))
