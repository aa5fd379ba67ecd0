"""The suite ETA's error on recorded event sequences (``tests/suite_events.py``), before and after issue 26.

    PYTHONPATH=src:. python bench/eta_accuracy.py [--before COMMIT]

For each sequence (3 seeds) and each share of the calls done (25 / 50 / 75 %): the ETA the progress line would
print over the real time left (1 = exact; the rule is 0.5 to 2), for the estimator at ``--before`` (read from git:
its run's own calls per finished sample, the bound per sample until one has finished, time at the calls' rate
since the progress started) and the current one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import suite_events  # noqa: E402


def old_module(commit: str) -> types.ModuleType:
    for path in ("src/medfuzz/cli/suite/progress.py", "src/medfuzz/tasks/suite_progress.py"):  # moved since
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    module = types.ModuleType("suite_progress_before")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "suite_progress_before.py", "exec"), module.__dict__)  # our own history, from git
    return module


def factory(sequence: suite_events.Sequence, module: Any, current: bool) -> Callable[[Callable[[], float]], Any]:
    from medfuzz.cli.suite.build import Bound

    bound = Bound({r.key: {"target": r.samples * r.bound_per_sample} for r in sequence.runs},
                  {r.key: r.samples for r in sequence.runs})
    if current:
        methods = {r.key: r.method for r in sequence.runs}
        return lambda clock: module.SuiteProgress(bound, show=False, methods=methods, clock=clock)

    def before(clock: Callable[[], float]) -> Any:
        progress = module.SuiteProgress(bound, show=False)
        progress.started = 0.0
        return progress
    return before


def ratios(module: Any, current: bool, suite: tuple[list[suite_events.SimRun], int, int]) -> list[list[float]]:
    runs, max_tasks, max_samples = suite
    out: list[list[float]] = [[], [], []]
    for seed in range(3):
        sequence = suite_events.record(runs, max_tasks, max_samples, seed=seed)
        with mock.patch.object(module, "time", types.SimpleNamespace(monotonic=lambda: 0.0)):
            for i, (_, eta, truth) in enumerate(suite_events.replay(sequence, factory(sequence, module, current))):
                out[i].append(eta / truth)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="a3ea6d3", help="the commit whose estimator is 'before'")
    args = parser.parse_args()
    import medfuzz.cli.suite.progress as now

    before = old_module(args.before)
    print("ETA / real time left at 25 % | 50 % | 75 % of the calls (min-max over 3 seeds; within 2x: 0.5-2)\n")
    suites = {**suite_events.SUITES, **{f"{k} [known limit]": v for k, v in suite_events.HARD.items()}}
    for name, suite in suites.items():
        print(name)
        for title, module, current in (("  before", before, False), ("  after ", now, True)):
            cells = [f"{min(r):6.2f}-{max(r):6.2f}" for r in ratios(module, current, suite)]
            print(f"{title}  " + " | ".join(cells))
    return None


if __name__ == "__main__":
    main()
