"""A researcher's first real run, end to end: ``medfuzz run`` (the real command, in a subprocess) on an
OpenAI-compatible endpoint that is slow (latency on every call) and faulty (a seeded share of calls fail once with
500, 429 or a hang past the deadline), both harnesses (Inspect and lm-eval's ``local-completions`` with the
endpoint's remote tokenizer), at a size where rates reach 0 % and 100 %. It must end with exit 0, a page,
``summary.json`` and a ``model-index.yaml`` that Hugging Face's own parser reads as one model with the clean
baseline and every robustness number; the API key (a canary) must reach the endpoint and no file on disk, inside
the ``.eval`` archives and Inspect's trace logs included. Then the same command again pays for no model call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import zipfile_zstd  # noqa: F401  (Inspect writes .eval members with zstd; this teaches zipfile to read them)

from medfuzz.planted.server import PlantedServer, TransientFaults, launch
from medfuzz.planted.spec import PlantedSpec
from tests.faults.test_canary import files_containing

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def endpoint() -> Iterator[PlantedServer]:
    # hang 4 s > the 2 s attempt deadline below: the client gives up and retries, as against a stuck server
    faults = TransientFaults(rate=0.1, hang_seconds=4.0, seed=1)
    server = launch(PlantedSpec.load().with_target(data="demo"), latency_ms=20, faults=faults)
    yield server
    server.stop()


def _run(server: PlantedServer, out: Path, key: str) -> subprocess.CompletedProcess[str]:
    lm_eval = (f"local-completions:model={server.target_name},base_url={server.base_url}/completions,"
               "tokenizer_backend=remote,num_concurrent=8")
    env = {**os.environ, **server.inspect_env(), "PLANTED_API_KEY": key, "OPENAI_API_KEY": key}
    # --limit 3 (it was 6): every property below still shows (rates of exactly 0 and 1 in both harnesses, about
    # 40 faults served, the canary scan, the free re-run) at about 60 % of the time: the lm-eval half, whose
    # requests scale with the items, was two thirds of it (docs/performance.md, P10)
    command = [sys.executable, "-m", "medfuzz", "run", "--model", server.inspect_model(),
               "--attacker", server.inspect_model(attacker=True), "--level", "quick", "--limit", "3",
               "--attempt-timeout", "2", "--lm-eval", lm_eval, "--out", str(out)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1500, check=False)


def _values(summary: dict) -> list[float]:
    return [number["value"] for model in summary["models"].values() for result in model["results"]
            for number in result["numbers"].values() if isinstance(number.get("value"), float | int)]


def test_a_first_real_run_on_a_slow_faulty_endpoint(endpoint: PlantedServer, tmp_path: Path) -> None:
    import yaml
    from huggingface_hub.repocard_data import model_index_to_eval_results

    canary = f"sk-canary-{uuid.uuid4().hex}"
    out = tmp_path / "run"
    done = _run(endpoint, out, canary)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    assert sum(endpoint.faults.served.values()) > 0, "the endpoint served no fault: the run proved nothing"
    report = out / "report"
    for name in ("index.html", "summary.json", "model-index.yaml"):
        assert (report / name).is_file(), f"{name} missing:\n{output[-3000:]}"
    values = _values(json.loads((report / "summary.json").read_text()))
    assert 0.0 in values and 1.0 in values, f"this size should reach a 0 % and a 100 % rate: {values}"

    card = yaml.safe_load((report / "model-index.yaml").read_text())
    name, results = model_index_to_eval_results(card["model-index"])
    assert name == endpoint.inspect_model(), f"one model, named as the user named it: {name}"
    metric_types = {r.metric_type for r in results}
    assert {"medfuzz_asr", "tces_asr"} <= metric_types and any("clean" in t for t in metric_types), metric_types

    leaks = files_containing(out, canary)
    traces = Path.home() / ".local" / "share" / "inspect_ai" / "traces"
    if traces.is_dir():
        leaks += files_containing(traces, canary)
    assert leaks == [], f"the API key reached {len(leaks)} file(s): {leaks[:5]}"

    calls_before = sum(endpoint.app.calls.values())
    again = _run(endpoint, out, canary)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert sum(endpoint.app.calls.values()) == calls_before, "the re-run paid for finished chat calls again"
