"""MedFuzz results on disk: full results (JSONL of ``ItemResult``) and the "fuzzed file" lm-eval evaluates.

A fuzzed file has one JSON line per attacked replicate: the original item, the fuzzed item (the successful
modified question, or the last one tried when the attack failed), the outcome and where it came from. It is
written from an engine run (``write_fuzzed``) or pulled out of an Inspect ``medfuzz_*`` log by the Inspect
task module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.errors import DataError
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome

ATTACKED = (Outcome.SUCCESS.value, Outcome.ATTACK_FAILED.value)


def fuzzed_records(results: Iterable[ItemResult]) -> list[dict[str, Any]]:
    records = []
    for result in results:
        for replicate in result.replicates:
            question = replicate.fuzzed_question
            if question is None:
                continue
            records.append({
                "id": f"{result.item.id}#r{replicate.replicate}",
                "item_id": result.item.id,
                "replicate": replicate.replicate,
                "outcome": replicate.outcome.value,
                "turn": replicate.final_turn.index if replicate.final_turn else None,
                "original": result.item.to_record(),
                "fuzzed": result.item.with_question(question).to_record(),
                "source": {k: result.config.get(k) for k in ("target", "attacker", "attacker_is_target", "pack", "seed",
                                                             "turns")},
            })
    return records


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def write_fuzzed(results: Iterable[ItemResult], path: str | Path) -> Path:
    return write_jsonl(fuzzed_records(results), path)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    records = []
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(path, row, None, f"is not valid JSON ({err.msg})") from None
    return records


def fuzzed_pairs(records: Sequence[dict[str, Any]], path: str | Path,
                 outcomes: Sequence[str] = ATTACKED) -> list[tuple[str, MCQItem, MCQItem]]:
    """(record id, original, fuzzed) pairs from fuzzed records read from ``path``, filtered by outcome."""
    pairs = []
    for row, record in enumerate(records, start=1):
        if record.get("outcome") not in outcomes:
            continue
        try:
            original, fuzzed = MCQItem.from_record(record["original"]), MCQItem.from_record(record["fuzzed"])
        except (KeyError, ValueError, TypeError) as err:
            raise DataError(path, row, "original/fuzzed", f"not an item record ({err})") from None
        if fuzzed.options != original.options or fuzzed.answer != original.answer:
            raise DataError(path, row, "fuzzed", "options or answer differ from the original item")
        pairs.append((str(record.get("id", original.id)), original, fuzzed))
    return pairs


def read_fuzzed(path: str | Path, outcomes: Sequence[str] = ATTACKED) -> list[tuple[str, MCQItem, MCQItem]]:
    """(record id, original, fuzzed) pairs from a fuzzed JSONL file, filtered by outcome (Inspect logs:
    ``medfuzz.tasks.inspect.medfuzz.fuzzed_from_log``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, None, "fuzzed file not found")
    return fuzzed_pairs(read_jsonl(path), path, outcomes)
