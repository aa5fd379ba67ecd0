"""MedGuard Inspect tasks run offline against the scripted provider: metrics equal the harness-free
scoring of the logged samples; refusals and unparsable replies are recorded, not crashes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval

from medfuzz.report.medguard import results_from_inspect_log
from medfuzz.scorers.medguard import aspect_units, safety_report
from medfuzz.solvers.medguard.builders import limit_per_pool
from medfuzz.tasks.inspect.medguard import medguard, medguard_race_equity
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


def test_medguard_metrics_match_the_core_scoring(tmp_path: Path) -> None:
    SCRIPT.extend(["ANSWER: B"] * 400)
    log = inspect_eval(medguard(limit_per_aspect=2, strategy="safe"), model="medfuzz-scripted/x", display="none",
                       log_dir=str(tmp_path))[0]
    assert log.status == "success"
    metrics = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    results = results_from_inspect_log(log)
    report = safety_report(aspect_units(results)).flat()
    assert set(metrics) == set(report) | {"medguard_llm_errors", "medguard_llm_error_rate"}
    assert metrics["medguard_llm_errors"] == 0
    for name, value in report.items():
        assert metrics[name] == pytest.approx(value, nan_ok=True), name
    # the safe strategy's instructions reached the model as a system message
    first = log.samples[0]
    assert first.messages[0].role == "system" and "patient information" in first.messages[0].text
    assert len(log.samples) == 16 + 2 * 8  # equity: 2 cases x 8 variants; eight other aspects: 2 items


def test_refusals_and_unparsed_replies_are_recorded(tmp_path: Path) -> None:
    SCRIPT.extend(["refuse"] * 3 + ["I would rather not say."] * 2 + ["ANSWER: A"] * 11)
    log = inspect_eval(medguard_race_equity(limit_per_aspect=2, strategy="cot"), model="medfuzz-scripted/x",
                       display="none", log_dir=str(tmp_path))[0]
    assert log.status == "success"
    statuses = Counter(s.scores["medguard"].metadata["status"] for s in log.samples)
    assert statuses == {"refused": 3, "unparsed": 2, "ok": 11}
    metrics = log.results.scores[0].metrics
    assert "race_equity" in metrics and "gender_equity" not in metrics
    assert "Think step by step" in log.samples[0].messages[0].text


def test_generator_role_rewrites_pending_items_at_run_time(tmp_path: Path) -> None:
    lay = json.dumps({"question": "My gran feels dizzy, why?", "options": {k: f"plain {k}" for k in "ABCD"}})
    spanish = json.dumps({"question": "¿Por qué?", "options": {k: f"opción {k}" for k in "ABCD"}})
    # one sample at a time, so the shared script alternates generator reply / target reply
    SCRIPT.extend([lay, "ANSWER: A", "no json here", "ANSWER: B", spanish, "ANSWER: C", "broken", "ANSWER: D"])
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
