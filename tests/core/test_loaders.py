from __future__ import annotations

import json
from pathlib import Path

import pytest

from medfuzz.benchmarks import (
    DEMO_MEDMCQA,
    DEMO_MEDQA,
    ColumnMap,
    MCQItem,
    clean_text,
    load_items,
    load_local,
    load_medmcqa,
    load_medqa,
)
from medfuzz.benchmarks.items import item_seed
from medfuzz.benchmarks.prompts import completion_prompt
from medfuzz.errors import DataError, MedfuzzError

GOOD = {"question": "Which drug?", "options": {"A": "x", "B": "y", "C": "z", "D": "w"},
        "answer": "y", "answer_idx": "B", "meta_info": "step1"}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_medqa_fixture_loads(fixtures):
    items = load_medqa(fixtures / "medqa_small.jsonl")
    assert len(items) == 5
    first = items[0]
    assert first.answer == "C" and first.answer_text == "Ceftriaxone"
    assert first.metadata["meta_info"] == "step1" and first.metadata["row"] == 1
    assert first.id == "medqa-medqa_small-00001"


def test_demo_samples_are_bundled():
    assert DEMO_MEDQA.is_file() and DEMO_MEDMCQA.is_file()
    assert len(load_medqa("demo")) == 50
    assert len(load_medmcqa("demo")) == 50
    assert load_items("medqa", "demo", limit=3)[2].id == "medqa-dev-00003"


def test_medmcqa_release_file_is_one_based(fixtures):
    items = load_medmcqa(fixtures / "medmcqa_small.jsonl")
    raw = [json.loads(line) for line in (fixtures / "medmcqa_small.jsonl").read_text().splitlines()]
    for item, row in zip(items, raw, strict=True):
        assert item.answer == "ABCD"[row["cop"] - 1]
        assert item.id == row["id"]


def test_medmcqa_zero_based_override(tmp_path):
    row = {"id": "q1", "question": "Q?", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 0}
    path = write_jsonl(tmp_path / "hf_copy.jsonl", [row])
    assert load_medmcqa(path, cop_base=0)[0].answer == "A"
    with pytest.raises(DataError) as err:
        load_medmcqa(path)
    assert "row 1" in str(err.value) and "'cop'" in str(err.value) and "0-based" in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "field", "problem"),
    [
        (lambda r: r.update(question="  "), "question", "is empty"),
        (lambda r: r.pop("question"), "question", "is missing"),
        (lambda r: r["options"].pop("C"), "options", "without gaps"),
        (lambda r: r["options"].update(B=""), "options.B", "is missing or empty"),
        (lambda r: r.update(answer_idx="E"), "answer_idx", "not among the options"),
        (lambda r: r.update(answer="nope"), "answer", "disagrees with option B"),
        (lambda r: r.update(question=7), "question", "must be text"),
    ],
)
def test_malformed_medqa_row_names_file_row_field(tmp_path, mutate, field, problem):
    bad = json.loads(json.dumps(GOOD))
    mutate(bad)
    other = {**GOOD, "question": GOOD["question"] + " Another case."}  # two good rows, not duplicates
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD, other, bad])
    with pytest.raises(DataError) as err:
        load_medqa(path)
    message = str(err.value)
    assert str(path) in message and "row 3" in message and f"field {field!r}" in message
    assert problem in message
    assert err.value.row == 3 and err.value.field == field


def test_bad_encoding_names_row(tmp_path):
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(GOOD).encode()
    path.write_bytes(good + b"\n" + good.replace(b"Which", b"Wh\xe9ch") + b"\n")
    with pytest.raises(DataError) as err:
        load_medqa(path)
    assert "row 2" in str(err.value) and "UTF-8" in str(err.value)


def test_invalid_json_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(DataError, match=r"row 2: is not valid JSON"):
        load_medqa(path)


def test_missing_file_and_unknown_benchmark(tmp_path):
    with pytest.raises(MedfuzzError, match="no such data file"):
        load_medqa(tmp_path / "absent.jsonl")
    with pytest.raises(MedfuzzError, match="unknown benchmark"):
        load_items("pubmed", "demo")


def test_local_csv_with_column_map(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("qid,stem,o1,o2,o3,key\nk1,What?,red,green,blue,2\nk2,Why?,a,b,c,3\n")
    columns = ColumnMap(question="stem", options=("o1", "o2", "o3"), answer="key", answer_format="index1",
                        id="qid")
    items = load_local(path, columns)
    assert [i.answer for i in items] == ["B", "C"] and items[0].id == "k1"
    assert items[0].options == {"A": "red", "B": "green", "C": "blue"}
    path.write_text("qid,stem,o1,o2,o3,key\nk1,What?,red,,blue,2\n")
    with pytest.raises(DataError, match=r"row 1, field 'o2': is empty"):
        load_local(path, columns)


def test_local_parquet_and_json_list_with_text_answers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"q": "Q1", "choices": ["a", "b"], "gold": "b"}, {"q": "Q2", "choices": ["c", "d"], "gold": "c"}]
    columns = ColumnMap(question="q", options="choices", answer="gold", answer_format="text")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "x.parquet")
    (tmp_path / "x.json").write_text(json.dumps(rows))
    for name in ("x.parquet", "x.json"):
        assert [i.answer for i in load_local(tmp_path / name, columns)] == ["B", "A"]


def test_json_dict_keyed_by_id(tmp_path):
    data = {"p1": {"question": "Q", "options": {"A": "a", "B": "b"}, "answer": "A"}}
    (tmp_path / "d.json").write_text(json.dumps(data))
    assert load_local(tmp_path / "d.json", ColumnMap(id="id"))[0].id == "p1"


def test_a_repeated_json_key_is_an_error_not_a_lost_row(tmp_path):
    # plain json.loads keeps the last "p1": one of the two rows would vanish without a word (both harnesses)
    row = '{"question": "Q", "options": {"A": "a", "B": "b"}, "answer": "A"}'
    (tmp_path / "d.json").write_text('{\n "p1": ' + row + ',\n "p2": ' + row + ',\n "p1": ' + row + '\n}\n')
    with pytest.raises(DataError, match=r"d.json, row 4, field 'p1': is a repeated key"):
        load_local(tmp_path / "d.json", ColumnMap(id="id"))
    # inside a record of a JSON Lines file: the line is named
    (tmp_path / "d.jsonl").write_text(row + "\n" + row.replace('"answer": "A"', '"answer": "A", "answer": "B"') + "\n")
    with pytest.raises(DataError, match=r"d.jsonl, row 2, field 'answer': is a repeated key"):
        load_local(tmp_path / "d.jsonl")


def test_duplicate_ids_rejected(tmp_path):
    row = {"id": "same", "question": "Q", "options": {"A": "a", "B": "b"}, "answer": "A"}
    path = write_jsonl(tmp_path / "dup.jsonl", [row, row])
    with pytest.raises(DataError, match=r"row 2, field 'id': duplicate id 'same' \(also row 1\)"):
        load_local(path, ColumnMap(id="id"))


def test_duplicate_rows_rejected_naming_both_rows(tmp_path, fixtures):
    rows = [json.loads(line) for line in (fixtures / "medqa_small.jsonl").read_text().splitlines()]
    path = write_jsonl(tmp_path / "dup.jsonl", [rows[0], rows[1], rows[2], dict(rows[1])])
    with pytest.raises(DataError, match=r"dup.jsonl, row 4: repeats row 2 \(same question, options and answer\)"):
        load_medqa(path)


def test_duplicate_rows_warned_when_asked(tmp_path, caplog):
    from medfuzz.benchmarks.loaders import items_from_records

    row = {"question": "Q", "options": {"A": "a", "B": "b"}, "answer": "A"}
    items = items_from_records([(1, row), (2, dict(row))], ColumnMap(), "x", "x", duplicates="warn")
    assert len(items) == 2 and "row 2: repeats row 1" in caplog.text


def test_csv_with_byte_order_mark(tmp_path):
    text = "question,options,answer\nWhat?,\"{\"\"A\"\": \"\"a\"\", \"\"B\"\": \"\"b\"\"}\",B\n"
    (tmp_path / "bom.csv").write_bytes("\ufeff".encode() + text.encode())
    [item] = load_local(tmp_path / "bom.csv")
    assert item.question == "What?" and item.answer == "B"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ('What is the next step?"', "What is the next step?"),
        ('Meningitis\n"', "Meningitis"),
        ('The so-called "silent" MI', 'The so-called "silent" MI'),
        ('He said "stop"', 'He said "stop"'),
        ("  plain  ", "plain"),
    ],
)
def test_clean_text(raw, clean):
    assert clean_text(raw) == clean


def test_cleaning_does_not_alter_data_and_prompt_is_clean():
    item = MCQItem("x", 'Which one?"', {"A": 'one\n"', "B": "two"}, "A")
    assert item.question.endswith('"') and item.options["A"].endswith('"')
    assert completion_prompt(item) == "Question: Which one?\nA. one\nB. two\nAnswer:"


def test_shuffle_follows_answer_and_is_seeded():
    item = MCQItem("x", "Q", {"A": "a", "B": "b", "C": "c", "D": "d"}, "C")
    shuffled = item.shuffled(item_seed(3, item.id))
    assert shuffled.answer_text == "c"
    assert sorted(shuffled.options.values()) == ["a", "b", "c", "d"]
    assert shuffled == item.shuffled(item_seed(3, item.id))
    order = shuffled.metadata["option_order"]
    assert all(shuffled.options[new] == item.options[old] for new, old in order.items())
    assert item_seed(3, "x") == item_seed(3, "x") != item_seed(4, "x")


def test_item_rejects_bad_letters():
    with pytest.raises(ValueError, match="consecutive"):
        MCQItem("x", "Q", {"A": "a", "C": "c"}, "A")
    with pytest.raises(ValueError, match="not one of"):
        MCQItem("x", "Q", {"A": "a", "B": "b"}, "C")
    item = MCQItem("x", "Q", {"A": "a", "B": "b"}, "B", {"k": 1})
    assert MCQItem.from_record(item.to_record()) == item


def test_shared_full_files_load(shared_data):
    medqa = load_medqa(shared_data / "medqa_us_4options" / "dev.jsonl")
    medmcqa = load_medmcqa(shared_data / "medmcqa" / "dev.json")
    assert len(medqa) == 1272 and len(medmcqa) == 4183
    assert sum('"' in i.question[-1:] for i in medqa) > 50  # the artifacts are kept in the data
    assert not any(i.clean_question().endswith('"') and i.clean_question().count('"') % 2 for i in medqa)


def test_an_unreachable_hub_dataset_is_a_data_error_naming_the_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, ``data=hf`` fails as a DataError (one line in the ``inspect`` CLI: 6 lines instead of a
    157-line traceback), naming the dataset and the split and saying what to pass instead."""
    import datasets

    from medfuzz.benchmarks.loaders import _hf_rows
    from medfuzz.errors import DataError

    def offline(*_: object, **__: object) -> None:
        raise ConnectionError("Couldn't reach the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"'GBaker/MedQA-USMLE-4-options': could not load split 'test' "
                                        r"\(ConnectionError: .*Offline\? Pass a local file path or 'demo'"):
        _hf_rows("GBaker/MedQA-USMLE-4-options", "test")


def test_a_nul_byte_in_any_text_field_is_refused_naming_row_and_field(tmp_path):
    for field, mutate in (("question", lambda r: {**r, "question": r["question"] + "\x00"}),
                          ("options.B", lambda r: {**r, "options": {**r["options"], "B": "x\x00y"}})):
        path = tmp_path / f"nul-{field}.jsonl"
        path.write_text(json.dumps(GOOD) + "\n" + json.dumps(mutate(GOOD)) + "\n")
        with pytest.raises(DataError, match="NUL byte") as err:
            load_medqa(path)
        assert (err.value.row, err.value.field) == (2, field)


def test_an_item_longer_than_any_context_is_warned_about(tmp_path, caplog):
    from medfuzz.benchmarks.loaders import LONGEST_ITEM_CHARS

    path = tmp_path / "huge.jsonl"
    huge = {**GOOD, "question": "Which is it? " + "x" * LONGEST_ITEM_CHARS}
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(huge) + "\n")
    assert len(load_medqa(path)) == 2
    [warning] = [r.getMessage() for r in caplog.records if "context" in r.getMessage()]
    assert "row 2" in warning and "more than any model's context" in warning


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_limit_reads_only_the_rows_it_needs(tmp_path, suffix, monkeypatch):
    """A run with ``--limit 3`` on a large file: rows after the third are never read (a broken row 5 is not
    even seen), in every streamed format."""
    rows = [{"question": f"Which one, {i}?", "A": "a", "B": "b", "C": "c", "D": "d", "answer": "A"}
            for i in range(6)]
    rows[4] = {**rows[4], "answer": "Z"}  # broken, past the limit
    path = tmp_path / f"items{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".csv":
        import csv

        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    columns = ColumnMap(options=("A", "B", "C", "D"))
    from medfuzz.benchmarks.loaders import items_from_records, read_rows

    items = items_from_records(read_rows(path), columns, str(path), "x", limit=3)
    assert [i.question for i in items] == [f"Which one, {i}?" for i in range(3)]
    with pytest.raises(DataError) as err:
        items_from_records(read_rows(path), columns, str(path), "x")
    assert err.value.row == 5


def test_a_bad_byte_in_a_csv_names_its_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"question,A,B,answer\nWhich one?,a,b,A\nWh\xe9ch two?,a,b,B\n")
    with pytest.raises(DataError, match="UTF-8") as err:
        load_local(path, ColumnMap(options=("A", "B")))
    assert err.value.row == 3  # the file's third line
