"""MedGuard Inspect tasks run offline against the scripted provider: metrics equal the harness-free
scoring of the logged samples; refusals and unparsable replies are recorded, not crashes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.scorer import SampleScore, Score

from medfuzz.report.medguard import results_from_inspect_log
from medfuzz.scorers.medguard import ItemResult, aspect_units, position_report, safety_report
from medfuzz.solvers.medguard.builders import limit_per_pool
from medfuzz.solvers.medguard.prompts import SAFE_INSTRUCTIONS
from medfuzz.tasks.inspect.medguard import medguard, medguard_race_equity, medguard_safety_index
from tests.scripted_inspect import SCRIPT


@pytest.fixture(autouse=True)
def _empty_script():
    SCRIPT.clear()
    yield
    SCRIPT.clear()


def test_limit_per_pool_keeps_whole_equity_cases() -> None:
    from medfuzz.solvers.medguard.builders import BuildConfig, build

    items = build(BuildConfig(n=5), "equity,defense").items
    kept = limit_per_pool(items, 2)
    assert Counter(i.metadata["pool"] for i in kept) == {"equity": 16, "defense": 2}


def test_a_limit_samples_every_aspect_and_never_half_a_unit(tmp_path: Path) -> None:
    """Inspect's --limit keeps the first N samples: the order interleaves the pools, an equity case's variants
    as gender pairs, so --limit 10 scores nine aspects (one whole gender unit) instead of ten equity variants."""
    SCRIPT.extend(["ANSWER: B"] * 40)
    log = inspect_eval(medguard(), model="medfuzz-scripted/x", display="none", log_dir=str(tmp_path), limit=10)[0]
    assert log.status == "success"
    metrics = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    scored = {k for k in metrics if f"{k}_chance" in metrics}
    assert len(scored) == 9 and "medguard_gender_equity" in scored and "medguard_race_equity" not in scored, \
        sorted(scored)
    pools = [s.metadata["item"]["metadata"]["pool"] for s in log.samples]
    assert Counter(pools) == {"equity": 2, **{p: 1 for p in set(pools) - {"equity"}}}


def test_medguard_metrics_match_the_core_scoring(tmp_path: Path) -> None:
    SCRIPT.extend(["ANSWER: B"] * 400)
    log = inspect_eval(medguard(limit_per_aspect=2, strategy="safe"), model="medfuzz-scripted/x", display="none",
                       log_dir=str(tmp_path))[0]
    assert log.status == "success"
    metrics = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    # the headline first; every key carries the method prefix (Inspect's metric keys are global)
    assert list(log.results.scores[0].metrics)[:2] == ["medguard_overall", "medguard_overall_se"]
    assert all(k.startswith("medguard_") for k in metrics), sorted(metrics)
    results = results_from_inspect_log(log)
    report = {f"medguard_{k}": v for k, v in safety_report(aspect_units(results)).flat().items()}
    positions = position_report(results)
    report.update({f"medguard_{a.value}_chance": p.chance for a, p in positions.items()})
    report.update({f"medguard_{a.value}_answer_{k}": v for a, p in positions.items() for k, v in p.answers.items()})
    assert set(metrics) == set(report) | {"medguard_llm_errors", "medguard_llm_error_rate"}
    assert metrics["medguard_llm_errors"] == 0
    for name, value in report.items():
        assert metrics[name] == pytest.approx(value, nan_ok=True), name
    # chance levels and the letter distribution of a model that always answers B
    assert metrics["medguard_defense_chance"] == 0.25 and metrics["medguard_confidentiality_chance"] == 0.2
    # 2 mortality cases, k=5
    assert metrics["medguard_race_equity_chance"] == pytest.approx((1 / 5**3 + 1 / 5**3) / 2)
    assert all(metrics[f"medguard_{a.value}_answer_B"] == 1.0 for a in positions)
    assert len(log.samples) == 16 + 2 * 8  # equity: 2 cases x 8 variants; eight other aspects: 2 items


def test_safe_instructions_are_in_the_user_prompt_as_in_the_paper(tmp_path: Path) -> None:
    SCRIPT.extend(["ANSWER: B"] * 10)
    log = inspect_eval(medguard(aspects="defense", limit_per_aspect=2, strategy="cot_safe"),
                       model="medfuzz-scripted/x", display="none", log_dir=str(tmp_path))[0]
    for sample in log.samples:
        assert [m.role for m in sample.messages] == ["user", "assistant"]
        prompt = sample.messages[0].text
        assert prompt.startswith(SAFE_INSTRUCTIONS) and "Think step by step" in prompt
        assert sample.metadata["item"]["question"][:40] in prompt


def test_target_temperature_defaults_to_zero_as_in_the_paper() -> None:
    assert medguard().config.temperature == 0.0
    assert medguard_race_equity(temperature=0.7).config.temperature == 0.7


def _sample_score(value: float, **metadata) -> SampleScore:
    return SampleScore(score=Score(value=value, metadata={"pool": "defense", "n_options": 4, **metadata}),
                       sample_id=metadata.get("id", "x"))


def test_a_nan_score_never_counts_as_correct() -> None:
    """A run-time generator failure (NaN, status generator_error) is left out; any other NaN is wrong."""
    scores = [_sample_score(1.0, id="a"), _sample_score(float("nan"), id="b", status="generator_error")]
    assert medguard_safety_index(["defense"])(scores)["medguard_defense"] == 1.0
    scores.append(_sample_score(float("nan"), id="c"))
    assert medguard_safety_index(["defense"])(scores)["medguard_defense"] == 0.5
    assert not ItemResult.from_score("d", float("nan"), {"pool": "defense", "status": "generator_error"}).correct


def test_refusals_and_unparsed_replies_are_recorded(tmp_path: Path) -> None:
    SCRIPT.extend(["refuse"] * 3 + ["I would rather not say."] * 2 + ["ANSWER: A"] * 11)
    log = inspect_eval(medguard_race_equity(limit_per_aspect=2, strategy="cot"), model="medfuzz-scripted/x",
                       display="none", log_dir=str(tmp_path))[0]
    assert log.status == "success"
    statuses = Counter(s.scores["medguard"].metadata["status"] for s in log.samples)
    assert statuses == {"refused": 3, "unparsed": 2, "ok": 11}
    metrics = log.results.scores[0].metrics
    assert "medguard_race_equity" in metrics and "medguard_gender_equity" not in metrics
    assert "Think step by step" in log.samples[0].messages[0].text


def test_generator_role_rewrites_pending_items_at_run_time(tmp_path: Path) -> None:
    lay = json.dumps({"question": "My gran feels dizzy, why?", "options": {k: f"plain {k}" for k in "ABCD"}})
    spanish = json.dumps({"question": "¿Por qué?", "options": {k: f"opción {k}" for k in "ABCD"}})
    # one sample at a time, so the shared script alternates generator reply / target reply; the samples come
    # interleaved by pool (colloquial, multilingual, colloquial, multilingual: ``interleaved``)
    SCRIPT.extend([lay, "ANSWER: A", spanish, "ANSWER: B", "no json here", "ANSWER: C", "broken", "ANSWER: D"])
    log = inspect_eval(medguard(aspects="colloquial,multilingual", generator=True, limit_per_aspect=2),
                       model="medfuzz-scripted/target", model_roles={"generator": "medfuzz-scripted/gen"},
                       display="none", log_dir=str(tmp_path), max_samples=1, max_connections=1)[0]
    assert log.status == "success"
    by_id = {s.id: s for s in log.samples}
    assert len(by_id) == 4
    items = {sid: s.metadata["item"] for sid, s in by_id.items()}
    recipes = sorted(i["metadata"].get("recipe") for i in items.values())
    statuses = sorted(s.scores["medguard"].metadata["status"] for s in log.samples)
    # 2 colloquial (one generated, one glossary fallback) + 1 translated + 1 failed translation (not scored)
    assert statuses.count("generator_error") == 1
    assert "generator" in recipes and "lay-glossary" in recipes
    asked = [m.text for s in log.samples for m in s.messages if m.role == "user"]
    assert any("My gran feels dizzy" in q for q in asked) and any("¿Por qué?" in q for q in asked)
    from medfuzz.report.medguard import results_from_inspect_log

    assert len(results_from_inspect_log(log)) == 3  # the never-asked sample is left out
