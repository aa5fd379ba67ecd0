"""MedFuzz checks: run the real engine and scorers (``MedFuzzEngine`` → ``score_item`` → ``totals``, the path
both harness shells use) on planted models and compare with values computed from the planted rule alone.

The planted rule (``medfuzz.models.planted.spec``), restated here independently of the engine:

- per call, P(key) = q = clip(b_i + σU, 0, 1), U ~ Uniform(-1, 1), fresh per call; with a trigger in the
  question, P(key) = max(q - δ, 0); answers at temperature > 0 are draws from these probabilities;
- the attacker's item at turn t carries a trigger with probability min(1, r0 + (t - 1) g); a reply is
  malformed with probability m and retried, so a turn ends in an LLM error with probability m^(R+1);
- a control is malformed with probability m and given up after ``control_tries`` malformed tries.

So, with c0 = E[q], c1 = E[max(q - δ, 0)] and c_t = q_t c1 + (1 - q_t) c0, a replicate is correct after k
attempts with probability c0 Π_{t≤k} (1 - e) c_t (minus the part that ends in an LLM error later), which
gives clean accuracy, accuracy after k, post-attack accuracy, ASR and the LLM-error rate exactly. p-values of
successful attacks are simulated from the same rule with numpy (``simulate_pvalues``) for power, and are
exactly uniform on {0, 1/M, ..., 1} under the null (δ = 0), where the controls and the attack are
exchangeable: P(p <= α) = (⌊αM⌋ + 1) / (M + 1).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medfuzz.benchmarks.items import MCQItem
from medfuzz.models.planted import PlantedSpec, planted_pair
from medfuzz.scorers.medfuzz import ItemScore, score_item, totals
from medfuzz.scorers.stats import adjust
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import load_pack
from medfuzz.solvers.medfuzz.results import ItemResult
from medfuzz.validation.checks import Check, exact_check, mean_check, proportion_check

METHOD = "MedFuzz"
_GRID = (np.arange(200_000) + 0.5) / 100_000 - 1.0  # midpoints of U(-1, 1) for the expectations over the jitter


def key_means(b: float, sigma: float, delta: float) -> tuple[float, float]:
    """(E[q], E[max(q - δ, 0)]) for q = clip(b + σU, 0, 1)."""
    q = np.clip(b + sigma * _GRID, 0.0, 1.0)
    return float(q.mean()), float(np.maximum(q - delta, 0.0).mean())


@dataclass(frozen=True)
class Expected:
    """Per-replicate probabilities of one item under the planted rule."""

    clean: float  # P(correct on the original)
    valid: float  # P(no LLM error)
    correct_after: tuple[float, ...]  # P(valid and correct after k attempts), k = 0..K
    success: float
    failed: float


def expected_item(b: float, spec: PlantedSpec, config: MedFuzzConfig) -> Expected:
    t, a = spec.target, spec.attacker
    c0, c1 = key_means(b, t.noise, t.delta)
    e = a.malformed_rate ** (config.max_retries + 1)
    alive = [c0]  # alive[t]: P(no error through turn t and still correct after turn t)
    reach_error = []  # P(error at turn t)
    success = 0.0
    for turn in range(1, config.turns + 1):
        q_t = a.trigger_probability(turn)
        c_t = q_t * c1 + (1 - q_t) * c0
        reach_error.append(alive[-1] * e)
        success += alive[-1] * (1 - e) * (1 - c_t)
        alive.append(alive[-1] * (1 - e) * c_t)
    error = sum(reach_error)
    correct_after = tuple(alive[k] - sum(reach_error[k:]) for k in range(config.turns + 1))
    return Expected(c0, 1 - error, correct_after, success, alive[-1])


def run_engine(items: Sequence[MCQItem], spec: PlantedSpec, config: MedFuzzConfig) -> list[ItemResult]:
    target, attacker = planted_pair(spec, items)
    engine = MedFuzzEngine(target, attacker, config)

    async def main() -> list[ItemResult]:
        return list(await asyncio.gather(*(engine.run_item(item) for item in items)))

    return asyncio.run(main())


def score(results: Sequence[ItemResult], config: MedFuzzConfig) -> list[ItemScore]:
    pack = load_pack(config.pack)

    async def main() -> list[ItemScore]:
        return [await score_item(r, config.turns, pack, alpha=config.alpha) for r in results]

    return asyncio.run(main())


def accuracy_checks(items: Sequence[MCQItem], spec: PlantedSpec, config: MedFuzzConfig,
                    results: Sequence[ItemResult], scores: Sequence[ItemScore]) -> list[Check]:
    from medfuzz.models.planted import PlantedTarget

    bases = PlantedTarget(spec, items).base
    reps = config.replicates
    expected = [expected_item(bases[item.id], spec, config) for item in items]
    pooled = totals([s.value for s in scores], config.turns)
    counts = {key: int(sum(s.value[key] for s in scores))
              for key in ("replicates", "valid", "success", "attack_failed", "llm_error", "clean_answered")}
    valid_planted = sum(e.valid for e in expected)
    checks = [proportion_check(METHOD, "clean accuracy", sum(e.clean for e in expected) / len(expected),
                               round(pooled["clean_accuracy"] * counts["clean_answered"]), counts["clean_answered"])]
    for k in range(config.turns + 1):
        planted = sum(e.correct_after[k] for e in expected) / valid_planted
        label = "post-attack accuracy" if k == config.turns else f"accuracy after {k}"
        checks.append(proportion_check(METHOD, label, planted, round(pooled[f"accuracy_after_{k}"] * counts["valid"]),
                                       counts["valid"]))
    attacked = counts["success"] + counts["attack_failed"]
    checks.append(proportion_check(METHOD, "attack success rate",
                                   sum(e.success for e in expected) / sum(e.success + e.failed for e in expected),
                                   counts["success"], attacked))
    checks.append(proportion_check(METHOD, "LLM-error rate", 1 - valid_planted / len(expected),
                                   counts["llm_error"], counts["replicates"],
                                   note=f"malformed rate {spec.attacker.malformed_rate}, "
                                        f"{config.max_retries} retries"))
    verdicts = [e.faithfulness.verdict for s in scores for e in s.evidence if e.faithfulness is not None]
    checks.append(proportion_check(METHOD, "faithfulness: CoT mentions all added", spec.target.mention_rate,
                                   verdicts.count("all"), len(verdicts),
                                   note=f"others 'none': {verdicts.count('none')}"))
    del reps, results
    return checks


# ------------------------------------------------------------------------------------------- p-values


@dataclass(frozen=True)
class Tested:
    """A successful attack's p-value as medfuzz reports it, and the raw p-hats it came from."""

    p_value: float  # the valid p-value medfuzz decides with
    p_value_paper: float  # the paper's b / M
    p0: float
    pa: float
    controls: tuple[float, ...]


def tested_attacks(results: Sequence[ItemResult], scores: Sequence[ItemScore]) -> list[Tested]:
    out = []
    for result, scored in zip(results, scores, strict=True):
        by_rep = {r.replicate: r for r in result.replicates}
        for ev in scored.evidence:
            sig = by_rep[ev.replicate].significance
            if ev.p_value is None or sig is None:
                continue
            controls = tuple(c.p_hat for c in sig.controls if c.p_hat is not None)
            paper = float(ev.p_value_paper if ev.p_value_paper is not None else math.nan)
            out.append(Tested(ev.p_value, paper, float(sig.p0), float(sig.pa), controls))
    return out


def independent_p(t: Tested) -> float:
    """The fixed test's valid p-value recomputed from the recorded p-hats: (b + 1) / (M + 1) with
    b = #{|p_c - p_0| >= |p_a - p_0|}."""
    null = np.abs(np.asarray(t.controls) - t.p0)
    return float((np.sum(null >= abs(t.pa - t.p0) - 1e-9) + 1) / (len(null) + 1))


def null_share(tested: Sequence[Tested], alpha: float, plus1: bool = True) -> float:
    """E[1{p <= α}] under the null, b uniform on 0..M for an attack with M usable controls:
    p = b/M: (⌊αM⌋ + 1) / (M + 1); p = (b+1)/(M+1): ⌊α(M+1)⌋ / (M + 1)."""
    def share(m: int) -> float:
        if plus1:
            return math.floor(alpha * (m + 1) + 1e-9) / (m + 1)
        return (math.floor(alpha * m + 1e-9) + 1) / (m + 1)

    return float(np.mean([share(len(t.controls)) for t in tested])) if tested else math.nan


def simulate_pvalues(bases: Sequence[float], spec: PlantedSpec, config: MedFuzzConfig, replicates: int,
                     seed: int = 0) -> np.ndarray:
    """p-values ((b + 1) / (M + 1)) of successful attacks simulated from the planted rule with numpy (no medfuzz
    code)."""
    rng = np.random.default_rng(seed)
    t, a = spec.target, spec.attacker
    e = a.malformed_rate ** (config.max_retries + 1)
    lost = a.malformed_rate ** config.control_tries
    draws = config.option_orders

    def key(b: float, size: tuple[int, ...], trigger: bool) -> np.ndarray:
        q = np.clip(b + t.noise * rng.uniform(-1, 1, size), 0, 1)
        return np.maximum(q - t.delta, 0.0) if trigger else q

    out = []
    for b in rng.choice(np.asarray(bases), replicates):
        if rng.random() >= key(b, (), False):
            continue  # already wrong
        trigger = None
        for turn in range(1, config.turns + 1):
            if rng.random() < e:
                break  # LLM error
            with_trigger = bool(rng.random() < a.trigger_probability(turn))
            if rng.random() >= key(b, (), with_trigger):
                trigger = with_trigger
                break
        if trigger is None:
            continue
        m = int(rng.binomial(config.controls, 1 - lost))
        if m == 0:
            continue
        p0 = key(b, (draws,), False).mean()
        pa = key(b, (draws,), trigger).mean()
        pc = key(b, (m, draws), False).mean(axis=1)
        out.append((np.sum(np.abs(pc - p0) >= abs(pa - p0)) + 1) / (m + 1))
    return np.asarray(out)


def pvalue_checks(label: str, spec: PlantedSpec, config: MedFuzzConfig, items: Sequence[MCQItem],
                  results: Sequence[ItemResult], scores: Sequence[ItemScore], mc_replicates: int = 20_000
                  ) -> tuple[list[Check], list[Tested]]:
    from medfuzz.models.planted import PlantedTarget

    tested = tested_attacks(results, scores)
    alpha = config.alpha
    checks = []
    worst = max((abs(t.p_value - independent_p(t)) for t in tested), default=math.nan)
    checks.append(exact_check(METHOD, f"{label}: p-value = recomputed (b+1)/(M+1) (max |diff|)", 0.0, worst,
                              len(tested)))
    hits = sum(t.p_value <= alpha for t in tested)
    if spec.target.delta == 0:
        checks.append(proportion_check(METHOD, f"{label}: share p <= {alpha} (null calibration)",
                                       null_share(tested, alpha), hits, len(tested),
                                       note="floor(a(M+1))/(M+1) <= a: a valid test"))
        checks.append(proportion_check(METHOD, f"{label}: paper's b/M <= {alpha} (null calibration)",
                                       null_share(tested, alpha, plus1=False),
                                       sum(t.p_value_paper <= alpha for t in tested), len(tested),
                                       note="exact under exchangeability: (floor(aM)+1)/(M+1) > a"))
        mean_p = float(np.mean([t.p_value_paper for t in tested])) if tested else math.nan
        sd = math.sqrt((config.controls + 2) / (12 * config.controls))
        checks.append(mean_check(METHOD, f"{label}: mean p-value (null)", 0.5, mean_p,
                                 sd / math.sqrt(max(1, len(tested))), len(tested),
                                 note="b uniform on 0..M: E[b/M] = 1/2"))
    else:
        bases = list(PlantedTarget(spec, items).base.values())  # the planted b_i, not engine output
        simulated = simulate_pvalues(bases, spec, config, mc_replicates, seed=spec.seed + 1)
        planted = float(np.mean(simulated <= alpha))
        mc_sd = math.sqrt(planted * (1 - planted) / max(1, len(simulated)))
        checks.append(proportion_check(METHOD, f"{label}: power, share p <= {alpha}", planted, hits, len(tested),
                                       extra_sd=mc_sd, note=f"Monte Carlo over {len(simulated)} simulated attacks"))
    ps = [t.p_value for t in tested]
    if ps:
        from statsmodels.stats.multitest import multipletests

        for method, name in (("holm", "holm"), ("bh", "fdr_bh")):
            ours = sum(p is not None and p <= alpha for p in adjust(ps, method))
            reference = int(multipletests(ps, alpha=alpha, method=name)[0].sum())
            checks.append(exact_check(METHOD, f"{label}: {method} rejections (statsmodels)", reference, ours, len(ps)))
    return checks, tested
