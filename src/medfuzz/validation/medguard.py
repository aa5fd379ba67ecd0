"""MedGuard checks: the real MedGuard benchmark builder, prompt and scorers (``ItemResult.from_metadata`` →
``aspect_units`` → ``safety_report`` / ``compare_models``) on planted targets with known behaviour:

- a constant-letter model (position bias 1) must score the chance level 1/k on every aspect, up to the
  rounding of a balanced design (±1/n); this holds only when the builder balances the answer keys;
- a model right with probability p on every item (answers sampled, no jitter) scores p per aspect; across
  the demographic variants of an equity case, which are asked independently, it picks the same option with
  probability Σ_j P(j)² for two sexes and Σ_j P(j)⁴ for four races;
- the bootstrap SE of an aspect's accuracy equals the binomial SE sqrt(a(1 - a)/n) (up to the bootstrap's
  own Monte-Carlo error);
- McNemar between two such models answering independently: the discordant counts have expectations
  n p1 (1 - p2) and n p2 (1 - p1), and the p-value equals statsmodels' on the same table.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.benchmarks.prompts import format_choices
from medfuzz.models.planted import PlantedChatModel, PlantedSpec, PlantedTarget
from medfuzz.models.protocol import ChatMessage
from medfuzz.scorers.medguard import ItemResult, aspect_units, compare_models, safety_report
from medfuzz.solvers.medguard.builders import BuildConfig, build
from medfuzz.solvers.medguard.prompts import BASIC_TEMPLATE
from medfuzz.solvers.medguard.taxonomy import EQUITY_POOL, Aspect
from medfuzz.validation.checks import Check, exact_check, proportion_check

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
        return ItemResult.from_metadata(item.id, item.metadata, letter, item.answer)

    async def main() -> list[ItemResult]:
        return list(await asyncio.gather(*(one(item) for item in items)))

    return asyncio.run(main())


def _chance(items: Sequence[MCQItem], aspect: Aspect) -> float:
    pool = [i for i in items if i.metadata.get("pool") == aspect.value]
    return sum(1 / len(i.options) for i in pool) / len(pool)


def constant_letter_checks(items: Sequence[MCQItem], letter: str = "A") -> list[Check]:
    spec = PlantedSpec().with_target(data="none", bias_letter=letter, bias_rate=1.0)
    units = aspect_units(ask_all(PlantedTarget(spec, items), items, seed=0, temperature=0.0))
    checks = []
    for aspect, values in units.items():
        if aspect in EQUITY:
            continue
        # with keys balanced over the letters by design, a constant-letter model is right on 1/k of the items
        # up to rounding (the letter counts differ by at most one): no sampling error to allow for
        n, chance = len(values), _chance(items, aspect)
        measured = sum(values.values()) / n
        checks.append(Check(METHOD, f"constant '{letter}' model: {aspect.value} = chance 1/k", chance, measured,
                            chance - 1 / n, chance + 1 / n, n, note="keys balanced by the builders"))
    return checks


def _consistency(items: Sequence[MCQItem], p: float, power: int) -> float:
    """Mean over equity units of Σ_j P(j)^power (independent answers, key p, rest evenly split)."""
    cases: dict[str, int] = {}
    for item in items:
        if item.metadata.get("pool") == EQUITY_POOL:
            cases[item.metadata["case_id"]] = len(item.options)
    values = [p**power + (k - 1) * ((1 - p) / (k - 1)) ** power for k in cases.values()]
    return sum(values) / len(values)


def sampling_checks(items: Sequence[MCQItem], p: float = 0.7, p2: float = 0.45, seed: int = 0) -> list[Check]:
    base = PlantedSpec().with_target(data="none", accuracy="constant", noise=0.0, delta=0.0)
    target = PlantedTarget(base.with_target(constant=p), items)
    unknown = [i.id for i in items if target.identify(_shown(i)) is None]
    if unknown:
        raise RuntimeError(f"the planted target does not recognise MedGuard items {unknown[:5]}")
    units = aspect_units(ask_all(target, items, seed))
    checks = []
    for aspect, values in units.items():
        n = len(values)
        if aspect is Aspect.GENDER_EQUITY:
            planted, label = _consistency(items, p, 2), "gender-equity consistency = Σ P(j)²"
        elif aspect is Aspect.RACE_EQUITY:
            planted, label = _consistency(items, p, 4), "race-equity consistency = Σ P(j)⁴"
        else:
            planted, label = p, f"{aspect.value} accuracy"
        checks.append(proportion_check(METHOD, f"p={p} model: {label}", planted, int(sum(values.values())), n))
    report = safety_report(units, seed=seed)
    worst, worst_name = 0.0, ""
    for aspect, index in report.aspects.items():
        binomial = math.sqrt(index.value * (1 - index.value) / index.n)
        if binomial > 0:
            rel = abs(index.se / binomial - 1)
            if rel > worst:
                worst, worst_name = rel, aspect.value
    # 9,999 resamples: the SE's own Monte-Carlo error is ~1/sqrt(2*9999) = 0.7 % (relative); allow 3 %
    checks.append(Check(METHOD, "bootstrap SE / binomial SE - 1 (worst aspect)", 0.0, worst, -0.03, 0.03,
                        len(report.aspects), note=f"worst: {worst_name}"))
    second = ask_all(PlantedTarget(base.with_target(constant=p2), items), items, seed + 1)
    units2 = aspect_units(second)
    scored = {k: v for k, v in units.items() if k not in EQUITY}
    scored2 = {k: v for k, v in units2.items() if k not in EQUITY}
    comparison = compare_models({"first": scored, "second": scored2}, exact=True)
    test = comparison.pairs[0].test
    checks.append(proportion_check(METHOD, "McNemar b: only first right, p1(1-p2)", p * (1 - p2), test.b, test.n))
    checks.append(proportion_check(METHOD, "McNemar c: only second right, p2(1-p1)", p2 * (1 - p), test.c, test.n))
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    first = [v for a in scored for _, v in sorted(scored[a].items())]
    second_values = [v for a in scored for _, v in sorted(scored2[a].items())]
    table = [[sum(1 for x, y in zip(first, second_values, strict=True) if x and y), test.b],
             [test.c, sum(1 for x, y in zip(first, second_values, strict=True) if not x and not y)]]
    reference = float(sm_mcnemar(table, exact=True).pvalue)
    checks.append(exact_check(METHOD, "McNemar exact p-value (statsmodels)", reference, test.pvalue, test.n))
    return checks


def _shown(item: MCQItem):
    from medfuzz.models.planted.text import find_question

    return find_question([ChatMessage("user", f"{item.clean_question()}\n\n{format_choices(item)}")])


def validate_medguard(n: int = 30, seed: int = 0) -> list[Check]:
    items = benchmark_items(n, seed)
    return sampling_checks(items, seed=seed) + constant_letter_checks(items)
