"""What MedFuzz's cost levels (``medfuzz run --level``: ``LEVELS`` in ``medfuzz.cli.suite.levels``) cost and what they
change statistically, measured with the real engine and scorer on planted models in-process.

Per planted regime (null: delta = 0; a small effect; the bundled spec's effect) and per level: the up-front bound
per item (``MedFuzzConfig.max_calls``, all roles and the target's p-hat calls), the calls per item the run paid,
per role; the tested attacks; the significant ones unadjusted / Holm / BH (valid p-values; Holm and BH within
each seed's run, one family per run, summed over seeds); power; the null rejection rate; and the agreement of the
per-attack decisions with the ``paper`` level.

- Power: the share of tested attacks whose modified question carries a planted trigger (the attacks that move
  P(key) by delta) that are significant. Null rejection: the share significant among tested attacks without an
  effect (under delta = 0 every attack; under an effect the successes that carry no trigger, i.e. the target
  just missed); its exact rate for the sequential test at M = 30, alpha = 0.05 is printed with the table.
- Agreement: the engine derives every seed from (config seed, item id, replicate) and the option-order draws
  from (config seed, item id), so on the same items and seed a replicate that two levels both run makes the same
  attack trajectory and draws the same control fuzzes (levels differ only in how p-hat is read and over how many
  option orders, a prefix of the paper's five). The bench checks this (``different attacks``: replicates run by
  both whose outcome or successful modified question differs; it must be 0) and then compares, over the
  successful attacks both levels ran, the decision "significant" (valid p-value <= alpha; an untested attack is
  not significant) of the level with the paper level's. ``lean`` runs replicates 0-2 of the paper's 0-4.

Reference rows that are not levels: ``paper, fixed M`` (no sequential early stop: what the stop saves; the
bound is the same, it assumes every control is drawn) and ``direct, no logprobs`` (the direct prompt against a
target that returns no letter log-probabilities: each draw is one sampled letter, the engine's fallback).
The planted target's p-hat has the same distribution under the dialog and the direct prompt (its letter
probabilities do not depend on a reasoning step), so paper vs direct here shows the paired Monte Carlo spread
of the decisions, not the difference a real model's reasoning makes to p-hat.

    PYTHONPATH=src python bench/medfuzz_cost_levels.py [--items 30] [--seeds 0 1] [--small-delta 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from medfuzz.benchmarks.items import MCQItem
from medfuzz.cli.suite.levels import LEVELS
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation
from medfuzz.planted import PlantedSpec, planted_pair
from medfuzz.planted.text import contains_phrase
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome
from medfuzz.stats import adjust, significant
from medfuzz.validation import medfuzz as vm
from medfuzz.validation.items import synthetic_items

ROLES = ("target", "attacker", "attacker_controls", "target_significance")


class NoLogprobs:
    """A target that returns no letter log-probabilities (a backend without logprobs): the engine falls back
    to one sampled letter per p-hat draw."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name

    async def generate(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Generation:
        return dataclasses.replace(await self.model.generate(messages, **kwargs), letter_logprobs=None)


@dataclass(frozen=True)
class Setting:
    label: str
    level: str  # the LEVELS entry whose MedFuzz options it runs
    extra: tuple[tuple[str, Any], ...] = ()  # options over the level's (reference rows)
    logprobs: bool = True

    def config(self, seed: int) -> MedFuzzConfig:
        # exemplars 0: the synthetic planted items have no exemplar pool of their own (as in the other MedFuzz
        # benches); no level changes the exemplars, so this does not favour one level
        return MedFuzzConfig.from_options(**{**LEVELS[self.level].options_of("medfuzz"), "exemplars": 0, "seed": seed,
                                             **dict(self.extra)})


SETTINGS = (Setting("paper", "paper"), Setting("direct", "direct"), Setting("lean", "lean"),
            Setting("paper, fixed M (reference)", "paper", (("controls_policy", "fixed"),)),
            Setting("direct, no logprobs (reference)", "direct", logprobs=False))


@dataclass(frozen=True)
class Attack:
    outcome: str
    question: str | None
    triggered: bool
    p_value: float | None


@dataclass
class Run:
    """One setting on one regime, pooled over seeds."""

    attacks: dict[tuple[int, str, int], Attack]  # (seed, item id, replicate)
    calls: dict[str, int]
    items: int
    holm: int
    bh: int
    seconds: float


def run_engine(items: Sequence[MCQItem], spec: PlantedSpec, config: MedFuzzConfig, logprobs: bool
               ) -> list[ItemResult]:
    if logprobs:
        return vm.run_engine(items, spec, config)  # the validation's own runner: the same path as its checks
    target, attacker = planted_pair(spec, items)
    engine = MedFuzzEngine(NoLogprobs(target), attacker, config)

    async def main() -> list[ItemResult]:
        return list(await asyncio.gather(*(engine.run_item(item) for item in items)))

    return asyncio.run(main())


def run(setting: Setting, spec: PlantedSpec, items: int, seeds: Sequence[int]) -> Run:
    start = time.perf_counter()
    out = Run({}, dict.fromkeys(ROLES, 0), 0, 0, 0, 0.0)
    for seed in seeds:
        config = setting.config(seed)
        pool = synthetic_items(items, seed=seed + 1)
        results = run_engine(pool, spec, config, setting.logprobs)
        scores = vm.score(results, config)
        p_values: list[float | None] = []
        for result, scored in zip(results, scores, strict=True):
            evidence = {e.replicate: e for e in scored.evidence}
            for rep in result.replicates:
                for role, usage in rep.usage.items():
                    out.calls[role] = out.calls.get(role, 0) + usage["calls"]
                success = rep.outcome is Outcome.SUCCESS
                p = evidence[rep.replicate].p_value if success and rep.replicate in evidence else None
                question = rep.fuzzed_question if success else None
                out.attacks[(seed, result.item.id, rep.replicate)] = Attack(
                    rep.outcome.value, question, bool(question and contains_phrase(question, spec.target.triggers)),
                    p)
                if success and rep.significance is not None:
                    p_values.append(p)
        tested = [p for p in p_values if p is not None]
        out.holm += sum(significant(p, config.alpha) for p in adjust(tested, "holm"))
        out.bh += sum(significant(p, config.alpha) for p in adjust(tested, "bh"))
        out.items += items
    out.seconds = time.perf_counter() - start
    return out


def share(hits: int, n: int) -> str:
    return f"{hits / n:.2f} ({hits}/{n})" if n else "—"


def agreement(level: Run, paper: Run, alpha: float) -> tuple[str, int]:
    """(agreement text, replicates both ran whose outcome or attack differs)."""
    shared = [key for key in level.attacks if key in paper.attacks]
    different = sum((level.attacks[k].outcome, level.attacks[k].question)
                    != (paper.attacks[k].outcome, paper.attacks[k].question) for k in shared)
    pairs = [(significant(paper.attacks[k].p_value, alpha), significant(level.attacks[k].p_value, alpha))
             for k in shared if paper.attacks[k].outcome == Outcome.SUCCESS.value
             and level.attacks[k].outcome == Outcome.SUCCESS.value]
    same = sum(a == b for a, b in pairs)
    paper_only = sum(a and not b for a, b in pairs)
    level_only = sum(b and not a for a, b in pairs)
    return f"{share(same, len(pairs))}; paper only {paper_only}, level only {level_only}", different


def row(regime: str, effect: bool, setting: Setting, result: Run, paper: Run | None, seeds: Sequence[int]) -> str:
    config = setting.config(seeds[0])
    bound = config.max_calls(1)
    per_item = {role: result.calls.get(role, 0) / result.items for role in ROLES}
    tested = [a for a in result.attacks.values() if a.outcome == Outcome.SUCCESS.value and a.p_value is not None]
    hits = [a for a in tested if significant(a.p_value, config.alpha)]
    power = share(sum(a.triggered for a in hits), sum(a.triggered for a in tested)) if effect else "—"
    nulls = [a for a in tested if not (effect and a.triggered)]
    null = share(sum(significant(a.p_value, config.alpha) for a in nulls), len(nulls))
    agree, different = agreement(result, paper, config.alpha) if paper is not None else ("—", 0)
    calls = " / ".join(f"{per_item[role]:.0f}" for role in ROLES)
    return (f"| {regime} | {setting.label} | {sum(bound.values()):,} ({bound['target_significance']:,}) "
            f"| {calls} | {sum(per_item.values()):,.0f} | {len(tested)} | {len(hits)} | {result.holm} | {result.bh} "
            f"| {power} | {null} | {agree} | {different} | {result.seconds:.0f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--small-delta", type=float, default=0.05)
    args = parser.parse_args()
    spec = PlantedSpec.load().with_target(data="none")
    exact = vm.null_rate(30, 0.05, "sequential")
    print(f"MedFuzz cost levels on {args.items} planted items x seeds {args.seeds} (items: synthetic_items(n, "
          f"seed + 1); engine seed = seed), K = 5, M = 30 sequential, alpha = 0.05, planted noise "
          f"±{spec.target.noise}. Exact null rejection rate of the sequential test at M = 30: {exact:.4f}. "
          f"Calls per item: target / attacker / attacker_controls / target_significance.\n")
    print("| regime | level | bound / item (p̂ calls) | calls / item by role | calls / item | tested | significant "
          "| Holm | BH | power (triggered) | null rejection | agreement with paper | different attacks | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    regimes = (("null (delta 0)", spec.with_target(delta=0.0), False),
               (f"small effect (delta {args.small_delta})", spec.with_target(delta=args.small_delta), True),
               (f"bundled effect (delta {spec.target.delta})", spec, True))
    for regime, planted, effect in regimes:
        paper: Run | None = None
        for setting in SETTINGS:
            result = run(setting, planted, args.items, args.seeds)
            print(row(regime, effect, setting, result, paper, args.seeds), flush=True)
            paper = paper or result


if __name__ == "__main__":
    main()
