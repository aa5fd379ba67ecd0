"""MedFuzz end to end through the real CLIs against the embedded SmolLM2-135M (attacker and target).

A 135M model cannot rewrite a MedQA vignette faithfully, so these runs prove the pipeline (prompts reach the
real model, replies are parsed and validated, outcomes, evidence and metrics are logged, both harnesses run),
not the attack's strength. Budgets are tiny (1 item, 1 replicate, K=2, 2 controls, short generations);
``min_kept=0`` lets the small attacker's rewrite through so the fuzzed branch is exercised too, and the
target runs at temperature 0 on an item whose answer is the letter SmolLM2 tends to give.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medfuzz.benchmarks import DEMO_MEDQA
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e

OUTCOMES = {"already_wrong", "attack_failed", "success", "llm_error"}


@pytest.fixture
def one_item(tmp_path: Path) -> Path:
    """The shortest bundled MedQA item whose answer is A."""
    rows = [json.loads(line) for line in DEMO_MEDQA.read_text().splitlines()]
    row = min((r for r in rows if r["answer_idx"] == "A"), key=lambda r: len(r["question"]))
    path = tmp_path / "item.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


SMALL = ["turns=2", "replicates=1", "controls=2", "option_orders=1", "pvalue_prompt=direct", "max_retries=0",
         "require_confidences=false", "max_tokens_scale=0.15", "min_kept=0", "target_temperature=0",
         "attacker_temperature=0", "seed=1"]


def test_inspect_medfuzz_medqa_on_the_embedded_model(local_server, one_item, tmp_path):
    from inspect_ai.log import read_eval_log

    from medfuzz.report.medfuzz import render

    logs = tmp_path / "logs"
    task_args = [arg for pair in (["-T", a] for a in [f"data={one_item}", "exemplars=1", *SMALL]) for arg in pair]
    run_cli([cli("inspect"), "eval", "medfuzz/medfuzz_medqa", "--model", local_server.inspect_model, *task_args,
             "--log-dir", str(logs), "--display", "plain"], env=local_server.inspect_env())
    [path] = list(logs.glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.status == "success" and len(log.samples) == 1
    score = log.samples[0].scores["medfuzz_scorer"]
    assert score.value["replicates"] == 1
    assert sum(score.value[o] for o in OUTCOMES) == 1
    [story] = score.metadata["replicates"]
    assert story["outcome"] in OUTCOMES and len(story["exemplar_ids"]) == 1
    # the real model was asked and answered (its reasoning is logged), whatever the outcome
    assert story["usage"]["target"]["calls"] >= 1 and story["original"]["cot"]
    if story["outcome"] in ("success", "attack_failed"):
        assert story["turns"] and story["turns"][-1]["plan"] and story["fuzzed_question"]
        assert story["usage"]["attacker"]["calls"] >= 2
    metrics = {name for s in log.results.scores for name in s.metrics}
    assert {"medfuzz_clean_acc", "medfuzz_post_attack_acc", "k0", "k2", "medfuzz_llm_error_rate",
            "medfuzz_significant_holm"} <= metrics
    written = render([path], tmp_path / "report")
    assert any(p.suffix == ".png" for p in written)


def test_lm_eval_medfuzz_medqa_attacks_then_evaluates(local_server, one_item, tmp_path):
    metadata = {"target_base_url": local_server.base_url, "target_model": "smollm2-135m-instruct",
                "data": str(one_item), "attack_limit": 1, "cache_dir": str(tmp_path / "cache"),
                "outcomes": "success,attack_failed,already_wrong"}
    for arg in SMALL:
        key, value = arg.split("=")
        metadata[key] = value
    out = tmp_path / "out"
    # the attack runs against the server; lm-eval scores the letters in-process with the same GGUF
    # (medfuzz-local), because the server's echo logprobs are misaligned (docs/foundation.md)
    command = [cli("medfuzz-lm-eval"), "--model", "medfuzz-local", "--tasks", "medfuzz_medqa",
               "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples"]
    try:
        run_cli(command)
    except AssertionError as err:
        if "no fuzzed items to evaluate" in str(err):
            cached = [json.loads(line) for f in (tmp_path / "cache").glob("*.jsonl") for line in f.open()]
            pytest.fail(f"the attack produced no fuzzed item: {json.dumps(cached)[:2000]}")
        raise
    [results_file] = list(out.rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]["medfuzz_medqa"]
    assert results["clean_acc,none"] in (0.0, 1.0) and results["attacked_acc,none"] in (0.0, 1.0)
    assert results["flip_rate,none"] in (0.0, 1.0) or results["flip_rate,none"] != results["flip_rate,none"]
    [samples_file] = list(out.rglob("samples_medfuzz_medqa_*.jsonl"))
    [sample] = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert sample["doc"]["original_question"] != sample["doc"]["fuzzed_question"]
    assert len(sample["resps"]) == 8  # 4 letters x (clean, fuzzed)
    # a rerun reuses the cached attack: same fuzzed question, no new attack
    cache = list((tmp_path / "cache").glob("*.jsonl"))
    before = [p.read_text() for p in cache]
    run_cli(command)
    assert [p.read_text() for p in cache] == before
