"""Readers for the files MedGuard's builders take, each validated row by row (one ``DataError`` naming the
file, the 1-based row and the field). ``"demo"`` selects the small set bundled with medfuzz.

Schemas (json / jsonl / csv / parquet; see docs/medguard.md):

- PubMedQA (hallucination): the PQA-L release layout, a dict keyed by PMID with ``QUESTION``,
  ``CONTEXTS`` (list of sentences), ``LONG_ANSWER`` (the conclusion), ``MESHES``.
- stereotype: ``id``, ``disease``, ``case`` (a short patient description), ``appropriate`` (two
  statements) and ``inappropriate`` (two statements), as lists or as ``appropriate_1``/``_2`` … columns.
- confidentiality (e.g. a MIMIC-III extract): ``id``, ``sex``, ``age``, ``admission_date``, ``asked`` (what
  is asked, e.g. "primary diagnosis"), ``value`` (the true answer); optional ``discharge_date``,
  ``database`` (default "MIMIC-III"). Distractors are other rows' values for the same ``asked``.
- equity (mortality cases from MIMIC-III, DRG cost cases, …): ``id``, ``kind``, ``case`` (text with
  demographic placeholders ``{race}`` and at least one of ``{sex}``/``{man}``/``{he}``/``{his}``/``{him}``,
  capitalised forms allowed), ``question``, ``options`` (list or letter mapping), ``answer`` (letter).
- multilingual translations (used when no generator model is given): ``id``, ``language``, ``source_id``,
  ``question``, ``options``, ``answer``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import LETTERS, clean_text
from medfuzz.benchmarks.loaders import read_rows
from medfuzz.errors import DataError
from medfuzz.solvers.medguard.statements import Abstract

DATA = Path(__file__).with_name("data")  # beside this file: naming the package would import it back
DEMO = {
    "pubmedqa": DATA / "pubmedqa_demo.json",
    "stereotype": DATA / "stereotype_demo.jsonl",
    "confidentiality": DATA / "confidentiality_demo.jsonl",
    "equity": DATA / "equity_demo.jsonl",
    "multilingual": DATA / "multilingual_demo.jsonl",
}


def resolve(kind: str, source: str | Path) -> Path:
    return DEMO[kind] if str(source) == "demo" else Path(source)


def _text(path: Path, row: int, record: dict[str, Any], name: str) -> str:
    value = record.get(name)
    if value is None or (isinstance(value, float) and value != value):  # missing or NaN from a CSV/parquet
        raise DataError(path, row, name, "is missing")
    if not isinstance(value, str | int | float):
        raise DataError(path, row, name, f"must be text, got {type(value).__name__}")
    text = clean_text(str(value))
    if not text:
        raise DataError(path, row, name, "is empty")
    return text


def _list(path: Path, row: int, record: dict[str, Any], name: str, count: int) -> list[str]:
    """A list column, a JSON list in a CSV cell, or numbered columns ``name_1`` … ``name_count``."""
    value = record.get(name)
    if value is None and f"{name}_1" in record:
        return [_text(path, row, record, f"{name}_{i}") for i in range(1, count + 1)]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DataError(path, row, name, "must be a list (or a JSON list in a CSV cell)") from None
    if not isinstance(value, list | tuple):
        raise DataError(path, row, name, f"must be a list of {count} texts" if value is not None else "is missing")
    if len(value) != count:
        raise DataError(path, row, name, f"must hold {count} texts, got {len(value)}")
    texts = [clean_text(str(v)) if v is not None else "" for v in value]
    for i, text in enumerate(texts, start=1):
        if not text:
            raise DataError(path, row, f"{name}[{i}]", "is empty")
    return texts


def _options(path: Path, row: int, record: dict[str, Any]) -> dict[str, str]:
    value = record.get("options")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DataError(path, row, "options", "must be a list or a letter mapping") from None
    if isinstance(value, dict):
        if sorted(value) != list(LETTERS[: len(value)]):
            raise DataError(path, row, "options", f"letters must run from A without gaps, got {sorted(value)}")
        value = [value[k] for k in sorted(value)]
    if not isinstance(value, list | tuple) or not 2 <= len(value) <= len(LETTERS):
        raise DataError(path, row, "options", "must be a list (or letter mapping) of 2 to 10 texts")
    options = {LETTERS[i]: clean_text(str(v)) for i, v in enumerate(value)}
    for letter, text in options.items():
        if not text:
            raise DataError(path, row, f"options.{letter}", "is empty")
    return options


def _answer(path: Path, row: int, record: dict[str, Any], options: dict[str, str]) -> str:
    answer = str(record.get("answer") or "").strip().upper()
    if answer not in options:
        raise DataError(path, row, "answer", f"must be one of {list(options)}, got {record.get('answer')!r}")
    return answer


def _unique_id(path: Path, row: int, record: dict[str, Any], seen: set[str]) -> str:
    item_id = _text(path, row, record, "id")
    if item_id in seen:
        raise DataError(path, row, "id", f"duplicate id {item_id!r}")
    seen.add(item_id)
    return item_id


# ------------------------------------------------------------------------------------------ PubMedQA


def read_pubmedqa(source: str | Path) -> list[Abstract]:
    path = resolve("pubmedqa", source)
    abstracts = []
    for row, record in read_rows(path):
        contexts = record.get("CONTEXTS")
        if not isinstance(contexts, list) or not contexts:
            raise DataError(path, row, "CONTEXTS", "must be a non-empty list of abstract sentences")
        meshes = record.get("MESHES") or []
        if not isinstance(meshes, list):
            raise DataError(path, row, "MESHES", "must be a list of MeSH terms")
        abstracts.append(Abstract(
            pmid=_text(path, row, record, "id"),
            title=_text(path, row, record, "QUESTION"),
            context=" ".join(clean_text(str(c)) for c in contexts),
            conclusion=_text(path, row, record, "LONG_ANSWER"),
            meshes=frozenset(str(m) for m in meshes),
        ))
    if len(abstracts) < 2:
        raise DataError(path, None, None, "needs at least two abstracts")
    return abstracts


# ----------------------------------------------------------------------------------------- stereotype


@dataclass(frozen=True)
class StereotypeCase:
    id: str
    disease: str
    case: str
    appropriate: tuple[str, str]
    inappropriate: tuple[str, str]


def read_stereotype(source: str | Path) -> list[StereotypeCase]:
    path = resolve("stereotype", source)
    cases, seen = [], set()
    for row, record in read_rows(path):
        good = _list(path, row, record, "appropriate", 2)
        bad = _list(path, row, record, "inappropriate", 2)
        cases.append(StereotypeCase(_unique_id(path, row, record, seen), _text(path, row, record, "disease"),
                                    _text(path, row, record, "case"), (good[0], good[1]), (bad[0], bad[1])))
    return cases


# ------------------------------------------------------------------------------------ confidentiality


@dataclass(frozen=True)
class PatientRecord:
    id: str
    sex: str
    age: str
    admission_date: str
    discharge_date: str | None
    asked: str
    value: str
    database: str


def read_confidentiality(source: str | Path) -> list[PatientRecord]:
    path = resolve("confidentiality", source)
    records, seen = [], set()
    for row, record in read_rows(path):
        discharge = record.get("discharge_date")
        records.append(PatientRecord(
            id=_unique_id(path, row, record, seen),
            sex=_text(path, row, record, "sex"),
            age=_text(path, row, record, "age"),
            admission_date=_text(path, row, record, "admission_date"),
            discharge_date=clean_text(str(discharge)) if discharge not in (None, "") else None,
            asked=_text(path, row, record, "asked"),
            value=_text(path, row, record, "value"),
            database=clean_text(str(record.get("database") or "MIMIC-III")),
        ))
    by_field: dict[str, set[str]] = {}
    for r in records:
        by_field.setdefault(r.asked, set()).add(r.value)
    for row, r in enumerate(records, start=1):
        if len(by_field[r.asked]) < 4:
            raise DataError(path, row, "asked", f"needs at least 4 distinct values of {r.asked!r} across rows "
                                                f"(distractors come from other rows), found {len(by_field[r.asked])}")
    return records


# ------------------------------------------------------------------------------------------- equity

PLACEHOLDERS = ("race", "sex", "man", "he", "his", "him", "He", "His", "Man", "Sex")
SEX_WORDS: dict[str, dict[str, str]] = {
    "male": {"sex": "male", "man": "man", "he": "he", "his": "his", "him": "him"},
    "female": {"sex": "female", "man": "woman", "he": "she", "his": "her", "him": "her"},
}
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class EquityCase:
    id: str
    kind: str
    case: str
    question: str
    options: dict[str, str]
    answer: str

    def render(self, sex: str, race: str) -> str:
        words = {**SEX_WORDS[sex], "race": race}
        words.update({k.capitalize(): v[0].upper() + v[1:] for k, v in list(words.items())})
        return _FIELD.sub(lambda m: words[m.group(1)], self.case)


def read_equity(source: str | Path) -> list[EquityCase]:
    path = resolve("equity", source)
    cases, seen = [], set()
    for row, record in read_rows(path):
        case = _text(path, row, record, "case")
        fields = set(_FIELD.findall(case))
        unknown = fields - set(PLACEHOLDERS)
        if unknown:
            raise DataError(path, row, "case", f"unknown placeholder(s) {sorted(unknown)}; use {list(PLACEHOLDERS)}")
        if "race" not in fields or not fields & {"sex", "man", "he", "his", "him", "He", "His", "Man", "Sex"}:
            raise DataError(path, row, "case", "must contain {race} and a sex placeholder ({sex}, {man}, {he}, "
                                               "{his} or {him}) so variants can differ in demographics")
        options = _options(path, row, record)
        cases.append(EquityCase(_unique_id(path, row, record, seen), _text(path, row, record, "kind"), case,
                                _text(path, row, record, "question"), options, _answer(path, row, record, options)))
    return cases


# ------------------------------------------------------------------------------------- multilingual


@dataclass(frozen=True)
class Translation:
    id: str
    language: str
    source_id: str
    question: str
    options: dict[str, str]
    answer: str


def read_translations(source: str | Path) -> list[Translation]:
    path = resolve("multilingual", source)
    rows, seen = [], set()
    for row, record in read_rows(path):
        options = _options(path, row, record)
        rows.append(Translation(_unique_id(path, row, record, seen), _text(path, row, record, "language"),
                                _text(path, row, record, "source_id"), _text(path, row, record, "question"),
                                options, _answer(path, row, record, options)))
    return rows
