"""TCES plots and table from Inspect logs of ``medfuzz/tces_*`` runs.

- ASR as a function of the query budget (query scaling, the paper's Fig. 4), one line per run configuration,
  from each item's queries-to-success;
- the n-sweep (Fig. 2): accuracy after the attack and Gini-Simpson diversity of the successful replacement
  entities against the PDWS exponent n (RandS drawn at n = 0 as the reference);
- ``tces_summary.md``: one row per run.

Logs of other tasks are ignored. ``render`` is what ``medfuzz report`` calls.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medfuzz.scorers.tces import TCESSummary, asr_by_budget, summarise

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
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path))
    except Exception:  # not an Inspect log at all (an lm-eval file, a PNG, ...): not ours to read
        return None
    metadata = log.eval.metadata or {}
    if metadata.get("medfuzz_method") != "tces" or log.status != "success" or not log.samples:
        return None
    records = [s.scores[SCORER].metadata["record"] for s in log.samples
               if s.scores and SCORER in s.scores and s.scores[SCORER].metadata]
    return TCESRun(path=path, task=log.eval.task, benchmark=str(metadata.get("benchmark", "?")),
                   entity=str(metadata.get("entity", "?")), sampler=str(metadata.get("sampler", "?")),
                   n=float(metadata.get("n", 0.0)), budget=int(metadata.get("budget", 1)),
                   zoo_m=int(metadata.get("zoo_m", 0)), embedding=str(metadata.get("embedding", "?")),
                   model=str(log.eval.model), records=records)


def _slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def _plot_budget_curves(runs: Sequence[TCESRun], out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    written = []
    groups: dict[tuple[str, str, str], list[TCESRun]] = defaultdict(list)
    for run in runs:
        groups[(run.benchmark, run.entity, run.model)].append(run)
    for (benchmark, entity, model), members in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for run in sorted(members, key=lambda r: (r.sampler, r.n, r.budget)):
            curve = asr_by_budget(run.records, run.budget)
            ax.plot(range(1, run.budget + 1), [100 * v for v in curve], marker="o", label=run.label)
        ax.set_ylim(0, 100)
        ax.set_xlabel("query budget")
        ax.set_ylabel("ASR (%) among items correct when clean")
        ax.set_title(f"{benchmark} {entity} — {model}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        path = out_dir / f"tces_asr_vs_budget_{_slug(benchmark, entity, model)}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _plot_n_sweeps(runs: Sequence[TCESRun], out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    written = []
    groups: dict[tuple[str, str, str, int], list[TCESRun]] = defaultdict(list)
    for run in runs:
        if run.sampler in ("pdws", "rands"):
            groups[(run.benchmark, run.entity, run.model, run.budget)].append(run)
    for (benchmark, entity, model, budget), members in sorted(groups.items()):
        points = sorted(((0.0 if r.sampler == "rands" else r.n), r.summary, r.sampler) for r in members)
        xs = [p[0] for p in points]
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(5.5, 5))
        top.plot(xs, [p[1].attacked_accuracy for p in points], marker="o", label="after attack")
        top.plot(xs, [p[1].clean_accuracy for p in points], linestyle="--", color="grey", label="clean")
        top.set_ylabel("accuracy")
        top.set_ylim(0, 1)
        top.legend(fontsize=8)
        bottom.plot(xs, [p[1].gini_simpson for p in points], marker="s", color="tab:orange")
        bottom.set_ylabel("Gini-Simpson η")
        bottom.set_ylim(0, 1)
        bottom.set_xlabel("PDWS exponent n (RandS at n = 0)")
        for axis in (top, bottom):
            axis.axvline(0.0, linestyle=":", color="black", linewidth=0.8)
            axis.grid(alpha=0.3)
        top.set_title(f"{benchmark} {entity}, budget {budget} — {model}", fontsize=9)
        path = out_dir / f"tces_n_sweep_{_slug(benchmark, entity, model, f'B{budget}')}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _fmt(value: float) -> str:
    return "–" if isinstance(value, float) and math.isnan(value) else f"{value:.3f}"


def _table(runs: Sequence[TCESRun], out_dir: Path) -> Path:
    lines = ["| log | model | benchmark | entity | sampler | n | budget | items | evaluated | clean acc | "
             "attacked acc | ASR | mean queries | Gini-Simpson | most reused |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        s = run.summary
        reused = ", ".join(f"{name} ({count})" for name, count in s.top_entities) or "–"
        lines.append(f"| {run.path.name} | {run.model} | {run.benchmark} | {run.entity} | {run.label} | {run.n:g} | "
                     f"{run.budget} | {s.items} | {s.evaluated} | {_fmt(s.clean_accuracy)} | "
                     f"{_fmt(s.attacked_accuracy)} | {_fmt(s.asr)} | {_fmt(s.mean_queries_to_success)} | "
                     f"{_fmt(s.gini_simpson)} | {reused} |")
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
    return [*_plot_budget_curves(runs, out_dir), *_plot_n_sweeps(runs, out_dir), _table(runs, out_dir)]
