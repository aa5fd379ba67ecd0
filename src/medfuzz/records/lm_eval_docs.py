"""lm-eval docs that hold several versions of a question, built by the hooks (``medfuzz.tasks.lm_eval``) and
decoded by the hooks and by the report from a logged sample's ``filtered_resps`` (``medfuzz.report``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from medfuzz.scorers.medguard import ItemResult, result_from_doc

# ------------------------------------------------------------------ several versions of a question in one doc
# lm-eval's ``multiple_choice`` gives a doc one context, so a metric that compares versions of a question (clean vs
# attacked, demographic variants) gets them all from one doc: the context is the prompts' shared beginning and each
# choice is the rest of one version's prompt followed by one letter. The text lm-eval scores for a choice is then
# exactly ``prompt + " " + letter``, the same token sequence as a letter-only task whose context is the prompt
# (lm-eval and medfuzz-local split context and continuation inside the joint encoding); the log-likelihood adds
# log p(rest of prompt), which the letters of one version share, so each version's argmax letter is that of the
# letter-only task. lm-eval's hf model also evaluates the letters of one version in one forward pass (it groups
# requests that differ only in their last token), so the doc costs what the separate docs cost. The questions are
# in the continuations: these tasks cannot take --apply_chat_template.


def shared_context(prompts: Sequence[str]) -> tuple[str, list[str]]:
    """(context, rests): the prompts' longest common beginning, cut before its last space or newline (so the
    context ends at a word and each rest starts with the whitespace), and what follows it in each prompt."""
    first = prompts[0]
    length = min(len(p) for p in prompts)
    same = next((i for i in range(length) if any(p[i] != first[i] for p in prompts)), length)
    common = first[:same]
    cut = max(common.rfind(" "), common.rfind("\n"))
    if cut <= 0:
        raise ValueError(f"prompts share no leading word: {[p[:40] for p in prompts]}")
    return prompts[0][:cut], [prompt[cut:] for prompt in prompts]


def versions_doc(prompts: Sequence[str], letters: Sequence[str]) -> dict[str, Any]:
    """``context`` and ``choices`` (version-major: every letter of version 0, then of version 1, ...)."""
    context, rests = shared_context(prompts)
    return {"context": context, "choices": [f"{rest} {letter}" for rest in rests for letter in letters],
            "n_options": len(letters)}


def version_picks(doc: Mapping[str, Any], results: Sequence[Any]) -> list[int]:
    """The argmax letter index of each version (``results``: lm-eval's per-choice (log-likelihood, greedy)
    pairs, or a logged sample's ``filtered_resps``)."""
    n = int(doc["n_options"])
    scores = [float(r[0]) if isinstance(r, list | tuple) else float(r) for r in results]
    return [max(range(n), key=lambda i, v=v: scores[v * n + i]) for v in range(len(scores) // n)]


def versions_correct(doc: Mapping[str, Any], results: Sequence[Any]) -> tuple[bool, bool]:
    """(correct on the clean version, correct on the attacked / fuzzed version) of a two-version doc."""
    clean, attacked = version_picks(doc, results)
    gold = int(doc["answer_index"])
    return clean == gold, attacked == gold


def doc_results(doc: dict[str, Any], results: Sequence[Any]) -> list[ItemResult]:
    """Per-item results of a doc (``results``: lm-eval's per-choice log-likelihoods or a logged sample's
    ``filtered_resps``): one for an item doc, one per variant for an equity unit. Docs written before units
    (one doc per variant) read as items."""
    if not doc.get("variants"):
        return [result_from_doc(doc, results)]
    n = int(doc["n_options"])
    return [result_from_doc(variant, results[k * n:(k + 1) * n])
            for k, variant in enumerate(json.loads(doc["variants"]))]
