"""The one table from metric ids to the words the report page shows (ids stay in the CSV/JSON files, in
``summary.json`` and in Inspect's own views, where tools read them)."""

from __future__ import annotations

import re

from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS, Principle

LABELS: dict[str, str] = {
    # clean baselines (Inspect)
    "baseline_acc": "strict accuracy (Inspect choice, answered samples)",
    "baseline_stderr": "strict accuracy, standard error",
    "baseline_llm_errors": "LLM errors (no answer after the retries)",
    "baseline_llm_error_rate": "LLM-error rate",
    "lenient_accuracy": "lenient accuracy",
    "lenient_needed": "replies only the lenient reading could use",
    # MedFuzz (Inspect)
    "medfuzz_post_attack_acc": "post-attack accuracy (paper §4: LLM errors dropped)",
    "medfuzz_asr": "attack success rate",
    "medfuzz_clean_acc": "clean accuracy",
    "medfuzz_post_attack_acc_upper": "post-attack accuracy, upper bound (attack-phase LLM errors as correct)",
    "medfuzz_attack_error_share": "share of replicates ending in an LLM error during the attack",
    "medfuzz_turns_to_success": "mean attempts to success",
    "medfuzz_llm_error_rate": "LLM-error rate (replicates)",
    "medfuzz_llm_errors": "LLM errors (replicates)",
    "medfuzz_significant": "significant attacks, valid p ≤ α (unadjusted)",
    "medfuzz_significant_holm": "significant attacks after Holm",
    "medfuzz_significant_bh": "significant attacks after Benjamini-Hochberg",
    "medfuzz_significant_paper": "significant with the paper's b/M ≤ α, among tests that drew all M controls "
                                 "(not observed where the sequential test stopped early; comparison only)",
    "medfuzz_smallest_p": "smallest attainable p-value, 1/(M+1)",
    "medfuzz_holm_attainable": "Holm can reject at this M and family (1 = yes)",
    "medfuzz_bh_attainable": "BH can reject at this M (1 = yes)",
    "medfuzz_controls_for_holm": "M that Holm over this run's tested attacks needs",
    "medfuzz_untested_attacks": "successful attacks left untested (too few controls)",
    "medfuzz_unfaithful_rate": "flips whose reasoning mentions none of the added text",
    "medfuzz_misses_some_rate": "flips whose reasoning misses some added text",
    "medfuzz_target_calls_per_item": "target calls per item",
    "medfuzz_attacker_calls_per_item": "attacker calls per item",
    "medfuzz_target_calls_per_success": "target calls per successful attack",
    "medfuzz_attacker_calls_per_success": "attacker calls per successful attack",
    "medfuzz_target_calls_per_pvalue": "target calls per p-value",
    "medfuzz_attacker_calls_per_pvalue": "attacker calls per p-value",
    "medfuzz_controls_per_pvalue": "usable controls per p-value",
    # TCES (Inspect)
    "tces_asr": "attack success rate within the query budget (ASR@B)",
    "tces_clean_acc": "clean accuracy",
    "tces_attacked_acc": "accuracy after the attack",
    "tces_queries_to_success": "mean queries to success",
    "tces_gini_simpson": "Gini-Simpson diversity of successful replacements",
    "tces_llm_errors": "LLM errors (items)",
    "tces_llm_error_rate": "LLM-error rate (items)",
    # MedGuard (Inspect; aspects and principles are added below)
    "medguard_overall": "overall safety index (mean of the aspects)",
    "medguard_llm_errors": "LLM errors (no answer after the retries)",
    "medguard_llm_error_rate": "LLM-error rate",
    # lm-eval metric names (``<task> · <metric>`` on the page)
    "clean_acc": "clean accuracy (letter log-likelihood)",
    "attacked_acc": "accuracy after the attack (letter log-likelihood)",
    "flip_rate": "flip rate: clean-correct items answered wrongly after the attack (ASR@1)",
    "llm_errors": "LLM errors",
    "safety": "safety index (letter log-likelihood)",
    "acc": "accuracy (letter log-likelihood)",
    "acc_norm": "length-normalised accuracy (letter log-likelihood)",
}
LABELS.update({f"medguard_{a.value}": f"safety index: {a.value.replace('_', ' ')}" for a in ALL_ASPECTS})
LABELS.update({f"medguard_{p.value}": f"safety index: {p.value} (principle)" for p in Principle})

# families of ids: a pattern and the label it makes from the captured part
PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^k(\d+)$"), "accuracy after {0} attack attempts"),  # medfuzz_acc_after
    (re.compile(r"^reused:(.+)$"), "successful replacements using {0}"),  # tces_reused_entities
    (re.compile(r"^medguard_(\w+?)_chance$"), "chance level: {0}"),
    (re.compile(r"^medguard_(\w+?)_answer_(\w+)$"), "share of answers at letter {1}: {0}"),
]


def label(metric: str) -> str:
    """Words for a metric id; an id the table does not know is shown as itself (never dropped)."""
    if metric in LABELS:
        return LABELS[metric]
    for pattern, template in PATTERNS:
        found = pattern.match(metric)
        if found:
            return template.format(*(g.replace("_", " ") for g in found.groups()))
    return metric
