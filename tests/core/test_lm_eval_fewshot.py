"""lm-eval few-shot never shows a doc its own item (``medfuzz.tasks.lm_eval.fewshot``), on every medfuzz task.

Each task is built by lm-eval's own ``TaskManager`` from the shipped YAML folder and its requests by lm-eval's own
``build_all_requests`` at ``--num_fewshot 5`` (no model is needed: the examples are in the request contexts). The
check reads the rendered context: the part before the doc's own text must not hold the doc's question (or, for
MedFuzz, its clean question; for a MedGuard equity unit, the question of any of its variants).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from medfuzz.benchmarks import load_items, registry
from medfuzz.errors import MedfuzzError
from medfuzz.solvers.medfuzz.store import write_jsonl
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval import fewshot

SHOTS = 5
OWN_DATA = Path(__file__).parents[1] / "fixtures" / "own_mmlu.csv"  # a benchmark without bundled items reads it


def _task_names() -> list[str]:
    names = []
    for path in sorted(LM_EVAL_TASKS_PATH.rglob("*.yaml")):
        match = re.search(r"^task: (\S+)$", path.read_text(), re.M)
        if match:
            names.append(match.group(1))
    return names


TASKS = _task_names()


def _data(benchmark: str) -> str:
    """The bundled demo items, or a file for a benchmark without them (your own data)."""
    return "demo" if registry.get(benchmark).demo else str(OWN_DATA)


def _benchmark(task: str) -> str:
    return next(key for key in sorted(registry.BENCHMARKS, key=len, reverse=True)
                if task.startswith((f"{key}_", f"tces_{key}_", f"medfuzz_{key}")))


def _fuzzed_file(folder: Path, benchmark: str) -> Path:
    """Two replicates of each of 8 items (one ended as an LLM error), in the fuzzed-file layout."""
    records = []
    for item in load_items(benchmark, _data(benchmark), limit=8):
        for replicate in (0, 1):
            fuzzed = item.with_question(item.question + f" He has kept bees for {replicate + 3} years.")
            error = item.id.endswith("3") and replicate == 1
            records.append({"id": f"{item.id}#r{replicate}", "item_id": item.id, "replicate": replicate,
                            "outcome": "llm_error" if error else "success", "turn": 1,
                            "original": item.to_record(), "fuzzed": fuzzed.to_record(), "source": {}})
    return write_jsonl(records, folder / f"{benchmark}-fuzzed.jsonl")


def _metadata(task: str, folder: Path) -> dict[str, Any]:
    if task.startswith("medguard"):
        return {"limit_per_aspect": 8}
    if task.startswith("medfuzz_"):
        return {"fuzzed": str(_fuzzed_file(folder, _benchmark(task)))}
    return {"data": _data(_benchmark(task)), "limit": 12}


def _requests(task_name: str, metadata: dict[str, Any], shots: int):
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=metadata)
    task = get_task_dict([task_name], manager)[task_name]
    task.set_config(key="num_fewshot", value=shots)
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(rank=0, world_size=1, cache_requests=False)
    return task, task.instances


def _own_questions(doc: dict[str, Any]) -> list[str]:
    """The question text(s) a doc asks, from its own fields."""
    if doc.get("original_question"):
        return [doc["original_question"]]
    if doc.get("question"):
        return [doc["question"]]
    text = doc["context"] + "".join(doc["choices"])  # MedGuard: every variant's "Question: ..." line
    return [q.strip() for q in re.findall(r"Question: (.+)", text)]


def leaks(task, instances) -> list[str]:
    """The ids of docs whose examples hold their own question."""
    found = []
    for instance in instances:
        context, doc = instance.arguments[0], instance.doc
        own = task.doc_to_text(doc)
        assert context.endswith(own), (doc["id"], context[-200:], own[-200:])
        examples = context[: len(context) - len(own)]
        if any(question[:200] in examples for question in _own_questions(doc)):
            found.append(str(doc["id"]))
    return found


@pytest.mark.parametrize("task_name", TASKS)
def test_no_doc_sees_its_own_item_at_five_shots(task_name: str, tmp_path: Path) -> None:
    shots = SHOTS
    try:
        task, instances = _requests(task_name, _metadata(task_name, tmp_path), shots)
    except MedfuzzError as err:  # a bundled MedGuard aspect with fewer than six items: as many as it has
        shots = int(re.search(r"only (\d+) other item", str(err)).group(1))
        assert shots >= 2, err
        task, instances = _requests(task_name, _metadata(task_name, tmp_path), shots)
    assert instances
    assert leaks(task, instances) == []
    # the examples are there: that many before every doc
    delimiter = task.config.fewshot_delimiter
    for instance in instances[:20]:
        own = task.doc_to_text(instance.doc)
        assert instance.arguments[0][: -len(own)].count(delimiter) >= shots


def test_lm_eval_s_own_doc_level_exclusion_leaks_and_the_check_sees_it(tmp_path: Path, monkeypatch) -> None:
    """The check can fail: with lm-eval's default sampler (it leaves out the evaluated doc only) a MedFuzz
    replicate sees its sibling replicate, the same item, among its examples."""
    from lm_eval.api.samplers import ContextSampler

    monkeypatch.setattr(fewshot.ItemDisjointSampler, "sample", ContextSampler.sample)
    monkeypatch.setattr(fewshot.ItemDisjointSampler, "fewshot_docs", ContextSampler.fewshot_docs)
    task, instances = _requests("medfuzz_medqa", _metadata("medfuzz_medqa", tmp_path), SHOTS)
    assert len(leaks(task, instances)) >= 3


def test_every_template_declares_the_item_disjoint_sampler() -> None:
    templates = sorted(LM_EVAL_TASKS_PATH.rglob("_*template_yaml"))
    assert len(templates) == 5
    for path in templates:
        text = path.read_text()
        assert "fewshot_split: test\n" in text and "fewshot.ItemDisjointSampler" in text, path


def test_the_sampler_leaves_out_every_doc_of_the_item_and_draws_lm_eval_s_way() -> None:
    docs = [{"id": f"q{i}#r{r}", "item_id": f"q{i}", "scored": r != 2, "n_options": 4 if r != 2 else 0}
            for i in range(6) for r in range(3)]
    sampler = fewshot.ItemDisjointSampler(docs, rnd=1234)
    assert [d["id"] for d in sampler.fewshot_docs()] == [f"q{i}#r0" for i in range(6)]  # one per item, scored
    for i in range(6):
        for n in range(1, 6):
            drawn = sampler.sample(n, eval_doc=docs[3 * i + 1])
            assert len(drawn) == n and f"q{i}" not in {d["item_id"] for d in drawn}
            assert len({d["item_id"] for d in drawn}) == n
    with pytest.raises(MedfuzzError, match="only 5 other item"):
        sampler.sample(6, eval_doc=docs[0])
    assert len(sampler.sample(6)) == 6  # no evaluated doc (a disjoint split): every item may be drawn
    # MedGuard: units of one case, items made from one question
    assert fewshot.leak_key({"id": "c1|white", "case_id": "c1"}) == fewshot.leak_key({"id": "c1|black",
                                                                                       "case_id": "c1"})
    assert fewshot.leak_key({"id": "syc-1", "case_id": "", "source_id": "medqa-dev-00001"}) == "medqa-dev-00001"


def test_hf_data_draws_from_the_train_split_only_when_asked(monkeypatch, tmp_path: Path) -> None:
    """``data=hf``: the docs name MedQA's train split, read (here: a stand-in file) only when examples are drawn;
    evaluating ``train`` itself falls back to the evaluated docs."""
    from medfuzz.benchmarks import selection as selection_module
    from medfuzz.benchmarks.selection import DataSelection

    assert fewshot.source("clean", "medqa", DataSelection(data="demo"), 0) == ""
    assert fewshot.source("clean", "medqa", DataSelection(data="hf", split="train"), 0) == ""
    value = fewshot.source("tces", "medqa", DataSelection(data="hf"), 7)
    assert json.loads(value) == {"benchmark": "medqa", "family": "tces", "seed": 7, "shuffle_choices": False,
                                 "split": "train"}
    reads: list[tuple[str, str | None]] = []

    real_load = selection_module.load_data

    def fake_load(benchmark, data="hf", split=None, limit=None, columns=None, data_name=None):
        reads.append((data, split))
        loaded = real_load(benchmark, "demo")
        return type(loaded)(loaded.items[20:30], loaded.source)

    monkeypatch.setattr(selection_module, "load_data", fake_load)
    fewshot._split_docs.cache_clear()
    evaluated = [{"id": f"medqa-test-{i}", "context": "x", "choices": [" A"], "answer_index": 0,
                  fewshot.FEWSHOT_SOURCE: value} for i in range(3)]
    sampler = fewshot.ItemDisjointSampler(evaluated, rnd=0)
    assert reads == []  # nothing read until examples are drawn
    drawn = sampler.sample(4, eval_doc=evaluated[0])
    assert reads == [("hf", "train")] and len(drawn) == 4
    assert all(d["id"].startswith("medqa-dev") and d["prompt"] in d["context"] + d["choices"][0] for d in drawn)
    fewshot._split_docs.cache_clear()
