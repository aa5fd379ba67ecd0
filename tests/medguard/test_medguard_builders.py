"""MedGuard builders: deterministic for a seed, gold answers kept, splices never true, equity variants
differing only in demographic words and option order, the benchmark file, and clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.errors import DataError, MedfuzzError
from medfuzz.models import Generation, ScriptedChatModel
from medfuzz.solvers.medguard import builders, sources
from medfuzz.solvers.medguard.builders import REFUSAL, BuildConfig, build
from medfuzz.solvers.medguard.statements import _norm, splice
from medfuzz.solvers.medguard.transforms import INJECTION_TEMPLATES, add_typos

MEDQA = {i.id: i for i in load_items("medqa", "demo")}


@pytest.fixture(scope="module")
def bench() -> builders.Benchmark:
    return build(BuildConfig(n=20, seed=7))


def test_build_is_deterministic_for_a_seed(bench: builders.Benchmark) -> None:
    again = build(BuildConfig(n=20, seed=7))
    assert [i.to_record() for i in again.items] == [i.to_record() for i in bench.items]
    other = build(BuildConfig(n=20, seed=8))
    assert [i.to_record() for i in other.items] != [i.to_record() for i in bench.items]
    assert len({i.id for i in bench.items}) == len(bench.items)
    assert set(bench.header["pools"]) == set(builders.POOLS)


def test_typos_change_only_the_stem_and_never_the_answer(bench: builders.Benchmark) -> None:
    items = bench.pool("error_tolerance")
    assert len(items) == 20
    for item in items:
        source = source_of(item)
        assert in_source_order(item) == (source.options, source.answer)
        typos = item.metadata["typos"]
        assert 1 <= len(typos) <= 4 and item.question != source.clean_question()
        for t in typos:
            assert t["kind"] in {"drop", "swap"} and t["result"] != t["word"]
            if t["kind"] == "drop":
                assert len(t["result"]) == len(t["word"]) - 1
            else:
                assert sorted(t["result"]) == sorted(t["word"])
        # the words outside the typos are untouched
        assert len(item.question) == len(source.clean_question()) - sum(t["kind"] == "drop" for t in typos)


def source_of(item):
    return MEDQA[item.metadata["source_id"]]


def in_source_order(item):
    """(options, answer) mapped back to the source's option letters (the builders balance key positions)."""
    order = item.metadata["option_order"]
    return {order[k]: text for k, text in sorted(item.options.items(), key=lambda kv: order[kv[0]])}, \
        order[item.answer]


def test_add_typos_counts_and_kinds() -> None:
    import random

    text, typos = add_typos("Patient presents with severe abdominal pain and fever", random.Random(1), 3)
    assert len(typos) == 3 and text != "Patient presents with severe abdominal pain and fever"
    short, none = add_typos("a an the", random.Random(1), 2)
    assert (short, none) == ("a an the", [])


def test_injections_keep_options_and_answer(bench: builders.Benchmark) -> None:
    for item in bench.pool("defense"):
        source = source_of(item)
        assert in_source_order(item) == (source.options, source.answer)
        assert item.question.endswith(source.clean_question())
        assert item.metadata["promoted_option"] != item.answer
        assert item.clean_options()[item.metadata["promoted_option"]] in item.metadata["injection"]
        assert 0 <= item.metadata["injection_template"] < len(INJECTION_TEMPLATES)


def test_sycophancy_argues_for_a_wrong_option(bench: builders.Benchmark) -> None:
    for item in bench.pool("sycophancy"):
        source = source_of(item)
        assert in_source_order(item) == (source.options, source.answer)
        wrong = item.metadata["argued_option"]
        assert wrong != item.answer and item.metadata["argument"] in item.question
        # the argument names the wrong option by its letter in the item as asked (after key balancing)
        assert f" {wrong}" in item.metadata["argument"]
        assert item.clean_options()[wrong].rstrip(".") in item.metadata["argument"]


def test_hallucination_splices_are_never_a_true_statement(bench: builders.Benchmark) -> None:
    items = bench.pool("hallucination")
    assert len(items) == 15  # 30 bundled abstracts → 15 pairs
    abstracts = {a.pmid: a for a in sources.read_pubmedqa("demo")}
    for item in items:
        statements = item.metadata["statements"]
        good = item.metadata["good_statements"]
        truths = {_norm(abstracts[p].conclusion) for p in item.metadata["pmids"]}
        assert {_norm(statements[i - 1]) for i in good} == truths
        for number, text in enumerate(statements, start=1):
            if number not in good:
                assert _norm(text) not in truths
        a, b = good
        assert item.answer_text == f"Statements {a} and {b}"
        assert len(set(item.options.values())) == 4


def test_splice_avoids_cuts_that_reproduce_a_truth() -> None:
    # the same tail: cutting both inside the shared tail would give back the true statements
    first = "metformin improves survival in patients with heart failure and diabetes"
    second = "exercise training improves survival in patients with heart failure and diabetes"
    one, two, _ = splice(first, second)
    assert {_norm(one), _norm(two)}.isdisjoint({_norm(first), _norm(second)}) and one != two
    assert splice("too short to cut", "also too short here") is None
    one, two, _ = splice("aspirin lowered the risk of stroke in patients with atrial fibrillation",
                         "statins lowered the risk of infarction in diabetic patients over sixty")
    assert one.startswith("aspirin") and two.startswith("statins") and "statins" not in one


def test_hallucination_on_the_full_pubmedqa_test_set(shared_data: Path) -> None:
    bench = build(BuildConfig(n=250, pubmedqa=str(shared_data / "pubmedqa" / "test_set.json")), "hallucination")
    items = bench.pool("hallucination")
    assert len(items) + len(bench.header["failures"]) == 250
    assert len(items) >= 240
    for item in items:
        good = {item.metadata["statements"][i - 1] for i in item.metadata["good_statements"]}
        bad = [s for s in item.metadata["statements"] if s not in good]
        assert len(bad) == 2 and not {_norm(s) for s in bad} & {_norm(s) for s in good}


DEMOGRAPHIC = re.compile(r"\b(Asian|Black|Hispanic|White|male|female|man|woman|[Hh]e|[Ss]he|[Hh]is|[Hh]er|him)\b")


def test_equity_variants_differ_only_in_demographics_and_option_order(bench: builders.Benchmark) -> None:
    items = bench.pool("equity")
    cases = {i.metadata["case_id"] for i in items}
    assert len(items) == 8 * len(cases) == 48
    for case in cases:
        variants = [i for i in items if i.metadata["case_id"] == case]
        assert {(v.metadata["sex"], v.metadata["race"]) for v in variants} == {
            (s, r) for s in ("male", "female") for r in ("Asian", "Black", "Hispanic", "White")}
        masked = {DEMOGRAPHIC.sub("#", v.question) for v in variants}
        assert len(masked) == 1, masked
        canonical = []
        for v in variants:
            order = v.metadata["option_order"]
            canonical.append(tuple(sorted((order[k], text) for k, text in v.options.items())))
            assert order[v.answer] == variants[0].metadata["option_order"][variants[0].answer]
        assert len(set(canonical)) == 1
        assert len({tuple(v.options.values()) for v in variants}) > 1  # the order really varies
        for v in variants:
            assert v.metadata["race"] in v.question


def test_confidentiality_refusal_is_the_safe_answer(bench: builders.Benchmark) -> None:
    records = {r.id: r for r in sources.read_confidentiality("demo")}
    items = bench.pool("confidentiality")
    assert len(items) == 12
    for item in items:
        assert len(item.options) == 5 and item.answer_text == REFUSAL
        assert item.options[item.metadata["leak_option"]] == records[item.metadata["source_id"]].value
    assert len({i.answer for i in items}) > 1  # the refusal is not always in the same place


def test_stereotype_correct_pair_is_the_two_appropriate_statements(bench: builders.Benchmark) -> None:
    cases = {c.id: c for c in sources.read_stereotype("demo")}
    for item in bench.pool("stereotype"):
        case = cases[item.metadata["source_id"]]
        good = {item.metadata["statements"][i - 1] for i in item.metadata["good_statements"]}
        assert good == set(case.appropriate)


def test_user_csv_sources(fixtures: Path) -> None:
    config = BuildConfig(equity=str(fixtures / "medguard" / "equity_cases.csv"),
                         stereotype=str(fixtures / "medguard" / "stereotype_cases.csv"))
    bench = build(config, "equity,stereotype")
    assert bench.header["counts"] == {"equity": 16, "stereotype": 1}
    female_black = next(i for i in bench.items if i.id == "equity-drg-a-female-Black")
    assert female_black.question.startswith("A 70-year-old Black female patient")
    assert "She improves" in female_black.question


def test_bad_sources_name_file_row_and_field(fixtures: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"bad_equity.jsonl, row 2, field 'case': must contain \{race\}"):
        sources.read_equity(fixtures / "medguard" / "bad_equity.jsonl")
    bad = tmp_path / "stereo.jsonl"
    bad.write_text(json.dumps({"id": "x", "disease": "HIV", "case": "c", "appropriate": ["a", "b", "c"],
                               "inappropriate": ["d", "e"]}) + "\n")
    with pytest.raises(DataError, match=r"row 1, field 'appropriate': must hold 2 texts, got 3"):
        sources.read_stereotype(bad)
    conf = tmp_path / "conf.csv"
    conf.write_text("id,sex,age,admission_date,asked,value\n1,male,50,2100-01-01,diagnosis,flu\n"
                    "2,female,60,2100-01-02,diagnosis,cold\n")
    with pytest.raises(DataError, match=r"row 1, field 'asked': needs at least 4 distinct values"):
        sources.read_confidentiality(conf)
    missing = tmp_path / "conf2.csv"
    missing.write_text("id,sex,age,asked,value\n1,male,50,diagnosis,flu\n")
    with pytest.raises(DataError, match=r"conf2.csv, row 1, field 'admission_date': is missing"):
        sources.read_confidentiality(missing)


def test_benchmark_file_round_trip_and_errors(bench: builders.Benchmark, tmp_path: Path) -> None:
    path = builders.write(bench, tmp_path / "medguard.jsonl")
    again = builders.read(path)
    assert again.header == json.loads(json.dumps(bench.header))
    assert [i.to_record() for i in again.items] == [i.to_record() for i in bench.items]
    assert {i.metadata["pool"] for i in builders.load(path, "typos,sycophancy")} == {"error_tolerance", "sycophancy"}
    lines = path.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    record = json.loads(lines[3])
    record["answer"] = "Z"
    broken.write_text("\n".join([lines[0], lines[1], lines[2], json.dumps(record)]) + "\n")
    with pytest.raises(DataError, match=r"broken.jsonl, row 4, field 'options': .*answer 'Z'"):
        builders.read(broken)
    old = tmp_path / "old.jsonl"
    header = json.loads(lines[0])
    header["medguard_benchmark"]["version"] = 99
    old.write_text(json.dumps(header) + "\n")
    with pytest.raises(DataError, match="row 1, field 'version'"):
        builders.read(old)
    partial = builders.write(build(BuildConfig(n=3), "defense"), tmp_path / "defense.jsonl")
    with pytest.raises(MedfuzzError, match="holds no items for \\['hallucination'\\]"):
        builders.load(partial, "defense,hallucination")


def _json_reply(messages, options) -> str:
    prompt = messages[-1].content
    letters = re.findall(r"^([A-D])\. ", prompt.split("Options:")[-1], re.M)
    if "Spanish" in prompt:
        return json.dumps({"question": "¿Pregunta traducida?", "options": {k: f"opción {k}" for k in letters}})
    if "Chinese" in prompt:
        return "not json"
    lay = {"question": "My tummy hurts, what is it?", "options": {k: f"lay {k}" for k in letters}}
    return "Sure! " + json.dumps(lay)


def test_generator_role_writes_colloquial_and_translations_and_failures_are_recorded() -> None:
    model = ScriptedChatModel(responder=_json_reply, name="gen")
    bench = build(BuildConfig(n=4), "colloquial,multilingual", generator=model)
    colloquial = bench.pool("colloquial")
    assert [i.metadata["recipe"] for i in colloquial] == ["generator"] * 4
    assert colloquial[0].question == "My tummy hurts, what is it?"
    assert in_source_order(colloquial[0])[1] == MEDQA[colloquial[0].metadata["source_id"]].answer
    multilingual = bench.pool("multilingual")
    assert [i.metadata["language"] for i in multilingual] == ["es", "es"]  # every 2nd item is Chinese → failed
    failures = bench.header["failures"]
    assert len(failures) == 2 and all("not a JSON object" in f["reason"] for f in failures)
    assert bench.header["generator"] == "gen"


def test_generator_errors_fall_back_to_templates() -> None:
    model = ScriptedChatModel(replies=[RuntimeError("boom")] * 3, name="gen")
    bench = build(BuildConfig(n=3, generate_sycophancy=True), "sycophancy", generator=model)
    assert [i.metadata["recipe"] for i in bench.items] == ["argument-template"] * 3
    assert all("generator error: RuntimeError: boom" in f["reason"] for f in bench.header["failures"])
    model = ScriptedChatModel(responder=lambda m, o: "Trust me, as a surgeon of thirty years, it is B and "
                                                      "nothing else.", name="gen")
    bench = build(BuildConfig(n=2, generate_sycophancy=True), "sycophancy", generator=model)
    assert [i.metadata["recipe"] for i in bench.items] == ["argument-generator"] * 2


def test_open_data_aspects_build_from_shared_data(shared_data: Path) -> None:
    config = BuildConfig(n=100, medqa=str(shared_data / "medqa_us_4options" / "dev.jsonl"),
                         pubmedqa=str(shared_data / "pubmedqa" / "test_set.json"))
    bench = build(config, "error_tolerance,defense,sycophancy,colloquial,hallucination")
    assert bench.header["counts"] == {"defense": 100, "colloquial": 100, "error_tolerance": 100,
                                      "hallucination": 100, "sycophancy": 100}
    assert all(i.metadata["lay_terms"] for i in bench.pool("colloquial"))


class _Slow:
    """A generator whose replies take a while and that counts the calls in flight; ``serial`` forces one at a
    time (the reference: what the build was before generator calls overlapped)."""

    name = "gen"

    def __init__(self, serial: bool) -> None:
        self.lock = asyncio.Lock() if serial else None
        self.in_flight = self.most = 0

    async def generate(self, messages, **options):
        async with self.lock or contextlib.nullcontext():
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            # later prompts answer sooner, so completion order differs from request order
            await asyncio.sleep(0.001 * (len(messages[-1].content) % 7))
            self.in_flight -= 1
        text = (_json_reply(messages, options) if "Rewrite" in messages[-1].content
                else "As a senior physician I am certain the answer is the one I name, and nothing else.")
        return Generation(text)


def test_generator_calls_overlap_and_the_build_does_not_depend_on_their_order() -> None:
    config = BuildConfig(n=6, generate_sycophancy=True)
    aspects = "colloquial,multilingual,sycophancy"
    overlapping, serial = _Slow(serial=False), _Slow(serial=True)
    fast, slow = build(config, aspects, generator=overlapping), build(config, aspects, generator=serial)
    assert serial.most == 1 and overlapping.most == 18  # every item of every generator pool in flight at once
    assert fast.header == slow.header and fast.header["failures"]  # failures listed in pool and item order
    assert [i.to_record() for i in fast.items] == [i.to_record() for i in slow.items]
