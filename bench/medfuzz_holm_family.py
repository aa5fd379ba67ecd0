"""What ``holm_family`` costs and buys (issue 19): MedFuzz on planted models, the default configuration
(sequential test, M = 30, alpha = 0.05) against ``holm_family = items x replicates``, which raises the largest
M so that Holm over every attack the run can test is attainable (1/(M+1) <= alpha/m) while h stays the paper
M's (null attacks stop at their first exceedance).

Prints one table (a benchmark, not a test): per planted regime (null: delta = 0; effect: the bundled spec's
delta), the tested attacks, Algorithm 2's target and attacker calls per tested attack, the significant
attacks unadjusted / Holm / BH (valid p-values) and the smallest p-value reached.

    PYTHONPATH=src python bench/medfuzz_holm_family.py [--items 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from medfuzz.planted import PlantedSpec
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.stats import adjust, significant
from medfuzz.validation import medfuzz as vm
from medfuzz.validation.items import synthetic_items


def row(label: str, spec: PlantedSpec, config: MedFuzzConfig, items: int, seed: int) -> str:
    start = time.perf_counter()
    pool = synthetic_items(items, seed=seed + 1)
    results = vm.run_engine(pool, spec, config)
    scores = vm.score(results, config)
    tests = [r.significance for res in results for r in res.replicates if r.significance is not None]
    p_values = [p for s in scores for p in s.p_values if p is not None]
    n = max(1, len(tests))
    target = sum(t.target_calls for t in tests) / n
    attacker = sum(t.attacker_calls for t in tests) / n
    controls = sum(len(t.controls) for t in tests) / n
    holm = sum(significant(p, config.alpha) for p in adjust(p_values, "holm"))
    bh = sum(significant(p, config.alpha) for p in adjust(p_values, "bh"))
    raw = sum(significant(p, config.alpha) for p in p_values)
    smallest = min(p_values, default=float("nan"))
    return (f"| {label} | {config.max_controls} | {len(p_values)} | {controls:.1f} | {target:.1f} | {attacker:.1f} "
            f"| {raw} | {holm} | {bh} | {smallest:.4f} | {time.perf_counter() - start:.0f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec = PlantedSpec.load().with_target(data="none")
    base = dict(replicates=5, option_orders=2, pvalue_prompt="direct", exemplars=0, seed=args.seed)
    family = args.items * base["replicates"]
    print(f"MedFuzz on {args.items} planted items x 5 replicates, alpha = 0.05, sequential test (p-hat: direct "
          f"prompt, 2 option orders; calls scale with orders and x3 for the dialog prompt)\n")
    print("| regime, setting | largest M | tested attacks | controls / test | target calls / test "
          "| attacker calls / test | significant | Holm | BH | smallest p | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for regime, planted in (("null (delta 0)", spec.with_target(delta=0.0)),
                            (f"effect (delta {spec.target.delta})", spec)):
        for setting, extra in (("default M = 30", {}), (f"holm_family = {family}", {"holm_family": family})):
            print(row(f"{regime}, {setting}", planted, MedFuzzConfig(**base, **extra), args.items, args.seed),
                  flush=True)


if __name__ == "__main__":
    main()
