"""The fault suite as tables: fault kinds × Inspect task families → completed / LLM errors (expected) / crashes,
and calls re-paid after a SIGKILL and resume, with the call cache on (now) and off (before).

    PYTHONPATH=src:. python bench/fault_table.py [--tasks medqa_clean,medfuzz_medqa,tces_medqa,medguard]
        [--kinds rate_limit,...] [--modes transient,unrecoverable] [--no-resume]

Each cell is ``completed/LLM errors (expected)/crashes``: ``ok/1(1)/0`` is a run that completed with the one
LLM error the schedule made unavoidable and no crash. See tests/faults/suite.py for the schedules.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
# the subprocesses (inspect, medfuzz-lm-eval) inherit the environment: they need the repository root for the
# tests' own modules and must NOT get src/ (medfuzz comes from the installed package; an extra src/ entry makes
# Inspect see the src/ egg-info too and find no medfuzz tasks, which broke the documented "src:." command)
os.environ["PYTHONPATH"] = str(ROOT)

from medfuzz.benchmarks import load_items  # noqa: E402
from tests.faults.server import CONFIG_FAULTS, FaultServer, default_items  # noqa: E402
from tests.faults.suite import FIXTURES, KINDS, TASKS, run_case  # noqa: E402


def matrix(tasks: list[str], kinds: list[str], modes: list[str], tmp: Path) -> int:
    items = [*default_items(), *load_items("medqa", FIXTURES / "medqa_small.jsonl")]
    header = f"| fault kind | mode | {' | '.join(tasks)} |"
    print(header)
    print("|" + "---|" * (len(tasks) + 2))
    mismatches = 0
    with FaultServer(items=items) as server:
        for kind in kinds:
            for mode in (["stops run"] if kind in CONFIG_FAULTS else modes):
                cells = []
                for task in tasks:
                    o = run_case(server, task, kind, mode, tmp / "logs", tmp / "cache")
                    if kind in CONFIG_FAULTS:
                        stopped = o.status == "error" and "the run stops" in o.error
                        mismatches += not stopped
                        cells.append(f"stopped: HTTP {'401' if kind == 'auth' else '404'}" if stopped
                                     else f"?? {o.status}")
                        continue
                    mismatches += (not o.completed) or o.crashes > 0 or o.llm_errors != o.expected
                    cells.append(f"{'ok' if o.completed else 'FAILED'}/{o.llm_errors}({o.expected})/{o.crashes}"
                                 f" [{o.faults}f]")
                print(f"| {kind} | {mode} | {' | '.join(cells)} |", flush=True)
    print(f"\ncells: completed/LLM errors (expected)/crashes [faults injected]; mismatches: {mismatches}")
    return mismatches


def resume_table(tmp: Path) -> int:
    """The resume table; returns how many cached runs re-paid a completed call (0 when the cache works)."""
    from tests.faults.resume import kill_and_resume
    from tests.faults.test_resume import environment, inspect_commands, lm_eval_attack_command

    print("\n| run (MedFuzz, 4 items, 2 replicates, K=2) | call cache | completed before kill | calls after resume "
          "| completed calls re-paid |")
    print("|---|---|---|---|---|")
    repaid_with_cache = 0
    with FaultServer() as server:
        for label in ("inspect eval → SIGKILL → inspect eval-retry", "lm-eval attack path → SIGKILL → same command"):
            for cache in ("off", "1W"):
                folder = tmp / f"resume-{len(label)}-{cache}"
                env = environment(server, folder, cache)
                if label.startswith("inspect"):
                    first, retry = inspect_commands(server, folder / "logs")
                    result = kill_and_resume(server, first, retry, env, hold_after=40)
                else:
                    result = kill_and_resume(server, lm_eval_attack_command(server, folder), None, env, hold_after=40)
                print(f"| {label} | {'off (before)' if cache == 'off' else 'on (now)'} | "
                      f"{result.completed_before_kill} | {result.calls_after} | {result.repaid} |", flush=True)
                if cache != "off":
                    repaid_with_cache += result.repaid
    return repaid_with_cache


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--kinds", default=",".join(KINDS + CONFIG_FAULTS))
    parser.add_argument("--modes", default="transient,unrecoverable")
    parser.add_argument("--no-resume", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        failures = matrix(args.tasks.split(","), args.kinds.split(","), args.modes.split(","), Path(tmp))
        if not args.no_resume:
            failures += resume_table(Path(tmp))
    # a table that shows a failure must not look like a successful run to a script or CI
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
