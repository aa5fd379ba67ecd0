"""The validation can fail: planted one-line defects in the statistics, each caught by ``medfuzz validate``.

Each mutation replaces exactly one occurrence of a line fragment in a temporary copy of ``src/medfuzz`` and
runs ``python -m medfuzz validate --size ci`` with ``PYTHONPATH`` pointing at the copy: the run must exit
non-zero. The unmutated copy must exit 0 (one baseline run of every check, started first: it also fills the
embedding cache the other runs then share). The mutated copies run with ``--fail-fast`` (cheapest sections
first, stop at the first failing check), so a defect the exact checks catch costs a few seconds instead of a
whole run. Two runs at a time (the CI machines have two cores); marked slow.
``MEDFUZZ_MUTATION_REPORT=path.json`` writes the failed rows per defect (the mutants then run every check,
as the report lists every row a defect fails).

A mutation whose catching check is absent from the source tree is ``xfail`` with the reason in ``needs`` (the
stratified bootstrap needs MedGuard's principle/overall SE checks, ``index_se_checks`` in
``validation/medguard.py``, which the tree has); a mutation whose check is present runs as any other.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "medfuzz"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to src/medfuzz
    old: str
    new: str
    why: str  # the defect, and the check that catches it
    needs: str = ""  # non-empty: the check that catches it is not on this branch (xfail with this reason)


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("gini_simpson_unbiased_normaliser", "stats.py",
             "return float(1.0 - np.sum(shares**2))",
             "return float((1.0 - np.sum(shares**2)) * counts.sum() / max(counts.sum() - 1.0, 1.0))",
             "n/(n-1) normaliser: hand-valued multisets, the TCES run's recomputed 1 - Σq² and the near quantile"),
    # Holm is written out (stats.holm_step_down: statsmodels' steps without its gc.collect()), so its defects
    # are planted there; BH still comes from statsmodels through METHODS
    Mutation("holm_step_scale_off_by_one", "stats.py",
             "scaled = p_values[order] * np.arange(len(p_values), 0, -1)",
             "scaled = p_values[order] * np.arange(len(p_values) + 1, 1, -1)",
             "Holm vector on the planted family (the i-th smallest times m - i + 1)"),
    Mutation("holm_swapped_for_bonferroni", "stats.py",
             "scaled = p_values[order] * np.arange(len(p_values), 0, -1)",
             "scaled = p_values[order] * len(p_values)",
             "Holm vectors, planted family and the run's p-values"),
    Mutation("wilson_lower_end_left_to_rounding", "stats.py",
             "low = np.where(k_arr == 0, 0.0, np.clip(low, 0.0, share))",
             "low = np.where(k_arr == 0, low, np.clip(low, 0.0, share))",
             "Wilson interval's exact ends over every k <= n <= 80 (statsmodels leaves 2.8e-17 at 0/7)"),
    Mutation("wilson_upper_bound_unclamped", "stats.py",
             "high = np.where(k_arr == n_arr, 1.0, np.clip(high, share, 1.0))",
             "high = np.where(k_arr == n_arr, high, np.clip(high, share, 1.0))",
             "Wilson interval holding its point at k = n (statsmodels: 0.9999999999999999 at 7/7)"),
    Mutation("bh_swapped_for_by", "stats.py",
             'METHODS = {"holm": "holm", "bh": "fdr_bh"}', 'METHODS = {"holm": "holm", "bh": "fdr_by"}',
             "BH vectors, planted family and the run's p-values"),
    Mutation("stratified_bootstrap_pools_the_groups", "stats.py",
             "arrays = [np.asarray(g, dtype=float) for g in groups if len(g) > 0]",
             "arrays = [np.concatenate([np.asarray(g, dtype=float) for g in groups if len(g) > 0])]",
             "principle/overall bootstrap SE against sqrt(Σ var_g/n_g)/K (validation/medguard.py::index_se_checks)",
             needs="" if "def index_se_checks" in (SRC / "validation" / "medguard.py").read_text(encoding="utf-8")
             else "needs the MedGuard principle/overall SE check (index_se_checks)"),
    Mutation("sequential_p_h_over_l_plus_1", "stats.py",
             "p = exceedances / len(null)  # Besag & Clifford",
             "p = exceedances / (len(null) + 1)  # Besag & Clifford",
             "the default path's p-value, recomputed from the recorded controls"),
    Mutation("fixed_p_b_over_m_plus_1", "stats.py",
             "p_value=(exceedances + 1) / (len(null) + 1),", "p_value=exceedances / (len(null) + 1),",
             "recomputed p-values (unstopped sequential attacks, fixed run), fixed null calibration"),
    Mutation("sequential_h_off_by_one", "stats.py",
             "if not significant((b + 1) / (controls + 1), alpha))",
             "if not significant(b / (controls + 1), alpha))",
             "h = 2 instead of 1: recomputed sequential p-values"),
    Mutation("paper_column_copies_h_over_l", "stats.py",
             "p_value=p, p_value_paper=None,", "p_value=p, p_value_paper=p,",
             "the paper's b/M of a stopped sequential test: not observed (None), recomputed attack by attack"),
    Mutation("p_hat_ignores_letter_logprobs", "solvers/medfuzz/controls.py",
             "    if letter_logprobs:", "    if letter_logprobs and False:",
             "default dialog p-hat with log-probabilities present: every draw read as a sampled letter"),
    Mutation("p_hat_logprob_of_the_wrong_letter", "solvers/medfuzz/controls.py",
             "return normalise(letter_logprobs, shown.letters)[shown.answer], \"logprobs\"",
             "return normalise(letter_logprobs, shown.letters)[item.answer], \"logprobs\"",
             "p-hat from the key's letter before the option shuffle (log-probabilities present)"),
    Mutation("p_hat_sampled_wrong_letter", "solvers/medfuzz/controls.py",
             "return float(answer == shown.answer), \"sampling\"", "return float(answer == item.answer), \"sampling\"",
             "p-hat from the key's letter before the option shuffle (log-probabilities absent)"),
    Mutation("significant_strict", "stats.py",
             "return p is not None and not math.isnan(p) and p <= alpha * (1.0 + _ALPHA_REL_TOLERANCE)",
             "return p is not None and not math.isnan(p) and p < alpha",
             "p < alpha: the boundary decisions (p = alpha, 3 x 1/60)"),
    Mutation("decisions_by_the_papers_b_over_m", "scorers/medfuzz.py",
             'value["significant"] = sum(significant(p, alpha) for p in tested)',
             'value["significant"] = sum(significant(e.p_value_paper, alpha) for e in evidence if e.p_value)',
             "significant count of the fixed null run against the recomputed valid p-values"),
    Mutation("tces_one_query_past_the_budget", "solvers/tces/attack.py",
             "return self.config.budget - len(self.attempts)", "return self.config.budget + 1 - len(self.attempts)",
             "query counts of every TCES attack against B"),
    Mutation("tces_asr_at_b_strict", "scorers/tces.py",
             "np.sum(hits <= b)", "np.sum(hits < b)", "ASR@1 and ASR@8 against the planted values"),
    Mutation("tces_asr_over_every_evaluated_item", "scorers/tces.py",
             "asr=_ratio(len(successes), attacked),", "asr=_ratio(len(successes), evaluated),",
             "TCES ASR with half the items planted wrong clean: successes / attacked, exact"),
    Mutation("tces_asr_at_b_over_every_record", "scorers/tces.py",
             "for b in range(1, budget + 1)], len(attacked)",
             "for b in range(1, budget + 1)], len(records)",
             "TCES ASR@1 and ASR@B with half the items planted wrong clean: over the attacked items, exact"),
    Mutation("tces_accuracy_after_attack_over_attacked", "scorers/tces.py",
             'attacked_accuracy=_ratio(outcomes["attack_failed"], evaluated),',
             'attacked_accuracy=_ratio(outcomes["attack_failed"], attacked),',
             "TCES accuracy after the attack with half the items planted wrong clean: over every evaluated item"),
    Mutation("tces_zoo_step_drawn_uniformly", "solvers/tces/attack.py",
             "index = nearest_available(zoo_step_target(anchor, gradient, self.config.zoo_step), unit, self.pool,",
             "index = int(rng.choice(self.pool.indices())) if m >= 0 else nearest_available("
             "zoo_step_target(anchor, gradient, self.config.zoo_step), unit, self.pool,",
             "DiscreteZOO's step (Eq. 5, 7) ignored, a uniform draw: the walk replayed from the records"),
    Mutation("tces_zoo_gradient_points_from_the_whole_pool", "solvers/tces/attack.py",
             "self.config.zoo_neighbourhood, unit=True)] = True", "len(vectors), unit=True)] = True",
             "DiscreteZOO's gradient points not drawn in the neighbourhood: the walk replayed from the records"),
    Mutation("asr_denominator_every_usable_replicate", "scorers/medfuzz.py",
             '"attack_success_rate": (total("success"), total("success") + total("attack_failed")),',
             '"attack_success_rate": (total("success"), total("valid")),', "attack success rate"),
    Mutation("post_attack_accuracy_counts_llm_errors_correct", "scorers/medfuzz.py",
             '"post_attack_accuracy": (total(f"correct_after_{turns}"), total("valid")),',
             '"post_attack_accuracy": (total(f"correct_after_{turns}") + total("attack_errors"), '
             'total("valid") + total("attack_errors")),',
             "post-attack accuracy with LLM errors dropped (frequent in the delta run)"),
    Mutation("accuracy_after_k_off_by_one", "solvers/medfuzz/results.py",
             "return k < self.success_turn", "return k <= self.success_turn", "accuracy after k"),
    Mutation("flip_rate_over_every_pair", "stats.py",
             "return sum(not a for a in attacked) / len(attacked) if attacked else math.nan",
             "return sum(not a for a in attacked) / len(pairs) if attacked else math.nan",
             "flip rate of the clean/attacked pairs against the ASR"),
    Mutation("wilson_swapped_for_normal", "stats.py",
             'method="wilson")', 'method="normal")', "Wilson interval against its closed form"),
    Mutation("mcnemar_one_sided", "stats.py",
             "pvalue = min(1.0, 2.0 * float(stats.binom.cdf(low, m, 0.5)))",
             "pvalue = min(1.0, float(stats.binom.cdf(low, m, 0.5)))",
             "McNemar exact p-value (planted table, and statsmodels on the MedGuard comparison)"),
    Mutation("mcnemar_no_continuity_correction", "stats.py",
             "statistic = (abs(b - c) - 1.0) ** 2 / m", "statistic = (b - c) ** 2 / m",
             "McNemar chi-square p-value against erfc"),
    Mutation("mcnemar_switch_at_or_below_25", "stats.py",
             "use_exact = m < 25 if exact is None else exact", "use_exact = m <= 25 if exact is None else exact",
             "McNemar's automatic choice at b+c = 25 (exact instead of chi-square) against statsmodels"),
    Mutation("mcnemar_switch_below_24", "stats.py",
             "use_exact = m < 25 if exact is None else exact", "use_exact = m < 24 if exact is None else exact",
             "McNemar's automatic choice at b+c = 24 (chi-square instead of exact) against statsmodels"),
    Mutation("guess_accuracy_one_over_mean_k", "stats.py",
             "return sum(shares) / len(shares) if shares else None",
             "return len(shares) / sum(1 / s for s in shares) if shares else None",
             "chance level with mixed option counts (mean of 1/k)"),
    # the layer users read (validate's surface section: the real harness tasks and the real report)
    Mutation("report_share_interval_over_n_plus_1", "report/overview.py",
             "    found = stats.proportion(k, n)", "    found = stats.proportion(k, n + 1)",
             "the page's, summary.json's and the card's Wilson interval over one more item than k/n says "
             "(surfaces: summary.json Wilson ends against statsmodels)"),
    Mutation("report_lm_eval_n_counts_one_more_doc", "report/runs.py",
             "    counts = dict.fromkeys(aggregation, 0)", "    counts = dict.fromkeys(aggregation, 1)",
             "an lm-eval rate's n over the wrong docs on the page, summary.json and the terminal (surfaces: "
             "summary.json n = docs)"),
    Mutation("medguard_principle_chance_over_every_aspect", "report/overview.py",
             "                                  chance=_mean_of(chances, members)))",
             "                                  chance=_mean_of(chances, report.aspects)))",
             "each principle's chance level on the first screen and in summary.json is the overall one (surfaces: "
             "MedGuard summary.json chance levels = recount)"),
    Mutation("medguard_index_pooled_over_units", "scorers/medguard.py",
             "    value = sum(sum(g) / len(g) for g in groups) / len(groups)",
             "    value = sum(map(sum, groups)) / sum(map(len, groups))",
             "a principle's and the overall index pooled over units instead of the mean of the aspects' means "
             "(surfaces: MedGuard Inspect metrics and summary.json = recount; the design's groups differ by > 0.1)"),
    Mutation("medfuzz_first_screen_holm_count_unadjusted", "report/overview.py",
             "tested (Holm {summary['significant_holm']}, ", "tested (Holm {summary['significant']}, ",
             "the first screen's, summary.json's and the terminal's Holm count is the unadjusted one (surfaces: "
             "MedFuzz summary.json text and terminal = recount; the design has raw p ≤ α < adjusted p)"),
    Mutation("medfuzz_holm_metric_unadjusted", "tasks/inspect/medfuzz.py",
             '    return _significant("holm", alpha)', '    return _significant("significant", alpha)',
             "Inspect's medfuzz_significant_holm metric counts unadjusted p-values (surfaces: MedFuzz Inspect "
             "metrics = recount, Holm by statsmodels over the family)"),
    Mutation("medfuzz_misses_some_over_every_replicate", "scorers/medfuzz.py",
             '"misses_some_rate": (total("cot_mentions_none") + total("cot_mentions_some"), verdicts)}',
             '"misses_some_rate": (total("cot_mentions_none") + total("cot_mentions_some"), total("replicates"))}',
             "the CoT rate of flips that miss some added text over every replicate (surfaces: MedFuzz Inspect "
             "metrics and medfuzz_summary.csv = recount; the design has partial mentions)"),
    Mutation("lm_eval_tces_flip_rate_on_every_doc", "tasks/lm_eval/tces.py",
             '    if clean:\n        values["flip_rate"] = float(not attacked)',
             '    if True:\n        values["flip_rate"] = float(not attacked)',
             "lm-eval's TCES flip_rate over every doc instead of the docs answered correctly clean (surfaces: lm-eval "
             "TCES results file, summary.json, card and terminal = recount; half the docs are planted wrong)"),
    Mutation("medguard_ranking_reads_the_first_pair_only", "scorers/medguard.py",
             "        for pair in pairs:\n            winner = pair.better(alpha, adjusted)",
             "        for pair in pairs[:1]:\n            winner = pair.better(alpha, adjusted)",
             "MedGuard's rankings (raw and Holm) read the first pair's test only (surfaces: MedGuard ranking "
             "medguard_comparison.json and .md = recount over every pair)"),
    Mutation("lm_eval_medfuzz_llm_errors_over_scored_docs", "tasks/lm_eval/medfuzz.py",
             '    if not doc["scored"]:\n        return values', '    if not doc["scored"]:\n        return {}',
             "lm-eval's MedFuzz llm_error_rate and llm_errors over the scored docs only (surfaces: lm-eval MedFuzz "
             "results file = recount over every replicate's doc)"),
    Mutation("merged_shards_keep_one_shards_bound", "report/shards.py",
             '"max_calls": config.max_calls(samples)}', '"max_calls": meta["max_calls"]}',
             "a run merged from shards records the first shard's call bound, not the whole run's (surfaces: TCES "
             "merged shards' max_calls = the whole run's)"),
    Mutation("first_screen_rows_repeat_the_first_number", "report/overview.py",
             "<td class=num>{html.escape(number.shown())}", "<td class=num>{html.escape(result.numbers[0].shown())}",
             "every row of a result on the first screen (index.html) shows its first number; summary.json, the "
             "card and the terminal stay right (surfaces: first screen = the terminal's lines, every part)"),
    Mutation("first_screen_chance_of_the_first_row", "report/overview.py",
             "        chance = number_text(number.chance)", "        chance = number_text(result.numbers[0].chance)",
             "every chance level on the first screen is the first row's (MedGuard: the overall one), summary.json "
             "right (surfaces: MedGuard's first screen chance levels = recount)"),
    Mutation("tces_queries_over_every_attacked_item", "scorers/tces.py",
             '    queries = [r["queries_to_success"] for r in successes]',
             '    queries = [r["queries_to_success"] or r["queries_used"] for r in records'
             ' if r["outcome"] in ("success", "attack_failed")]',
             "the mean queries to success over every attacked item instead of the successes (surfaces: TCES "
             "Inspect metrics = recount; the design's failures make the two populations differ)"),
)


def mutated_tree(root: Path, mutation: Mutation | None) -> Path:
    """A copy of src/medfuzz under ``root`` (as ``root/medfuzz``) with ``mutation`` applied once."""
    target = root / "medfuzz"
    shutil.copytree(SRC, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if mutation is not None:
        path = target / mutation.path
        text = path.read_text(encoding="utf-8")
        assert text.count(mutation.old) == 1, f"{mutation.name}: {mutation.old!r} occurs {text.count(mutation.old)}x"
        path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
        assert path.read_text(encoding="utf-8").count(mutation.new) >= 1
    return root


def validate(root: Path, fail_fast: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "MEDFUZZ_CALL_CACHE": "off", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "medfuzz", "validate", "--size", "ci", "--out", str(root / "out")]
    return subprocess.run(command + (["--fail-fast"] if fail_fast else []),
                          cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def failing_rows(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.rstrip().endswith(("FAIL", "VACUOUS"))]


def test_every_mutation_is_a_single_replacement_in_todays_source():
    """Cheap guard (not slow): a refactor that moves a mutated line must update the list, not silently
    turn a mutation into a no-op."""
    for mutation in MUTATIONS:
        text = (SRC / mutation.path).read_text(encoding="utf-8")
        assert text.count(mutation.old) == 1, (mutation.name, text.count(mutation.old))
        assert mutation.old != mutation.new


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """The baseline (every check) and every mutation, two at a time, the baseline first. The mutants stop at
    their first failing check (``--fail-fast``: a mutant only has to fail once) unless the report wants every
    failing row. The baseline shares the pool rather than running alone: the embedding cache it fills is
    written atomically, and a mutant that reaches TCES before it is written only computes the vectors again."""
    report = os.environ.get("MEDFUZZ_MUTATION_REPORT")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[str, Future[subprocess.CompletedProcess[str]]] = {
            "baseline": pool.submit(validate, mutated_tree(tmp_path_factory.mktemp("baseline"), None))}
        futures.update({m.name: pool.submit(lambda m=m: validate(mutated_tree(tmp_path_factory.mktemp(m.name), m),
                                                                 fail_fast=not report))
                        for m in MUTATIONS})
        results = {name: future.result() for name, future in futures.items()}
    if report:  # for docs/validation.md: which rows each defect failed
        Path(report).write_text(json.dumps({name: {"returncode": run.returncode, "failed": failing_rows(run.stdout)}
                                            for name, run in results.items()}, indent=2), encoding="utf-8")
    yield results


@pytest.mark.slow
def test_the_unmutated_copy_passes(runs):
    baseline = runs["baseline"]
    assert baseline.returncode == 0, baseline.stdout[-5000:] + baseline.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("mutation", [
    pytest.param(m, id=m.name, marks=[pytest.mark.xfail(reason=m.needs, strict=True)] if m.needs else [])
    for m in MUTATIONS])
def test_a_planted_defect_fails_the_validation(runs, mutation: Mutation):
    if runs["baseline"].returncode != 0:
        pytest.fail("the unmutated copy does not pass: no mutation result means anything")
    run = runs[mutation.name]
    assert "Traceback" not in run.stderr, f"{mutation.name} crashed instead of failing a check:\n{run.stderr[-3000:]}"
    assert run.returncode != 0, f"{mutation.name} ({mutation.why}) passed every check"
    assert failing_rows(run.stdout), run.stdout[-3000:]
    if not os.environ.get("MEDFUZZ_MUTATION_REPORT"):  # the mutants ran with --fail-fast: it stopped them
        assert "stopped at the first failing check (--fail-fast)" in run.stdout, run.stdout[-3000:]
