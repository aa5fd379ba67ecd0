"""MedFuzz Inspect logs as rows: the successful attacks of a run, its accuracy-after-k curve and its pooled
summary row, read from the records ``scorers.medfuzz`` leaves in each sample's score. No HTML, no files: the
renderer (``medfuzz.report.medfuzz``), the review sheet (``medfuzz.report.review``) and the first screen
(``medfuzz.report.overview``) all read a MedFuzz run through here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medfuzz.records.keys import method_of, recorded_config
from medfuzz.report.log_reader import read_log
from medfuzz.scorers.medfuzz import SignificanceFamily, recorded_alpha, significance_family, totals
from medfuzz.stats import attainability, guess_accuracy


def read_medfuzz_log(path: Path) -> Any:
    """The Inspect log at ``path`` if it is a MedFuzz run, else ``None`` (never raises for other files)."""
    try:
        header = read_log(path, header_only=True)
        if method_of(header.eval.metadata, header.eval.task) != "medfuzz" or header.status != "success":
            return None
        return read_log(path)
    except Exception:  # not an Inspect log, or unreadable: not ours to report
        return None


SUMMARY = ["run", "attacker", "attacker_is_target", "items", "clean_accuracy", "post_attack_accuracy",
           "post_attack_accuracy_upper", "llm_error_rate", "attack_error_share", "attack_success_rate", "tested",
           "untested", "alpha", "significant", "significant_holm", "significant_bh", "significant_paper",
           "max_controls", "smallest_p", "holm_attainable", "unfaithful_rate", "misses_some_rate",
           "target_calls_per_item", "attacker_calls_per_item", "target_calls_per_success",
           "attacker_calls_per_success", "target_calls_per_pvalue", "attacker_calls_per_pvalue",
           "controls_per_pvalue"]


def attacker_of(log: Any) -> str:
    """The attacker model of a run (the target itself when it had no ``attacker`` role)."""
    roles = getattr(log.eval, "model_roles", None) or {}
    role = roles.get("attacker")
    if isinstance(role, list):
        role = role[0] if role else None
    return getattr(role, "model", None) or f"{log.eval.model} (self)"


def run_config(log: Any) -> dict[str, Any]:
    """The run's MedFuzz config as recorded in the task metadata (empty for logs without one)."""
    return recorded_config(log.eval.metadata)


def run_alpha(log: Any) -> float:
    """The significance level the run was made with (``-T alpha``), else the default (``recorded_alpha``)."""
    return recorded_alpha(run_config(log))


def run_max_controls(log: Any) -> int:
    """The largest M of the run (``MedFuzzConfig.max_controls``; the paper's M for older logs)."""
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig

    return MedFuzzConfig.recorded_max_controls(run_config(log))


def summary_of(log: Any, values: list[dict[str, Any]], family: SignificanceFamily, self_attack: set[Any],
               turns: int) -> dict[str, Any]:
    """One ``medfuzz_summary.csv`` row: the pooled statistics of a log, its significance counts at the run's own
    alpha (``family``: ``significance_family`` over its tests, as the Inspect metrics count them)."""
    pooled = totals(values, turns)
    reach = attainability(run_max_controls(log), family.tested, family.alpha)
    return {"run": f"{log.eval.model} · {log.eval.task.split('/')[-1]}", "attacker": attacker_of(log),
            "attacker_is_target": next(iter(self_attack)) if len(self_attack) == 1 else "mixed",
            "items": len(values), **{k: pooled[k] for k in SUMMARY if k in pooled},
            "alpha": family.alpha, "tested": family.tested, "significant": family.significant,
            "significant_holm": family.holm, "significant_bh": family.bh, "significant_paper": family.paper,
            "max_controls": reach.controls, "smallest_p": reach.smallest_p,
            "holm_attainable": reach.holm_attainable}


def score_values(log: Any) -> list[dict[str, Any]]:
    """The per-item score values (``scorers.medfuzz`` counts) of a MedFuzz log's scored samples."""
    found = [(sample.scores or {}).get("medfuzz_scorer") for sample in log.samples or []]
    return [score.value for score in found if score is not None and isinstance(score.value, dict)]


def max_turns(values: list[dict[str, Any]]) -> int:
    """K, the attack turns of the run, from the ``correct_after_<k>`` counts its values carry."""
    return max((int(k.rsplit("_", 1)[1]) for v in values for k in v if k.startswith("correct_after_")), default=0)


def chance_level(log: Any) -> float | None:
    """A uniform guess's accuracy on the log's items (``stats.guess_accuracy``; None without items)."""
    return guess_accuracy(len(options) for sample in log.samples or []
                          for score in [(sample.scores or {}).get("medfuzz_scorer")] if score is not None
                          for options in [((score.metadata or {}).get("item") or {}).get("options")] if options)


def attacks_of(log: Any, path: Path) -> tuple[list[dict[str, Any]], tuple[list[float], int], str,
                                              dict[str, Any] | None]:
    """Successful attacks of one log, its accuracy-after-k curve (with the usable replicates behind each point),
    its model name and its summary row."""
    rows, values, self_attack = [], [], set()
    for sample in log.samples or []:
        score = (sample.scores or {}).get("medfuzz_scorer")
        if score is None or not isinstance(score.value, dict):
            continue
        values.append(score.value)
        self_attack.add(((score.metadata or {}).get("config") or {}).get("attacker_is_target"))
        item = (score.metadata or {}).get("item", {})
        answer = item.get("answer")
        for story in (score.metadata or {}).get("replicates", []):
            if story.get("outcome") != "success":
                continue
            turn = next((t for t in reversed(story.get("turns", [])) if t.get("question")), {})
            target = turn.get("target") or {}
            faith = story.get("faithfulness") or {}
            permutation = story.get("permutation") or {}
            rows.append({
                # stable across re-exports (the rank is not): the review sheet is matched back on it
                "attack_id": f"{log.eval.eval_id[:8]}:{item.get('id')}#r{story.get('replicate')}",
                "model": log.eval.model, "attacker": attacker_of(log), "task": log.eval.task,
                "item_id": item.get("id"), "replicate": story.get("replicate"), "turn": story.get("success_turn"),
                "status": (f"untested: {story['untested']}" if story.get("untested") else
                           "tested" if story.get("p_value") is not None else "no significance test"),
                "p_value": story.get("p_value"), "controls": permutation.get("controls"),
                "p_value_paper": story.get("p_value_paper", permutation.get("p_value_paper")),
                "confidence_drop": story.get("confidence_drop"), "p_hat_drop": story.get("p_hat_drop"),
                "faithfulness": faith.get("verdict"), "correct_answer": answer,
                "target_answer": target.get("answer"), "added_text": " | ".join(turn.get("added_spans", [])),
                "plan": turn.get("plan"), "target_reasoning": target.get("cot"),
                "original_question": item.get("question", ""), "fuzzed_question": turn.get("question", ""),
                "log": str(path),
            })
    family = significance_family([(r["p_value"], r["p_value_paper"]) for r in rows], run_alpha(log))
    for row, holm, bh in zip(rows, family.p_holm, family.p_bh, strict=True):
        row["p_holm"], row["p_bh"] = holm, bh
    turns = max_turns(values)
    pooled = totals(values, turns) if values else {}
    curve = [pooled[f"accuracy_after_{k}"] for k in range(turns + 1)] if values else []
    # the number of usable replicates behind every point (for the plot's interval)
    curve_n = int(sum(v.get("valid", 0) for v in values))
    summary = summary_of(log, values, family, self_attack, turns) if values else None
    return rows, (curve, curve_n), log.eval.model, summary
