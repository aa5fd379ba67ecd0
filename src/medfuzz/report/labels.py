"""Metric ids to the words the report page shows (ids stay in the CSV/JSON files, in ``summary.json`` and in
Inspect's own views, where tools read them): each method's ids from its spec (``records.methods``), the ids no
method owns and the families of ids here."""

from __future__ import annotations

import re

from medfuzz.records.methods import METHODS

# the ids no one method owns (each method's own ids are in its spec: ``records.methods.Method.labels``)
LABELS: dict[str, str] = {
    # lm-eval metric names (``<task> · <metric>`` on the page)
    "clean_acc": "clean accuracy (letter log-likelihood)",
    "attacked_acc": "accuracy after the attack (letter log-likelihood)",
    "flip_rate": "flip rate: clean-correct items answered wrongly after the attack (ASR@1)",
    "llm_errors": "LLM errors",
    "safety": "safety index (letter log-likelihood)",
    "acc": "accuracy (letter log-likelihood)",
    "acc_norm": "length-normalised accuracy (letter log-likelihood)",
}

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
    for method in METHODS.values():
        words = method.label_table().get(metric)
        if words is not None:
            return words
    for pattern, template in PATTERNS:
        found = pattern.match(metric)
        if found:
            return template.format(*(g.replace("_", " ") for g in found.groups()))
    return metric
