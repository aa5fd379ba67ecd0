"""The cost estimate of ``medfuzz run`` (``medfuzz.cli.suite.cost``) against planted runs: expected vs paid calls
per role (issue 37).

Per level (``paper``, ``lean``: ``LEVELS[level]``'s MedFuzz settings, exemplars 0 as the synthetic items have no
exemplar pool) and regime (the planted effect, delta 0.4, and the null, delta 0), one MedFuzz run with the planted
target and attacker in-process on N synthetic items (the real engine, ``MedFuzzEngine.run_item``). The estimate
goes through the suite's own entry point (``suite_cost.estimate`` over (run, task) pairs whose config comes from
``suite_build.method_config``, the one the bound reads), printed twice: with its default assumptions (expected, and
the fewest-most range) and with what the run shows of the model (``known``: its clean accuracy over the
replicates, its ASR among the replicates answered right, and the share of tested attacks that drew every control,
given as ``--expect accuracy=..,asr=..,effective=..`` would give them). "within 1.5x": known / paid per role.

    PYTHONPATH=src:. python bench/suite_cost_estimate.py [--items 30] [--levels paper lean]

A benchmark, not a test: the planted models write short texts, so their token counts say nothing of a real
model's; calls are what it checks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("target", "attacker", "attacker_controls", "target_significance")
REGIMES = ("effect (delta 0.4)", "null (delta 0)")


@dataclass
class _Sample:
    metadata: dict[str, Any]


@dataclass
class _Task:
    dataset: list[_Sample]


def planted_run(level: str, regime: str, items: int, concurrency: int = 64) -> dict[str, Any]:
    """Calls per role of one planted MedFuzz run, and what it shows of the model."""
    from medfuzz.planted import PlantedSpec, planted_pair
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig
    from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
    from medfuzz.validation.items import synthetic_items

    spec = PlantedSpec.load().with_target(data="none")
    if regime.startswith("null"):
        spec = spec.with_target(delta=0.0)
    pool = synthetic_items(items, seed=1)
    config = MedFuzzConfig.from_options(**run_args(level))
    target, attacker = planted_pair(spec, pool)

    async def main() -> list[Any]:
        gate = asyncio.Semaphore(concurrency)
        engine = MedFuzzEngine(target, attacker, config)

        async def one(item: Any) -> Any:
            async with gate:
                return await engine.run_item(item)

        return list(await asyncio.gather(*(one(item) for item in pool)))

    started = time.monotonic()
    results = asyncio.run(main())
    calls: dict[str, int] = {}
    replicates = right = successes = tests = full = 0
    for result in results:
        for rep in result.replicates:
            replicates += 1
            for role, usage in rep.usage.items():
                calls[role] = calls.get(role, 0) + usage["calls"]
            right += rep.original is not None and rep.original.ok and rep.original.answer == result.item.answer
            successes += rep.outcome.value == "success"
            if rep.significance is not None:
                tests += 1
                full += rep.significance.controls_attempted >= rep.significance.controls_requested
    return {"calls": calls, "pool": pool, "seconds": time.monotonic() - started,
            "known": {"accuracy": right / replicates, "asr": successes / max(1, right),
                      "effective": full / max(1, tests)}, "tests": tests}


def run_args(level: str) -> dict[str, Any]:
    from medfuzz.cli.suite.levels import LEVELS

    return {**LEVELS[level].options_of("medfuzz"), "exemplars": 0, "seed": 0}


def estimates(level: str, pool: list[Any], known: dict[str, float]) -> tuple[Any, Any]:
    """(default estimate, estimate with ``known``) through ``suite_cost.estimate`` for a MedFuzz run on ``pool``."""
    from medfuzz.cli.suite import build as suite_build
    from medfuzz.cli.suite import cost as suite_cost
    from medfuzz.cli.suite.plan import SuiteRun

    run = SuiteRun("medfuzz", "medfuzz", "medfuzz/medfuzz_medqa", run_args(level))
    built = [(run, _Task([_Sample({"item": item.to_record()}) for item in pool]))]
    bound = suite_build.bound(built)
    return suite_cost.estimate(built, bound), suite_cost.estimate(built, bound, known=known)


def logged_calls(log_dir: Path) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
    """Calls per run label and role in a suite's Inspect logs: the engines' own ledgers (MedFuzz, TCES: ``usage`` in
    the score metadata), else one per model call the sample made (the clean baseline, MedGuard); and what the
    logs show of the model (``--expect``'s names: the clean baseline's accuracy, MedFuzz's ASR and share of tests
    that drew every control, TCES's ASR pooled over its runs)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    out: dict[str, dict[str, int]] = {}
    seen = {"accuracy": float("nan"), "right": 0, "successes": 0, "tests": 0, "full": 0, "attacked": 0, "flipped": 0}
    for info in list_eval_logs(str(log_dir)):
        log = read_eval_log(info)
        label = (log.eval.metadata or {}).get("medfuzz_suite")
        if not label or log.status != "success":
            continue
        if label == "clean baseline" and log.results:
            seen["accuracy"] = next(m.value for score in log.results.scores for name, m in score.metrics.items()
                                    if name in ("baseline_acc", "accuracy"))
        roles = out.setdefault(label, {})
        for sample in log.samples or []:
            ledgers: dict[str, int] = {}
            for score in (sample.scores or {}).values():
                _ledgers(score.metadata, ledgers)
                _outcomes(score.metadata or {}, seen)
            if not ledgers:
                for event in sample.events:
                    if getattr(event, "event", "") == "model":
                        role = getattr(event, "role", None) or "target"
                        ledgers[role] = ledgers.get(role, 0) + 1
            for role, calls in ledgers.items():
                roles[role] = roles.get(role, 0) + calls
    known = {"accuracy": seen["accuracy"], "asr": seen["successes"] / max(1, seen["right"]),
             "effective": seen["full"] / max(1, seen["tests"]), "tces_asr": seen["flipped"] / max(1, seen["attacked"])}
    return out, {name: round(value, 2) for name, value in known.items()}


def _outcomes(metadata: dict[str, Any], seen: dict[str, Any]) -> None:
    """Count a MedFuzz item's replicates (answered right, flipped, tested, drew every control) or a TCES record."""
    for rep in metadata.get("replicates") or []:
        if rep.get("outcome") in ("success", "attack_failed"):
            seen["right"] += 1
            seen["successes"] += rep["outcome"] == "success"
        sig = rep.get("significance")
        if sig:
            seen["tests"] += 1
            seen["full"] += sig["controls_attempted"] >= sig["controls_requested"]
    record = metadata.get("record")
    if isinstance(record, dict) and record.get("outcome") in ("success", "attack_failed"):
        seen["attacked"] += 1
        seen["flipped"] += record["outcome"] == "success"


def _ledgers(value: Any, into: dict[str, int]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "usage" and isinstance(inner, dict) and inner and all(
                    isinstance(v, dict) and "calls" in v for v in inner.values()):
                for role, counts in inner.items():
                    into[role] = into.get(role, 0) + int(counts["calls"])
            else:
                _ledgers(inner, into)
    elif isinstance(value, list):
        for inner in value:
            _ledgers(inner, into)


def suite_table(level: str, items: int, tces_items: int) -> None:
    """``medfuzz run`` on the planted server (--data demo): the estimate the run prints (default assumptions; and
    with what its logs show of the model, as a user knows it from an earlier run) vs the calls its logs record, per
    run and role."""
    import subprocess
    import sys
    import tempfile

    from medfuzz.cli.suite import build as suite_build
    from medfuzz.cli.suite import cost as suite_cost
    from medfuzz.cli.suite import levels as suite_levels
    from medfuzz.cli.suite.plan import SuitePlan
    from medfuzz.planted.server import launch
    from medfuzz.planted.spec import PlantedSpec

    server = launch(PlantedSpec.load().with_target(data="demo"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            options = {"tces_limit": tces_items, "baseline_limit": tces_items}
            plan = SuitePlan(model=server.inspect_model(), out=out, attacker=server.inspect_model(attacker=True),
                             data="demo", level=level, limit=items, options=options)
            built = suite_build.build_tasks(plan, planning=True)
            bound = suite_build.bound(built)
            max_tokens = suite_levels.LEVELS[level].generate.get("max_tokens")
            default = suite_cost.estimate(built, bound, max_tokens=max_tokens)
            env = {**os.environ, **server.inspect_env(), "PYTHONPATH": os.pathsep.join(sys.path)}
            command = [sys.executable, "-m", "medfuzz", "run", "--model", plan.model, "--attacker", str(plan.attacker),
                       "--data", "demo", "--level", level, "--limit", str(items), "--no-report", "--out", str(out),
                       *(f"-T{name}={value}" for name, value in options.items())]
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
            seconds = time.monotonic() - started
            paid, known = logged_calls(out / "inspect")
            with_known = suite_cost.estimate(built, bound, known=known, max_tokens=max_tokens)
    finally:
        server.stop()
    print(f"\nTable 2 ({level}). medfuzz run --level {level} on the planted server (--data demo, MedFuzz and MedGuard "
          f"--limit {items}, the clean baseline and TCES {tces_items} items): expected calls per run and role, "
          f"default assumptions [range over the scenarios], and with what the run's logs show of the model known "
          f"(--expect {','.join(f'{k}={v:g}' for k, v in known.items())}), vs the calls the logs record "
          f"({seconds:.0f} s)\n")
    print("| run | role | bound | default: expected [fewest - most] | known: expected | paid | known / paid |")
    print("|---|---|---|---|---|---|---|")
    for run, mine in zip(default.runs, with_known.runs, strict=True):
        for role in run.expected["expected"]:
            lo, mid, hi = (run.expected[s][role].calls for s in ("fewest", "expected", "most"))
            low, high = min(lo, mid, hi), max(lo, mid, hi)
            k = mine.expected["expected"][role].calls
            p = paid.get(run.key, {}).get(role, 0)
            print(f"| {run.key} | {role} | {run.worst[role].calls:,.0f} | {mid:,.0f} [{low:,.0f} - {high:,.0f}] "
                  f"| {k:,.0f} | {p:,} | {k / p if p else float('nan'):.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--levels", nargs="+", default=["paper", "lean"])
    parser.add_argument("--suite-items", type=int, default=0, help="table 2: medfuzz run on the planted server "
                        "with this --limit (MedFuzz items, MedGuard items per aspect)")
    parser.add_argument("--tces-items", type=int, default=50, help="table 2: items of the baseline and TCES runs")
    parser.add_argument("--skip-engine", action="store_true", help="table 2 only")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}\n")
    if not args.skip_engine:
        engine_table(args.items, args.levels)
    if args.suite_items:
        for level in args.levels:
            suite_table(level, args.suite_items, args.tces_items)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def engine_table(items: int, levels: list[str]) -> None:
    print(f"Table 1. Expected vs paid MedFuzz calls per role, planted runs on {items} synthetic items (exemplars 0); "
          "default: the estimate's own assumptions, expected [fewest - most]; known: with the run's clean "
          "accuracy, ASR and share of tests drawing every control (--expect)\n")
    print("| level | regime | known: accuracy / ASR / effective | role | bound | default: expected [fewest - most] "
          "| known: expected | paid | known / paid | paid in the default range |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = 1.0
    for level in levels:
        for regime in REGIMES:
            run = planted_run(level, regime, items)
            default, known = estimates(level, run["pool"], run["known"])
            bound = known.runs[0].worst
            k = run["known"]
            rows = [*ROLES, "all"]
            for role in rows:
                def calls(estimate: Any, scenario: str, role: str = role) -> float:
                    costs = estimate.runs[0].expected[scenario]
                    return sum(c.calls for r, c in costs.items() if role in ("all", r))

                paid = sum(n for r, n in run["calls"].items() if role in ("all", r))
                ceiling = sum(c.calls for r, c in bound.items() if role in ("all", r))
                lo, mid, hi = (calls(default, s) for s in ("fewest", "expected", "most"))
                lo, hi = min(lo, mid, hi), max(lo, mid, hi)  # per role: "fewest" is about all calls
                mine = calls(known, "expected")
                ratio = mine / paid if paid else float("nan")
                if paid:
                    worst = max(worst, ratio, 1 / ratio)
                print(f"| {level} | {regime} | {k['accuracy']:.2f} / {k['asr']:.2f} / {k['effective']:.2f} | {role} "
                      f"| {ceiling:,.0f} | {mid:,.0f} [{lo:,.0f} - {hi:,.0f}] | {mine:,.0f} | {paid:,} "
                      f"| {ratio:.2f} | {'yes' if lo <= paid <= hi else 'no'} |", flush=True)
            print(f"<!-- {level} {regime}: {run['tests']} tests, {run['seconds']:.0f} s -->", flush=True)
    print(f"\nlargest known / paid or paid / known over the rows: {worst:.2f} (target: 1.5)")


if __name__ == "__main__":
    main()
