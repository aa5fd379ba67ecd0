"""Fewer calls for the same decisions (issue 13, P2): sequential vs fixed M = 30 controls, and p-hat sharing.

Prints two tables (a benchmark, not a test):

1. On a simulated p-hat distribution, the controls each policy scores per successful attack and whether the
   decisions at alpha agree. Per attack: p0 ~ U(0.5, 0.99); control p-hats p0 + N(0, sd) (clipped to [0, 1]);
   under the null the attack's p-hat is one more draw of the same law (so p is uniform), under the
   alternative it is p0 - U(0.15, 0.6). Each control fails (no usable control) with probability ``--fail``.
   Both policies see the same control stream; the sequential one scores it in batches of ``control_batch``
   and stops as ``medfuzz.stats.sequential_decision`` says, its p-value is ``permutation_p_value(...,
   stop_at=h)`` (Besag-Clifford h/l, else (b+1)/(M+1)); the fixed one scores all M, p = (b+1)/(M+1).
   Decision = valid p <= alpha and tested (>= ``min_controls`` usable controls or h exceedances). The two
   valid tests can disagree: the sequential one also rejects when its h-th exceedance comes after draw h/alpha.
2. The MedFuzz engine with scripted actors on one item: target calls of Algorithm 2 per item with p-hat of
   the original shared by the item's replicates (now) and as before (each replicate paid for its own).

    PYTHONPATH=src:. python bench/medfuzz_controls.py [--attacks 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from medfuzz.stats import permutation_p_value, sequential_decision, significant, stop_exceedances

M, ALPHA = 30, 0.05


def decide(p0: float, pa: float, stream: list[float | None], policy: str, batch: int,
           min_controls: int) -> tuple[bool, int, int]:
    """(significant, controls attempted, usable controls scored) for one attack."""
    h = stop_exceedances(ALPHA, M)
    step = M if policy == "fixed" else batch
    attempted = 0
    while attempted < M:
        attempted = min(M, attempted + step)
        usable = [c for c in stream[:attempted] if c is not None]
        if policy == "sequential":
            test = permutation_p_value(p0, pa, usable) if usable else None
            g = test.exceedances if test else 0
            if sequential_decision(g, len(usable), M - attempted, h, min_controls) is not None:
                break
    usable = [c for c in stream[:attempted] if c is not None]
    test = permutation_p_value(p0, pa, usable, stop_at=h if policy == "sequential" else None)
    if test is None:
        return False, attempted, 0
    tested = test.scored >= min_controls or test.exceedances >= h
    return tested and significant(test.p_value, ALPHA), attempted, len(usable)


def simulate(attacks: int, null_share: float, sd: float, fail: float, batch: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    min_controls = int(np.ceil(0.8 * M - 1e-9))
    used = {"fixed": [], "sequential": []}
    agree, significant, seq_significant, nonsig = 0, 0, 0, 0
    for _ in range(attacks):
        p0 = rng.uniform(0.5, 0.99)
        stream = list(np.clip(p0 + rng.normal(0, sd, M), 0, 1))
        stream = [None if rng.random() < fail else float(c) for c in stream]
        null = rng.random() < null_share
        pa = float(np.clip(p0 + rng.normal(0, sd), 0, 1)) if null else float(max(0.0, p0 - rng.uniform(0.15, 0.6)))
        fixed = decide(p0, pa, stream, "fixed", batch, min_controls)
        seq = decide(p0, pa, stream, "sequential", batch, min_controls)
        agree += fixed[0] == seq[0]
        significant += fixed[0]
        seq_significant += seq[0]
        assert seq[0] or not fixed[0]  # every fixed rejection is a sequential one (same p-value)
        if not fixed[0]:
            nonsig += 1
            used["fixed"].append(fixed[1])
            used["sequential"].append(seq[1])
    return {"agree": agree / attacks, "significant": significant / attacks,
            "seq_significant": seq_significant / attacks,
            "fixed_nonsig": float(np.mean(used["fixed"])) if nonsig else float("nan"),
            "seq_nonsig": float(np.mean(used["sequential"])) if nonsig else float("nan")}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacks", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"Table 1. Controls per attack the fixed test does not reject, sequential vs fixed M = {M}, alpha = {ALPHA} "
          f"({args.attacks} simulated attacks per row; same control stream for both policies)\n")
    print("| null share | control sd | fail rate | batch | significant (fixed) | significant (sequential) "
          "| fixed controls | sequential controls | fewer | decisions agree |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for null_share, sd, fail, batch in [(1.0, 0.1, 0.0, 1), (1.0, 0.1, 0.0, 5), (1.0, 0.1, 0.0, 10),
                                        (0.5, 0.1, 0.0, 5), (0.5, 0.05, 0.0, 5), (0.5, 0.1, 0.1, 5),
                                        (0.5, 0.1, 0.3, 5), (0.0, 0.1, 0.0, 5)]:
        r = simulate(args.attacks, null_share, sd, fail, batch, args.seed)
        ratio = r["fixed_nonsig"] / r["seq_nonsig"] if r["seq_nonsig"] == r["seq_nonsig"] else float("nan")
        print(f"| {null_share:.1f} | {sd} | {fail:.1f} | {batch} | {r['significant']:.3f} | {r['seq_significant']:.3f} "
              f"| {r['fixed_nonsig']:.1f} "
              f"| {r['seq_nonsig']:.2f} | {ratio:.1f}x | {r['agree']:.4f} |")
    print("\nTable 2. Algorithm 2 target calls on one item whose replicates all succeed (M = 3 controls, fixed)\n")
    print("| replicates | orders | p-hat prompt | before (p0 per replicate) | now (p0 once) | saved "
          "| (replicates-1) x orders x calls per draw |")
    print("|---|---|---|---|---|---|---|")
    for replicates, orders, prompt in [(5, 5, "direct"), (5, 5, "dialog"), (3, 2, "direct")]:
        before, now = asyncio.run(p0_sharing(replicates, orders, prompt))
        expected = (replicates - 1) * orders * (3 if prompt == "dialog" else 1)
        print(f"| {replicates} | {orders} | {prompt} | {before} | {now} | {before - now} | {expected} |")


if __name__ == "__main__":
    main()
