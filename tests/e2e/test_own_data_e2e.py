"""Your own benchmark end to end (docs/usage.md, "Your own benchmark"): ``medfuzz run --data FILE`` on an MMLU-style
CSV and on a ``choices``-list JSONL runs the clean baseline, TCES and MedFuzz against the planted server (whose
target knows the file's items), and the same file runs in plain ``inspect eval medfuzz/mcq_clean -T data=FILE``
and ``medfuzz-lm-eval --tasks mcq_clean,tces_mcq_drugs --metadata '{"data": "FILE"}'``; every run records the data's
name and source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from medfuzz.planted.server import PlantedServer, launch
from medfuzz.planted.spec import PlantedSpec
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
FILES = {"own_mmlu.csv": ("mmlu", 12), "own_choices.jsonl": ("choices", 8)}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One MEDFUZZ_CACHE for the module: TCES embeds its vocabulary once, the later runs read it."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module", params=sorted(FILES))
def served(request) -> Iterator[tuple[Path, PlantedServer]]:
    """The planted server whose target knows the items of one of the files."""
    path = FIXTURES / request.param
    running = launch(PlantedSpec.load().with_target(data=str(path)))
    yield path, running
    running.stop()


def _env(server: PlantedServer, cache: Path, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server.inspect_env(), "MEDFUZZ_CACHE": str(cache),
            "INSPECT_CACHE_DIR": str(tmp_path / "inspect-cache")}


def _headers(folder: Path) -> dict[str, object]:
    from inspect_ai.log import list_eval_logs, read_eval_log

    return {h.eval.task: h for h in (read_eval_log(info, header_only=True) for info in list_eval_logs(str(folder)))}


def test_medfuzz_run_on_your_file(served: tuple[Path, PlantedServer], cache: Path, tmp_path: Path) -> None:
    path, server = served
    layout, rows = FILES[path.name]
    out = tmp_path / "suite"
    done = subprocess.run([sys.executable, "-m", "medfuzz", "run", "--model", server.inspect_model(),
                           "--attacker", "openai-api/planted/planted-attacker", "--data", str(path),
                           "--data-name", "my exam", "--level", "quick", "--methods", "baseline,tces,medfuzz",
                           "--out", str(out)],
                          env=_env(server, cache, tmp_path), capture_output=True, text=True, timeout=900, cwd=ROOT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    settings = json.loads((out / "run.json").read_text())
    assert settings["benchmark"] == "mcq" and settings["data_name"] == "my exam"
    headers = _headers(out / "inspect")
    assert set(headers) == {"medfuzz/mcq_clean", "medfuzz/tces_mcq", "medfuzz/medfuzz_mcq"}
    for task, header in headers.items():
        assert header.status == "success", (task, header.error)
        metadata = header.eval.metadata
        assert metadata["data_name"] == "my exam" and metadata["benchmark"] == "mcq"
        source = metadata["data_source"]
        assert (source["file"], source["layout"], source["kind"], source["display"]) == (path.name, layout, "file",
                                                                                          "my exam")
    assert headers["medfuzz/mcq_clean"].results.total_samples == min(rows, 10)
    assert headers["medfuzz/medfuzz_mcq"].results.total_samples == 2
    # TCES said how many items it could attack, and why not the others
    attackable = headers["medfuzz/tces_mcq"].eval.metadata["attackable"]
    assert attackable["items"] == min(rows, 10) and 0 < attackable["attackable"] < attackable["items"]
    assert f"{attackable['attackable']} of {attackable['items']} items attackable" in output
    assert all(why.startswith("no drugs entity in any distractor") for why in attackable["skipped"].values())
    # the terminal, the page, summary.json and the model card name the data (never MedQA, no Hub id)
    assert f"on my exam · user file {path.name}" in output
    summary = json.loads((out / "report" / "summary.json").read_text())
    results = [r for model in summary["models"].values() for r in model["results"]]
    assert {r["method"] for r in results} == {"baseline", "tces", "medfuzz"}
    for result in results:
        assert result["data"]["name"] == "my exam" and result["data"]["benchmark"] == "mcq", result["data"]
        assert (result["data"]["source"], result["data"]["hub_id"], result["data"]["file"]) == ("file", None,
                                                                                                path.name)
    [card] = (out / "report").glob("model-index*.yaml")
    datasets = [r["dataset"] for r in yaml.safe_load(card.read_text())["model-index"][0]["results"]]
    assert datasets and all(d["type"] == f"medfuzz:mcq-file:{path.name}" and d["name"].startswith("my exam · ")
                            for d in datasets)
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert "my exam" in page and "GBaker" not in page and "MedQA" not in card.read_text()


def test_plain_inspect_and_lm_eval_read_the_same_file(served: tuple[Path, PlantedServer], cache: Path,
                                                      tmp_path: Path) -> None:
    from medfuzz.report.runs import read_inspect_log, read_lm_eval_output

    path, server = served
    if path.suffix != ".csv":
        pytest.skip("one file is enough for the plain harness commands")
    env = _env(server, cache, tmp_path)
    run_cli([cli("inspect"), "eval", "medfuzz/mcq_clean", "--model", server.inspect_model(), "-T", f"data={path}",
             "-T", "data_name=my exam", "--limit", "4", "--log-dir", str(tmp_path / "inspect"), "--display", "none"],
            env=env)
    run = read_inspect_log(next((tmp_path / "inspect").glob("*.eval")))
    assert run.n == 4 and run.reported == pytest.approx(run.recomputed)
    assert _headers(tmp_path / "inspect")["medfuzz/mcq_clean"].eval.metadata["data_name"] == "my exam"

    output = run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-planted", "--model_args",
                      f"spec=default,data={path}", "--tasks", "mcq_clean,tces_mcq_drugs",
                      "--metadata", json.dumps({"data": str(path), "data_name": "my exam"}), "--log_samples",
                      "--output_path", str(tmp_path / "lm-eval")], env=env)
    clean = read_lm_eval_output(tmp_path / "lm-eval", "mcq_clean")
    assert clean.n == 12 and clean.reported == pytest.approx(clean.recomputed)
    assert "tces_mcq_drugs (my exam): 8 of 12 items attackable" in output
    from medfuzz.report.overview import lm_eval_results

    results_file = next((tmp_path / "lm-eval").rglob("results_*.json"))
    found = lm_eval_results(results_file, json.loads(results_file.read_text()))
    assert {r.task for _, r in found} >= {"mcq_clean"}
    assert all(r.data.label == "my exam" and r.data.source == "file" and r.data.hub_id is None for _, r in found)
    samples = next((tmp_path / "lm-eval").rglob("samples_mcq_clean_*.jsonl"))
    assert json.loads(samples.read_text().splitlines()[0])["doc"]["data_name"] == "my exam"
