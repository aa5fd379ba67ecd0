"""``medfuzz run --dry-run`` against the planted server, through the real command: it prints exactly the bound (and
the cost estimate) the real run prints before its first call, asks no model a question, and on an empty cache
embeds nothing (TCES's vocabulary vectors are the real run's work: ``suite.build_tasks(planning=True)``)."""

from __future__ import annotations

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


def block(stdout: str, first: str) -> list[str]:
    """The lines after the one starting with ``first``, up to the estimate's cost line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first)) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("  cost (--price"))
    return lines[start:end + 1]


def test_the_dry_run_prints_the_real_runs_bound_and_estimate_and_pays_nothing(server: PlantedServer,
                                                                              tmp_path: Path) -> None:
    env = {**os.environ, **server.inspect_env(), "MEDFUZZ_CACHE": str(tmp_path / "cache"),
           "INSPECT_CACHE_DIR": str(tmp_path / "inspect-cache"), "COLUMNS": "300"}
    args = ["--model", server.inspect_model(), "--attacker", server.inspect_model(attacker=True), "--data", "demo",
            "--level", "quick", "--limit", "2", "--methods", "baseline,tces,medguard,medfuzz",
            "--price", f"{server.inspect_model()}=0.001/0.002", "--no-report"]

    def run(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "medfuzz", "run", *args, *more, "--out", str(tmp_path / "out")],
                              env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)

    before = dict(server.app.calls)
    dry = run("--dry-run")
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert server.app.calls == before  # the checks list the models; no question asked
    assert "  checked: " in dry.stdout  # the preflight ran
    assert not (tmp_path / "out").exists()
    assert not any((tmp_path / "cache").rglob("*.npy")) and not (tmp_path / "cache" / "embeddings").exists()
    real = run()
    assert real.returncode == 0, real.stdout[-3000:] + real.stderr[-3000:]
    planned = block(dry.stdout, "dry run: the runs, their items")
    paid = block(real.stdout, "Upper bound on model calls before the first call")
    assert planned == paid, "\n".join([*planned, "---", *paid])
    assert any(line.startswith("  medfuzz ") and "at most" in line for line in planned)
    assert any(line.startswith("  tces drugs rands ") and "with a drugs distractor" in line for line in planned)
    assert planned[-1].startswith("  cost (--price, per 1,000 tokens): expected ")
    assert planned[-1].endswith(f"no price for {server.inspect_model(attacker=True)} (not counted)")
