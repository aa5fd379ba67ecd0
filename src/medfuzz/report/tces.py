"""TCES plots and table from Inspect logs of ``medfuzz/tces_*`` runs.

- ASR as a function of the query budget (query scaling, the paper's Fig. 4), one line per run configuration,
  from each item's queries-to-success;
- the n-sweep (Fig. 2): accuracy after the attack and Gini-Simpson diversity of the successful replacement
  entities against the PDWS exponent n (RandS drawn at n = 0 as the reference);
- ``tces_summary.md``: one row per run.

Logs of other tasks are ignored; runs of a ``medfuzz sweep`` are drawn by ``medfuzz.report.sweep``
instead (they stay in the table). ``render`` is what ``medfuzz report`` calls.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medfuzz import stats
from medfuzz.records.keys import METHOD_KEY, recorded_config
from medfuzz.report.format import number
from medfuzz.scorers.tces import TCESSummary, successes_by_budget, summarise

SCORER = "tces_scorer"


@dataclass
class TCESRun:
    path: Path
    task: str
    benchmark: str
    entity: str
    sampler: str
    n: float
    budget: int
    zoo_m: int
    embedding: str
    model: str
    records: list[dict[str, Any]]
    created: str = ""  # when Inspect started the run (ISO time to the second; orders reruns)
    completed: str = ""  # when it finished (ISO time to the second; breaks ties of ``created``)
    written_ns: int = 0  # the log file's modification time (ns; breaks ties of both within one second)
    sweep: str | None = None  # the ``medfuzz sweep`` this run belongs to (``report.sweep``)
    metadata: dict[str, Any] = field(default_factory=dict)  # the task's metadata (its data: ``overview.recorded_data``)
    items: int = 0  # the run's samples

    @property
    def label(self) -> str:
        if self.sampler == "pdws":
            return f"PDWS n={self.n:g}"
        if self.sampler == "zoo":
            return f"DiscreteZOO M={self.zoo_m}"
        return "RandS"

    @property
    def summary(self) -> TCESSummary:
        return summarise(self.records)


def read_tces_log(path: Path) -> TCESRun | None:
    """The run in an Inspect log, or ``None`` when the log is not a finished TCES run."""
    from medfuzz.report.log_reader import read_log

    try:
        log = read_log(path)
    except Exception:  # not an Inspect log at all (an lm-eval file, a PNG, ...): not ours to read
        return None
    metadata = log.eval.metadata or {}
    if metadata.get(METHOD_KEY) != "tces" or log.status != "success" or not log.samples:
        return None
    records = [s.scores[SCORER].metadata["record"] for s in log.samples
               if s.scores and SCORER in s.scores and s.scores[SCORER].metadata]
    config = recorded_config(metadata)
    return TCESRun(path=path, task=log.eval.task, benchmark=str(metadata.get("benchmark", "?")),
                   entity=str(config.get("entity", "?")), sampler=str(config.get("sampler", "?")),
                   n=float(config.get("n", 0.0)), budget=int(config.get("budget", 1)),
                   zoo_m=int(config.get("zoo_m", 0)), embedding=str(config.get("embedding", "?")),
                   model=str(log.eval.model), records=records, created=str(log.eval.created or ""),
                   completed=str(getattr(log.stats, "completed_at", "") or ""),
                   written_ns=Path(path).stat().st_mtime_ns, sweep=metadata.get("medfuzz_sweep"),
                   metadata=dict(metadata), items=len(log.samples))


def _slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def chance_level(records: Sequence[dict[str, Any]]) -> float:
    """A uniform guess's accuracy on the items the records carry (0.25, four options, when none does)."""
    chance = stats.guess_accuracy(len(r["modified_item"]["options"]) for r in records if r.get("modified_item"))
    return 0.25 if chance is None else chance


def _errorbar(ax, xs: Sequence[float], intervals: Sequence[stats.Proportion], **style) -> None:
    """Points with asymmetric Wilson error bars, in percent."""
    ys = [100 * v for v, _, _ in intervals]
    below = [100 * (v - lo) for v, lo, _ in intervals]
    above = [100 * (hi - v) for v, _, hi in intervals]
    ax.errorbar(xs, ys, yerr=[below, above], capsize=3, **style)


def _plot_budget_curves(runs: Sequence[TCESRun], out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    written = []
    groups: dict[tuple[str, str, str], list[TCESRun]] = defaultdict(list)
    for run in runs:
        groups[(run.benchmark, run.entity, run.model)].append(run)
    for (benchmark, entity, model), members in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        ordered = sorted(members, key=lambda r: (r.sampler, r.n, r.budget, str(r.path)))
        for position, run in enumerate(ordered):
            hits, attacked = successes_by_budget(run.records, run.budget)
            intervals = [stats.proportion(k, attacked) for k in hits]
            # small horizontal offsets keep overlapping error bars of several runs apart
            offset = (position - (len(ordered) - 1) / 2) * 0.06
            xs = [b + offset for b in range(1, run.budget + 1)]
            _errorbar(ax, xs, intervals, marker="o", label=f"{run.label} (N = {attacked} attacked)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, 102)
        ax.set_xlabel("query budget b (attack queries per item)")
        ax.set_ylabel("ASR@b (%), 95 % Wilson CI\namong items correct when clean")
        ax.set_title(f"TCES query scaling: {benchmark} {entity}\n{model}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
        path = out_dir / f"tces_asr_vs_budget_{_slug(benchmark, entity, model)}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _accuracy_interval(run: TCESRun) -> stats.Proportion:
    s = run.summary
    return stats.proportion(s.clean_correct - s.successes, s.evaluated)


def _plot_n_sweeps(runs: Sequence[TCESRun], out_dir: Path) -> list[Path]:
    """Accuracy after the attack (with Wilson CIs, the clean accuracy and the chance level) and Gini-Simpson
    against n. RandS is its own marker at n = 0; several runs at one n (a PDWS n = 0 beside RandS, a rerun) are
    all drawn, side by side, and the PDWS line goes through their mean."""
    import matplotlib.pyplot as plt

    written = []
    groups: dict[tuple[str, str, str, int], list[TCESRun]] = defaultdict(list)
    for run in runs:
        if run.sampler in ("pdws", "rands"):
            groups[(run.benchmark, run.entity, run.model, run.budget)].append(run)
    for (benchmark, entity, model, budget), members in sorted(groups.items()):
        pdws = sorted((r for r in members if r.sampler == "pdws"), key=lambda r: (r.n, str(r.path)))
        rands = sorted((r for r in members if r.sampler == "rands"), key=lambda r: str(r.path))
        span = max([abs(r.n) for r in pdws] + [1.0])
        width = 0.015 * span  # side-by-side offset for runs at the same n
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 6.4))
        by_n: dict[float, list[TCESRun]] = defaultdict(list)
        for run in pdws:
            by_n[run.n].append(run)
        line_x, line_acc, line_eta = [], [], []
        for n, same in sorted(by_n.items()):
            xs = [n + (i - (len(same) - 1) / 2) * width for i in range(len(same))]
            intervals = [_accuracy_interval(r) for r in same]
            _errorbar(top, xs, intervals, marker="o", linestyle="none", color="tab:blue")
            bottom.plot(xs, [r.summary.gini_simpson for r in same], marker="s", linestyle="none", color="tab:orange")
            line_x.append(n)
            line_acc.append(100 * sum(v for v, _, _ in intervals) / len(intervals))
            line_eta.append(sum(r.summary.gini_simpson for r in same) / len(same))
        if line_x:
            top.plot(line_x, line_acc, color="tab:blue", label="PDWS, after attack")
            bottom.plot(line_x, line_eta, color="tab:orange", label="PDWS")
        for i, run in enumerate(rands):
            x = (i + 1) * width * (1 if not by_n.get(0.0) else 2)
            _errorbar(top, [x], [_accuracy_interval(run)], marker="D", linestyle="none", color="tab:green",
                      label="RandS, after attack" if i == 0 else None)
            bottom.plot([x], [run.summary.gini_simpson], marker="D", linestyle="none", color="tab:green",
                        label="RandS" if i == 0 else None)
        clean = [r.summary for r in members]
        evaluated = sum(s.evaluated for s in clean)
        clean_rate = 100 * sum(s.clean_correct for s in clean) / evaluated if evaluated else float("nan")
        top.axhline(clean_rate, linestyle="--", color="grey", label="clean (all runs)")
        chance = 100 * chance_level([r for run in members for r in run.records])
        top.axhline(chance, linestyle=":", color="red", label=f"chance ({chance:.0f} %)")
        top.set_ylabel("accuracy (%), 95 % Wilson CI")
        top.set_ylim(0, 102)
        top.legend(fontsize=8, loc="best")
        bottom.set_ylabel("Gini-Simpson η of\nsuccessful replacements")
        bottom.set_ylim(0, 1)
        bottom.set_xlabel("PDWS exponent n (n < 0: near the key; RandS drawn at n = 0)")
        bottom.legend(fontsize=8, loc="best")
        for axis in (top, bottom):
            axis.axvline(0.0, linestyle=":", color="black", linewidth=0.8)
            axis.grid(alpha=0.3)
        top.set_title(f"TCES n-sweep: {benchmark} {entity}, budget {budget}\n{model}", fontsize=10)
        path = out_dir / f"tces_n_sweep_{_slug(benchmark, entity, model, f'B{budget}')}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _table(runs: Sequence[TCESRun], out_dir: Path) -> Path:
    lines = ["| log | model | benchmark | entity | sampler | n | budget | items | evaluated | clean acc | "
             "attacked acc | ASR | mean queries | Gini-Simpson | most reused |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        s = run.summary
        reused = ", ".join(f"{name} ({count})" for name, count in s.top_entities) or "–"
        lines.append(f"| {run.path.name} | {run.model} | {run.benchmark} | {run.entity} | {run.label} | {run.n:g} | "
                     f"{run.budget} | {s.items} | {s.evaluated} | {number(s.clean_accuracy)} | "
                     f"{number(s.attacked_accuracy)} | {number(s.asr)} | {number(s.mean_queries_to_success)} | "
                     f"{number(s.gini_simpson)} | {reused} |")
    path = out_dir / "tces_summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """Write the TCES plots and table for the TCES runs among ``log_paths``; returns the files written
    (none when no log is a TCES run)."""
    import matplotlib

    matplotlib.use("Agg")
    runs = [run for run in (read_tces_log(Path(p)) for p in log_paths) if run is not None]
    if not runs:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # runs of a ``medfuzz sweep`` get their own figures (``report.sweep``); they stay in the table
    single = [run for run in runs if run.sweep is None]
    return [*_plot_budget_curves(single, out_dir), *_plot_n_sweeps(single, out_dir), _table(runs, out_dir)]
