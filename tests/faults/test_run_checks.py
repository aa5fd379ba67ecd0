"""Whole-run checks through the real ``inspect eval`` CLI against the fault server (e2e): a run in which every
sample ended as an LLM error ends with status ``error``, a non-zero exit and the cause, its log still holding
every sample; a partly failing run stays ``success``; and MedFuzz's up-front call bound is for the samples the
run really has (``--limit``, ``--epochs``), in the log line and in the recorded metadata."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from tests.e2e.conftest import cli
from tests.faults.backoff import subprocess_env
from tests.faults.server import FaultServer, Schedule

pytestmark = pytest.mark.e2e

# Inspect's own retries and deadline kept short (the defaults are 20 s per attempt and several retries); the waits
# between retries are the test's too (tests/faults/backoff.py, through the subprocess's sitecustomize)
FAST = ["--max-retries", "1", "--attempt-timeout", "2", "--timeout", "20", "--display", "plain"]
MEDFUZZ = ["-T", "data=demo", "-T", "turns=1", "-T", "replicates=2", "-T", "exemplars=0", "-T", "controls=0",
           "-T", "max_tokens_scale=0.25"]


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def inspect_eval(server: FaultServer, task: str, args: list[str], log_dir: Path,
                 command: str = "eval") -> tuple[int, str, Path]:
    """``inspect eval`` (or ``eval-set``) as a user runs it: (exit code, output, the newest log file)."""
    env = subprocess_env({**os.environ, **server.env(), "MEDFUZZ_CALL_CACHE": "off",  # retry waits: the test's
                          "INSPECT_CACHE_DIR": str(log_dir / "cache"), "MEDFUZZ_CACHE": str(log_dir / "cache"),
                          "COLUMNS": "400"})  # wide: Inspect's log lines unwrapped
    result = subprocess.run([cli("inspect"), command, task, "--model", server.inspect_model, "--log-dir",
                             str(log_dir), *FAST, *args], env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    logs = sorted(log_dir.glob("*.eval"), key=lambda p: p.stat().st_mtime)
    assert logs, result.stdout + result.stderr
    return result.returncode, result.stdout + result.stderr, logs[-1]


# Inspect's `inspect eval` exits 0 whatever a task's status (a 401 run too); `inspect eval-set` exits 1 unless
# every task succeeded, retrying a failed one first (here from the log: its samples are reused, no new call)
@pytest.mark.parametrize(("command", "task", "args", "kind", "reason"), [
    ("eval-set", "medfuzz/medqa_clean", ["-T", "data=demo", "--limit", "3", "--retry-attempts", "1",
                                         "--retry-wait", "1"], "server_error", "internal server error"),
    ("eval", "medfuzz/medqa_clean", ["-T", "data=demo", "--limit", "2"], "hang", "attempt_timeout"),
    ("eval", "medfuzz/medfuzz_medqa", [*MEDFUZZ, "--limit", "2"], "server_error", "internal server error"),
    ("eval", "medfuzz/medguard", ["-T", "aspects=defense", "-T", "limit_per_aspect=2"], "server_error",
     "internal server error"),
])
def test_a_run_with_only_llm_errors_ends_as_an_error_with_the_cause(server, command, task, args, kind, reason,
                                                                     tmp_path: Path) -> None:
    server.reset(Schedule(kind=kind, rate=1.0, times=10_000, hang_seconds=30))
    code, output, path = inspect_eval(server, task, args, tmp_path, command)
    log = read_eval_log(str(path))
    samples = len(log.samples or [])
    assert code == (1 if command == "eval-set" else 0), output[-3000:]
    assert log.status == "error" and log.error is not None, output[-3000:]
    message = log.error.message
    assert re.search(rf"every sample ended as an LLM error \({samples} of {samples}; most common: .*{reason}",
                     message, re.I), message
    assert "every sample ended as an LLM error" in output
    # every sample is in the log, scored as an LLM error (what `medfuzz report` and eval-retry read)
    assert samples == {"medfuzz/medguard": 2}.get(task, int(args[args.index("--limit") + 1]) if "--limit" in args
                                                  else 0) and all(s.scores for s in log.samples)
    assert not any(s.error for s in log.samples)


def test_a_partly_failing_run_stays_success(server, tmp_path: Path) -> None:
    from medfuzz.benchmarks import load_items

    first = load_items("medqa", "demo")[0].clean_question()
    server.reset(Schedule(kind="server_error", poison=(first[len(first) // 3: len(first) // 3 + 60],)))
    code, output, path = inspect_eval(server, "medfuzz/medqa_clean", ["-T", "data=demo", "--limit", "3"], tmp_path)
    log = read_eval_log(str(path))
    assert code == 0 and log.status == "success", output[-3000:]
    metrics = {name: m.value for s in log.results.scores for name, m in s.metrics.items()}
    assert metrics["baseline_llm_errors"] == 1 and metrics["baseline_acc"] == 1.0


@pytest.mark.parametrize(("limit", "epochs"), [(2, 1), (1, 3)])
def test_the_call_bound_is_for_the_samples_the_run_has(server, limit, epochs, tmp_path: Path) -> None:
    server.reset(Schedule())
    code, output, path = inspect_eval(server, "medfuzz/medfuzz_medqa",
                                      [*MEDFUZZ, "--limit", str(limit), "--epochs", str(epochs)], tmp_path)
    log = read_eval_log(str(path), header_only=True)
    assert code == 0 and log.status == "success", output[-3000:]
    samples = limit * epochs
    bound = MedFuzzConfig(turns=1, replicates=2, exemplars=0, controls=0, max_tokens_scale=0.25).max_calls(samples)
    assert log.eval.metadata["max_calls"] == bound
    said = re.search(r"MedFuzz: at most ([\d,]+) model calls for (\d+) samples", output)
    assert said is not None, output[-3000:]
    assert (int(said[1].replace(",", "")), int(said[2])) == (sum(bound.values()), samples)
    assert "for 50 samples" not in output and "for 50 items" not in output
