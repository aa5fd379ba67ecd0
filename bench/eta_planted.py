"""The suite ETA against a real ``medfuzz run``: the planted server (its own process) with a fixed latency.

    PYTHONPATH=src python bench/eta_planted.py [--latency-ms 200] [--limit 20] [--level quick] [--repeat 3]

Runs the Inspect half in-process (no lm-eval half, no report) into a fresh folder each time, records the
progress's ETA at every hook event with the wall clock, and prints, at 25 / 50 / 75 % of the calls the run made,
the ETA it gave over the time that was really left (1 = exact; the rule is 0.5 to 2), for the current estimator
and, from the same state, the one before issue 26 (elapsed × calls still expected / calls so far, its expected
calls from each run's calls per finished sample and the bound per sample until one has finished).

Measured (2 shared cores, other work running; each row one run; ETA / real time left at 25 | 50 | 75 %):

    200 ms, --limit 20, 720 calls, 3 runs     1.37-1.67 | 0.75-1.15 | 0.90-1.38   (before 3.2-3.4 | 4.0-4.8 | 3.2-5.4)
    500 ms, --limit 20, 720 calls, 2 runs     0.86-1.02 | 0.54-0.59 | 0.85-0.86   (before 2.0-2.4 | 2.9-3.1 | 3.2-3.6)
    300 ms, --limit 40, 1,237 calls, 2 runs   0.77-0.81 | 1.02      | 0.60-1.46   (before 2.0-2.7 | 3.2-3.6 | 1.7-2.0)
    200 ms, --limit 20, --max-tasks 1, 1 run  11.7      | 0.33      | 1.09        (before 23.5    | 2.9     | 8.4)

With one run at a time MedFuzz, last, had not started at 25 %: its calls were estimated at its bound. MedFuzz now
starts first when runs go one at a time (``suite.run_order``); one run at a time, the same machine and hour:

    200 ms, --limit 40, --max-tasks 1, MedFuzz last (2 runs)    5.74-8.60 | 0.79-0.95 | 0.37-0.48
    200 ms, --limit 40, --max-tasks 1, MedFuzz first (2 runs)   0.61-0.73 | 0.58-0.71 | 1.59-2.24
    200 ms, --limit 20, --max-tasks 1, MedFuzz last (2 runs)    5.61-9.68 | 0.19-0.30 | 0.52-0.64
    200 ms, --limit 20, --max-tasks 1, MedFuzz first (1 run)    0.36      | 0.34      | 9.36 (4 s left)

An attack method with no finished sample takes the share of the bound the other attack's runs used
(``suite_progress.ADAPTIVE``; before, its bound). As the README's main command runs (``--as-embedded``: one run,
one sample and one connection at a time), level demo, --limit 10, 250 ms a call, 431 calls in about 150 s, main
before and this change after, back to back (load 3.5-4.8 from other work):

    before (its bound)            1.78 | 2.84 | 1.56
    after (the attacks' share)    0.78 | 2.54 | 1.47

At 50 % the estimate of the calls was 1.4x the real count; the rest was the rate: the first TCES run paused about
20 s while it loaded the sentence encoder for the option-text anchors, and the rate over the later half of the
time counted that pause. The anchors are now embedded while the tasks are built (``Method.before_first_call``:
``tasks.inspect.tces.embed_anchor_texts``, cached on disk), the same bench:

    after, anchors embedded before the first call   0.81 | 2.00 | 1.37

The paper level (``--level paper --data demo --limit 10 --latency-ms 100``, 14,104 calls, 338 s): 0.09 | 0.19 |
1.06, the line saying "not yet known, at least ..." at all three points (a MedFuzz sample running longer than every
finished one); each cell now says when the line called the estimate a floor (docs/performance.md, P9).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def start_planted(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([str(Path(sys.executable).parent / "medfuzz"), "planted", "serve", "--latency-ms",
                                str(latency_ms)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"serving at (http://\S+/v1)", line)
        if found:
            return process, found.group(1)
    raise RuntimeError("the planted server did not start")


def before_total(progress: Any) -> float:
    """The expected total calls as the estimator before issue 26 computed it."""
    total = float(progress.calls)
    for state in progress.runs.values():
        left = max(0, state.samples - state.finished - state.reused)
        per_sample = state.calls / state.finished if state.finished else state.bound / max(1, state.samples)
        total += left * per_sample
    return total


def one_run(argv: list[str]) -> tuple[list[tuple[float, int, float, float, bool]], float]:
    """(time, calls, ETA now, ETA before, whether the line called the ETA known) at every event, and when the
    command started."""
    from medfuzz.cli import run as run_cli
    from medfuzz.cli.suite import progress as suite_progress

    records: list[tuple[float, int, float, float, bool]] = []
    refresh = suite_progress.SuiteProgress._refresh

    def recording(progress: Any) -> None:
        now = time.monotonic()
        elapsed = now - progress.started
        old = elapsed * (before_total(progress) - progress.calls) / progress.calls if progress.calls else math.nan
        records.append((now, progress.calls, progress.eta_seconds(), old, progress.eta_known()))
        refresh(progress)

    suite_progress.SuiteProgress._refresh = recording  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as out:
            _fresh_call_cache(Path(out) / "cache")
            command = argparse.ArgumentParser()
            run_cli.add_parser(command.add_subparsers())
            started = time.monotonic()
            done = run_cli.execute(run_cli.plan_from(command.parse_args([*argv, "--out", out])), report=False)
            if done.error is not None:
                raise SystemExit(f"medfuzz run: {done.error}")
    finally:
        suite_progress.SuiteProgress._refresh = refresh  # type: ignore[method-assign]
    return records, started


def _fresh_call_cache(folder: Path) -> None:
    """``MEDFUZZ_CACHE`` and ``INSPECT_CACHE_DIR`` for one run: the user's medfuzz cache without its model calls
    (the embeddings stay) and an empty Inspect cache, so a repeated run pays its calls again."""
    from medfuzz.paths import cache_dir

    real = cache_dir()
    folder.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name != "calls":
            (folder / entry.name).symlink_to(entry)
    os.environ["MEDFUZZ_CACHE"] = str(folder)
    os.environ["INSPECT_CACHE_DIR"] = str(folder / "inspect")  # models.call_cache keeps calls in Inspect's cache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--level", default="quick")
    parser.add_argument("--data", default=None, help="the run's --data (paper: demo, offline)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-tasks", default=None, help="runs at a time (1: one after another, as embedded)")
    parser.add_argument("--as-embedded", action="store_true",
                        help="one run, one sample and one connection at a time, as medfuzz run sets for the "
                             "embedded model (the README's main command)")
    parser.add_argument("--base-url", default=None, help=argparse.SUPPRESS)  # one repetition, in its own process
    args = parser.parse_args()
    if args.base_url:
        print(f"ROW {repetition(args)}", flush=True)
        return
    rows = []
    process, base_url = start_planted(args.latency_ms)
    try:  # each repetition in its own process: a process keeps model calls in memory and would not pay them again
        for _ in range(args.repeat):
            done = subprocess.run([sys.executable, __file__, "--limit", str(args.limit), "--level", args.level,
                                   "--base-url", base_url, *(["--data", args.data] if args.data else []),
                                   *(["--max-tasks", args.max_tasks] if args.max_tasks else []),
                                   *(["--as-embedded"] if args.as_embedded else [])],
                                  capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"a repetition failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
            rows += [line[4:] for line in done.stdout.splitlines() if line.startswith("ROW ")]
    finally:
        process.terminate()
        process.wait(timeout=10)
    shape = "as embedded" if args.as_embedded else f"max_tasks {args.max_tasks or 'default'}"
    print(f"planted server, {args.latency_ms:g} ms a call, level {args.level}, --limit {args.limit}, {shape}: "
          "ETA / real time left at 25 % | 50 % | 75 % of the calls (within 2x: 0.5-2)")
    print("\n".join(rows))


def repetition(args: argparse.Namespace) -> str:
    os.environ.update({"PLANTED_BASE_URL": args.base_url, "PLANTED_API_KEY": "planted"})
    argv = ["run", "--model", "openai-api/planted/planted", "--attacker", "openai-api/planted/planted-attacker",
            "--level", args.level, "--limit", str(args.limit), "--no-report",
            *(["--data", args.data] if args.data else []),
            *(["--max-tasks", args.max_tasks] if args.max_tasks else []),
            *(["--max-tasks", "1", "--max-samples", "1", "--max-connections", "1"] if args.as_embedded else [])]
    records, started = one_run(argv)
    end = max(t for t, *_ in records)
    total = max(c for _, c, *_ in records)
    cells = []
    for share in (0.25, 0.5, 0.75):
        t, _, now, old, known = next(r for r in records if r[1] >= share * total)
        said = "" if known else ", said: not yet known, at least this"  # the line's own words (eta_known)
        cells.append(f"{now / (end - t):5.2f} (before {old / (end - t):5.2f}, real left {end - t:3.0f} s{said})")
    return f"{total:5d} calls in {end - started:4.0f} s | " + " | ".join(cells)


if __name__ == "__main__":
    main()
