"""Kill and resume (e2e): a real ``inspect eval`` of MedFuzz is killed with SIGKILL mid-run and resumed with
``inspect eval-retry``; the lm-eval attack path is killed and run again. Counted at the fault server, no call that
had completed before the kill is paid for again (the call cache answers them)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.backoff import subprocess_env
from tests.faults.resume import kill_and_resume
from tests.faults.server import FaultServer

pytestmark = pytest.mark.e2e

MEDFUZZ_ARGS = ["-T", "data=demo", "-T", "limit=4", "-T", "turns=2", "-T", "replicates=2", "-T", "controls=0",
                "-T", "exemplars=0", "-T", "max_tokens_scale=0.25"]


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def environment(server: FaultServer, tmp_path: Path, cache: str = "1W") -> dict[str, str]:
    # PYTHONPATH: the repository root for the tests' own modules and the test's retry waits (subprocess_env)
    return subprocess_env({**os.environ, **server.env(), "MEDFUZZ_CALL_CACHE": cache,
                           "MEDFUZZ_CACHE": str(tmp_path / "cache"),
                           "INSPECT_CACHE_DIR": str(tmp_path / "inspect-cache")})


def inspect_commands(server: FaultServer, logs: Path) -> tuple[list[str], object]:
    inspect = str(Path(sys.executable).parent / "inspect")
    first = [inspect, "eval", "medfuzz/medfuzz_medqa", "--model", server.inspect_model, *MEDFUZZ_ARGS,
             "--log-dir", str(logs), "--display", "none"]

    def retry() -> list[str]:
        [log] = list(logs.glob("*.eval"))
        return [inspect, "eval-retry", str(log), "--log-dir", str(logs), "--display", "none"]

    return first, retry


def test_inspect_eval_retry_after_sigkill_repays_no_completed_call(server, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    first, retry = inspect_commands(server, tmp_path / "logs")
    resumed = kill_and_resume(server, first, retry, environment(server, tmp_path), hold_after=40)
    assert resumed.completed_before_kill >= 40 and resumed.calls_after > 0
    assert resumed.repaid == 0, resumed
    logs = sorted((tmp_path / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)
    final = read_eval_log(str(logs[-1]))
    assert final.status == "success" and len(final.samples) == 4


def lm_eval_attack_command(server: FaultServer, tmp_path: Path) -> list[str]:
    code = ("import sys; from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache; "
            f"attack_with_cache('medqa', target_base_url={server.base_url!r}, target_model='fault-model', "
            f"data='demo', attack_limit=4, turns=2, replicates=2, controls=0, exemplars=0, max_tokens_scale=0.25, "
            f"cache_dir={str(tmp_path / 'attacks')!r}, attack_concurrency=2)")
    return [sys.executable, "-c", code]


def test_lm_eval_attack_path_rerun_after_sigkill_repays_no_completed_call(server, tmp_path: Path) -> None:
    command = lm_eval_attack_command(server, tmp_path)
    resumed = kill_and_resume(server, command, None, environment(server, tmp_path), hold_after=40)
    assert resumed.completed_before_kill >= 40 and resumed.calls_after > 0
    assert resumed.repaid == 0, resumed


def test_medfuzz_run_rerun_after_sigkill_repays_no_completed_call(server, tmp_path: Path) -> None:
    """``medfuzz run`` killed mid-suite and run again with the same command: the eval set reuses finished runs and
    samples, the call cache answers the calls of unfinished samples, and the suite ends complete."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    out = tmp_path / "suite"
    command = [sys.executable, "-m", "medfuzz", "run", "--model", server.inspect_model, "--data", "demo",
               "--level", "quick", "--methods", "baseline,tces,medfuzz", "--option", "medfuzz_controls=0",
               "--option", "medfuzz_turns=2", "--option", "tces_budget=2", "--limit", "4", "--no-report",
               "--out", str(out)]
    resumed = kill_and_resume(server, command, None, environment(server, tmp_path), hold_after=30)
    assert resumed.completed_before_kill >= 30 and resumed.calls_after > 0
    assert resumed.repaid == 0, resumed
    headers = [read_eval_log(info, header_only=True) for info in list_eval_logs(str(out / "inspect"))]
    finished = {h.eval.metadata["medfuzz_suite"]: h for h in headers if h.status == "success"}
    assert set(finished) == {"clean baseline", "tces drugs rands", "medfuzz"}, [(h.eval.task, h.status)
                                                                                for h in headers]
    assert all(h.results.total_samples == 4 for h in finished.values())
    # the clean baseline (4 calls) had finished before the kill: the second invocation reused its log
    reused = re.search(r"\((\d+) found finished and reused\)", resumed.resume_output)
    assert reused and int(reused.group(1)) >= 1, resumed.resume_output[-2000:]
    # the progress counts what the first invocation finished (Inspect's task start lists a retried run's every
    # sample and no event fires for a reused one): the resumed suite ends with every sample done
    done = re.findall(r"samples (\d+)/(\d+)", resumed.resume_output)
    assert done and done[-1][0] == done[-1][1] == "12", resumed.resume_output[-2000:]
