"""MedFuzz case studies and plots from Inspect logs (paper §3.1.4 Step 4 and Fig. 2).

``render(log_paths, out_dir)`` picks out the ``medfuzz_*`` Inspect logs (anything else is ignored) and writes

- ``medfuzz_attacks.csv`` / ``medfuzz_attacks.html``: every successful attack, ranked by p-value (untested
  last) then by the drop in the target's confidence in the correct answer, with the text the attacker added
  highlighted, the target's reasoning, the faithfulness verdict and Holm / BH-adjusted p-values (family: the
  tested attacks of the same log); untested attacks (too few usable controls) say why in ``status``;
- ``medfuzz_summary.csv``: per run, clean and post-attack accuracy (the paper's estimate and the upper
  bound that counts attack-phase LLM errors as correct, with the dropped shares), ASR, tested / untested /
  significant attacks, faithfulness rates, calls per item / success / p-value, and whether the target was
  its own attacker;
- ``medfuzz_accuracy_vs_attempts.png`` (+ ``.csv``): accuracy after k = 0..K attempts, one line per model;
- ``medfuzz_review.csv`` / ``medfuzz_review.html``: the expert-review sheet of the same attacks, in the same
  order, with the paper's three reviewer questions to answer (``medfuzz.report.review``; read back with
  ``medfuzz review import``).
"""

from __future__ import annotations

import csv
import html
from pathlib import Path
from typing import Any

from medfuzz.records.keys import method_of
from medfuzz.report._csv import safe_cell
from medfuzz.scorers.medfuzz import totals
from medfuzz.solvers.medfuzz.parsing import word_opcodes
from medfuzz.stats import (
    DEFAULT_ALPHA,
    adjust,
    attainability,
    guess_accuracy,
    significant,
    wilson_interval,
)

COLUMNS = ["rank", "model", "attacker", "task", "item_id", "replicate", "turn", "status", "p_value", "p_holm", "p_bh",
           "p_value_paper",
           "controls", "confidence_drop", "p_hat_drop", "faithfulness", "correct_answer", "target_answer",
           "added_text", "plan", "target_reasoning", "original_question", "fuzzed_question", "log"]


def _read(path: Path):
    """The Inspect log at ``path`` if it is a MedFuzz run, else ``None`` (never raises for other files)."""
    try:
        from medfuzz.report._logs import read_log

        header = read_log(path, header_only=True)
        if method_of(header.eval.metadata, header.eval.task) != "medfuzz" or header.status != "success":
            return None
        return read_log(path)
    except Exception:  # not an Inspect log, or unreadable: not ours to report
        return None


def highlight(original: str, fuzzed: str) -> str:
    """The fuzzed question as HTML with inserted or substituted words in ``<mark>``."""
    _, words, ops = word_opcodes(original, fuzzed)
    parts = []
    for tag, _, _, j1, j2 in ops:
        text = html.escape(" ".join(words[j1:j2]))
        if not text:
            continue
        parts.append(f"<mark>{text}</mark>" if tag in ("insert", "replace") else text)
    return " ".join(parts)


SUMMARY = ["run", "attacker", "attacker_is_target", "items", "clean_accuracy", "post_attack_accuracy",
           "post_attack_accuracy_upper", "llm_error_rate", "attack_error_share", "attack_success_rate", "tested",
           "untested", "alpha", "significant", "significant_holm", "significant_bh", "significant_paper",
           "max_controls", "smallest_p", "holm_attainable", "unfaithful_rate", "misses_some_rate",
           "target_calls_per_item", "attacker_calls_per_item", "target_calls_per_success",
           "attacker_calls_per_success", "target_calls_per_pvalue", "attacker_calls_per_pvalue",
           "controls_per_pvalue"]


def _attacker(log: Any) -> str:
    roles = getattr(log.eval, "model_roles", None) or {}
    role = roles.get("attacker")
    if isinstance(role, list):
        role = role[0] if role else None
    return getattr(role, "model", None) or f"{log.eval.model} (self)"


def run_config(log: Any) -> dict[str, Any]:
    """The run's MedFuzz config as recorded in the task metadata (empty for logs without one)."""
    return dict(((log.eval.metadata or {}).get("medfuzz")) or {})


def run_alpha(log: Any) -> float:
    """The significance level the run was made with (``-T alpha``), else the default."""
    return float(run_config(log).get("alpha", DEFAULT_ALPHA))


def run_max_controls(log: Any) -> int:
    """The largest M of the run (``MedFuzzConfig.max_controls``; the paper's M for older logs)."""
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig

    return MedFuzzConfig.recorded_max_controls(run_config(log))


def summary_of(log: Any, values: list[dict[str, Any]], rows: list[dict[str, Any]], self_attack: set[Any],
               turns: int) -> dict[str, Any]:
    """One ``medfuzz_summary.csv`` row: the pooled statistics of a log, counted at the run's own alpha."""
    pooled = totals(values, turns)
    alpha = run_alpha(log)
    tested = [r for r in rows if r["p_value"] is not None]
    reach = attainability(run_max_controls(log), len(tested), alpha)
    return {"run": f"{log.eval.model} · {log.eval.task.split('/')[-1]}", "attacker": _attacker(log),
            "attacker_is_target": next(iter(self_attack)) if len(self_attack) == 1 else "mixed",
            "items": len(values), **{k: pooled[k] for k in SUMMARY if k in pooled},
            "alpha": alpha,
            "significant": sum(significant(r["p_value"], alpha) for r in tested),
            "significant_holm": sum(significant(r["p_holm"], alpha) for r in rows),
            "significant_bh": sum(significant(r["p_bh"], alpha) for r in rows),
            "significant_paper": sum(significant(r["p_value_paper"], alpha) for r in tested),
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


def attacks_of(log: Any, path: Path) -> tuple[list[dict[str, Any]], list[float], str, dict[str, Any] | None]:
    """Successful attacks of one log, its accuracy-after-k curve, its model name and its summary row."""
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
                "model": log.eval.model, "attacker": _attacker(log), "task": log.eval.task,
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
    for method, column in (("holm", "p_holm"), ("bh", "p_bh")):
        for row, adjusted in zip(rows, adjust([r["p_value"] for r in rows], method), strict=True):
            row[column] = adjusted
    turns = max_turns(values)
    pooled = totals(values, turns) if values else {}
    curve = [pooled[f"accuracy_after_{k}"] for k in range(turns + 1)] if values else []
    # the number of usable replicates behind every point (for the plot's interval)
    curve_n = int(sum(v.get("valid", 0) for v in values))
    summary = summary_of(log, values, rows, self_attack, turns) if values else None
    return rows, (curve, curve_n), log.eval.model, summary


def _rank_key(row: dict[str, Any]) -> tuple:
    p = row["p_value"]
    drop = row["confidence_drop"]
    return (p is None, p if p is not None else 0.0, -(drop if drop is not None else -99))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _paper_missing(row: dict[str, Any]) -> str:
    """Why a row has no paper's b/M: untested, or a sequential test that stopped before drawing all M."""
    return "-" if row["p_value"] is None else "not observed (stopped early)"


def _write_html(rows: list[dict[str, Any]], path: Path) -> None:
    cards = []
    for row in rows:
        meta = (f"#{row['rank']} · {html.escape(str(row['model']))} attacked by {html.escape(str(row['attacker']))}"
                f" · item {html.escape(str(row['item_id']))}, replicate {row['replicate']}, turn {row['turn']}")
        stats = (f"p = {_fmt(row['p_value']) or row['status']} (Holm {_fmt(row['p_holm']) or '-'}, "
                 f"BH {_fmt(row['p_bh']) or '-'}, {row['controls'] or 0} controls; paper's b/M "
                 f"{_fmt(row.get('p_value_paper')) or _paper_missing(row)}) · confidence drop "
                 f"{_fmt(row['confidence_drop']) or '?'} · p̂ drop {_fmt(row['p_hat_drop']) or '?'} · "
                 f"reasoning mentions {row['faithfulness'] or '?'} of the added text · answer "
                 f"{html.escape(str(row['target_answer']))} (correct {html.escape(str(row['correct_answer']))})")
        cards.append(
            f"<section><h2>{meta}</h2><p class=stats>{stats}</p>"
            f"<p>{highlight(row['original_question'], row['fuzzed_question'])}</p>"
            f"<details><summary>Attacker's plan</summary><p>{html.escape(row['plan'] or '')}</p></details>"
            f"<details><summary>Target's reasoning</summary><p>{html.escape(row['target_reasoning'] or '')}</p>"
            "</details></section>")
    body = "\n".join(cards) or "<p>No successful attacks in these logs.</p>"
    path.write_text(
        "<!doctype html><meta charset=utf-8><title>MedFuzz successful attacks</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}mark{background:#ffe066}"
        "section{border-bottom:1px solid #ccc;padding:1em 0}.stats{color:#555;font-size:.9em}</style>"
        f"<h1>MedFuzz successful attacks ({len(rows)})</h1>"
        "<p>Ranked by the valid permutation-test p-value ((b+1)/(M+1), or Besag-Clifford's h/l after a sequential "
        "stop; the paper's b/M over all M controls beside it, not observed where the sequential test stopped "
        "early), then by the drop in the target's 1-5 confidence in the correct "
        "answer. Highlighted: text the attacker added.</p>" + body, encoding="utf-8")


def _plot(curves: list[tuple[str, list[float]]], sizes: list[int], path: Path, chance: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    fig, ax = plt.subplots(figsize=(6, 4))
    for (label, curve), n in zip(curves, sizes, strict=True):
        ks = list(range(len(curve)))
        line = ax.plot(ks, curve, marker="o", label=f"{label} (n={n})")[0]
        if n:
            # 95% Wilson interval over the usable replicates (replicates of one item are not independent,
            # so read it as a lower bound on the uncertainty)
            low, high = wilson_interval([round(a * n) for a in curve], n)
            ax.fill_between(ks, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    if chance is not None:  # a model that guesses uniformly: where an attacked accuracy bottoms out by chance
        ax.axhline(chance, linestyle=":", color="red", label=f"chance level (uniform guess, {chance:.2f})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("MedFuzz attack attempts (k)")
    ax.set_ylabel("accuracy after k attempts (95% Wilson band)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """Write the MedFuzz case-study tables and the accuracy-vs-attempts plot; return the files written."""
    rows: list[dict[str, Any]] = []
    curves: list[tuple[str, list[float]]] = []
    sizes: list[int] = []
    summaries: list[dict[str, Any]] = []
    chances: list[float] = []
    for path in log_paths:
        log = _read(Path(path))
        if log is None:
            continue
        found, (curve, n), model, summary = attacks_of(log, Path(path))
        rows += found
        if curve and (chance := chance_level(log)) is not None:
            chances.append(chance)
        if summary is not None:
            summaries.append(summary)
        if curve:
            curves.append((f"{model} · {log.eval.task.split('/')[-1]}", curve))
            sizes.append(n)
    if not curves:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows.sort(key=_rank_key)
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    written = []
    table = out_dir / "medfuzz_attacks.csv"
    with table.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: safe_cell(_fmt(row.get(k))) for k in COLUMNS} for row in rows)
    written.append(table)
    summary = out_dir / "medfuzz_summary.csv"
    with summary.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY)
        writer.writeheader()
        writer.writerows({k: _fmt(row.get(k)) for k in SUMMARY} for row in summaries)
    written.append(summary)
    page = out_dir / "medfuzz_attacks.html"
    _write_html(rows, page)
    written.append(page)
    curve_csv = out_dir / "medfuzz_accuracy_vs_attempts.csv"
    with curve_csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "k", "accuracy"])
        for label, curve in curves:
            writer.writerows([safe_cell(label), k, _fmt(value)] for k, value in enumerate(curve))
    written.append(curve_csv)
    plot = out_dir / "medfuzz_accuracy_vs_attempts.png"
    # one line when the runs share it (the usual case: 4-option MedQA); none when they differ
    _plot(curves, sizes, plot, chances[0] if chances and max(chances) - min(chances) < 1e-9 else None)
    written.append(plot)
    from medfuzz.report.review import write_sheet

    written += write_sheet(rows, out_dir)
    return written
