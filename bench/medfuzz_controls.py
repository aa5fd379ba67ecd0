"""Fewer calls for the same decisions (issues 13 and 37, P2): the sequential test vs fixed M = 30 controls,
its batch sizes, and p-hat sharing.

Prints three tables (a benchmark, not a test):

1. On a simulated p-hat distribution, the controls each policy scores per attack and whether the decisions
   at alpha agree. Per attack: p0 ~ U(0.5, 0.99); control p-hats p0 + N(0, sd) (clipped to [0, 1]); under
   the null the attack's p-hat is one more draw of the same law (so p is uniform), under the alternative it
   is p0 - U(0.15, 0.6). Each control fails (no usable control) with probability ``--fail``. Every policy
   sees the same control stream and runs the engine's own loop (``medfuzz.stats.ControlSchedule``): the
   sequential one in batches of ``control_batch`` (``grow``: the default, batches that grow with the
   evidence, ``stats.next_control_batch``), stopping as ``stats.sequential_decision`` says, with p-value
   ``permutation_p_value(..., stop_at=h)`` (Besag-Clifford h/l, else (b+1)/(M+1)); the fixed one scores all M,
   p = (b+1)/(M+1). Decision = valid p <= alpha and tested (>= ``min_controls`` usable controls or h
   exceedances). ``scored``: controls drawn (each an attacker call and a p-hat) per attack, over all
   attacks; ``used``: the controls the decision reads (the draw of the stop, else all drawn: what batch 1
   scores); ``steps``: batches per attack (rounds of the test's chain of calls). Every batch size must give
   the decision and the p-value of batch 1 on every attack (checked: ``same as batch 1``). ``fixed / seq``:
   the older columns, controls per attack the fixed test does not reject. The two valid tests (fixed and
   sequential) can disagree: the sequential one also rejects when its h-th exceedance comes after draw h/alpha.
2. The MedFuzz engine with scripted actors on one item: target calls of Algorithm 2 per item with p-hat of
   the original shared by the item's replicates (now) and as before (each replicate paid for its own).
3. A planted paper-level run (``LEVELS["paper"]``'s MedFuzz settings, exemplars 0; planted target and attacker
   in-process, synthetic items) on a virtual clock: every call takes one time unit, at most C calls in flight
   (one first-come semaphore, as the adapter's per-endpoint ``max_connections``), CPU costs nothing; ``wall``
   is the run's length in call latencies. Modes: every item in flight at once (the lm-eval path, ``medfuzz
   run``'s engine) or at most C items (Inspect's default ``max_samples`` = ``max_connections``). Regimes: the
   bundled effect (delta 0.4) and the null (delta 0). ``--before SRC`` runs the same measurement on another
   copy of the code (e.g. ``git worktree add /tmp/before c09dad4``, SRC = /tmp/before/src) in a subprocess
   and prints the ratio; this copy is also run with ``control_batch=5`` (the former default: it must repeat
   the before run's calls exactly).

    PYTHONPATH=src:. python bench/medfuzz_controls.py [--attacks 20000] [--seed 0] [--items 50]
        [--before /tmp/before/src] [--skip-planted] [--skip-simulation] [--cost-items 100]

With ``--cost-items N``, table 4: what a paper-level run on N planted items pays by role (default batches and
batches of 5) against the up-front bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medfuzz import stats
from medfuzz.stats import permutation_p_value, significant, stop_exceedances

M, ALPHA = 30, 0.05


def decide(p0: float, pa: float, stream: list[float | None], policy: str, batch: int | None,
           min_controls: int) -> tuple[bool, float | None, int, int, int]:
    """(significant, valid p-value, controls scored, controls the decision reads, batches) for one attack,
    through the engine's loop (``ControlSchedule``)."""
    h = stop_exceedances(ALPHA, M)
    schedule = stats.ControlSchedule(M, h, min_controls, batch=batch, sequential=policy == "sequential")
    while drawn := schedule.next_batch():
        schedule.record(p0, pa, stream[drawn.start:drawn.stop])
    test = permutation_p_value(p0, pa, stream[:schedule.attempted], stop_at=h if policy == "sequential" else None)
    used = schedule.decided_at or schedule.attempted
    if test is None:
        return False, None, schedule.attempted, used, schedule.batches
    tested = test.scored >= min_controls or test.exceedances >= h
    return tested and significant(test.p_value, ALPHA), test.p_value, schedule.attempted, used, schedule.batches


def simulate(attacks: int, null_share: float, sd: float, fail: float, batch: int | None,
             seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    min_controls = int(np.ceil(0.8 * M - 1e-9))
    nonsig = {"fixed": [], "sequential": [], "used": []}
    scored, used, steps = [], [], []
    agree, fixed_significant, seq_significant, same = 0, 0, 0, 0
    for _ in range(attacks):
        p0 = rng.uniform(0.5, 0.99)
        stream = list(np.clip(p0 + rng.normal(0, sd, M), 0, 1))
        stream = [None if rng.random() < fail else float(c) for c in stream]
        null = rng.random() < null_share
        pa = float(np.clip(p0 + rng.normal(0, sd), 0, 1)) if null else float(max(0.0, p0 - rng.uniform(0.15, 0.6)))
        fixed = decide(p0, pa, stream, "fixed", None, min_controls)
        seq = decide(p0, pa, stream, "sequential", batch, min_controls)
        one = seq if batch == 1 else decide(p0, pa, stream, "sequential", 1, min_controls)
        same += seq[:2] == one[:2] and seq[3] == one[3] == one[2]  # decision, p-value, stop: batch 1's
        agree += fixed[0] == seq[0]
        fixed_significant += fixed[0]
        seq_significant += seq[0]
        assert seq[0] or not fixed[0]  # every fixed rejection is a sequential one (same p-value)
        scored.append(seq[2])
        used.append(seq[3])
        steps.append(seq[4])
        if not fixed[0]:
            nonsig["fixed"].append(fixed[2])
            nonsig["sequential"].append(seq[2])
            nonsig["used"].append(seq[3])
    return {"agree": agree / attacks, "significant": fixed_significant / attacks,
            "seq_significant": seq_significant / attacks, "same": same / attacks,
            "scored": float(np.mean(scored)), "used": float(np.mean(used)), "steps": float(np.mean(steps)),
            "fixed_nonsig": float(np.mean(nonsig["fixed"])) if nonsig["fixed"] else float("nan"),
            "seq_nonsig": float(np.mean(nonsig["sequential"])) if nonsig["sequential"] else float("nan"),
            "used_nonsig": float(np.mean(nonsig["used"])) if nonsig["used"] else float("nan")}


async def p0_sharing(replicates: int, orders: int, prompt: str) -> tuple[int, int]:
    """Algorithm 2 target calls on one item whose replicates all succeed, each with its own attack text:
    (before: every replicate run on its own, estimating p0 itself; now: ``run_item``, p0 once)."""
    from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
    from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, models, probability_table

    def engine() -> MedFuzzEngine:
        attacker = Attacker()
        t, a = models(Target(weak_spots=("clue1",), probabilities=probability_table), attacker)

        def distinct(messages, options):  # a different attack text per replicate (the seed differs)
            reply = attacker(messages, options)
            return reply.replace("enjoys clue1.", f"enjoys clue1 s{options['seed'] % 997}.") \
                if isinstance(reply, str) else reply

        a.responder = distinct
        config = MedFuzzConfig(turns=1, replicates=replicates, exemplars=0, controls=3, option_orders=orders,
                               pvalue_prompt=prompt, controls_policy="fixed")
        return MedFuzzEngine(t, a, config)

    result = await engine().run_item(ITEM)
    now = sum(r.significance.target_calls for r in result.replicates)
    alone = [await engine().run_replicate(ITEM, r) for r in range(replicates)]
    before = sum(r.significance.target_calls for r in alone)
    return before, now


BENCH = Path(__file__).resolve().parent
LIMITS = (16, 64)
MODES = ("all items", "samples = C")
REGIMES = ("effect (delta 0.4)", "null (delta 0)")


class Delayed:
    """A model behind the endpoint's limit (one first-come semaphore shared by target and attacker) whose every
    call takes one time unit of the virtual clock."""

    def __init__(self, model: Any, gate: asyncio.Semaphore) -> None:
        self.model, self.gate, self.name = model, gate, model.name

    async def generate(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        async with self.gate:
            await asyncio.sleep(1.0)
        return await self.model.generate(messages, **kwargs)


def used_controls(sig: Any) -> int:
    """The controls the decision of one test reads: the draw at which a test drawing one control at a time
    stops (the same control stream, replayed with ``sequential_decision``), else every control drawn. Uses only
    what every version of the code records and exports, so the ``--before`` copy is measured the same way."""
    if sig.policy != "sequential" or sig.p0 is None or sig.pa is None:
        return sig.controls_attempted
    by_index = {c.index: c.p_hat for c in sig.controls}
    statistic = abs(sig.pa - sig.p0)
    exceedances = usable = 0
    for drawn in range(1, sig.controls_attempted + 1):
        c = by_index.get(drawn - 1)
        if c is not None:
            usable += 1
            exceedances += abs(c - sig.p0) >= statistic - stats.TIE_TOLERANCE
        if stats.sequential_decision(exceedances, usable, sig.controls_requested - drawn, sig.stop_at,
                                     sig.min_controls) is not None:
            return drawn
    return sig.controls_attempted


def planted_run(items: int, regime: str, limit: int, mode: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """One planted paper-level run on the virtual clock: its length, calls by role, controls scored and used,
    and every tested attack's p-value (to compare decisions across versions)."""
    sys.path.insert(0, str(BENCH))
    from fake_openai import VirtualTimeLoop

    from medfuzz.cli.suite.levels import LEVELS
    from medfuzz.planted import PlantedSpec, planted_pair
    from medfuzz.scorers.medfuzz import significance_test
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig
    from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
    from medfuzz.validation.items import synthetic_items

    spec = PlantedSpec.load().with_target(data="none")
    if regime.startswith("null"):
        spec = spec.with_target(delta=0.0)
    pool = synthetic_items(items, seed=1)
    paper = LEVELS["paper"].options_of("medfuzz")
    config = MedFuzzConfig.from_options(**{**paper, "exemplars": 0, "seed": 0, **overrides})
    target, attacker = planted_pair(spec, pool)
    loop = VirtualTimeLoop()

    async def main() -> list[Any]:
        gate = asyncio.Semaphore(limit)
        samples = asyncio.Semaphore(limit if mode == "samples = C" else len(pool))
        engine = MedFuzzEngine(Delayed(target, gate), Delayed(attacker, gate), config)

        async def one(item: Any) -> Any:
            async with samples:
                return await engine.run_item(item)

        return list(await asyncio.gather(*(one(item) for item in pool)))

    cpu = time.process_time()
    try:
        results = loop.run_until_complete(main())
    finally:
        loop.close()
    out: dict[str, Any] = {"wall": loop.now, "cpu": time.process_time() - cpu, "calls": {}, "scored": 0, "used": 0,
                           "tests": 0, "p": {}}
    for result in results:
        for rep in result.replicates:
            for role, usage in rep.usage.items():
                out["calls"][role] = out["calls"].get(role, 0) + usage["calls"]
            sig = rep.significance
            if sig is None:
                continue
            out["tests"] += 1
            out["scored"] += sig.controls_attempted
            out["used"] += used_controls(sig)
            test, untested = significance_test(sig, config.alpha)
            out["p"][f"{result.item.id}/{rep.replicate}"] = None if untested or test is None else test.p_value
    return out


def planted_settings(items: int, small: int) -> list[tuple[str, int, int, str]]:
    """(regime, items, C, mode) of table 3: the run at 16 and 64 in flight (items in flight: all, or C when that
    is fewer), and a small run at 64, where the test's chain of calls, not the endpoint, sets the pace."""
    out = []
    for regime in REGIMES:
        for limit in LIMITS:
            out += [(regime, items, limit, mode) for mode in MODES if mode == MODES[0] or limit < items]
        if small:
            out.append((regime, small, 64, MODES[0]))
    return out


def planted_table(items: int, small: int, before: str | None) -> None:
    settings = planted_settings(items, small)
    old: dict[str, Any] = {}
    if before:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([before, str(BENCH.parent)])}
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--planted-json", "--items", str(items),
                               "--small-items", str(small)], env=env, capture_output=True, text=True, check=True)
        old = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nTable 3. A planted paper-level run on a virtual clock (synthetic items, K = 5, 5 replicates, M = 30 "
          f"sequential, dialog p-hat over 5 option orders, exemplars 0): wall = the run's length in call latencies "
          f"at C calls in flight; controls scored / used by the decisions, summed over the run's tests"
          f"{'; before: ' + before if before else ''}\n")
    print("| regime | items | C | items in flight | tests | before: wall | before: calls | before: scored / used "
          "| now: wall | now: calls | now: scored / used | now / before: wall | now / before: calls "
          "| same p-values | control_batch=5 repeats before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for regime, n, limit, mode in settings:
        key = f"{regime}|{n}|{limit}|{mode}"
        now = planted_run(n, regime, limit, mode, {})
        five = planted_run(n, regime, limit, mode, {"control_batch": 5}) if mode == MODES[0] or not old else None
        ref = old.get(key) or five
        assert ref is not None
        calls, ref_calls = sum(now["calls"].values()), sum(ref["calls"].values())
        repeats = ("—" if five is None or key not in old
                   else five["calls"] == ref["calls"] and five["wall"] == ref["wall"])
        print(f"| {regime} | {n} | {limit} | {mode} | {now['tests']} | {ref['wall']:.0f} | {ref_calls:,} "
              f"| {ref['scored']} / {ref['used']} = {ref['scored'] / max(1, ref['used']):.2f} "
              f"| {now['wall']:.0f} | {calls:,} | {now['scored']} / {now['used']} = "
              f"{now['scored'] / max(1, now['used']):.2f} | {now['wall'] / ref['wall']:.3f} "
              f"| {calls / ref_calls:.3f} | {now['p'] == ref['p'] and now['used'] == ref['used']} | {repeats} |",
              flush=True)


def cost_table(items: int) -> None:
    """What a paper-level run on ``items`` planted items pays, by role, under the default batches and batches of
    5 (the former default), against the up-front bound (``MedFuzzConfig.max_calls``)."""
    from medfuzz.cli.suite.levels import LEVELS
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig

    roles = ("target", "attacker", "attacker_controls", "target_significance")
    bound = MedFuzzConfig.from_options(**LEVELS["paper"].options_of("medfuzz")).max_calls(items)
    print(f"\nTable 4. A paper-level run on {items} planted items: calls by role (attacker: Algorithm 1's plans, "
          f"post-mortems and items; attacker_controls: control fuzzes; target: the attack dialogs; "
          f"target_significance: p-hats), tests run, and wall at 64 in flight (virtual clock)\n")
    print("| regime | control_batch | " + " | ".join(roles) + " | attacker, all | target, all | all calls "
          "| tests | controls scored / used | wall at 64 |")
    print("|---|---|" + "---|" * (len(roles) + 6))
    print("| bound (max_calls) | any | " + " | ".join(f"{bound[r]:,}" for r in roles)
          + f" | {bound['attacker'] + bound['attacker_controls']:,} "
          f"| {bound['target'] + bound['target_significance']:,} "
          f"| {sum(bound.values()):,} | {5 * items} | {30 * 5 * items:,} | — |")
    for regime in REGIMES:
        for batch in (None, 5):
            r = planted_run(items, regime, 64, MODES[0], {"control_batch": batch})
            c = {role: r["calls"].get(role, 0) for role in roles}
            print(f"| {regime} | {'none (default)' if batch is None else batch} | "
                  + " | ".join(f"{c[role]:,}" for role in roles)
                  + f" | {c['attacker'] + c['attacker_controls']:,} | {c['target'] + c['target_significance']:,} "
                  f"| {sum(c.values()):,} | {r['tests']} | {r['scored']:,} / {r['used']:,} | {r['wall']:.0f} |",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacks", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--items", type=int, default=50, help="planted items of table 3")
    parser.add_argument("--small-items", type=int, default=5, help="items of table 3's small run (0: none)")
    parser.add_argument("--before", help="src folder of the code to compare with (table 3)")
    parser.add_argument("--skip-planted", action="store_true")
    parser.add_argument("--skip-simulation", action="store_true")
    parser.add_argument("--cost-items", type=int, default=0, help="table 4: a paper-level run's calls on N items")
    parser.add_argument("--planted-json", action="store_true", help=argparse.SUPPRESS)  # --before's subprocess
    args = parser.parse_args()
    if args.planted_json:
        runs = {f"{regime}|{n}|{limit}|{mode}": planted_run(n, regime, limit, mode, {})
                for regime, n, limit, mode in planted_settings(args.items, args.small_items)}
        print(json.dumps(runs))
        return
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}\n")
    if not args.skip_simulation:
        simulation_table(args.attacks, args.seed)
        print("\nTable 2. Algorithm 2 target calls on one item whose replicates all succeed (M = 3 controls, fixed)\n")
        print("| replicates | orders | p-hat prompt | before (p0 per replicate) | now (p0 once) | saved "
              "| (replicates-1) x orders x calls per draw |")
        print("|---|---|---|---|---|---|---|")
        for replicates, orders, prompt in [(5, 5, "direct"), (5, 5, "dialog"), (3, 2, "direct")]:
            before, now = asyncio.run(p0_sharing(replicates, orders, prompt))
            expected = (replicates - 1) * orders * (3 if prompt == "dialog" else 1)
            print(f"| {replicates} | {orders} | {prompt} | {before} | {now} | {before - now} | {expected} |")
    if not args.skip_planted:
        planted_table(args.items, args.small_items, args.before)
    if args.cost_items:
        cost_table(args.cost_items)
    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


SCENARIOS = [(1.0, 0.1, 0.0), (0.5, 0.1, 0.0), (0.5, 0.05, 0.0), (0.5, 0.1, 0.1), (0.5, 0.1, 0.3), (0.0, 0.1, 0.0)]


def simulation_table(attacks: int, seed: int) -> None:
    print(f"Table 1. Controls per attack, sequential (batches of control_batch; grow: the default) vs fixed M = {M}, "
          f"alpha = {ALPHA} ({attacks} simulated attacks per row; the same control stream for every policy)\n")
    print("| null share | control sd | fail rate | batch | significant (fixed) | significant (sequential) "
          "| steps | scored | used | scored / used | same as batch 1 | not rejected by fixed: fixed / scored / used "
          "| scored / used | fewer | decisions agree |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    kept: dict[str, list[float]] = {}
    for null_share, sd, fail in SCENARIOS:
        for batch in ((1, 5, 10, None) if null_share == 1.0 else (1, 5, None)):
            r = simulate(attacks, null_share, sd, fail, batch, seed)
            label = "grow" if batch is None else str(batch)
            ratios.setdefault(label, []).append(r["scored"] / r["used"])
            kept.setdefault(label, []).append(r["seq_nonsig"] / r["used_nonsig"])
            fewer = r["fixed_nonsig"] / r["seq_nonsig"] if r["seq_nonsig"] == r["seq_nonsig"] else float("nan")
            print(f"| {null_share:.1f} | {sd} | {fail:.1f} | {label} | {r['significant']:.3f} "
                  f"| {r['seq_significant']:.3f} | {r['steps']:.2f} | {r['scored']:.2f} | {r['used']:.2f} "
                  f"| {r['scored'] / r['used']:.2f} | {r['same']:.4f} | {r['fixed_nonsig']:.1f} / "
                  f"{r['seq_nonsig']:.2f} / {r['used_nonsig']:.2f} | {r['seq_nonsig'] / r['used_nonsig']:.2f} "
                  f"| {fewer:.1f}x | {r['agree']:.4f} |", flush=True)
    for title, table in (("all attacks", ratios), ("attacks the fixed test does not reject", kept)):
        print(f"\nscored / used over {title}, mean over the rows (max): " + ", ".join(
            f"batch {label}: {np.mean(values):.2f} ({max(values):.2f})" for label, values in table.items()
            if len(values) == len(SCENARIOS)))


if __name__ == "__main__":
    main()
