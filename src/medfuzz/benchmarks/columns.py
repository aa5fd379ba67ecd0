"""Where a data file keeps each part of an item: the column map, the layouts read without being told, and the
one parser of a column mapping given on a command line, in ``-T columns=...`` or in lm-eval's ``--metadata``.

A file's layout is found from its first row (column names compared without regard to case):

========  ===========================================================  =========================================
layout    columns                                                      answer
========  ===========================================================  =========================================
medqa     ``question``, ``options`` ({letter: text}), ``answer_idx``   a letter (``answer``, the text, must agree)
medmcqa   ``question``, ``opa`` .. ``opd``, ``cop``                    1-based index (the release files)
mmlu      ``question``, ``A``, ``B``, ``C``, ``D`` (..``J``), ``answer``  a letter
choices   ``question``, ``choices`` (a list), ``answer``               a letter, a 0-based index or the text
options   ``question``, ``options`` (a list or mapping), ``answer``     a letter, a 0-based index or the text
========  ===========================================================  =========================================

Any other layout is named with a mapping (``columns``), as text
``question:stem,options:A|B|C|D,answer:key,answer_format:letter`` (``field:column`` pairs, several columns joined
by ``|``) or as JSON ``{"question": "stem", "options": ["A", "B", "C", "D"], "answer": "key"}``. Its fields:
``question``, ``options`` (one column holding a list or mapping, or several columns in letter order),
``answer``, ``answer_format`` (``letter`` | ``index0`` | ``index1`` | ``text`` | ``auto``; default ``auto``: a
letter, a 0-based index or an option's text), ``id`` and ``metadata`` (columns copied into each item). A
mapping may name only some fields: the others come from the layout the file matches once the named columns
stand in for them (``columns=question:stem`` on an MMLU-style file with a ``stem`` column).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from medfuzz.benchmarks.items import LETTERS
from medfuzz.errors import DataError
from medfuzz.options import ConfigError, did_you_mean, one_of

AnswerFormat = Literal["letter", "index0", "index1", "text", "auto"]
ANSWER_FORMATS = ("letter", "index0", "index1", "text", "auto")
FIELDS = ("question", "options", "answer", "answer_format", "id", "metadata")
EXAMPLE = "columns=question:COLUMN,options:COLUMN|COLUMN|...,answer:COLUMN"


@dataclass(frozen=True)
class ColumnMap:
    """Where a local file keeps each part of an item.

    ``options`` is either one column holding a ``{letter: text}`` mapping or a list of texts, or a tuple of
    columns holding the option texts in letter order. ``answer_format`` says how the answer column is
    written: a letter, a 0-based or 1-based option index, the full text of the correct option, or ``auto`` (a
    letter, else a 0-based index, else an option's text).
    """

    question: str = "question"
    options: str | tuple[str, ...] = "options"
    answer: str = "answer"
    answer_format: AnswerFormat = "letter"
    id: str | None = None
    metadata: tuple[str, ...] = ()

    def columns(self) -> list[str]:
        """Every column it reads (the id and metadata columns are optional per row)."""
        options = list(self.options) if isinstance(self.options, tuple) else [self.options]
        return [self.question, *options, self.answer]

    def text(self) -> str:
        """The mapping in the text form ``parse_columns`` reads (what a run records)."""
        options = "|".join(self.options) if isinstance(self.options, tuple) else self.options
        parts = [f"question:{self.question}", f"options:{options}", f"answer:{self.answer}",
                 f"answer_format:{self.answer_format}"]
        if self.id:
            parts.append(f"id:{self.id}")
        if self.metadata:
            parts.append("metadata:" + "|".join(self.metadata))
        return ",".join(parts)


# ------------------------------------------------------------------------------------------------ parsing


def _one_column(field: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        if len(value) != 1:
            raise ConfigError(f"columns: {field} names one column, got {list(value)}")
        value = value[0]
    text = str(value).strip() if value is not None else ""
    if not text or "|" in text:
        raise ConfigError(f"columns: {field} names one column, got {value!r}")
    return text


def _column_list(field: str, value: Any) -> tuple[str, ...]:
    parts = value.split("|") if isinstance(value, str) else list(value or ())
    names = tuple(str(part).strip() for part in parts if str(part).strip())
    if not names:
        raise ConfigError(f"columns: {field} names no column")
    return names


def _pairs(text: str | Sequence[Any]) -> dict[str, Any]:
    """``question:stem,options:A|B`` (or Inspect's list of its comma parts) as ``{field: value}``."""
    parts = text.split(",") if isinstance(text, str) else [str(part) for part in text]
    pairs: dict[str, Any] = {}
    for part in (p.strip() for p in parts):
        if not part:
            continue
        name, sep, value = part.partition(":")
        if not sep:
            name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"columns: {part!r} is not FIELD:COLUMN (e.g. {EXAMPLE})")
        if name.strip() in pairs:
            raise ConfigError(f"columns: {name.strip()} is given twice")
        pairs[name.strip()] = value.strip()
    return pairs


def parse_columns(spec: Any) -> dict[str, Any]:
    """A column mapping as ``{field: value}`` (only the fields given), checked: the one reader of ``columns`` for
    every surface (``medfuzz run --columns``, Inspect ``-T columns=``, lm-eval ``--metadata``, Python). Takes the
    text form, JSON text, a mapping, Inspect's list of the text's comma parts, a ``ColumnMap`` or nothing."""
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return {}
    if isinstance(spec, ColumnMap):
        return {"question": spec.question, "options": spec.options, "answer": spec.answer,
                "answer_format": spec.answer_format, "id": spec.id, "metadata": spec.metadata}
    if isinstance(spec, str) and spec.strip().startswith("{"):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as err:
            raise ConfigError(f"columns: not valid JSON ({err.msg})") from None
    raw = dict(spec) if isinstance(spec, Mapping) else _pairs(spec)
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in FIELDS:
            raise ConfigError(f"columns: unknown field {name!r}{did_you_mean(name, FIELDS)} (fields: "
                              f"{', '.join(FIELDS)})")
        if name in ("question", "answer", "id"):
            out[name] = _one_column(name, value) if value not in (None, "") or name != "id" else None
        elif name == "options":
            names = _column_list(name, value)
            out[name] = names[0] if len(names) == 1 else names
            if isinstance(out[name], tuple) and not 2 <= len(out[name]) <= len(LETTERS):
                raise ConfigError(f"columns: options names {len(names)} columns; 2 to {len(LETTERS)} needed")
        elif name == "metadata":
            out[name] = _column_list(name, value) if value else ()
        else:
            out[name] = one_of("columns: answer_format", str(value).strip(), ANSWER_FORMATS)
    return out


def columns_text(spec: Any) -> str | None:
    """A mapping in its text form (how a run records it), or None for none."""
    parsed = parse_columns(spec)
    if not parsed:
        return None
    parts = []
    for name in FIELDS:
        if name in parsed and parsed[name] not in (None, ()):
            value = parsed[name]
            parts.append(f"{name}:{'|'.join(value) if isinstance(value, tuple) else value}")
    return ",".join(parts)


# ------------------------------------------------------------------------------------------------ layouts


@dataclass(frozen=True)
class Layout:
    """A layout read without options: its name, what identifies it, and the column map it implies."""

    name: str
    description: str

    def match(self, keys: Mapping[str, str]) -> ColumnMap | None:
        """The column map for a row whose columns are ``keys`` (lower-case name -> the file's spelling), or None
        when the row is not in this layout."""
        return _MATCHERS[self.name](keys)


def _has(keys: Mapping[str, str], *names: str) -> bool:
    return all(name in keys for name in names)


def _optional(keys: Mapping[str, str], *names: str) -> tuple[str, ...]:
    return tuple(keys[name] for name in names if name in keys)


def _medqa(keys: Mapping[str, str]) -> ColumnMap | None:
    if not _has(keys, "question", "options", "answer_idx"):
        return None
    return ColumnMap(keys["question"], keys["options"], keys["answer_idx"], "letter",
                     metadata=_optional(keys, "meta_info"))


def _medmcqa(keys: Mapping[str, str]) -> ColumnMap | None:
    if not _has(keys, "question", "opa", "opb", "cop"):
        return None
    options = []
    for suffix in "abcdefghij":
        if f"op{suffix}" not in keys:
            break
        options.append(keys[f"op{suffix}"])
    return ColumnMap(keys["question"], tuple(options), keys["cop"], "index1", id=keys.get("id"),
                     metadata=_optional(keys, "subject_name", "topic_name", "choice_type"))


def _mmlu(keys: Mapping[str, str]) -> ColumnMap | None:
    if not _has(keys, "question", "a", "b", "answer"):
        return None
    options = []
    for letter in LETTERS.lower():
        if letter not in keys:
            break
        options.append(keys[letter])
    return ColumnMap(keys["question"], tuple(options), keys["answer"], "letter", id=keys.get("id"),
                     metadata=_optional(keys, "subject"))


def _listed(column: str):
    def match(keys: Mapping[str, str]) -> ColumnMap | None:
        if not _has(keys, "question", column, "answer"):
            return None
        return ColumnMap(keys["question"], keys[column], keys["answer"], "auto", id=keys.get("id"),
                         metadata=_optional(keys, "subject"))
    return match


_MATCHERS = {"medqa": _medqa, "medmcqa": _medmcqa, "mmlu": _mmlu, "choices": _listed("choices"),
             "options": _listed("options")}

# in the order they are tried (a benchmark's own layout first): MedQA's before the plain ``options`` one
LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (
    Layout("medqa", "MedQA: question, options {letter: text}, answer_idx (a letter)"),
    Layout("medmcqa", "MedMCQA: question, opa..opd, cop (a 1-based index, as in the release files)"),
    Layout("mmlu", "MMLU-style: question, A, B, C, D (up to J), answer (a letter)"),
    Layout("choices", "question, choices (a list), answer (a letter, a 0-based index or the option's text)"),
    Layout("options", "question, options (a list or mapping), answer (a letter, a 0-based index or the text)"),
)}


def _keys(record: Mapping[str, Any]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for name in record:
        keys.setdefault(str(name).strip().lower(), str(name))
    return keys


def detect(record: Mapping[str, Any], prefer: Iterable[str] = ()) -> tuple[str, ColumnMap] | None:
    """The first layout (``prefer``'s first, then ``LAYOUTS``' order) a row's columns match."""
    keys = _keys(record)
    order = [*[name for name in prefer if name in LAYOUTS], *[name for name in LAYOUTS if name not in prefer]]
    for name in order:
        found = LAYOUTS[name].match(keys)
        if found is not None:
            return name, found
    return None


def resolve(source: str, row: int, record: Mapping[str, Any], given: Mapping[str, Any],
            prefer: Iterable[str] = ()) -> tuple[str, ColumnMap]:
    """The layout's name ("columns" when the mapping names everything) and the column map for a file whose
    first row is ``record``: the mapping ``given`` (``parse_columns``), its missing fields from the layout the row
    matches with the mapped columns standing in for them. A mapped column the row lacks, or a row that matches
    no layout, is a ``DataError`` naming the file, the row and the field."""
    present = set(map(str, record))
    have = ", ".join(map(str, record)) or "none"
    for name in ("question", "answer", "id", "options", "metadata"):
        value = given.get(name)
        for column in (value if isinstance(value, tuple) else (value,) if value else ()):
            if column not in present:
                raise DataError(source, row, column, f"is not a column of the file (columns maps {name} to it); "
                                                     f"the file's columns: {have}")
    if all(name in given for name in ("question", "options", "answer")):
        columns = ColumnMap(given["question"], given["options"], given["answer"], given.get("answer_format", "auto"),
                            given.get("id") or _keys(record).get("id"), tuple(given.get("metadata", ())))
        return "columns", columns
    # the named columns stand in for the fields they map
    view: dict[str, Any] = {str(k): v for k, v in record.items()}
    for name in ("question", "answer", "options"):
        if isinstance(given.get(name), str):
            view = {k: v for k, v in view.items() if k.strip().lower() != name}
            view[name] = record[given[name]]
    if isinstance(given.get("options"), tuple):  # option columns of any names: one list, as the options layout has
        view = {k: v for k, v in view.items() if k.strip().lower() != "options"}
        view["options"] = [record[column] for column in given["options"]]
    found = detect(view, prefer)
    if found is None:
        layouts = "; ".join(layout.description for layout in LAYOUTS.values())
        missing = [name for name in ("question", "options", "answer") if name not in given]
        raise DataError(source, row, None, f"its columns ({have}) match no layout medfuzz reads without options "
                                           f"({layouts}); name the {', '.join(missing)} column(s) with {EXAMPLE}")
    layout, columns = found
    renamed = {name: given[name] for name in ("question", "answer", "options") if name in given}
    extra = {name: given[name] for name in ("answer_format", "id", "metadata") if name in given}
    columns = replace(columns, **renamed, **extra)
    return (layout if not given else f"{layout}+columns"), columns
