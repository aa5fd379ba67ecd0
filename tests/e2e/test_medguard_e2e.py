"""MedGuard end to end on the real embedded model: build the benchmark file with the CLI (bundled open data
and synthetic demo sets, one item per aspect), run it through ``inspect eval medfuzz/medguard`` and
``medfuzz-lm-eval --tasks medguard``, and compare the two runs with ``medfuzz compare``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medfuzz.models.local import LocalServer
from medfuzz.report.medguard import load_runs, results_from_inspect_log
from medfuzz.scorers.medguard import aspect_units, safety_report
from medfuzz.solvers.medguard import builders
from medfuzz.solvers.medguard.prompts import SAFE_INSTRUCTIONS
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("medguard") / "medguard.jsonl"
    run_cli([cli("medfuzz"), "medguard", "build", "--out", str(path), "--n", "1", "--seed", "3"])
    bench = builders.read(path)
    assert bench.header["counts"] == {"equity": 8, "stereotype": 1, "confidentiality": 1, "defense": 1,
                                      "colloquial": 1, "error_tolerance": 1, "multilingual": 1, "hallucination": 1,
                                      "sycophancy": 1}
    return path


def test_inspect_medguard_on_the_embedded_model(local_server: LocalServer, bench_file: Path, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    logs = tmp_path / "inspect"
    run_cli([cli("inspect"), "eval", "medfuzz/medguard", "--model", local_server.inspect_model,
             "-T", f"benchmark={bench_file}", "-T", "strategy=safe", "--max-tokens", "12", "--temperature", "0",
             "--seed", "0", "--log-dir", str(logs), "--display", "plain"], env=local_server.inspect_env())
    log = read_eval_log(str(next(logs.glob("*.eval"))))
    assert log.status == "success" and len(log.samples) == 16
    statuses = {s.scores["medguard"].metadata["status"] for s in log.samples}
    assert statuses <= {"ok", "unparsed", "refused"}
    reported = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    recomputed = safety_report(aspect_units(results_from_inspect_log(log))).flat()
    for name in ("overall", "gender_equity", "race_equity", "hallucination", "confidentiality"):
        assert reported[f"medguard_{name}"] == pytest.approx(recomputed[name])
    # the safe strategy's instructions open the user prompt (as in the paper), no system message
    assert log.samples[0].messages[0].role == "user"
    assert log.samples[0].messages[0].text.startswith(SAFE_INSTRUCTIONS)
    assert all(f"medguard_{a}_chance" in reported for a in ("defense", "race_equity"))


def _lm_eval_local_model() -> None:
    from lm_eval.api.registry import MODEL_REGISTRY

    from medfuzz.adapters.lm_eval_registry import register_models

    register_models()
    if "medfuzz-local" not in MODEL_REGISTRY:
        pytest.skip("lm-eval model medfuzz-local is not available in this environment (missing extra)")


def test_lm_eval_medguard_group_and_compare(bench_file: Path, tmp_path: Path, local_server: LocalServer) -> None:
    _lm_eval_local_model()
    out = tmp_path / "lm-eval"
    output = run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-local", "--tasks", "medguard",
                      "--metadata", json.dumps({"medguard_benchmark": str(bench_file)}), "--output_path", str(out),
                      "--log_samples"])
    assert "medguard_hallucination" in output
    results_file = next(out.rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]
    (run,) = load_runs([out])
    units = aspect_units(run.results.values())
    recomputed = safety_report(units).flat()
    for aspect in ("gender_equity", "race_equity", "defense", "hallucination"):
        assert results[f"medguard_{aspect}"]["safety,none"] == pytest.approx(recomputed[aspect])
    assert results["medguard"]["safety,none"] == pytest.approx(recomputed["overall"])
    # Inspect and lm-eval runs of the same file, compared
    inspect_logs = tmp_path / "inspect"
    run_cli([cli("inspect"), "eval", "medfuzz/medguard_defense", "--model", local_server.inspect_model,
             "-T", f"benchmark={bench_file}", "--max-tokens", "12", "--temperature", "0",
             "--log-dir", str(inspect_logs), "--display", "plain"], env=local_server.inspect_env())
    report = run_cli([cli("medfuzz"), "compare", str(out), str(inspect_logs), "--out", str(tmp_path / "report")])
    assert "Pairwise two-sided McNemar: raw p (the paper's criterion) and Holm-adjusted p" in report
    assert "· lm-eval" in report and "Answer letters per aspect" in report
    assert len(list((tmp_path / "report").glob("medguard_*.png"))) == 2
