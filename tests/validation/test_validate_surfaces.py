"""``validate``'s surface section: the planted target through the real Inspect and lm-eval tasks and the real report,
each printed number of the clean baseline read back where users read it (Inspect metric, summary.json, model card,
terminal) and compared with an independent recount and the planted truth."""

from __future__ import annotations

import numpy as np
import pytest

from medfuzz.validation.checks import format_table, suite_errors
from medfuzz.validation.surfaces import planted_accuracy, planted_argmax_accuracy, surface_spec, validate_surfaces

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checks():
    return validate_surfaces("ci")


def test_every_surface_check_passes_and_each_surface_is_read(checks) -> None:
    failed = [c for c in checks if not c.passed]
    assert not failed and not suite_errors(checks), "\n" + format_table(checks)
    names = " | ".join(c.statistic for c in checks)
    for where in ("Inspect's baseline_acc metric", "Inspect's baseline_stderr metric", "summary.json k",
                  "summary.json Wilson low", "summary.json Wilson high", "model card value", "model card Wilson low",
                  "terminal line", "lm-eval's acc =", "lm-eval's acc_stderr", "summary.json se", "model card stderr",
                  "Inspect clean baseline accuracy vs planted", "lm-eval clean baseline accuracy vs planted",
                  "3 shards merged = the whole run"):
        assert where in names, where
    # rates strictly inside (0, 1): every standard error and interval end is a real check, not 0 against 0
    measured = {c.statistic: c.measured for c in checks}
    assert 0 < measured["Inspect clean baseline accuracy: summary.json value = k/n"] < 1
    assert 0 < measured["lm-eval clean baseline accuracy: summary.json value = recount"] < 1
    assert all(c.power >= 0.8 for c in checks if c.defect)


def test_the_planted_accuracies_match_a_simulation_of_the_rule() -> None:
    """The closed forms against the rule simulated: q = clip(b + σU, 0, 1); sampled: E[q]; argmax: P(q > 1/4)."""
    from medfuzz.benchmarks import load_items
    from medfuzz.planted import PlantedTarget

    spec = surface_spec()
    target = PlantedTarget(spec, load_items("medqa", "demo"))
    ids = sorted(target.base)
    rng = np.random.default_rng(0)
    u = rng.uniform(-1, 1, size=(200_000, 1))
    q = np.clip(np.array([target.base[i] for i in ids])[None, :] + spec.target.noise * u, 0, 1)
    assert planted_accuracy(spec, ids) == pytest.approx(q.mean(), abs=2e-3)
    assert planted_argmax_accuracy(spec, ids) == pytest.approx((q > 0.25).mean(), abs=2e-3)


# ------------------------------------------------------------------------------------------------- MedGuard


def test_every_medguard_surface_is_read(checks) -> None:
    names = " | ".join(c.statistic for c in checks if c.statistic.startswith("MedGuard"))
    for where in ("separates the pooled mean", "chance levels differ", "Inspect's metrics: every aspect, principle",
                  "Inspect's metrics: every aspect's chance", "summary.json: every principle's and the overall value",
                  "summary.json: every principle's and the overall chance", "summary.json: every n",
                  "summary.json: every se", "model card: every value", "model card: every stderr",
                  "terminal: every line's value", "overall index SE"):
        assert where in names, where


def _stored(item_id: str, value: float, **meta) -> object:
    from medfuzz.tasks.inspect.planted_runs import StoredScore

    return StoredScore(item_id, value, {"status": "ok", "n_options": 4, **meta})


def test_the_recount_by_hand() -> None:
    """Two accuracy aspects of unequal size and one equity case (8 variants), valued by hand."""
    from medfuzz.validation.surfaces_medguard import recount

    scores = [_stored(f"d{i}", 1.0, pool="defense") for i in range(3)]  # resilience: 3/3
    scores += [_stored("h0", 1.0, pool="hallucination", n_options=5), _stored("h1", 0.0, pool="hallucination"),
               _stored("h2", 0.0, pool="hallucination", status="error")]  # the LLM error is left out: 1/2
    choices = {("male", "Asian"): "x", ("female", "Asian"): "x", ("male", "Black"): "x", ("female", "Black"): "y",
               ("male", "Hispanic"): "x", ("female", "Hispanic"): "x", ("male", "White"): "x",
               ("female", "White"): "x"}
    scores += [_stored(f"e{sex}{race}", 0.0, pool="equity", case_id="c1", sex=sex, race=race, choice=choice)
               for (sex, race), choice in choices.items()]
    groups = recount(scores)
    assert groups["defense"].value == 1.0 and groups["hallucination"].value == 0.5
    assert groups["hallucination"].chance == pytest.approx((1 / 5 + 1 / 4) / 2)
    assert groups["gender_equity"].units == [[1.0, 0.0, 1.0, 1.0]]  # Black differs between the sexes
    assert groups["race_equity"].units == [[1.0, 0.0]]  # the female quadruple differs
    assert groups["race_equity"].chance == pytest.approx(1 / 64)
    assert groups["fairness"].value == pytest.approx((0.75 + 0.5) / 2)  # no stereotype aspect here
    assert groups["overall"].value == pytest.approx((1 + 0.5 + 0.75 + 0.5) / 4)
    assert groups["overall"].pooled == pytest.approx((3 + 1 + 3 + 1) / (3 + 2 + 4 + 2))
    assert groups["overall"].n == 11


@pytest.fixture(scope="module")
def medguard_run():
    from medfuzz.validation.surfaces_medguard import medguard_surfaces

    return medguard_surfaces("ci", surface_spec())


@pytest.mark.parametrize("defect", ["pooled_index", "principle_chance_of_all_aspects", "card_value_off",
                                    "terminal_value_off", "inspect_aspect_chance_off", "page_chance_of_all_aspects",
                                    "page_chance_missing"])
def test_a_defect_where_users_read_fails_a_check(medguard_run, defect: str) -> None:
    """Each kind of defect the reviewer planted in the aggregation layer, written into one surface of a real
    run's outputs, fails at least one check (and the run as it was passes every one)."""
    import copy

    run = copy.deepcopy(medguard_run)
    assert all(c.passed for c in run.checks())
    numbers = next(r for m in run.summary["models"].values() for r in m["results"]
                   if r["method"] == "medguard")["numbers"]
    if defect == "pooled_index":
        numbers["medguard_overall"]["value"] = run.groups["overall"].pooled
    elif defect == "principle_chance_of_all_aspects":
        numbers["medguard_fairness"]["chance"] = run.groups["overall"].chance
    elif defect == "card_value_off":
        next(m for m in run.card if m["type"] == "medguard_robustness")["value"] += 0.001
    elif defect == "terminal_value_off":
        run.terminal["medguard_privacy"] = "0.100 ± 0.010 (n=4)"
    elif defect.startswith("page_chance"):  # the first screen's chance column only (summary.json right)
        from medfuzz.validation.read_back import CHANCE

        fairness = next(k for k in run.page if k.endswith(CHANCE) and "fairness" in k)
        if defect == "page_chance_missing":
            del run.page[fairness]
        else:
            run.page[fairness] = f"{run.groups['overall'].chance:.3f}"
        assert [c.statistic for c in run.checks() if not c.passed] == [
            "MedGuard: first screen (index.html): every row = the terminal's line, every chance level = recount "
            "(fields differing)"]
    else:
        run.metrics["medguard_race_equity_chance"] = 1 / 16
    assert [c.statistic for c in run.checks() if not c.passed]


# ----------------------------------------------------------------------------------------------------- TCES


def test_every_tces_surface_is_read(checks) -> None:
    names = " | ".join(c.statistic for c in checks if c.statistic.startswith("TCES"))
    for where in ("items attacked = the items planted right", "separates queries per success",
                  "Inspect's metrics: every rate", "summary.json: every share's value", "model card: every value",
                  "terminal: every line", "ASR@1 (summary.json k/n) vs planted", "2 shards merged = the whole run",
                  "the merged shards record the whole run's call bound"):
        assert where in names, where
    assert all(c.power >= 0.8 for c in checks if c.defect)


def test_the_tces_recount_by_hand() -> None:
    from medfuzz.validation.surfaces_tces import recount

    def record(i: int, outcome: str, q: int | None = None, used: int = 0, name: str | None = None) -> dict:
        return {"item_id": f"i{i}", "outcome": outcome, "queries_to_success": q, "queries_used": used,
                "replacement": name}

    records = [record(0, "success", 1, 1, "b"), record(1, "success", 3, 3, "a"), record(2, "success", 1, 1, "b"),
               record(3, "attack_failed", None, 8), record(4, "already_wrong"), record(5, "no_entity"),
               record(6, "llm_error")]
    r = recount(records)
    assert (r.shares["tces_clean_acc"].k, r.shares["tces_clean_acc"].n) == (4, 5)  # no_entity, llm_error: out
    assert (r.shares["tces_attacked_acc"].k, r.shares["tces_asr"].k, r.shares["tces_asr"].n) == (1, 3, 4)
    assert r.shares["tces_asr_at_1"].k == 2
    assert r.queries_per_success == pytest.approx(5 / 3) and r.queries_per_attack == pytest.approx(13 / 4)
    assert r.gini_simpson == pytest.approx(1 - (2 / 3) ** 2 - (1 / 3) ** 2)
    assert list(r.reused.items()) == [("b", 2), ("a", 1)]
    assert r.shares["tces_asr"].shown() == "0.750 [0.301, 0.954] (3/4)"  # statsmodels' Wilson, to 3 places


@pytest.fixture(scope="module")
def tces_run():
    from medfuzz.validation.surfaces_tces import tces_surfaces

    return tces_surfaces("ci", 0)


@pytest.mark.parametrize("defect", ["queries_per_attack", "asr_over_evaluated", "gini_normalised", "card_end_off",
                                    "terminal_count_off", "reused_not_top", "page_end_off", "page_row_missing",
                                    "page_extra_row", "page_missing"])
def test_a_tces_defect_where_users_read_fails_a_check(tces_run, defect: str) -> None:
    import copy

    run = copy.deepcopy(tces_run)
    assert all(c.passed for c in run.checks())
    numbers = next(r for m in run.summary["models"].values() for r in m["results"] if r["method"] == "tces")["numbers"]
    if defect == "queries_per_attack":
        run.metrics["tces_queries_to_success"] = run.recount.queries_per_attack
    elif defect == "asr_over_evaluated":
        asr = numbers["tces_asr"]
        asr["n"] = numbers["tces_clean_acc"]["n"]
        asr["value"] = asr["k"] / asr["n"]
    elif defect == "gini_normalised":
        s = run.recount.successes
        numbers["tces_gini_simpson"]["value"] = run.recount.gini_simpson * s / (s - 1)
    elif defect == "card_end_off":
        run.card["tces_asr_at_1"]["args"]["ci95"][0] -= 0.001
    elif defect == "terminal_count_off":
        line = run.terminal["tces_attacked_acc"]
        run.terminal["tces_attacked_acc"] = line.replace(f"/{run.recount.shares['tces_attacked_acc'].n})", "/999)")
    elif defect == "reused_not_top":
        run.metrics["reused:Nobody"] = 1.0
    else:  # the first screen against the terminal's lines (each checked against the recount on its own)
        first_label = next(iter(run.page))
        if defect == "page_end_off":
            run.page[first_label] = run.page[first_label].replace("]", "1]", 1)
        elif defect == "page_row_missing":
            del run.page[first_label]
        elif defect == "page_extra_row":
            run.page["attack success rate (unchecked)"] = "0.500"
        else:
            run.page.clear()
        assert [c.statistic for c in run.checks() if not c.passed] == [
            "TCES: first screen (index.html): every row = the terminal's line (fields differing)"]
    assert [c.statistic for c in run.checks() if not c.passed]


# --------------------------------------------------------------------------------------------------- MedFuzz


def test_every_medfuzz_surface_is_read(checks) -> None:
    names = " | ".join(c.statistic for c in checks if c.statistic.startswith("MedFuzz:"))
    for where in ("separates raw from adjusted significance (raw p ≤ α < Holm p)", "separates the populations",
                  "Inspect's metrics: every rate, significance count", "summary.json: every share's value",
                  "model card: every value", "terminal: every line", "medfuzz_summary.csv"):
        assert where in names, where
    lm_eval = " | ".join(c.statistic for c in checks if c.statistic.startswith("lm-eval MedFuzz:"))
    for where in ("separates flip_rate's docs", "results file: every rate and its stderr", "summary.json: every rate",
                  "model card: every value, stderr", "terminal: every line"):
        assert where in lm_eval, where


def test_the_medfuzz_recount_by_hand() -> None:
    """Three items, key A: replicates of every outcome, an attack-phase LLM error (clean answer right) and one
    before it (clean answer wrong), mentions none / some / all, three tested p-values of which two are ≤ α."""
    from medfuzz.validation.surfaces_medfuzz import recount

    def rep(outcome: str, clean: str | None, turn: int | None = None, p: float | None = None,
            paper: float | None = None, marks: list[bool] | None = None, untested: str | None = None) -> dict:
        return {"outcome": outcome, "original": {"answer": clean} if clean is not None else None,
                "success_turn": turn, "p_value": p, "p_value_paper": paper, "untested": untested,
                "faithfulness": {"mentioned": marks} if marks is not None else None}

    stored = [("A", [rep("success", "A", 1, 0.1, 0.1, [False, False]), rep("attack_failed", "A"),
                     rep("already_wrong", "B")]),
              ("A", [rep("success", "A", 2, 0.1, None, [True, False]), rep("llm_error", "A"),
                     rep("llm_error", None)]),
              ("A", [rep("success", "A", 2, 0.5, 0.6, [True, True]), rep("success", "A", 1, None, None, [],
                                                                        untested="too few controls")])]
    r = recount(stored, alpha=0.1, controls=9)
    s = {name: (share.k, share.n) for name, share in r.shares.items()}
    assert s["medfuzz_clean_acc"] == (6, 7)  # 7 answered (one LLM error had no clean answer), 6 with A
    # 6 valid replicates, 1 still right; the upper bound adds the attack-phase error (clean answer right)
    assert s["medfuzz_post_attack_acc"] == (1, 6) and s["medfuzz_post_attack_acc_upper"] == (2, 7)
    assert s["medfuzz_asr"] == (4, 5) and s["medfuzz_llm_error_rate"] == (2, 8)
    assert s["medfuzz_unfaithful_rate"] == (1, 3) and s["medfuzz_misses_some_rate"] == (2, 3)  # [] is no verdict
    assert r.turns_to_success == pytest.approx(6 / 4) and r.attack_error_share == pytest.approx(1 / 8)
    # p = (0.1, 0.1, 0.5): two ≤ α unadjusted; Holm 0.3 > α; BH 0.15 > α; the paper's b/M ≤ α once (one unobserved)
    assert (r.tested, r.untested, r.significant, r.holm, r.bh, r.paper) == (3, 1, 2, 0, 0, 1)
    assert r.significance_text == "2 of 3 tested (Holm 0, BH 0)" and r.smallest_p == pytest.approx(0.1)


@pytest.fixture(scope="module")
def medfuzz_run():
    from medfuzz.validation.surfaces_medfuzz import medfuzz_surfaces

    return medfuzz_surfaces("ci", 0)


@pytest.mark.parametrize("defect", ["holm_per_item", "asr_over_valid", "faithfulness_swapped", "text_disagrees",
                                    "card_end_off", "terminal_count_off", "table_misses_some_over_all",
                                    "upper_without_errors", "lm_eval_errors_over_scored", "lm_eval_flip_n"])
def test_a_medfuzz_defect_where_users_read_fails_a_check(medfuzz_run, defect: str) -> None:
    """Each kind of defect the review named, written into one surface of a real run's outputs: a check fails."""
    import copy

    run = copy.deepcopy(medfuzz_run)
    assert all(c.passed for c in run.checks())
    numbers = next(r for m in run.summary["models"].values() for r in m["results"]
                   if r["method"] == "medfuzz")["numbers"]
    r = run.recount
    if defect == "holm_per_item":  # each item's attacks as their own family: one test each is unadjusted
        run.metrics["medfuzz_significant_holm"] = float(r.significant)
    elif defect == "asr_over_valid":
        asr = numbers["medfuzz_asr"]
        asr["n"] = numbers["medfuzz_post_attack_acc"]["n"]
        asr["value"] = asr["k"] / asr["n"]
    elif defect == "faithfulness_swapped":
        run.metrics["medfuzz_unfaithful_rate"] = r.shares["medfuzz_misses_some_rate"].value
    elif defect == "text_disagrees":  # the value right, its words another count
        numbers["medfuzz_significant"]["text"] = r.significance_text.replace(f"Holm {r.holm}", f"Holm {r.holm + 1}")
    elif defect == "card_end_off":
        run.card["medfuzz_asr"]["args"]["ci95"][1] += 0.001
    elif defect == "terminal_count_off":
        run.terminal["medfuzz_significant"] = f"{r.significant + 1} of {r.tested} tested (Holm {r.holm}, BH {r.bh})"
    elif defect == "table_misses_some_over_all":
        shares = r.shares
        run.table["misses_some_rate"] = str(shares["medfuzz_misses_some_rate"].k / shares["medfuzz_llm_error_rate"].n)
    elif defect == "lm_eval_errors_over_scored":
        scored = run.lm_eval.rates["clean_acc"].n
        run.lm_eval.results["llm_error_rate,none"] = sum(run.lm_eval.rates["llm_error_rate"].values) / scored
    elif defect == "lm_eval_flip_n":
        lm_numbers = next(x for m in run.lm_eval.summary["models"].values() for x in m["results"]
                          if x["harness"] == "lm-eval")["numbers"]
        lm_numbers["flip_rate"]["n"] = run.lm_eval.rates["llm_error_rate"].n  # every replicate's doc
    else:
        upper = r.shares["medfuzz_post_attack_acc"]
        numbers["medfuzz_post_attack_acc_upper"]["value"] = upper.value
    assert [c.statistic for c in run.checks() if not c.passed]


# ------------------------------------------------------------------------------------------- lm-eval TCES


def test_every_lm_eval_surface_is_read(checks) -> None:
    names = " | ".join(c.statistic for c in checks if c.statistic.startswith("lm-eval TCES"))
    for where in ("separates flip_rate's docs", "results file: every rate and its stderr", "summary.json: every rate",
                  "model card: every value, stderr", "terminal: every line"):
        assert where in names, where


def test_the_lm_eval_recount_by_hand() -> None:
    """Three docs of two options (clean letters, then attacked letters): right then flipped, right and kept,
    wrong clean. flip_rate is over the two docs right clean; its SE is the sample SD over √2."""
    from medfuzz.validation.surfaces_lm_eval import recount

    def sample(gold: int, clean: tuple[float, float], attacked: tuple[float, float]) -> dict:
        return {"doc": {"n_options": 2, "answer_index": gold},
                "resps": [[[str(v), "False"]] for v in (*clean, *attacked)]}

    rates = recount([sample(0, (-0.1, -2.0), (-3.0, -0.2)), sample(1, (-2.0, -0.1), (-2.0, -0.1)),
                     sample(0, (-2.0, -0.1), (-0.1, -2.0))])
    assert rates["clean_acc"].values == (1.0, 1.0, 0.0) and rates["attacked_acc"].values == (0.0, 1.0, 0.0)
    assert rates["flip_rate"].values == (1.0, 0.0) and rates["flip_rate"].n == 2
    assert rates["flip_rate"].se == pytest.approx(np.std([1.0, 0.0], ddof=1) / np.sqrt(2))
    assert rates["clean_acc"].shown() == "0.667 ± 0.333 (n=3)"
    assert "llm_error_rate" not in rates  # TCES docs record no outcome
    # lm-eval MedFuzz: a replicate outside ``outcomes`` is a counted doc with one request, in the LLM-error rate only
    medfuzz = recount([{**sample(0, (-0.1, -2.0), (-3.0, -0.2)), "doc": {
                           "n_options": 2, "answer_index": 0, "scored": True, "outcome": "success"}},
                       {"doc": {"n_options": 0, "answer_index": 0, "scored": False, "outcome": "llm_error"},
                        "resps": [[["-1.0", "False"]]]},
                       {"doc": {"n_options": 0, "answer_index": 0, "scored": False, "outcome": "already_wrong"},
                        "resps": [[["-1.0", "False"]]]}])
    assert medfuzz["clean_acc"].values == (1.0,) and medfuzz["flip_rate"].values == (1.0,)
    assert medfuzz["llm_error_rate"].values == (0.0, 1.0, 0.0)


@pytest.fixture(scope="module")
def lm_eval_run(tmp_path_factory):
    from medfuzz.validation.surfaces import surface_spec
    from medfuzz.validation.surfaces_lm_eval import lm_eval_surfaces

    return lm_eval_surfaces(surface_spec(0), tmp_path_factory.mktemp("lm-eval"))


@pytest.mark.parametrize("defect", ["flip_over_every_doc", "n_every_doc", "no_stderr", "card_stderr_off",
                                    "terminal_n_off"])
def test_an_lm_eval_defect_where_users_read_fails_a_check(lm_eval_run, defect: str) -> None:
    import copy

    run = copy.deepcopy(lm_eval_run)
    assert all(c.passed for c in run.checks())
    numbers = next(r for m in run.summary["models"].values() for r in m["results"] if r["harness"] == "lm-eval")[
        "numbers"]
    every = run.rates["clean_acc"].n
    if defect == "flip_over_every_doc":
        run.results["flip_rate,none"] = (run.rates["flip_rate"].value * run.rates["flip_rate"].n) / every
    elif defect == "n_every_doc":
        numbers["flip_rate"]["n"] = every
    elif defect == "no_stderr":  # the NaN a nanmean over placeholders had
        run.results["flip_rate_stderr,none"] = float("nan")
    elif defect == "card_stderr_off":
        run.card["attacked_acc"]["args"]["stderr"] += 0.001
    else:
        run.terminal["flip_rate"] = run.terminal["flip_rate"].replace(f"(n={run.rates['flip_rate'].n})", f"(n={every})")
    assert [c.statistic for c in run.checks() if not c.passed]


# ------------------------------------------------------------------------------------------ MedGuard ranking


def test_every_ranking_surface_is_read(checks) -> None:
    names = " | ".join(c.statistic for c in checks if c.statistic.startswith("MedGuard ranking"))
    for where in ("raw p ≤ α < Holm p", "every pair's discordant counts", "both rankings (raw p, Holm)",
                  "medguard_comparison.md"):
        assert where in names, where


def test_the_ranking_recount_by_hand() -> None:
    """The design's answers: McNemar exact p = 2 / 2^b for b:0 tables; Holm over three pairs by hand."""
    from medfuzz.validation.surfaces_ranking import recount

    items = [f"i{k}" for k in range(8)]
    right = {m: {i: k >= misses for k, i in enumerate(items)} for m, misses in (("b", 6), ("c", 7), ("a", 0))}
    r = recount(right)
    assert [(p.first, p.second, p.b, p.c) for p in r.pairs] == [("a", "b", 6, 0), ("a", "c", 7, 0), ("b", "c", 1, 0)]
    assert [p.p for p in r.pairs] == pytest.approx([2 / 2**6, 2 / 2**7, 1.0])
    assert [p.p_holm for p in r.pairs] == pytest.approx([2 * 2 / 2**6, 3 * 2 / 2**7, 1.0])  # step-down, monotone
    assert r.ranking == [("a", ["b", "c"]), ("b", []), ("c", [])]
    assert r.ranking_holm == [("a", ["c"]), ("b", []), ("c", [])]


@pytest.fixture(scope="module")
def ranking_run():
    from medfuzz.validation.surfaces import surface_spec
    from medfuzz.validation.surfaces_ranking import ranking_surfaces

    return ranking_surfaces(surface_spec(0))


@pytest.mark.parametrize("defect", ["first_pair_only", "holm_unadjusted", "p_not_exact", "page_order"])
def test_a_ranking_defect_where_users_read_fails_a_check(ranking_run, defect: str) -> None:
    import copy

    run = copy.deepcopy(ranking_run)
    assert all(c.passed for c in run.checks())
    if defect == "first_pair_only":
        run.comparison["ranking_paper_raw_p"][0]["beats"] = run.comparison["ranking_paper_raw_p"][0]["beats"][:1]
    elif defect == "holm_unadjusted":
        run.comparison["ranking_holm"] = copy.deepcopy(run.comparison["ranking_paper_raw_p"])
    elif defect == "p_not_exact":  # the chi-square approximation where b + c < 25
        run.comparison["mcnemar"][0]["p"] = 0.0412
    else:
        run.page = run.page.replace("1. openai-api/planted/model-a", "1. openai-api/planted/model-b", 1)
    assert [c.statistic for c in run.checks() if not c.passed]
