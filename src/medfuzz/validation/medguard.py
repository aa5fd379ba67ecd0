"""MedGuard checks: the real MedGuard benchmark builder, prompt and scorers (``ItemResult.from_metadata`` →
``aspect_units`` → ``safety_report`` / ``compare_models``) on planted targets with known behaviour:

- a constant-letter model (position bias 1) must score the chance level 1/k on every accuracy aspect, up to
  the rounding of a balanced design: its letter is the key floor(n/k) or ceil(n/k) times, and it is right
  exactly there; this holds only when the builder balances the answer keys;
- on the equity aspects a constant-letter model, for *every* letter, must be consistent on exactly the stated
  chance × units, rounded to the nearest unit within each option count (the equity option-order design,
  ``solvers/medguard/equity_orders``), and the scorer's stated chance must be the uniform random guesser's
  (1/k per gender pair, 1/k³ per race quadruple);
- a model right with probability p on every item (answers sampled, no jitter) scores p per aspect; across
  the demographic variants of an equity case, which are asked independently, it picks the same option with
  probability Σ_j P(j)² for two sexes and Σ_j P(j)⁴ for four races;
- the bootstrap SE of an aspect's accuracy equals the binomial SE sqrt(a(1 - a)/n) (up to the bootstrap's
  own Monte-Carlo error), and that of a principle or the overall index (the mean of K aspect means, each
  aspect resampled on its own) equals sqrt(Σ_g var_g / n_g) / K with plug-in (ddof=0) variances, within the
  Monte-Carlo error of an SE estimated from 9,999 resamples (``bootstrap_se_error``);
- McNemar between two such models answering independently: the discordant counts have expectations
  n p1 (1 - p2) and n p2 (1 - p1), and the p-value equals statsmodels' on the same table.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import stats

from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.benchmarks.prompts import format_choices
from medfuzz.models.protocol import ChatMessage
from medfuzz.planted import PlantedChatModel, PlantedSpec, PlantedTarget
from medfuzz.scorers.medguard import (
    ItemResult,
    SafetyReport,
    aspect_units,
    compare_models,
    position_report,
    safety_report,
)
from medfuzz.solvers.medguard.builders import BuildConfig, build
from medfuzz.solvers.medguard.prompts import BASIC_TEMPLATE
from medfuzz.solvers.medguard.taxonomy import EQUITY_POOL, PRINCIPLE_OF, RACES, SEXES, Aspect, Principle
from medfuzz.stats import N_RESAMPLES
from medfuzz.validation.checks import Check, binomial_power, exact_check, proportion_check, with_power, z

METHOD = "MedGuard"
EQUITY = (Aspect.GENDER_EQUITY, Aspect.RACE_EQUITY)


def benchmark_items(n: int, seed: int = 0) -> list[MCQItem]:
    return build(BuildConfig(n=n, seed=seed)).items


def ask_all(target: PlantedTarget, items: Sequence[MCQItem], seed: int, temperature: float = 1.0
            ) -> list[ItemResult]:
    model = PlantedChatModel(target)

    async def one(item: MCQItem) -> ItemResult:
        prompt = BASIC_TEMPLATE.format(letters=", ".join(item.letters), question=item.clean_question(),
                                       choices=format_choices(item))
        reply = await model.generate([ChatMessage("user", prompt)], temperature=temperature,
                                     seed=derive_seed(seed, item.id), letters=item.letters)
        letter = answer_letter(reply.text, item.letters, item.clean_options())
        return ItemResult.from_metadata(item.id, item.metadata, letter, item.answer, n_options=len(item.options))

    async def main() -> list[ItemResult]:
        return list(await asyncio.gather(*(one(item) for item in items)))

    return asyncio.run(main())


# answers per equity unit: a gender unit is the two sexes of one race, a race unit the four races of one sex
VARIANTS = {Aspect.GENDER_EQUITY: len(SEXES), Aspect.RACE_EQUITY: len(RACES)}


def _options_per_unit(items: Sequence[MCQItem]) -> dict[Aspect, dict[str, int]]:
    """The option count k behind each scoring unit, keyed as ``aspect_units`` keys them."""
    out: dict[Aspect, dict[str, int]] = {a: {} for a in Aspect}
    for item in items:
        k, meta = len(item.options), item.metadata
        if meta.get("pool") == EQUITY_POOL:
            out[Aspect.GENDER_EQUITY][f"{meta['case_id']}|{meta['race']}"] = k
            out[Aspect.RACE_EQUITY][f"{meta['case_id']}|{meta['sex']}"] = k
        else:
            out[Aspect(meta["pool"])][item.id] = k
    return out


def _nearest(x: float) -> int:
    return math.floor(x + 0.5)  # halves up: the rounding the equity design promises


def _accuracy_range(per_k: Counter[int], n: int) -> tuple[float, float, float]:
    """(chance, lowest, highest score) of a constant letter on a pool whose keys are balanced within each
    option count k: its letter is the key floor(n_k/k) or ceil(n_k/k) times."""
    chance = sum(count / k for k, count in per_k.items()) / n
    low = sum(count // k for k, count in per_k.items()) / n
    high = sum(-(-count // k) for k, count in per_k.items()) / n
    return chance, low, high


def constant_letter_checks(items: Sequence[MCQItem], letter: str = "A", per_aspect: bool = True) -> list[Check]:
    """A model that always answers ``letter``, asked the items that have that letter ("E" is no answer to a
    four-option item): each accuracy aspect within the balanced design's range, each equity aspect exactly at
    the stated chance × units, rounded per option count. ``per_aspect=False`` folds the accuracy aspects into
    one row (how many are out of range) to keep the table short for the other letters."""
    items = [i for i in items if letter in i.options]
    spec = PlantedSpec().with_target(data="none", bias_letter=letter, bias_rate=1.0)
    results = ask_all(PlantedTarget(spec, items), items, seed=0, temperature=0.0)
    units, stated = aspect_units(results), position_report(results)
    options = _options_per_unit(items)
    checks, outside = [], []
    for aspect, values in units.items():
        n = len(values)
        per_k = Counter(options[aspect][u] for u in values)
        measured = sum(values.values()) / n
        if aspect in EQUITY:
            checks += _equity_constant_checks(aspect, letter, per_k, measured, stated[aspect].chance, n)
            continue
        # no sampling error to allow for: the keys are balanced by design
        chance, low, high = _accuracy_range(per_k, n)
        if per_aspect:
            checks.append(Check(METHOD, f"constant '{letter}' model: {aspect.value} = chance 1/k", chance, measured,
                                low, high, n, note="keys balanced: floor or ceil of n/k at each letter"))
        elif not low - 1e-12 <= measured <= high + 1e-12:
            outside.append(aspect.value)
    if not per_aspect:
        accuracy = [a for a in units if a not in EQUITY]
        checks.append(Check(METHOD, f"constant '{letter}' model: accuracy aspects off chance (floor/ceil n/k)",
                            0, len(outside), 0, 0, len(accuracy), note=", ".join(outside) or "none"))
    return checks


def _equity_constant_checks(aspect: Aspect, letter: str, per_k: Counter[int], measured: float, stated: float,
                            n: int) -> list[Check]:
    """A uniform random guesser's chance on a unit of m answers is 1/k^(m-1); the design makes a constant
    letter consistent on exactly round(units_k / k^(m-1)) of the units with k options, for every k."""
    power = VARIANTS[aspect] - 1
    chance = sum(count / k**power for k, count in per_k.items()) / n
    design = sum(_nearest(count / k**power) for k, count in per_k.items())
    strata = " + ".join(f"{count}/{k}^{power}" for k, count in sorted(per_k.items()))
    checks = [Check(METHOD, f"constant '{letter}' model: {aspect.value} = chance {chance:.4g} (units rounded)",
                    design / n, measured, design / n, design / n, n,
                    note=f"chance x units = {strata} = {chance * n:.3g}, rounded per option count: {design}")]
    if letter == "A":  # the scorer's stated chance (Inspect's medguard_<aspect>_chance), once per aspect
        checks.append(exact_check(METHOD, f"{aspect.value} stated chance = mean of 1/k^{power}", chance, stated, n))
    return checks


def bootstrap_se_error(groups: Sequence[Sequence[float]], n_resamples: int = N_RESAMPLES) -> tuple[float, float]:
    """The ideal (infinitely resampled) bootstrap SE of the mean of K group means, each group resampled on its
    own, and the relative standard deviation of its estimate from ``n_resamples`` resamples.

    The resampled statistic T = (1/K) Σ_g mean*_g is a sum of independent means, so its cumulants add:
    κ2(T) = Σ m2_g / (K² n_g) (plug-in variances: the SE is sqrt(Σ_g var_g / n_g) / K) and
    κ4(T) = Σ (m4_g - 3 m2_g²) / (K⁴ n_g³). The sample SD s of B draws of T has
    Var(s²) = σ⁴ (2 / (B - 1) + γ₂ / B) with γ₂ = κ4 / κ2², so sd(s) / σ ≈ sqrt(2 / (B - 1) + γ₂ / B) / 2
    (delta method): about 0.71 % at B = 9,999 for a near-normal T.
    """
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    k = len(arrays)
    m2 = [float(np.mean((a - a.mean()) ** 2)) for a in arrays]
    m4 = [float(np.mean((a - a.mean()) ** 4)) for a in arrays]
    kappa2 = sum(v / (k**2 * len(a)) for v, a in zip(m2, arrays, strict=True))
    kappa4 = sum((f - 3 * v**2) / (k**4 * len(a) ** 3) for v, f, a in zip(m2, m4, arrays, strict=True))
    if kappa2 == 0:
        return 0.0, math.nan
    excess = kappa4 / kappa2**2
    return math.sqrt(kappa2), math.sqrt(2 / (n_resamples - 1) + excess / n_resamples) / 2


def index_se_checks(units: dict[Aspect, dict[str, float]], report: SafetyReport,
                    n_resamples: int = N_RESAMPLES) -> list[Check]:
    """Each principle's and the overall index's bootstrap SE against sqrt(Σ_g var_g / n_g) / K, within
    z(LEVEL) standard deviations of the SE's own Monte-Carlo error (``bootstrap_se_error``). A bootstrap that
    pooled the aspects' units (or resampled them at any other level) gives a different SE and fails."""
    indices: list[tuple[str, list[Aspect], float]] = [
        (f"{p.value} (principle)", [a for a in units if PRINCIPLE_OF[a] is p], report.principles[p].se)
        for p in Principle if p in report.principles]
    indices.append(("overall", list(units), report.overall.se))
    checks = []
    for name, aspects, measured in indices:
        groups = [list(units[a].values()) for a in aspects]
        analytic, relative = bootstrap_se_error(groups, n_resamples)
        if analytic == 0:  # every unit of every aspect alike: nothing varies, the bootstrap SE is 0 too
            checks.append(exact_check(METHOD, f"bootstrap SE of {name} = 0 (no variation)", 0.0, measured))
            continue
        half = z() * relative * analytic
        check = Check(METHOD, f"bootstrap SE of {name} = sqrt(Σ var_g/n_g)/K", analytic, measured,
                      analytic - half, analytic + half, sum(map(len, groups)),
                      note=f"{len(groups)} aspects resampled separately; MC sd {relative:.2%} of the SE")
        checks.append(with_se_power(check, groups, n_resamples))
    return checks


def with_se_power(check: Check, groups: Sequence[Sequence[float]], n_resamples: int = N_RESAMPLES) -> Check:
    """``check`` (a bootstrap SE of the mean of the ``groups``' means against its ideal) with its named defect
    and the probability that it fails under it: every unit pooled into one resampled sample (the groups not kept
    apart), whose ideal SE is sqrt(var/N) of the pooled units, its estimate from the same resamples having about
    the same relative error. A principle of one aspect pools nothing: there the defect is the units' SD printed
    as the SE."""
    if len(groups) > 1:
        wrong_se, wrong_relative = bootstrap_se_error([[v for g in groups for v in g]], n_resamples)
        defect = f"the aspects' units pooled in one resample (SE {wrong_se:.4f})"
    else:
        analytic, relative = bootstrap_se_error(groups, n_resamples)
        wrong_se, wrong_relative = analytic * math.sqrt(len(groups[0])), relative
        defect = f"one aspect: the units' SD printed as the SE ({wrong_se:.4f})"
    power = float(stats.norm.cdf(check.low, wrong_se, wrong_relative * wrong_se)
                  + stats.norm.sf(check.high, wrong_se, wrong_relative * wrong_se))
    return with_power(check, defect, power)


def _consistency(items: Sequence[MCQItem], p: float, power: int) -> float:
    """Mean over equity units of Σ_j P(j)^power (independent answers, key p, rest evenly split)."""
    cases: dict[str, int] = {}
    for item in items:
        if item.metadata.get("pool") == EQUITY_POOL:
            cases[item.metadata["case_id"]] = len(item.options)
    values = [p**power + (k - 1) * ((1 - p) / (k - 1)) ** power for k in cases.values()]
    return sum(values) / len(values)


def sampling_checks(items: Sequence[MCQItem], p: float = 0.7, p2: float = 0.45, seed: int = 0,
                    replicates: int = 20) -> list[Check]:
    """``replicates`` independent runs of the p-model are pooled for the accuracy and consistency checks: with
    one run, the small aspects (8 multilingual items, 12 race units) gave intervals like [0.125, 1] and
    [0, 0.67], which a collapse to 1 or to 0 would pass. The SE and McNemar checks use the first run."""
    base = PlantedSpec().with_target(data="none", accuracy="constant", noise=0.0, delta=0.0)
    target = PlantedTarget(base.with_target(constant=p), items)
    unknown = [i.id for i in items if target.identify(_shown(i)) is None]
    if unknown:
        raise RuntimeError(f"the planted target does not recognise MedGuard items {unknown[:5]}")
    runs = [aspect_units(ask_all(target, items, seed if r == 0 else derive_seed(seed, f"replicate:{r}")))
            for r in range(replicates)]
    units = runs[0]
    checks = []
    for aspect, values in units.items():
        if aspect is Aspect.GENDER_EQUITY:
            planted, label = _consistency(items, p, 2), "gender-equity consistency = Σ P(j)²"
        elif aspect is Aspect.RACE_EQUITY:
            planted, label = _consistency(items, p, 4), "race-equity consistency = Σ P(j)⁴"
        else:
            planted, label = p, f"{aspect.value} accuracy"
        # units of one run are independent given the plant, and so are the runs: the pooled count is a sum
        # of independent Bernoullis (Poisson-binomial where equity cases differ in k, narrower than the binomial)
        hits = sum(int(sum(run[aspect].values())) for run in runs)
        check = proportion_check(METHOD, f"p={p} model: {label}", planted, hits, len(values) * replicates,
                                 note=f"{len(values)} units x {replicates} runs")
        checks.append(_with_defect(check, aspect, items, p))
    report = safety_report(units, seed=seed, n_resamples=N_RESAMPLES)
    worst, worst_name = 0.0, ""
    for aspect, index in report.aspects.items():
        binomial = math.sqrt(index.value * (1 - index.value) / index.n)
        if binomial > 0:
            rel = abs(index.se / binomial - 1)
            if rel > worst:
                worst, worst_name = rel, aspect.value
    # 9,999 resamples: the SE's own Monte-Carlo error is ~1/sqrt(2*9999) = 0.7 % (relative); allow 3 %
    smallest = min(index.n for index in report.aspects.values())
    checks.append(with_power(
        Check(METHOD, "bootstrap SE / binomial SE - 1 (worst aspect)", 0.0, worst, -0.03, 0.03,
              len(report.aspects), note=f"worst: {worst_name}"),
        # the ratio is then sqrt(n) - 1 >= sqrt(smallest aspect's n) - 1, far outside [-0.03, 0.03]
        f"the units' SD printed as the SE (not divided by sqrt(n): ratio >= {math.sqrt(smallest) - 1:.1f})",
        float(math.sqrt(smallest) - 1 > 0.03)))
    checks += index_se_checks(units, report)
    second = ask_all(PlantedTarget(base.with_target(constant=p2), items), items, seed + 1)
    units2 = aspect_units(second)
    scored = {k: v for k, v in units.items() if k not in EQUITY}
    scored2 = {k: v for k, v in units2.items() if k not in EQUITY}
    comparison = compare_models({"first": scored, "second": scored2}, exact=True)
    test = comparison.pairs[0].test
    for label, planted, count, swapped in (("McNemar b: only first right, p1(1-p2)", p * (1 - p2), test.b,
                                             p2 * (1 - p)),
                                            ("McNemar c: only second right, p2(1-p1)", p2 * (1 - p), test.c,
                                             p * (1 - p2))):
        check = proportion_check(METHOD, label, planted, count, test.n)
        checks.append(with_power(check, f"b and c swapped (the models' order lost: {swapped:.3f})",
                                 binomial_power(check, swapped)))
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    first = [v for a in scored for _, v in sorted(scored[a].items())]
    second_values = [v for a in scored for _, v in sorted(scored2[a].items())]
    table = [[sum(1 for x, y in zip(first, second_values, strict=True) if x and y), test.b],
             [test.c, sum(1 for x, y in zip(first, second_values, strict=True) if not x and not y)]]
    reference = float(sm_mcnemar(table, exact=True).pvalue)
    checks.append(exact_check(METHOD, "McNemar exact p-value (statsmodels)", reference, test.pvalue, test.n))
    return checks


def _mean_wrong_letter_share(items: Sequence[MCQItem], aspect: Aspect, p: float) -> float:
    """P(the answer is a given distractor) for the p-model, averaged over ``aspect``'s items: what a score
    against a distractor's letter (e.g. the key's letter before the option shuffle) would measure."""
    ks = [len(i.options) for i in items if i.metadata.get("pool") == aspect.value]
    return sum((1 - p) / (k - 1) for k in ks) / len(ks) if ks else math.nan


def _with_defect(check: Check, aspect: Aspect, items: Sequence[MCQItem], p: float) -> Check:
    """The p-model's rows with the power against their defect: an equity unit's variants not asked
    independently (one answer reused: consistency 1); an accuracy aspect scored against a distractor's letter."""
    if aspect in EQUITY:
        # the weaker defect stays in view: consistency read as "every variant right" (p^V) is close to Σ P(j)^V
        every_right = p ** VARIANTS[aspect]
        return with_power(check, "the variants' answers not independent (one answer reused: consistency 1; "
                          f"P(fail) against 'every variant right', p^{VARIANTS[aspect]} = {every_right:.3f}: "
                          f"{binomial_power(check, every_right):.2f})", binomial_power(check, 1.0))
    wrong = _mean_wrong_letter_share(items, aspect, p)
    return with_power(check, f"scored against a distractor's letter (accuracy {wrong:.3f})",
                      binomial_power(check, wrong))


def _shown(item: MCQItem):
    from medfuzz.planted.text import find_question

    return find_question([ChatMessage("user", f"{item.clean_question()}\n\n{format_choices(item)}")])


def constant_letters_checks(items: Sequence[MCQItem]) -> list[Check]:
    """Every letter some item has: "A" with one row per accuracy aspect, the others with one row for all of
    them; each letter with one row per equity aspect."""
    letters = sorted({letter for item in items for letter in item.options})
    return [c for letter in letters for c in constant_letter_checks(items, letter, per_aspect=letter == "A")]


def validate_medguard(n: int = 30, seed: int = 0) -> list[Check]:
    items = benchmark_items(n, seed)
    return sampling_checks(items, seed=seed) + constant_letters_checks(items)
