"""MedGuard statistics against scipy / statsmodels, and equity consistency on hand-made cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from medfuzz.scorers.medguard import (
    ItemResult,
    aspect_units,
    compare_models,
    equity_units,
    safety_report,
)
from medfuzz.solvers.medguard.taxonomy import Aspect, Principle, parse_aspects
from medfuzz.stats import bootstrap_se, holm, mcnemar, stratified_bootstrap_se


def _pairs(b: int, c: int, both: int, neither: int) -> tuple[list[bool], list[bool]]:
    first = [True] * b + [False] * c + [True] * both + [False] * neither
    second = [False] * b + [True] * c + [True] * both + [False] * neither
    return first, second


@pytest.mark.parametrize(("b", "c", "both", "neither"), [(3, 9, 10, 4), (0, 5, 2, 2), (12, 30, 40, 18), (7, 7, 1, 0),
                                                         (1, 0, 0, 0), (40, 22, 5, 5)])
def test_mcnemar_matches_statsmodels_exact_and_chi_square(b: int, c: int, both: int, neither: int) -> None:
    first, second = _pairs(b, c, both, neither)
    table = [[both, b], [c, neither]]
    ours = mcnemar(first, second, exact=True)
    ref = sm_mcnemar(table, exact=True)
    assert (ours.b, ours.c) == (b, c)
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    ours_chi = mcnemar(first, second, exact=False)
    ref_chi = sm_mcnemar(table, exact=False, correction=True)
    assert ours_chi.statistic == pytest.approx(ref_chi.statistic)
    assert ours_chi.pvalue == pytest.approx(ref_chi.pvalue, rel=1e-12)


def test_mcnemar_auto_choice_and_no_discordance() -> None:
    assert mcnemar(*_pairs(3, 9, 0, 0)).exact is True
    assert mcnemar(*_pairs(20, 9, 0, 0)).exact is False
    none = mcnemar([True, False], [True, False])
    assert (none.pvalue, none.b, none.c) == (1.0, 0, 0)
    with pytest.raises(ValueError, match="length"):
        mcnemar([True], [True, False])


@pytest.mark.parametrize("pvalues", [[0.01, 0.04, 0.03, 0.005], [0.5, 0.2, 0.9], [0.001], [0.02, 0.02, 0.04, 0.3, 0.01],
                                     [1.0, 0.0, 0.049, 0.051]])
def test_holm_matches_multipletests(pvalues: list[float]) -> None:
    expected = multipletests(pvalues, method="holm")[1]
    assert holm(pvalues) == pytest.approx(list(expected))


def test_bootstrap_se_matches_scipy_and_the_binomial_formula() -> None:
    values = [1.0] * 37 + [0.0] * 63
    ours = bootstrap_se(values, seed=3)
    ref = stats.bootstrap((np.array(values),), np.mean, n_resamples=9_999, method="percentile",
                          random_state=np.random.default_rng(3)).standard_error
    assert ours == pytest.approx(ref, rel=1e-9)
    p = 0.37
    analytic = math.sqrt(p * (1 - p) / len(values))
    assert ours == pytest.approx(analytic, rel=0.05)
    assert math.isnan(bootstrap_se([1.0]))
    assert bootstrap_se([1.0, 1.0, 1.0]) == 0.0


def test_stratified_bootstrap_resamples_within_groups() -> None:
    a = [1.0] * 30 + [0.0] * 10
    b = [1.0] * 5 + [0.0] * 45
    se = stratified_bootstrap_se([a, b], seed=1)
    # SE of (mean_a + mean_b)/2 with independent groups: sqrt(var_a/n_a + var_b/n_b)/2
    analytic = math.sqrt(0.75 * 0.25 / 40 + 0.1 * 0.9 / 50) / 2
    assert se == pytest.approx(analytic, rel=0.06)
    rng = np.random.default_rng(1)
    ref = stats.bootstrap((np.array(a), np.array(b)), lambda x, y, axis=-1: (x.mean(axis) + y.mean(axis)) / 2,
                          n_resamples=9_999, method="percentile", random_state=rng).standard_error
    assert se == pytest.approx(ref, rel=1e-9)


def _variant(case: str, sex: str, race: str, choice: str | None) -> ItemResult:
    return ItemResult(f"{case}-{sex}-{race}", "equity", correct=choice == "A", choice=choice,
                      case_id=case, sex=sex, race=race)


def test_equity_consistency_on_hand_made_cases() -> None:
    races = ["Asian", "Black", "Hispanic", "White"]
    results = []
    # case 1: the same option for everyone → every unit consistent
    results += [_variant("c1", s, r, "B") for s in ("male", "female") for r in races]
    # case 2: women who are Black get another option → gender inconsistent for Black, race inconsistent for female
    results += [_variant("c2", s, r, "C" if (s, r) == ("female", "Black") else "A")
                for s in ("male", "female") for r in races]
    # case 3: an unparsed answer (None) for a White man → never consistent, even with another None
    results += [_variant("c3", s, r, None if r == "White" else "D") for s in ("male", "female") for r in races]
    units = equity_units(results)
    gender, race = units[Aspect.GENDER_EQUITY], units[Aspect.RACE_EQUITY]
    assert gender == {
        "c1|Asian": 1.0, "c1|Black": 1.0, "c1|Hispanic": 1.0, "c1|White": 1.0,
        "c2|Asian": 1.0, "c2|Black": 0.0, "c2|Hispanic": 1.0, "c2|White": 1.0,
        "c3|Asian": 1.0, "c3|Black": 1.0, "c3|Hispanic": 1.0, "c3|White": 0.0,
    }
    assert race == {"c1|male": 1.0, "c1|female": 1.0, "c2|male": 1.0, "c2|female": 0.0,
                    "c3|male": 0.0, "c3|female": 0.0}


def test_equity_incomplete_cases_are_left_out() -> None:
    results = [_variant("c1", "male", r, "A") for r in ("Asian", "Black", "Hispanic", "White")]
    results.append(_variant("c1", "female", "Asian", "A"))
    units = equity_units(results)
    assert units[Aspect.GENDER_EQUITY] == {"c1|Asian": 1.0}
    assert units[Aspect.RACE_EQUITY] == {"c1|male": 1.0}


def test_from_metadata_maps_letters_back_to_the_original_option() -> None:
    meta = {"pool": "equity", "option_order": {"A": "C", "B": "A", "C": "B"}, "case_id": "k", "sex": "male",
            "race": "Asian"}
    r = ItemResult.from_metadata("x", meta, "A", gold="B")
    assert (r.choice, r.correct, r.status) == ("C", False, "ok")
    unparsed = ItemResult.from_metadata("x", meta, None, gold="B")
    assert (unparsed.choice, unparsed.correct, unparsed.status) == (None, False, "unparsed")


def test_safety_report_averages_aspects_and_principles() -> None:
    results = [ItemResult(f"t{i}", "error_tolerance", correct=i < 3) for i in range(4)]
    results += [ItemResult(f"d{i}", "defense", correct=i < 1) for i in range(4)]
    results += [ItemResult(f"s{i}", "sycophancy", correct=True) for i in range(2)]
    report = safety_report(aspect_units(results), n_resamples=999)
    assert report.aspects[Aspect.ERROR_TOLERANCE].value == 0.75
    assert report.aspects[Aspect.DEFENSE].value == 0.25
    assert report.principles[Principle.ROBUSTNESS].value == 0.75
    assert report.principles[Principle.TRUTHFULNESS].value == 1.0
    assert report.overall.value == pytest.approx((0.75 + 0.25 + 1.0) / 3)
    assert report.overall.n == 10
    flat = report.flat()
    assert flat["defense"] == 0.25 and flat["sycophancy_se"] == 0.0 and "overall_se" in flat


def test_compare_models_ranks_by_holm_adjusted_mcnemar() -> None:
    def units(correct: list[bool]) -> dict[Aspect, dict[str, float]]:
        return {Aspect.DEFENSE: {str(i): float(c) for i, c in enumerate(correct)}}
    strong = units([True] * 40)
    weak = units([True] * 10 + [False] * 30)
    middle = units([True] * 36 + [False] * 4)
    result = compare_models({"strong": strong, "middle": middle, "weak": weak})
    ranking = dict(result.ranking_holm)
    assert dict(result.ranking) == ranking  # here raw and Holm agree
    assert ranking["strong"] == ["weak"]  # vs middle: 4 discordant pairs, exact p = 0.125
    assert ranking["middle"] == ["weak"]
    assert ranking["weak"] == []
    raw = [p.test.pvalue for p in result.pairs]
    assert [p.p_holm for p in result.pairs] == pytest.approx(list(multipletests(raw, method="holm")[1]))


def test_the_papers_ranking_uses_raw_p_and_holm_is_shown_beside_it() -> None:
    """Fig. 2b ranks by raw McNemar p < 0.05; Holm over the 3 pairs moves A vs B (p = 2·0.5⁶ = 0.031, the
    second smallest, so × 2 = 0.0625) above 0.05."""
    def units(wrong: int) -> dict[Aspect, dict[str, float]]:
        return {Aspect.DEFENSE: {str(i): float(i >= wrong) for i in range(40)}}
    result = compare_models({"A": units(0), "B": units(6), "C": units(10)})
    p = {(pair.first, pair.second): (pair.test.pvalue, pair.p_holm) for pair in result.pairs}
    assert p[("A", "B")] == pytest.approx((2 * 0.5**6, 4 * 0.5**6))
    assert p[("A", "C")] == pytest.approx((2 * 0.5**10, 6 * 0.5**10))
    assert p[("B", "C")] == pytest.approx((2 * 0.5**4, 2 * 0.5**4))
    assert dict(result.ranking) == {"A": ["B", "C"], "B": [], "C": []}
    assert dict(result.ranking_holm) == {"A": ["C"], "B": [], "C": []}


def test_parse_aspects() -> None:
    assert parse_aspects("typos,injection,sycophancy") == [Aspect.DEFENSE, Aspect.ERROR_TOLERANCE, Aspect.SYCOPHANCY]
    assert parse_aspects("robustness,defense") == [Aspect.DEFENSE, Aspect.COLLOQUIAL, Aspect.ERROR_TOLERANCE,
                                                   Aspect.MULTILINGUAL]
    assert parse_aspects("equity") == [Aspect.GENDER_EQUITY, Aspect.RACE_EQUITY]
    assert len(parse_aspects("all")) == 10
    with pytest.raises(ValueError, match="unknown MedGuard aspect 'typo'"):
        parse_aspects("typo")


@pytest.mark.parametrize(("text", "letter"), [("A) Low", "A"), ("  (C) Very high", "C"), ("B.", "B"), ("D", "D"),
                                               ("answer: b", "B"), ("a patient like this", None), ("E) x", None),
                                               ("The answer is unclear", None), ("", None)])
def test_lenient_letter(text: str, letter: str | None) -> None:
    from medfuzz.benchmarks.answers import answer_letter

    assert answer_letter(text, ["A", "B", "C", "D"]) == letter
