"""Loaders that turn benchmark files or Hugging Face datasets into ``MCQItem`` lists.

Every row is validated; the first malformed row raises one ``DataError`` naming the file, the 1-based row
and the field. Files are read as strict UTF-8 so a bad byte is reported with its row instead of being
silently replaced.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import medfuzz.benchmarks.registry as registry
from medfuzz.benchmarks.cleaning import clean_text
from medfuzz.benchmarks.columns import LAYOUTS, ColumnMap, parse_columns, resolve
from medfuzz.benchmarks.items import LETTERS, MCQItem
from medfuzz.benchmarks.registry import Benchmark, DataRecord, default_name
from medfuzz.errors import DataError, MedfuzzError

DEMO_MEDQA = registry.get("medqa").demo
DEMO_MEDMCQA = registry.get("medmcqa").demo
HF_MEDQA = registry.get("medqa").hub_id
HF_MEDMCQA = registry.get("medmcqa").hub_id

Duplicates = Literal["error", "warn"]

log = logging.getLogger(__name__)

MEDQA_COLUMNS = LAYOUTS["medqa"].match({"question": "question", "options": "options", "answer_idx": "answer_idx",
                                        "meta_info": "meta_info"})


# ----------------------------------------------------------------------------------------------- reading


def _decode(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is not part of the first column
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(path, line, None, f"is not valid UTF-8 (byte {raw[err.start]:#04x} at offset "
                                          f"{err.start}); re-save the file as UTF-8") from None


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json`` hook: a repeated key is an error (plain ``json.loads`` keeps the last value, so a row or a field
    would vanish without a word)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen.add(key)
    return dict(pairs)


def _repeated_key_error(path: Path, text: str, key: str, line: int | None = None) -> DataError:
    if line is None:  # the second place the key appears as a key
        hits = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
        line = text.count("\n", 0, hits[1]) + 1 if len(hits) > 1 else None
    return DataError(path, line, key, "is a repeated key: JSON keeps only the last value, so a record or a field "
                                      "would be lost; make the keys unique")


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, read one at a time (a run with ``--limit`` reads only the rows it needs), each decoded as
    strict UTF-8 with the line named on a bad byte."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise DataError(path, line_number, None, f"is not valid UTF-8 (byte {raw[err.start]:#04x}); "
                                                         "re-save the file as UTF-8") from None


def _json_lines(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    row = 0
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row += 1
        try:
            record = json.loads(line, object_pairs_hook=_unique_keys)
        except _RepeatedKey as err:
            raise _repeated_key_error(path, line, err.key, line_number) from None
        except json.JSONDecodeError as err:
            raise DataError(path, line_number, None, f"is not valid JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise DataError(path, line_number, None, "is not a JSON object")
        yield line_number, record


def read_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(row_number, record)`` from a .jsonl, .json, .csv or .parquet file.

    A ``.json`` file may hold a list of records, a dict of records keyed by id (the id lands in ``"id"``
    unless present), or JSON Lines (MedMCQA's release files are JSON Lines named ``.json``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, None, "no such data file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):  # row groups as they are needed
            for record in batch.to_pylist():
                number += 1
                yield number, record
        return
    if suffix == ".csv":
        yield from _csv_rows(path)
        return
    if suffix == ".jsonl":
        yield from _json_lines(path, _lines(path))
        return
    text = _decode(path)
    if suffix == ".json":
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys)
        except _RepeatedKey as err:
            raise _repeated_key_error(path, text, err.key) from None
        except json.JSONDecodeError as err:
            if err.msg == "Extra data":  # JSON Lines under a .json name
                yield from _json_lines(path, text.splitlines())
                return
            raise DataError(path, err.lineno, None, f"is not valid JSON ({err.msg})") from None
        if isinstance(data, dict):
            data = [{"id": key, **value} if isinstance(value, dict) and "id" not in value else value
                    for key, value in data.items()]
        if not isinstance(data, list):
            raise DataError(path, None, None, "must hold a list of records, a dict of records or JSON Lines")
        for number, record in enumerate(data, start=1):
            if not isinstance(record, dict):
                raise DataError(path, number, None, "is not a JSON object")
            yield number, record
        return
    raise DataError(path, None, None, f"unsupported file type {suffix!r} (use .jsonl, .json, .csv or .parquet)")


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    # line by line (``_lines``: a bad byte is named with its line; only the rows a limit needs are read)
    for number, record in enumerate(csv.DictReader(_lines(path)), start=1):
        yield number, dict(record)


# ------------------------------------------------------------------------------------------ validation

# ~1M tokens, the longest context any model offers: an item above it cannot be asked at all (a pasted file?)
LONGEST_ITEM_CHARS = 4_000_000


def _text_field(source: str, row: int, record: dict[str, Any], column: str) -> str:
    if column not in record or record[column] is None:
        raise DataError(source, row, column, "is missing")
    value = record[column]
    if not isinstance(value, str):
        raise DataError(source, row, column, f"must be text, got {type(value).__name__}")
    _check_text(source, row, column, value)
    return value


def _check_text(source: str, row: int, column: str, value: str) -> None:
    if "\x00" in value:
        raise DataError(source, row, column, "holds a NUL byte (\\x00), which no model reads as text: is this a "
                                             "binary file or a bad export? Remove it")
    if not clean_text(value):
        raise DataError(source, row, column, "is empty")


def _options(source: str, row: int, record: dict[str, Any], spec: str | tuple[str, ...]) -> dict[str, str]:
    if isinstance(spec, tuple):
        texts = [_text_field(source, row, record, column) for column in spec]
        return dict(zip(LETTERS, texts, strict=False))
    if spec not in record or record[spec] is None:
        raise DataError(source, row, spec, "is missing")
    raw = record[spec]
    if isinstance(raw, str):  # a CSV cell holding JSON
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise DataError(source, row, spec, "must be a mapping or list of option texts") from None
    if isinstance(raw, dict):
        letters = sorted(raw)
        if letters != list(LETTERS[: len(letters)]):
            raise DataError(source, row, spec, f"option letters must run from A without gaps, got {letters}")
        pairs = [(letter, raw[letter]) for letter in letters]
    elif isinstance(raw, list):
        pairs = list(zip(LETTERS, raw, strict=False))
    else:
        raise DataError(source, row, spec, "must be a mapping or list of option texts")
    if len(pairs) < 2 or len(pairs) > len(LETTERS):
        raise DataError(source, row, spec, f"needs 2 to {len(LETTERS)} options, got {len(pairs)}")
    options: dict[str, str] = {}
    for letter, text in pairs:
        if not isinstance(text, str) or not clean_text(text):
            raise DataError(source, row, f"{spec}.{letter}", "is missing or empty")
        _check_text(source, row, f"{spec}.{letter}", text)
        options[letter] = text
    return options


def _index(source: str, row: int, column: str, value: Any, letters: list[str], base: int) -> str:
    try:
        if isinstance(value, bool):
            raise ValueError
        index = int(value)
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise DataError(source, row, column, f"answer index {value!r} is not an integer") from None
    if not base <= index < base + len(letters):
        hint = ""
        if base == 1 and index == 0:
            hint = " (0-based data? give columns=answer_format:index0)"
        elif base == 0 and index == len(letters):
            hint = " (1-based data? give columns=answer_format:index1)"
        raise DataError(source, row, column, f"answer index {index} is outside {base}..{base + len(letters) - 1}{hint}")
    return letters[index - base]


def _by_text(source: str, row: int, column: str, value: Any, options: dict[str, str]) -> str:
    target = clean_text(str(value))
    matches = [letter for letter, text in options.items() if clean_text(text) == target]
    if len(matches) != 1:
        raise DataError(source, row, column, f"answer text {value!r} matches {len(matches)} options, not 1")
    return matches[0]


def _answer(source: str, row: int, record: dict[str, Any], columns: ColumnMap, options: dict[str, str]) -> str:
    column = columns.answer
    if column not in record or record[column] is None or record[column] == "":
        raise DataError(source, row, column, "is missing")
    value = record[column]
    letters = list(options)
    fmt = columns.answer_format
    if fmt == "letter":
        letter = str(value).strip().upper()
        if letter not in options:
            hint = " (an index? give columns=answer_format:index0 or index1)" if letter.isdigit() else ""
            raise DataError(source, row, column, f"answer key {value!r} is not among the options {letters}{hint}")
        return letter
    if fmt in ("index0", "index1"):
        return _index(source, row, column, value, letters, 0 if fmt == "index0" else 1)
    if fmt == "auto":  # a letter, else a 0-based index, else an option's text
        text = str(value).strip()
        if isinstance(value, str) and len(text) == 1 and text.upper() in options:
            return text.upper()
        if (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and text.isdigit()):
            return _index(source, row, column, value, letters, 0)
        if isinstance(value, str) and len(text) == 1 and text.isalpha():
            raise DataError(source, row, column, f"answer key {value!r} is not among the options {letters}")
    return _by_text(source, row, column, value, options)


def items_from_records(
    records: Iterator[tuple[int, dict[str, Any]]] | Sequence[tuple[int, dict[str, Any]]],
    columns: ColumnMap,
    source: str,
    id_prefix: str,
    extra_check: Any = None,
    duplicates: Duplicates = "error",
    limit: int | None = None,
) -> list[MCQItem]:
    """Validate records and build items. ``extra_check(row, record, item)`` may raise a ``DataError``.

    A repeated id, or a row repeating an earlier row's question, options and answer, is a ``DataError`` naming
    both rows (a duplicate would be evaluated twice and weigh double); ``duplicates="warn"`` logs repeated
    rows instead (for published data sets known to repeat questions) and keeps them. ``limit``: stop after that
    many items, reading no further row (a run with ``--limit`` on a large file reads only what it uses)."""
    items: list[MCQItem] = []
    seen: dict[str, int] = {}
    contents: dict[tuple[str, tuple[str, ...], str], int] = {}
    for row, record in records:
        if limit is not None and len(items) >= limit:
            break
        question = _text_field(source, row, record, columns.question)
        options = _options(source, row, record, columns.options)
        answer = _answer(source, row, record, columns, options)
        item_id = str(record[columns.id]) if columns.id and record.get(columns.id) else f"{id_prefix}-{row:05d}"
        if item_id in seen:
            raise DataError(source, row, columns.id or "id", f"duplicate id {item_id!r} (also row {seen[item_id]})")
        seen[item_id] = row
        # the file's name, not its absolute path: item metadata lands in logs and reports shared with others
        metadata = {"source": Path(source).name if Path(source).is_absolute() else source, "row": row}
        metadata.update({key: record.get(key) for key in columns.metadata if key in record})
        item = MCQItem(id=item_id, question=question, options=options, answer=answer, metadata=metadata)
        if (size := len(question) + sum(map(len, options.values()))) > LONGEST_ITEM_CHARS:
            log.warning("%s, row %d: the question and options hold %s characters, more than any model's context "
                        "(about %s characters, 1M tokens); every call on it will fail", source, row, f"{size:,}",
                        f"{LONGEST_ITEM_CHARS:,}")
        if extra_check is not None:
            extra_check(row, record, item)
        content = (clean_text(question), tuple(clean_text(t) for t in options.values()), answer)
        if content in contents:
            problem = f"repeats row {contents[content]} (same question, options and answer)"
            if duplicates == "error":
                raise DataError(source, row, None, problem)
            log.warning("%s, row %d: %s; kept", source, row, problem)
        contents.setdefault(content, row)
        items.append(item)
    if not items:
        raise DataError(source, None, None, "holds no rows")
    return items


def load_local(path: str | Path, columns: ColumnMap | Any = None, id_prefix: str | None = None) -> list[MCQItem]:
    """Load any local json/jsonl/csv/parquet file: with a ``ColumnMap``, or a mapping in any form
    ``columns.parse_columns`` reads (partial mappings filled from the file's layout), or none (the layout found
    from the first row: ``benchmarks.columns``)."""
    path = Path(path)
    if isinstance(columns, ColumnMap):
        return items_from_records(read_rows(path), columns, str(path), id_prefix or path.stem)
    return _load(read_rows(path), str(path), parse_columns(columns), (), id_prefix or path.stem, "error", None)[0]


def _hf_rows(dataset: str, split: str) -> list[tuple[int, dict[str, Any]]]:
    import datasets

    try:
        data = datasets.load_dataset(dataset, split=split)
    except Exception as err:  # the hub raises many types; the user needs one message
        # a DataError, so the harness shells show it as one line (Inspect: a PrerequisiteError, no traceback)
        raise DataError(
            f"Hugging Face dataset {dataset!r}", None, None,
            f"could not load split {split!r} ({type(err).__name__}: {err}). Offline? Pass a local file path or "
            "'demo' as the data source instead."
        ) from err
    return list(enumerate(data, start=1))


def _check_medqa_answer_text(source: str):
    def check(row: int, record: dict[str, Any], item: MCQItem) -> None:
        text = record.get("answer")
        if isinstance(text, str) and clean_text(text) != clean_text(item.answer_text):
            raise DataError(source, row, "answer",
                            f"answer text {text!r} disagrees with option {item.answer} ({item.answer_text!r})")
    return check


# checks a layout brings with it (beyond the column map): MedQA's answer text must agree with its letter
LAYOUT_CHECKS = {"medqa": _check_medqa_answer_text}


def _load(records: Iterable[tuple[int, dict[str, Any]]], source: str, given: dict[str, Any], prefer: Sequence[str],
          id_prefix: str, duplicates: Duplicates, limit: int | None) -> tuple[list[MCQItem], str, ColumnMap]:
    """Items from records whose layout is resolved from the first row (``columns.resolve``)."""
    rows = iter(records)
    first = next(rows, None)
    if first is None:
        raise DataError(source, None, None, "holds no rows")
    layout, columns = resolve(source, first[0], first[1], given, prefer)
    check = LAYOUT_CHECKS.get(layout.split("+")[0])
    items = items_from_records(_chain(first, rows), columns, source, id_prefix,
                               check(source) if check else None, duplicates=duplicates, limit=limit)
    return items, layout, columns


def _chain(first: tuple[int, dict[str, Any]], rest: Iterator[tuple[int, dict[str, Any]]]):
    yield first
    yield from rest


FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Source:
    """Where ``data`` points for a benchmark: its Hub copy (hf), another Hub dataset (hub), its demo, or a file."""

    kind: str
    path: Path | None = None
    hub_id: str | None = None
    split: str | None = None


def data_source(benchmark: Benchmark, data: str | Path, split: str | None = None) -> Source:
    """What a ``data`` value names: ``hf`` (the benchmark's Hugging Face copy), ``demo`` (its bundled items),
    ``hf:OWNER/NAME`` or ``OWNER/NAME`` (a Hugging Face dataset; a bare ``OWNER/NAME`` only when no such file
    exists and it has no file suffix), else a file."""
    text = str(data).strip()
    if text == "hf":
        if not benchmark.hub_id:
            raise DataError(f"benchmark {benchmark.key!r}", None, None,
                            "has no Hugging Face copy: give data=FILE (.jsonl, .json, .csv or .parquet) or "
                            "data=hf:OWNER/NAME (a Hugging Face dataset)")
        return Source("hf", hub_id=benchmark.hub_id, split=split or benchmark.default_split or "test")
    if text == "demo":
        if benchmark.demo is None:
            raise DataError(f"benchmark {benchmark.key!r}", None, None,
                            "has no bundled demo items: give data=FILE or data=hf:OWNER/NAME")
        return Source("demo", path=benchmark.demo, split=benchmark.demo_split)
    hub = text[3:] if text.startswith("hf:") else None
    if hub is None and not Path(text).exists() and Path(text).suffix.lower() not in FILE_SUFFIXES \
            and HUB_ID.match(text):
        hub = text
    if hub is not None:
        if not HUB_ID.match(hub):
            raise DataError(text, None, None, "is not a Hugging Face dataset id (hf:OWNER/NAME)")
        own = registry.by_hub_id(hub)
        return Source("hf" if own is benchmark else "hub", hub_id=hub,
                      split=split or (own or benchmark).default_split or "test")
    return Source("file", path=Path(text))


@dataclass(frozen=True)
class LoadedData:
    """A run's items and what they are (``DataRecord``: the record every task writes into its metadata)."""

    items: list[MCQItem]
    source: DataRecord


def load_data(benchmark: str, data: str | Path = "hf", split: str | None = None, limit: int | None = None,
              columns: Any = None, data_name: str | None = None) -> LoadedData:
    """The items of a registered benchmark (``benchmarks.registry``) from ``data`` (``data_source``: hf, demo,
    a Hugging Face dataset id or a file), and the ``DataRecord`` that describes them. A file's layout is the
    benchmark's own when its first row has those columns, else the first layout it matches, else the one
    ``columns`` names (any form ``columns.parse_columns`` reads; it wins over a layout where both apply)."""
    spec = registry.get(benchmark)
    where = data_source(spec, data, split)
    described = describe(benchmark, data, split, data_name)
    given = parse_columns(columns)
    prefer: tuple[str, ...] = (spec.layout,) if spec.layout else ()
    if where.kind in ("hf", "hub"):
        owner = spec if where.kind == "hf" else registry.by_hub_id(where.hub_id or "")
        if owner is not None:  # a registered benchmark's Hub copy: its layout and where the copy departs from it
            prefer = (owner.layout,) if owner.layout else ()
            given = {**dict(owner.hub_columns), **given}
        source = f"hf:{where.hub_id}[{where.split}]"
        records: Iterable[tuple[int, dict[str, Any]]] = _hf_rows(where.hub_id or "", where.split or "test")
        part = where.split if where.kind == "hf" else f"{(where.hub_id or '').split('/')[-1]}-{where.split}"
        duplicates: Duplicates = "warn"  # published data sets repeat some questions
    else:
        path = where.path or Path(str(data))
        source, records = str(path), read_rows(path)
        part = spec.demo_split if where.kind == "demo" else path.stem
        duplicates = "error"
    prefix = spec.id_prefix.format(key=spec.key, part=part)
    items, layout, used = _load(records, source, given, prefer, prefix, duplicates, limit)
    if not parse_columns(columns):  # the Hub copy's own departures are part of its layout, not a user's mapping
        layout = layout.split("+")[0]
    if where.kind in ("file", "hub"):
        log.info("%s: layout %s (%s), %d items", source, layout, used.text(), len(items))
    return LoadedData(items, replace(described, layout=layout, columns=used.text(), items=len(items)))


def describe(benchmark: str, data: str | Path = "hf", split: str | None = None,
             data_name: str | None = None) -> DataRecord:
    """What ``data`` is for a registered benchmark, without reading it (``load_data`` adds the layout, columns
    and item count): the record every task writes into its metadata, and what the report and the terminal
    say of a run whose log has no such record."""
    spec = registry.get(benchmark)
    where = data_source(spec, data, split)
    stem = (where.hub_id or "").split("/")[-1] if where.kind in ("hf", "hub") else \
        where.path.stem if where.path is not None else Path(str(data)).stem
    return DataRecord(
        benchmark=spec.key, title=spec.title, name=data_name or default_name(spec.key, where.kind, stem),
        kind=where.kind, file=where.path.name if where.kind == "file" and where.path else None,
        hub_id=where.hub_id if where.kind in ("hf", "hub") else None,
        split=where.split if where.kind != "file" else None,
        licence=spec.licence if where.kind in ("hf", "demo") else None)


def load_items(benchmark: str, data: str | Path = "hf", split: str | None = None, limit: int | None = None,
               columns: Any = None) -> list[MCQItem]:
    """Load a registered benchmark from a source (``hf``, ``demo``, a Hugging Face dataset id or a path),
    optionally the first ``limit``; ``columns``: a column mapping (``benchmarks.columns``)."""
    return load_data(benchmark, data, split, limit, columns).items


def load_medqa(data: str | Path = "hf", split: str = "test", limit: int | None = None) -> list[MCQItem]:
    """MedQA-USMLE 4-option: ``"hf"`` (Hugging Face copy), ``"demo"`` (bundled 50 dev items) or a path
    to the original release jsonl (or any file in its layout)."""
    return load_items("medqa", data, split, limit)


def load_medmcqa(data: str | Path = "hf", split: str = "validation", cop_base: int | None = None,
                 limit: int | None = None) -> list[MCQItem]:
    """MedMCQA: ``"hf"`` (``openlifescienceai/medmcqa``, 0-based ``cop``), ``"demo"`` (bundled 50 dev
    items) or a path to the original release file (1-based ``cop``). ``cop_base`` overrides the
    convention for unusual copies.

    The HF test split has no answers (``cop`` is -1), so the default split is ``validation``.
    """
    if cop_base not in (None, 0, 1):
        raise MedfuzzError(f"cop_base must be 0 or 1, got {cop_base}")
    columns = None if cop_base is None else {"answer_format": f"index{cop_base}"}
    return load_items("medmcqa", data, split, limit, columns)
