"""MedFuzz case studies and plots from Inspect logs (paper §3.1.4 Step 4 and Fig. 2); the logs are read into rows
by ``medfuzz.report.medfuzz_logs``, this module only renders them.

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

from medfuzz.report.format import ATTACK_STYLE, MISSING, csv_cell, highlight, html_page, p_value, safe_cell
from medfuzz.report.medfuzz_logs import SUMMARY, attacks_of, chance_level, read_medfuzz_log
from medfuzz.report.review import write_sheet
from medfuzz.stats import wilson_interval

COLUMNS = ["rank", "model", "attacker", "task", "item_id", "replicate", "turn", "status", "p_value", "p_holm", "p_bh",
           "p_value_paper",
           "controls", "confidence_drop", "p_hat_drop", "faithfulness", "correct_answer", "target_answer",
           "added_text", "plan", "target_reasoning", "original_question", "fuzzed_question", "log"]


def _rank_key(row: dict[str, Any]) -> tuple:
    p = row["p_value"]
    drop = row["confidence_drop"]
    return (p is None, p if p is not None else 0.0, -(drop if drop is not None else -99))


def _paper_missing(row: dict[str, Any]) -> str:
    """Why a row has no paper's b/M: untested, or a sequential test that stopped before drawing all M."""
    return MISSING if row["p_value"] is None else "not observed (stopped early)"


def _write_html(rows: list[dict[str, Any]], path: Path) -> None:
    cards = []
    for row in rows:
        meta = (f"#{row['rank']} · {html.escape(str(row['model']))} attacked by {html.escape(str(row['attacker']))}"
                f" · item {html.escape(str(row['item_id']))}, replicate {row['replicate']}, turn {row['turn']}")
        stats = (f"p = {p_value(row['p_value'], row['status'])} (Holm {p_value(row['p_holm'])}, "
                 f"BH {p_value(row['p_bh'])}, {row['controls'] or 0} controls; paper's b/M "
                 f"{p_value(row.get('p_value_paper'), _paper_missing(row))}) · confidence drop "
                 f"{p_value(row['confidence_drop'])} · p̂ drop {p_value(row['p_hat_drop'])} · "
                 f"reasoning mentions {row['faithfulness'] or '?'} of the added text · answer "
                 f"{html.escape(str(row['target_answer']))} (correct {html.escape(str(row['correct_answer']))})")
        cards.append(
            f"<section class=attack><h2>{meta}</h2><p class=stats>{stats}</p>"
            f"<p>{highlight(row['original_question'], row['fuzzed_question'])}</p>"
            f"<details><summary>Attacker's plan</summary><p>{html.escape(row['plan'] or '')}</p></details>"
            f"<details><summary>Target's reasoning</summary><p>{html.escape(row['target_reasoning'] or '')}</p>"
            "</details></section>")
    body = "\n".join(cards) or "<p>No successful attacks in these logs.</p>"
    path.write_text(html_page(
        "MedFuzz successful attacks", f"<h1>MedFuzz successful attacks ({len(rows)})</h1>"
        "<p>Ranked by the valid permutation-test p-value ((b+1)/(M+1), or Besag-Clifford's h/l after a sequential "
        "stop; the paper's b/M over all M controls beside it, not observed where the sequential test stopped "
        "early), then by the drop in the target's 1-5 confidence in the correct "
        "answer. Highlighted: text the attacker added.</p>" + body, ATTACK_STYLE), encoding="utf-8")


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
        log = read_medfuzz_log(Path(path))
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
    from medfuzz.report.format import shown_path

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows.sort(key=_rank_key)
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
        row["log"] = shown_path(row["log"], out_dir)  # users share the folder: never their absolute paths
    written = []
    table = out_dir / "medfuzz_attacks.csv"
    with table.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: csv_cell(row.get(k)) for k in COLUMNS} for row in rows)
    written.append(table)
    summary = out_dir / "medfuzz_summary.csv"
    with summary.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY)
        writer.writeheader()
        writer.writerows({k: csv_cell(row.get(k)) for k in SUMMARY} for row in summaries)
    written.append(summary)
    page = out_dir / "medfuzz_attacks.html"
    _write_html(rows, page)
    written.append(page)
    curve_csv = out_dir / "medfuzz_accuracy_vs_attempts.csv"
    with curve_csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "k", "accuracy"])
        for label, curve in curves:
            writer.writerows([safe_cell(label), k, csv_cell(value)] for k, value in enumerate(curve))
    written.append(curve_csv)
    plot = out_dir / "medfuzz_accuracy_vs_attempts.png"
    # one line when the runs share it (the usual case: 4-option MedQA); none when they differ
    _plot(curves, sizes, plot, chances[0] if chances and max(chances) - min(chances) < 1e-9 else None)
    written.append(plot)
    written += write_sheet(rows, out_dir)
    return written
