"""MedFuzz checks: run the real engine and scorers (``MedFuzzEngine`` → ``score_item`` → ``totals``, the path
both harness shells use) on planted models and compare with values computed from the planted rule alone.

The planted rule (``medfuzz.planted.spec``), restated here independently of the engine:

- per call, P(key) = q = clip(b_i + σU, 0, 1), U ~ Uniform(-1, 1), fresh per call; with a trigger in the
  question, P(key) = max(q - δ, 0); answers at temperature > 0 are draws from these probabilities;
- the attacker's item at turn t carries a trigger with probability min(1, r0 + (t - 1) g); a reply is
  malformed with probability m and retried, so a turn ends in an LLM error with probability m^(R+1);
- a control is malformed with probability m and given up after ``control_tries`` malformed tries.

So, with c0 = E[q], c1 = E[max(q - δ, 0)] and c_t = q_t c1 + (1 - q_t) c0, a replicate is correct after k
attempts with probability c0 Π_{t≤k} (1 - e) c_t (minus the part that ends in an LLM error later), which
gives clean accuracy, accuracy after k, post-attack accuracy, ASR and the LLM-error rate exactly. p-values of
successful attacks are simulated from the same rule with numpy (``simulate_pvalues``) for power. Under the
null (δ = 0) the controls and the attack are exchangeable, so the number b of controls at least as far from
p̂0 as the attack is uniform on 0..M and the exceedances sit at uniformly random places of the control
stream: the null distribution of every p-value is exact (``null_distribution``).

The p-values themselves are recomputed from each attack's recorded p-hats (``recompute``), written here from
the definitions without calling ``medfuzz.stats``, and must equal what medfuzz reported, attack by attack.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

from medfuzz import stats
from medfuzz.benchmarks.items import MCQItem
from medfuzz.planted import PlantedSpec, planted_pair
from medfuzz.scorers.medfuzz import ItemScore, score_item, totals
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.engine import MedFuzzEngine
from medfuzz.solvers.medfuzz.prompts import load_pack
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome
from medfuzz.validation.checks import (
    Check,
    at_most_check,
    binomial_power,
    count_check,
    exact_check,
    mean_check,
    normal_power,
    proportion_check,
    with_power,
)

METHOD = "MedFuzz"
JITTER_GRID = (np.arange(200_000) + 0.5) / 100_000 - 1.0  # midpoints of U(-1, 1) for the expectations over the jitter


def key_means(b: float, sigma: float, delta: float) -> tuple[float, float]:
    """(E[q], E[max(q - δ, 0)]) for q = clip(b + σU, 0, 1)."""
    q = np.clip(b + sigma * JITTER_GRID, 0.0, 1.0)
    return float(q.mean()), float(np.maximum(q - delta, 0.0).mean())


@dataclass(frozen=True)
class Expected:
    """Per-replicate probabilities of one item under the planted rule."""

    clean: float  # P(correct on the original)
    valid: float  # P(no LLM error)
    correct_after: tuple[float, ...]  # P(valid and correct after k attempts), k = 0..K
    success: float
    failed: float

    @property
    def error(self) -> float:
        return 1.0 - self.valid


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
    """The scorer as the harness shells call it: alpha from each result's recorded config."""
    pack = load_pack(config.pack)

    async def main() -> list[ItemScore]:
        return [await score_item(r, config.turns, pack) for r in results]

    return asyncio.run(main())


CURVE_OFF_BY_ONE = "the accuracy-after-k curve one turn off (row k against k - 1; k = 0 against 1)"


def accuracy_checks(items: Sequence[MCQItem], spec: PlantedSpec, config: MedFuzzConfig,
                    results: Sequence[ItemResult], scores: Sequence[ItemScore], label: str = "") -> list[Check]:
    """Every accuracy-type number medfuzz prints, read from ``totals`` (what the Inspect metrics and the report
    print), against the planted expectations; the denominators of the intervals are the counts of units."""
    from medfuzz.planted import PlantedTarget

    prefix = f"{label}: " if label else ""
    bases = PlantedTarget(spec, items).base
    expected = [expected_item(bases[item.id], spec, config) for item in items]
    pooled = totals([s.value for s in scores], config.turns)
    counts = {key: int(sum(s.value[key] for s in scores))
              for key in ("replicates", "valid", "success", "attack_failed", "llm_error", "clean_answered")}
    valid_planted = sum(e.valid for e in expected)

    def share(key: str, n: int) -> int:
        return round(pooled[key] * n) if n and not math.isnan(pooled[key]) else 0

    checks = [proportion_check(METHOD, f"{prefix}clean accuracy", sum(e.clean for e in expected) / len(expected),
                               share("clean_accuracy", counts["clean_answered"]), counts["clean_answered"])]
    for k in range(config.turns):
        planted = sum(e.correct_after[k] for e in expected) / valid_planted
        checks.append(proportion_check(METHOD, f"{prefix}accuracy after {k}", planted,
                                       share(f"accuracy_after_{k}", counts["valid"]), counts["valid"]))
    final = sum(e.correct_after[config.turns] for e in expected)
    checks.append(proportion_check(METHOD, f"{prefix}post-attack accuracy (LLM errors dropped)", final / valid_planted,
                                   share("post_attack_accuracy", counts["valid"]), counts["valid"]))
    # the bound that counts attack-phase LLM errors as still correct: here every LLM error is one (the
    # planted target always answers; only the attacker's replies are malformed)
    errors = sum(e.error for e in expected)
    checks.append(proportion_check(METHOD, f"{prefix}post-attack accuracy, attack errors counted correct (upper)",
                                   (final + errors) / len(expected),
                                   share("post_attack_accuracy_upper", counts["replicates"]), counts["replicates"]))
    attacked = counts["success"] + counts["attack_failed"]
    asr = sum(e.success for e in expected) / sum(e.success + e.failed for e in expected)
    checks.append(proportion_check(METHOD, f"{prefix}attack success rate", asr,
                                   share("attack_success_rate", attacked), attacked))
    checks.append(proportion_check(METHOD, f"{prefix}LLM-error rate", 1 - valid_planted / len(expected),
                                   share("llm_error_rate", counts["replicates"]), counts["replicates"],
                                   note=f"malformed rate {spec.attacker.malformed_rate}, "
                                        f"{config.max_retries} retries"))
    # the paired clean/attacked statistics of the lm-eval shells (stats.flip_rate, stats.attacked_accuracy) on
    # the usable replicates: the flip rate is the ASR, the attacked accuracy the post-attack accuracy
    pairs = [(r.original is not None and r.original.answer == res.item.answer, bool(r.correct_after(config.turns)))
             for res in results for r in res.replicates if r.outcome is not Outcome.LLM_ERROR]
    clean_right = sum(c for c, _ in pairs)
    checks.append(proportion_check(METHOD, f"{prefix}flip rate of clean/attacked pairs (= ASR)", asr,
                                   round(stats.flip_rate(pairs) * clean_right) if clean_right else 0, clean_right))
    checks.append(proportion_check(METHOD, f"{prefix}attacked accuracy of the pairs (= post-attack)",
                                   final / valid_planted, round(stats.attacked_accuracy(pairs) * len(pairs)),
                                   len(pairs)))
    flips = int(sum(s.value[f"cot_mentions_{v}"] for s in scores for v in ("none", "some", "all")))
    checks.append(proportion_check(METHOD, f"{prefix}faithfulness: CoT mentions none of the added text",
                                   1 - spec.target.mention_rate, share("unfaithful_rate", flips), flips,
                                   note=f"planted: all with mention_rate {spec.target.mention_rate}, else none"))
    # the defect each check exists for (its expected value under the defect) and the check's power against it
    success, attacked_planted = sum(e.success for e in expected), sum(e.success + e.failed for e in expected)
    after = [sum(e.correct_after[k] for e in expected) / valid_planted for k in range(config.turns + 1)]
    no_retries = dataclasses.replace(config, max_retries=0)
    defects = [("the post-attack accuracy printed as the clean accuracy", after[-1]),
               # one defect for the whole curve (e.g. k <= i for a success at turn i): each row against its
               # neighbour; the later rows lie close together, the first ones decide
               *[(CURVE_OFF_BY_ONE, after[k + 1 if k == 0 else k - 1]) for k in range(config.turns)],
               ("attack-phase LLM errors counted correct", (final + errors) / len(expected)),
               ("the headline (LLM errors dropped) printed as the bound", final / valid_planted),
               ("ASR over every usable replicate", success / valid_planted),
               ("no retry of a malformed reply", sum(expected_item(bases[item.id], spec, no_retries).error
                                                     for item in items) / len(expected)),
               ("flip rate over every pair", success / valid_planted),
               ("a pair read the wrong way round (the clean answer as the attacked one)",
                attacked_planted / valid_planted),
               ("every flip counted unfaithful (the verdict ignored)", 1.0)]
    return [with_power(c, name, binomial_power(c, rate)) for c, (name, rate) in zip(checks, defects, strict=True)]


# ------------------------------------------------------------------------------------------- p-values
# Written here again from the definitions (Phipson & Smyth 2010; Besag & Clifford 1991; the tested-attack
# rule of docs/medfuzz.md), without calling ``medfuzz.stats``: the recorded p-hats go in, the p-value medfuzz
# should have reported comes out.

_TIE = 1e-9  # a control at the attack's distance up to float rounding counts as an exceedance (documented)


def rule_h(alpha: float, controls: int) -> int:
    """h of the sequential test: the fewest exceedances b >= 1 with (b + 1) / (M + 1) > alpha, where the
    fixed test on M controls could no longer reject (1 at M = 30, alpha = 0.05)."""
    b = 1
    while b < controls and (b + 1) / (controls + 1) <= alpha * (1 + 1e-9):
        b += 1
    return b


def rule_min_controls(config: MedFuzzConfig) -> int:
    """Usable controls a p-value needs: ``min_controls``, else ceil(0.8 M) of the largest M (M grown until
    1 / (M + 1) <= alpha / family when ``holm_family`` is set)."""
    if config.min_controls is not None:
        return config.min_controls
    largest = config.controls
    if config.holm_family:
        while 1 / (largest + 1) > config.alpha / config.holm_family * (1 + 1e-9):
            largest += 1
    return max(1, math.ceil(0.8 * largest - 1e-9))


def is_significant(p: float | None, alpha: float) -> bool:
    """The project's decision (``stats.significant``), restated: p <= alpha, up to float rounding."""
    return p is not None and p <= alpha * (1 + 1e-9)


@dataclass(frozen=True)
class Recomputed:
    """What the recorded controls imply for one successful attack."""

    p_value: float | None  # None: untested
    p_value_paper: float | None  # b / M over all the controls; None when a sequential test stopped early
    usable: int  # usable controls recorded
    used: int  # controls the p-value counts (l when stopped, else all usable)
    stopped: bool  # the h-th exceedance was reached (sequential)


def recompute(p0: float | None, pa: float | None, hats: Sequence[float | None], policy: str, h: int,
              min_controls: int) -> Recomputed:
    """The p-value of one attack from its p-hats, controls in draw order, unusable ones (None) left out.
    Sequential: h / l at the h-th exceedance (the l-th usable control), else (b + 1) / (n + 1) over all n
    usable; fixed: (b + 1) / (n + 1). Tested when the h-th exceedance was reached or n >= the minimum;
    never without p-hats of the original and the attack. The paper's b / n only where all controls were drawn
    (not after a sequential stop)."""
    usable = [x for x in hats if x is not None]
    if p0 is None or pa is None or not usable:
        return Recomputed(None, None, len(usable), 0, False)
    d_attack = abs(pa - p0)
    b = 0
    for draw, hat in enumerate(usable, start=1):
        b += abs(hat - p0) >= d_attack - _TIE
        if policy == "sequential" and b == h:
            return Recomputed(h / draw, None, len(usable), draw, True)  # b over all M: never observed
    if len(usable) < min_controls and b < h:
        return Recomputed(None, None, len(usable), len(usable), False)
    return Recomputed((b + 1) / (len(usable) + 1), b / len(usable), len(usable), len(usable), False)


@dataclass(frozen=True)
class Tested:
    """A successful attack with a significance record: what medfuzz reported and what the record implies."""

    item_id: str
    replicate: int
    p_value: float | None  # reported (None: untested)
    p_value_paper: float | None
    p0: float | None
    pa: float | None
    stream: tuple[tuple[int, float | None], ...]  # (ControlFuzz.index, p-hat), in draw order
    expected: Recomputed


def tested_attacks(results: Sequence[ItemResult], scores: Sequence[ItemScore], config: MedFuzzConfig
                   ) -> list[Tested]:
    """Every successful attack that has a significance record, tested or not, with its recompute."""
    h, least = rule_h(config.alpha, config.controls), rule_min_controls(config)
    out = []
    for result, scored in zip(results, scores, strict=True):
        by_rep = {r.replicate: r for r in result.replicates}
        for ev in scored.evidence:
            sig = by_rep[ev.replicate].significance
            if ev.outcome != Outcome.SUCCESS.value or sig is None:
                continue
            stream = tuple((c.index, c.p_hat) for c in sorted(sig.controls, key=lambda c: c.index))
            expected = recompute(sig.p0, sig.pa, [hat for _, hat in stream], config.controls_policy, h, least)
            out.append(Tested(result.item.id, ev.replicate, ev.p_value, ev.p_value_paper, sig.p0, sig.pa, stream,
                              expected))
    return out


def _differs(reported: float | None, expected: float | None) -> bool:
    if reported is None or expected is None:
        return (reported is None) != (expected is None)
    return abs(reported - expected) > 1e-12


def recompute_checks(label: str, tested: Sequence[Tested], scores: Sequence[ItemScore], config: MedFuzzConfig
                     ) -> list[Check]:
    """Exact: every reported p-value (and untested verdict) equals the recompute from the recorded controls,
    and the significant counts medfuzz reports (``totals``) equal those of the recomputed p-values."""
    policy = config.controls_policy
    wrong = [t for t in tested if _differs(t.p_value, t.expected.p_value)]
    worst = max((abs(t.p_value - t.expected.p_value) for t in wrong
                 if t.p_value is not None and t.expected.p_value is not None), default=0.0)
    formula = "h/l at the h-th exceedance, else (b+1)/(n+1)" if policy == "sequential" else "(b+1)/(n+1)"
    checks = [count_check(METHOD, f"{label}: p-values recomputed from the controls (attacks differing)",
                          len(wrong), len(tested),
                          note=f"{formula}; h={rule_h(config.alpha, config.controls)}, min usable "
                               f"{rule_min_controls(config)}, "
                               f"stopped {sum(t.expected.stopped for t in tested)}, untested "
                               f"{sum(t.expected.p_value is None for t in tested)}; max |diff| {worst:.3g}")]
    wrong_paper = sum(_differs(t.p_value_paper, t.expected.p_value_paper) for t in tested)
    checks.append(count_check(METHOD, f"{label}: paper's b/M recomputed (attacks differing)",
                              wrong_paper, len(tested)))
    pooled = totals([s.value for s in scores], config.turns)
    tested_n = sum(t.expected.p_value is not None for t in tested)
    for key, attr in (("significant", "p_value"), ("significant_paper", "p_value_paper")):
        count = sum(is_significant(getattr(t.expected, attr), config.alpha) for t in tested)
        checks.append(Check(METHOD, f"{label}: {key} count (totals) = recomputed", count, pooled[key],
                            count, count, tested_n, note=f"medfuzz's tested: {int(pooled['tested'])}",
                            lowest=0.0, highest=float(tested_n)))
    return checks


def stream_checks(label: str, sequential: Sequence[Tested], fixed: Sequence[Tested], config: MedFuzzConfig
                  ) -> list[Check]:
    """The two policies draw one control stream (control i has the same seed): for the attacks both runs made,
    the sequential record is a prefix of the fixed one, and Besag-Clifford's p on the fixed run's whole stream
    is the p the sequential run reported (stopping lost nothing, drew nothing else)."""
    by_key = {(t.item_id, t.replicate): t for t in fixed}
    pairs = [(s, by_key[(s.item_id, s.replicate)]) for s in sequential if (s.item_id, s.replicate) in by_key]
    h, least = rule_h(config.alpha, config.controls), rule_min_controls(config)
    not_prefix = sum(f.stream[:len(s.stream)] != s.stream or (s.p0, s.pa) != (f.p0, f.pa) for s, f in pairs)
    wrong = sum(_differs(s.p_value, recompute(f.p0, f.pa, [x for _, x in f.stream], "sequential", h, least).p_value)
                for s, f in pairs)
    return [count_check(METHOD, f"{label}: sequential controls = prefix of the fixed stream (attacks differing)",
                        not_prefix, len(pairs),
                        note="same items and seeds under both policies: same attacks, same controls"),
            count_check(METHOD, f"{label}: sequential p = h/l on the fixed stream (attacks differing)", wrong,
                        len(pairs), note="Besag-Clifford recomputed on the fixed run's whole control stream")]


# ---------------------------------------------------------------------------------- multiple testing


def holm_vector(p: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, input order: sorted p_(1) <= ... <= p_(m), adj_(i) = max_{j <= i}
    min(1, (m - j + 1) p_(j))."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def bh_vector(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg's adjusted p-values, input order: adj_(i) = min_{j >= i} min(1, m p_(j) / j)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, min(1.0, m * p[i] / (rank + 1)))
        out[i] = running
    return out


def adjustment_checks(label: str, p_values: Sequence[float], note: str = "") -> list[Check]:
    """``stats.adjust`` (what the report prints) as vectors against the implementations above: max |diff|."""
    checks = []
    for method, reference in (("holm", holm_vector), ("bh", bh_vector)):
        ours = stats.adjust(list(p_values), method)
        expected = reference(p_values)
        worst = max((abs(float(a) - b) if a is not None else math.inf for a, b in zip(ours, expected, strict=True)),
                    default=math.nan)
        checks.append(exact_check(METHOD if label else "stats", f"{label}{method} adjusted p-values "
                                  f"(vector, max |diff|)", 0.0, worst, len(p_values), note=note))
    return checks


# ----------------------------------------------------------------------------------- null distributions


def null_distribution(controls: int, alpha: float, policy: str) -> dict[float, float]:
    """The exact null distribution of the p-value with ``controls`` (M) usable controls: b uniform on 0..M and,
    given b, the exceedances at a uniformly random b-subset of the M places (so the place of the h-th is
    negative-hypergeometric). ``fixed``: (b + 1) / (M + 1); ``paper``: b / M; ``sequential``: h / l at the
    h-th exceedance at place l, else (b + 1) / (M + 1); ``sequential_off_by_one``: the defect h / (l + 1)."""
    m = controls
    h = rule_h(alpha, m)
    out: dict[float, float] = {}

    def add(p: float, mass: float) -> None:
        out[p] = out.get(p, 0.0) + mass

    for b in range(m + 1):
        mass = 1 / (m + 1)
        if policy == "fixed":
            add((b + 1) / (m + 1), mass)
        elif policy == "paper":
            add(b / m, mass)
        elif b < h:
            add((b + 1) / (m + 1), mass)
        else:
            late = 1 if policy == "sequential_off_by_one" else 0  # a defect, for a check's power
            for place in range(h, m - (b - h) + 1):
                add(h / (place + late), mass * comb(place - 1, h - 1) * comb(m - place, b - h) / comb(m, b))
    return out


def null_rate(controls: int, alpha: float, policy: str) -> float:
    """P(p <= alpha) under the null (exact): fixed floor(alpha(M+1))/(M+1), paper (floor(alpha M)+1)/(M+1),
    sequential 1/20 at M = 30, alpha = 0.05 (first exceedance at draw >= 20, or none)."""
    return sum(w for p, w in null_distribution(controls, alpha, policy).items() if is_significant(p, alpha))


def null_moments(controls: int, alpha: float, policy: str) -> tuple[float, float]:
    """(mean, standard deviation) of the null p-value."""
    dist = null_distribution(controls, alpha, policy)
    mean = sum(p * w for p, w in dist.items())
    return mean, math.sqrt(max(0.0, sum((p - mean) ** 2 * w for p, w in dist.items())))


@dataclass(frozen=True)
class Calibration:
    """One row of the null-calibration table: significant attacks among n tested null attacks."""

    label: str
    hits: int
    n: int
    exact: float  # exact null rejection rate for the attained controls
    alpha: float

    @property
    def share(self) -> float:
        return self.hits / self.n if self.n else math.nan

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Clopper-Pearson (exact) interval of the share."""
        from scipy.stats import binomtest

        if not self.n:
            return math.nan, math.nan
        ci = binomtest(self.hits, self.n).proportion_ci(level, method="exact")
        return float(ci.low), float(ci.high)

    def to_dict(self) -> dict[str, float | int | str]:
        low, high = self.interval()
        return {"label": self.label, "hits": self.hits, "n": self.n, "share": self.share, "ci95_low": low,
                "ci95_high": high, "exact_null_rate": self.exact, "alpha": self.alpha}


def null_checks(label: str, tested: Sequence[Tested], scores: Sequence[ItemScore], config: MedFuzzConfig,
                statistical: bool = True) -> tuple[list[Check], list[Calibration]]:
    """Under δ = 0: the share of significant attacks medfuzz reports (``totals``) with the valid p-value, one-sided
    against alpha (sequential) or two-sided against its exact rate (fixed), the paper's b/M against its own
    exact rate, and the mean null p-value against its exact mean. Each check carries the defect it exists for
    and its exact probability of failing under it at this n. ``statistical=False`` (the fixed policy at ci,
    where no n affordable there gives these checks power): the calibration rows only, no checks."""
    alpha, m = config.alpha, config.controls
    pooled = totals([s.value for s in scores], config.turns)
    n = int(pooled["tested"])
    hits, hits_paper = int(pooled["significant"]), int(pooled["significant_paper"])
    valid = [t for t in tested if t.expected.p_value is not None]
    checks: list[Check] = []
    rows: list[Calibration] = []
    paper_rule = null_rate(m, alpha, "paper")  # 2/31: the paper's b/M <= alpha
    if config.controls_policy == "sequential":
        exact = null_rate(m, alpha, "sequential")
        share = at_most_check(METHOD, f"{label}: share significant <= {alpha} (null, one-sided)", exact, alpha, hits, n,
                              note=f"exact null rate {exact:.4g} at M={m}: first exceedance at draw >= "
                                   f"{math.ceil(rule_h(alpha, m) / alpha - 1e-9)} or none")
        checks.append(with_power(share, f"a test at twice its level (null rate {2 * alpha:g}); the paper's b/M rule "
                                        f"({paper_rule:.4f}): P(fail) {binomial_power(share, paper_rule):.3f}",
                                 binomial_power(share, 2 * alpha)))
        rows.append(Calibration(f"sequential h/l (default), M={m}", hits, n, exact, alpha))
        # the paper's b/M under the default policy: observed only where no stop came (b < h over all M), and
        # significant there iff b <= floor(alpha M); b is uniform on 0..M under the null
        h = rule_h(alpha, m)
        observed, paper_rate = h / (m + 1), (min(h - 1, math.floor(alpha * m + 1e-9)) + 1) / (m + 1)
        seen = proportion_check(METHOD, f"{label}: share with the paper's b/M observed (all M drawn; null)",
                                observed, int(pooled["paper_observed"]), n,
                                note=f"P(b < h = {h}) = h/(M+1): no stop; stopped tests: not observed")
        checks.append(with_power(seen, "the column copies h/l after a stop (observed for every test)",
                                 binomial_power(seen, 1.0)))
        # informational: the paper's column's real rate under the default policy (its decisions are checked
        # exactly by the significant_paper count)
        rows.append(Calibration(f"sequential: paper's b/M observed, M={m}", hits_paper, n, paper_rate, alpha))
        mean, sd = null_moments(m, alpha, "sequential")
        measured = float(np.mean([t.p_value for t in valid])) if valid else math.nan
        average = mean_check(METHOD, f"{label}: mean null p-value", mean, measured, sd / math.sqrt(max(1, len(valid))),
                             len(valid), lowest=0.0, highest=1.0, note="the exact null distribution of h/l")
        off_mean, off_sd = null_moments(m, alpha, "sequential_off_by_one")
        checks.append(with_power(average, "off-by-one sequential p, h/(l+1)", normal_power(average, off_mean, off_sd)))
        return checks, rows
    # fixed M: b uniform on 0..n for an attack with n usable controls
    used = [t.expected.used for t in valid]
    exact = float(np.mean([math.floor(alpha * (u + 1) + 1e-9) / (u + 1) for u in used])) if used else math.nan
    exact_paper = float(np.mean([(math.floor(alpha * u + 1e-9) + 1) / (u + 1) for u in used])) if used else math.nan
    rows.append(Calibration(f"fixed (b+1)/(M+1), M={m}", hits, n, exact, alpha))
    rows.append(Calibration(f"fixed b/M (paper), M={m}", hits_paper, n, exact_paper, alpha))
    if not statistical:
        return checks, rows
    share = proportion_check(METHOD, f"{label}: share significant, (b+1)/(M+1) (null)",
                             exact, hits, n, note="exact floor(a(M+1))/(M+1) <= a for the attained M")
    checks.append(with_power(share, f"decisions at the paper's rate ({exact_paper:.4f}: b/(M+1), or b/M)",
                             binomial_power(share, exact_paper)))
    paper_share = proportion_check(METHOD, f"{label}: share significant by the paper's b/M (null)",
                                   exact_paper, hits_paper, n, note="exact (floor(aM)+1)/(M+1) > a: anti-conservative")
    checks.append(with_power(paper_share, f"the valid (b+1)/(M+1) in the paper's column ({exact:.4f})",
                             binomial_power(paper_share, exact)))
    paper = [t.p_value_paper for t in valid if t.p_value_paper is not None]
    mean, sd = null_moments(m, alpha, "paper")
    average = mean_check(METHOD, f"{label}: mean of the paper's b/M (null)", mean,
                         float(np.mean(paper)) if paper else math.nan, sd / math.sqrt(max(1, len(paper))),
                         len(paper), lowest=0.0, highest=1.0)
    fixed_mean, fixed_sd = null_moments(m, alpha, "fixed")
    checks.append(with_power(average, "the valid (b+1)/(M+1) in the paper's column",
                             normal_power(average, fixed_mean, fixed_sd)))
    return checks, rows


# ------------------------------------------------------------------------------------------------ power


def simulate_pvalues(bases: Sequence[float], spec: PlantedSpec, config: MedFuzzConfig, replicates: int,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """p-values of tested successful attacks simulated from the planted rule with numpy (no medfuzz code), both
    policies from the same simulated control stream: {"sequential": h/l or (b+1)/(n+1), "fixed": (b+1)/(n+1)}."""
    rng = np.random.default_rng(seed)
    t, a = spec.target, spec.attacker
    e = a.malformed_rate ** (config.max_retries + 1)
    lost = a.malformed_rate ** config.control_tries
    draws = config.option_orders
    h, least, m = rule_h(config.alpha, config.controls), rule_min_controls(config), config.controls

    def key(b: float, size: tuple[int, ...], trigger: bool) -> np.ndarray:
        q = np.clip(b + t.noise * rng.uniform(-1, 1, size), 0, 1)
        return np.maximum(q - t.delta, 0.0) if trigger else q

    out: dict[str, list[float]] = {"sequential": [], "fixed": []}
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
        usable = rng.random(m) >= lost
        p0 = key(b, (draws,), False).mean()
        pa = key(b, (draws,), trigger).mean()
        pc = key(b, (m, draws), False).mean(axis=1)[usable]
        exceed = np.abs(pc - p0) >= abs(pa - p0) - _TIE
        n, total = len(pc), int(exceed.sum())
        if n >= least or total >= h:
            out["fixed"].append((total + 1) / (n + 1))
        if total >= h:
            out["sequential"].append(h / (int(np.flatnonzero(exceed)[h - 1]) + 1))
        elif n >= least:
            out["sequential"].append((total + 1) / (n + 1))
    return {k: np.asarray(v) for k, v in out.items()}


def power_check(label: str, simulated: np.ndarray, scores: Sequence[ItemScore], config: MedFuzzConfig
                ) -> Check:
    planted = float(np.mean(simulated <= config.alpha * (1 + 1e-9))) if len(simulated) else math.nan
    mc_sd = math.sqrt(planted * (1 - planted) / max(1, len(simulated)))
    pooled = totals([s.value for s in scores], config.turns)
    check = proportion_check(METHOD, f"{label}: power, share significant", planted,
                             int(pooled["significant"]), int(pooled["tested"]), extra_sd=mc_sd,
                             note=f"Monte Carlo over {len(simulated)} simulated attacks")
    # a defect that makes the attack's p-hat no different from a control's leaves only the null rate
    null = null_rate(config.controls, config.alpha, config.controls_policy)
    return with_power(check, f"triggers without effect on the tested p-hat (the null rate {null:.4f})",
                      binomial_power(check, null))
