"""The lm-eval half of ``medfuzz run``: the lm-eval tasks of a plan and the ``medfuzz-lm-eval`` process that
runs them (its failure one line with the log's tail, a stop ending its process group)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.cli.suite.levels import LEVELS
from medfuzz.cli.suite.plan import EMBEDDED, SuitePlan
from medfuzz.errors import MedfuzzError
from medfuzz.options import ConfigError
from medfuzz.records.keys import MODEL_LABEL
from medfuzz.records.methods import METHODS as REGISTRY
from medfuzz.records.methods import suite_order

LM_EVAL_EMBEDDED = "medfuzz-local"


@dataclass(frozen=True)
class LmEvalPlan:
    """The lm-eval half: ``model`` and ``model_args`` as ``medfuzz-lm-eval --model M --model_args A`` takes them."""

    model: str
    model_args: str = ""

    @classmethod
    def parse(cls, text: str, threads: int = 2) -> LmEvalPlan:
        """``embedded`` (the GGUF in-process), or ``MODEL`` / ``MODEL:ARGS`` (``hf:pretrained=...``,
        ``local-completions:model=...,base_url=...``)."""
        if text == EMBEDDED:
            return cls(LM_EVAL_EMBEDDED, f"n_threads={threads}")
        model, _, args = text.partition(":")
        if not model:
            raise ConfigError(f"--lm-eval {text!r}: expected MODEL or MODEL:MODEL_ARGS (e.g. hf:pretrained=NAME)")
        from medfuzz.tasks.lm_eval.hook_options import refuse_secret_model_args

        refuse_secret_model_args(args, where="--lm-eval")  # before the Inspect half, and before it is printed
        return cls(model, args)


def lm_eval_tasks(plan: SuitePlan, fuzzed_log: Path | None) -> tuple[list[str], dict[str, Any]]:
    """lm-eval task names and ``--metadata`` for the suite's methods (MedFuzz: the items the Inspect run
    fuzzed, scored by letter log-likelihood)."""
    tasks: list[str] = []
    metadata: dict[str, Any] = plan.data_args()
    for key in suite_order(plan.methods):
        method = REGISTRY[key]
        if not method.lm_eval_tasks or (method.lm_eval_input == "fuzzed" and fuzzed_log is None):
            continue
        settings = LEVELS[plan.level].settings_for(key)
        tasks += sorted({name.format_map({**setting, "benchmark": plan.benchmark})
                         for name in method.lm_eval_tasks for setting in settings})
        if method.lm_eval_input == "fuzzed":
            metadata["fuzzed"] = str(fuzzed_log)
        elif plan.lm_eval_limit_for(key):
            metadata[method.lm_eval_limit_option] = plan.lm_eval_limit_for(key)
    return tasks, metadata


class LmEvalFailed(MedfuzzError):
    """The lm-eval half ended with a non-zero exit: ``cause`` is its last error line, ``tail`` its log's end."""

    def __init__(self, code: int, log_file: Path, cause: str, tail: list[str]) -> None:
        super().__init__(f"lm-eval half failed (exit {code}): {cause}")
        self.code, self.log_file, self.cause, self.tail = code, log_file, cause, tail

    def block(self) -> list[str]:
        """The failure as one block for the console: the cause, the log's last lines, where the whole log is."""
        return [f"{self}", *(f"  | {line}" for line in self.tail), f"  (whole log: {self.log_file})"]


def lm_eval_failure(code: int, log_file: Path, tail_lines: int = 12) -> LmEvalFailed:
    """What a failed lm-eval run says: its last exception line (``ValueError: ...``) as the cause."""
    import re

    lines = [line.rstrip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
    causes = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b.*", line)]
    cause = causes[-1] if causes else (lines[-1] if lines else "no output")
    return LmEvalFailed(code, log_file, cause[:500], [line[:300] for line in lines[-tail_lines:]])


def run_lm_eval(plan: SuitePlan, lm: LmEvalPlan, fuzzed_log: Path | None, log_file: Path,
                model_label: str | None = None,
                children: list[Any] | None = None) -> Path:
    """The lm-eval half through ``medfuzz-lm-eval`` in a subprocess (lm-eval's CLI, results + samples in
    ``OUT/lm-eval``); its request cache (``--use_cache``) makes a re-run pay nothing for finished requests.
    ``model_label`` (the Inspect half's model) goes into ``--metadata`` as the model's name in the report.

    The subprocess runs in its own session (a terminal's Ctrl-C reaches only this process, which stops it and
    its children as one process group) and is registered in ``children`` for a forced exit. Raises
    ``LmEvalFailed`` when it fails, ``KeyboardInterrupt`` (after stopping it) when interrupted."""
    import os
    import shlex
    import shutil
    import subprocess
    import sys
    import time

    from medfuzz.cli.suite.heartbeat import Heartbeat, lm_eval_status


    tasks, metadata = lm_eval_tasks(plan, fuzzed_log)
    if model_label:
        metadata[MODEL_LABEL] = model_label
    out = plan.out / "lm-eval"
    # the finished lm-eval run of this very command is reused, as the Inspect half reuses its finished runs: its
    # request cache would make a re-run free, but lm-eval would write a second results file of the same run, and
    # the report would show it twice (the record is not .json: the report reads every .json under the folder)
    record = {"model": lm.model, "model_args": lm.model_args, "tasks": list(tasks), "metadata": metadata}
    finished = plan.out / "lm-eval-cache" / "finished-run.jsonl"
    reused = finished_lm_eval_run(finished, record, out)
    if reused is not None:
        print(f"lm-eval half: finished before with the same command and settings ({reused.relative_to(out)}); "
              "reused, nothing run", flush=True)
        return out
    script = Path(sys.executable).parent / "medfuzz-lm-eval"
    command = [str(script if script.exists() else shutil.which("medfuzz-lm-eval")), "--model", lm.model,
               *(["--model_args", lm.model_args] if lm.model_args else []), "--tasks", ",".join(tasks),
               "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples",
               "--use_cache", str(plan.out / "lm-eval-cache" / "requests")]
    (plan.out / "lm-eval-cache").mkdir(parents=True, exist_ok=True)
    finished.unlink(missing_ok=True)
    before = set(out.rglob("results_*.json")) if out.is_dir() else set()
    print(f"$ {shlex.join(command)}", flush=True)  # pasteable: the --metadata JSON is quoted
    from medfuzz.models.local import die_with_parent

    with log_file.open("w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ},
                                   start_new_session=True,
                                   preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
        if children is not None:
            children.append(process)
        started = time.monotonic()
        try:
            with Heartbeat(lambda: lm_eval_status(log_file, started)):  # its progress is in its log, not here
                code = process.wait()
        except BaseException:  # Ctrl-C / SIGTERM / SIGHUP: stop lm-eval and whatever it started, then go on
            stop_process_group(process)
            raise
    if code != 0:
        raise lm_eval_failure(code, log_file)
    written = sorted(set(out.rglob("results_*.json")) - before, key=lambda p: p.stat().st_mtime)
    if written:
        finished.write_text(json.dumps({**record, "results": str(written[-1].relative_to(out))}) + "\n",
                            encoding="utf-8")
    return out


def finished_lm_eval_run(finished: Path, record: Mapping[str, Any], out: Path) -> Path | None:
    """The results file of an lm-eval half that finished with exactly ``record`` (model, model arguments, tasks,
    metadata), if it is still there."""
    try:
        previous = json.loads(finished.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict):
        return None
    results = out / str(previous.pop("results", ""))
    same = json.loads(json.dumps(record)) == previous  # as it was written: tuples as lists
    return results if same and results.is_file() and results.name.startswith("results_") else None


def stop_process_group(process: Any, grace: float = 1.5) -> None:
    """SIGTERM to the process group a child leads (it was started in its own session), SIGKILL after
    ``grace`` seconds; returns when the child has exited."""
    import contextlib
    import os
    import signal
    import subprocess

    for stop, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, stop)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the leader is gone; its children may not be
            os.killpg(process.pid, signal.SIGKILL)
        return
