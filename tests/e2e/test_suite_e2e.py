"""``medfuzz run`` end to end against the planted server (the real command in a subprocess): two models as one
eval set, every run's log found again by its label, and a report whose first screen compares them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from medfuzz.planted.server import PlantedServer, launch
from medfuzz.planted.spec import PlantedSpec

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[PlantedServer]:
    running = launch(PlantedSpec.load().with_target(data="demo"))
    yield running
    running.stop()


def test_two_models_as_one_eval_set_and_a_report_that_compares_them(server: PlantedServer, tmp_path: Path) -> None:
    first = server.inspect_model()
    # the same planted server under a second Inspect service name: a second model for Inspect
    second = first.replace("openai-api/planted/", "openai-api/plantedtwin/")
    env = {**os.environ, **server.inspect_env(), "PLANTEDTWIN_BASE_URL": server.base_url,
           "PLANTEDTWIN_API_KEY": server.inspect_env()["PLANTED_API_KEY"], "MEDFUZZ_CACHE": str(tmp_path / "cache"),
           "INSPECT_CACHE_DIR": str(tmp_path / "inspect-cache")}
    out = tmp_path / "suite"
    done = subprocess.run([sys.executable, "-m", "medfuzz", "run", "--model", f"{first},{second}", "--data", "demo",
                           "--level", "quick", "--methods", "baseline,tces", "--limit", "3", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the bound names each run per model, before the first call
    for label in ("clean baseline", "tces drugs rands"):
        for model in (first, second):
            assert f"{label} · {model}" in done.stdout, done.stdout
    settings = json.loads((out / "run.json").read_text())
    assert settings["models"] == [first, second] and settings["max_connections"] == 16
    assert sum(settings["max_calls"]["per_run"][f"clean baseline · {m}"]["target"] for m in (first, second)) == 6
    from inspect_ai.log import list_eval_logs, read_eval_log

    headers = [read_eval_log(info, header_only=True) for info in list_eval_logs(str(out / "inspect"))]
    assert sorted((h.eval.metadata["medfuzz_suite"], h.eval.model) for h in headers) == sorted(
        (label, model) for label in ("clean baseline", "tces drugs rands") for model in (first, second))
    assert all(h.status == "success" and h.results.total_samples == 3 for h in headers)
    # the report's first screen: one card per model and the figure that compares them
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    glance = page[page.index("<section id=glance>"):page.index("</section>")]
    assert glance.count("<div class=glance>") == 2 and 'alt="models compared"' in glance
    assert first in glance and second in glance
