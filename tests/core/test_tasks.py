"""Task definitions driven offline: Inspect with the scripted provider, lm-eval hooks directly."""

from __future__ import annotations

import yaml

from medfuzz.benchmarks import load_items
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval.baselines import clean_docs


def test_inspect_medqa_scores_letters_and_shuffles(tmp_path):
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import TASK_VERSION, medqa_clean
    from tests.scripted_inspect import SCRIPT

    SCRIPT[:] = ["ANSWER: C", "ANSWER: A", "ANSWER: B"]
    log = inspect_eval(medqa_clean(data="demo", limit=3), model="medfuzz-scripted/x", log_dir=str(tmp_path),
                       display="none")[0]
    assert log.status == "success" and log.eval.task_version == TASK_VERSION == 1  # in the log header
    values = [s.scores["baseline_choice"].value for s in log.samples]
    assert [s.target for s in log.samples] == ["C", "A", "D"] and values == ["C", "C", "I"]
    metrics = log.results.scores[0].metrics
    assert metrics["baseline_acc"].value == 2 / 3 and metrics["baseline_llm_errors"].value == 0

    shuffled = medqa_clean(data="demo", limit=3, shuffle_choices=True, seed=5).dataset
    again = medqa_clean(data="demo", limit=3, shuffle_choices=True, seed=5).dataset
    items = load_items("medqa", "demo", limit=3)
    for sample, same, item in zip(shuffled, again, items, strict=True):
        assert sample.choices == same.choices and sample.target == same.target
        position = "ABCD".index(sample.target)
        assert sample.choices[position] == item.clean_options()[item.answer]


def test_inspect_cot_prompt_style_changes_template():
    from medfuzz.tasks.inspect.baselines import medmcqa_clean

    task = medmcqa_clean(data="demo", limit=2, prompt_style="cot")
    assert task.metadata["prompt_style"] == "cot" and len(task.dataset) == 2


def test_lm_eval_docs_from_metadata(monkeypatch):
    from medfuzz.tasks.lm_eval import hook_options

    # lm-eval's own metadata (version, config_source) and --model_args names reach the hook too
    monkeypatch.setattr(hook_options, "model_arg_names", lambda: frozenset({"pretrained"}))
    docs = clean_docs("medqa", data="demo", version=1.0, config_source="x.yaml", pretrained="ignored-model-arg")["test"]
    assert len(docs) == 50
    first = docs[0]
    assert first["letters"] == ["A", "B", "C", "D"] and first["answer_index"] == 2
    assert first["prompt"].startswith("Question: A 21-year-old") and first["prompt"].endswith("\nAnswer:")
    assert "\nC. Ceftriaxone\n" in first["prompt"]


def test_lm_eval_docs_per_benchmark_override_and_shuffle():
    docs = clean_docs("medmcqa", data="missing.jsonl", medmcqa_data="demo", shuffle_choices="true", seed=3)["test"]
    items = load_items("medmcqa", "demo")
    for doc, item in zip(docs, items, strict=True):
        assert doc["choices"][doc["answer_index"]] == item.clean_options()[item.answer]
    assert [d["answer_index"] for d in docs] != [i.answer_index for i in items]


def test_lm_eval_yaml_files_reference_existing_hooks():
    import importlib

    for path in LM_EVAL_TASKS_PATH.rglob("*.yaml"):
        text = path.read_text()
        for line in text.splitlines():
            if "!function" in line:
                dotted = line.split("!function", 1)[1].strip()
                module, name = dotted.rsplit(".", 1)
                assert hasattr(importlib.import_module(module), name), f"{path}: {dotted}"
        config = yaml.safe_load(text.replace("!function", ""))
        assert config["task"]
