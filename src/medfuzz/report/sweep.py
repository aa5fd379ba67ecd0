"""Figures and tables of ``medfuzz sweep tces`` runs (logs whose eval metadata names a ``medfuzz_sweep``).

- ``tces_sweep_n_*.png``, the paper's Fig. 2: accuracy after the attack (top) and the Gini-Simpson diversity of
  the successful replacement entities (bottom) against the PDWS exponent n, one colour per entity type, with 95 %
  Wilson bands for accuracy and, beside η, its ceiling 1 − 1/successes; the clean accuracy per entity type, the
  chance level (1 / options) and n = 0 (uniform sampling, = RandS) are marked. One figure per sweep, benchmark,
  model and budget.
- ``tces_sweep_zoo_*.png``, the DiscreteZOO gradient-point study (App. E, Fig. 6): ASR@B against M with Wilson
  intervals, and ASR@b against the budget b for each M (read from each item's queries-to-success in the budget-B
  run; for DiscreteZOO a budget-b run would shrink its last step to fit b, so the curve below B approximates it).
- ``tces_sweep.md`` / ``tces_sweep.csv``: the numbers behind every point, and which duplicate runs were left out.

Several runs at one grid point (a rerun with another seed, a log copied in twice) are never averaged: the latest
(by Inspect's start time, then its finish time, then the log file's write time: Inspect's times have one-second
resolution) is drawn and the others are named in the table's notes.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from medfuzz import stats
from medfuzz.report.format import number, safe_cell
from medfuzz.report.tces import TCESRun, chance_level, read_tces_log
from medfuzz.stats import gini_simpson

ENTITY_COLOURS = {"drugs": "tab:blue", "diseases": "tab:red"}
STUDIES = {"pdws": "n", "zoo": "zoo"}  # sampler -> study


@dataclass
class SweepPoint:
    """One drawn grid point: the run used and the numbers the figures show."""

    study: str  # "n" (PDWS exponent) or "zoo" (DiscreteZOO gradient points)
    sweep: str
    benchmark: str
    model: str
    budget: int
    entity: str
    x: float  # n or M
    run: TCESRun
    left_out: list[TCESRun] = field(default_factory=list)  # older runs of the same point

    def __post_init__(self) -> None:
        s = self.run.summary
        self.items, self.evaluated, self.clean_correct, self.successes = s.items, s.evaluated, s.clean_correct, \
            s.successes
        self.clean_accuracy = stats.proportion(s.clean_correct, s.evaluated)
        self.attacked_accuracy = stats.proportion(s.clean_correct - s.successes, s.evaluated)
        self.asr = stats.proportion(s.successes, s.clean_correct)
        replacements = [r["replacement"] for r in self.run.records if r["outcome"] == "success"]
        self.distinct = len(set(replacements))
        self.gini_simpson = gini_simpson(replacements)
        self.chance = chance_level(self.run.records)

    @property
    def group(self) -> tuple[str, str, str, str, int]:
        return self.study, self.sweep, self.benchmark, self.model, self.budget


def _point_key(run: TCESRun) -> tuple:
    x = run.n if run.sampler == "pdws" else float(run.zoo_m)
    return STUDIES[run.sampler], run.sweep, run.benchmark, run.model, run.budget, run.entity, x


def sweep_points(runs: Sequence[TCESRun]) -> list[SweepPoint]:
    """One point per (study, sweep, benchmark, model, budget, entity, n or M): the latest run; older runs of the
    same point go to ``left_out``. Runs outside a sweep, and RandS runs, are not points."""
    by_key: dict[tuple, list[TCESRun]] = defaultdict(list)
    for run in runs:
        if run.sweep is not None and run.sampler in STUDIES:
            by_key[_point_key(run)].append(run)
    points = []
    for key, same in sorted(by_key.items(), key=lambda pair: (*map(str, pair[0][:-1]), pair[0][-1])):
        # Inspect's times have one-second resolution: two short runs can start in the same second, so the
        # finish time and then the log file's write time decide before the (random) file name does
        ordered = sorted(same, key=lambda r: (r.created, r.completed, r.written_ns, r.path.name))
        study, sweep, benchmark, model, budget, entity, x = key
        points.append(SweepPoint(study=study, sweep=str(sweep), benchmark=benchmark, model=model, budget=budget,
                                 entity=entity, x=x, run=ordered[-1], left_out=ordered[:-1]))
    return points


def _slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def _label(x: float) -> str:
    return f"{x:g}".replace("-", "−")


def _entities(points: Sequence[SweepPoint]) -> list[str]:
    return sorted({p.entity for p in points}, key=lambda e: (e not in ENTITY_COLOURS, e))


def _plot_n(points: Sequence[SweepPoint], out_dir: Path) -> Path:
    import matplotlib.pyplot as plt

    first = points[0]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9.6, 6.6))
    for entity in _entities(points):
        colour = ENTITY_COLOURS.get(entity)
        row = sorted((p for p in points if p.entity == entity), key=lambda p: p.x)
        xs = [p.x for p in row]
        acc = [[100 * v for v in p.attacked_accuracy] for p in row]
        evaluated = sum(p.evaluated for p in row)
        sizes = sorted({p.evaluated for p in row})
        size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        line = top.plot(xs, [a[0] for a in acc], marker="o", color=colour,
                        label=f"{entity}: after attack (N = {size} evaluated)")[0]
        colour = line.get_color()
        top.fill_between(xs, [a[1] for a in acc], [a[2] for a in acc], color=colour, alpha=0.15, linewidth=0)
        clean = 100 * sum(p.clean_correct for p in row) / evaluated if evaluated else float("nan")
        top.axhline(clean, color=colour, linestyle="--", linewidth=1, label=f"{entity}: clean")
        bottom.plot(xs, [p.gini_simpson for p in row], marker="s", color=colour, label=entity)
        # η of k replacements is at most 1 - 1/k (all distinct): with few successes a low η may only mean few
        # successes, so the ceiling is drawn beside it (a bootstrap band does not work here: resampling makes
        # repeats, so every resample's η is below an all-distinct estimate)
        bottom.plot(xs, [1 - 1 / p.successes if p.successes else float("nan") for p in row], color=colour,
                    linestyle=":", marker="_", markersize=10, alpha=0.7, label=f"{entity}: ceiling 1 − 1/successes")
    chance = 100 * sum(p.chance for p in points) / len(points)
    top.axhline(chance, color="grey", linestyle=":", label=f"chance ({chance:.0f} %)")
    grid = sorted({p.x for p in points})
    for axis in (top, bottom):
        axis.axvline(0.0, color="black", linestyle="--", linewidth=0.8)
        axis.grid(alpha=0.3)
        axis.set_xticks(grid, [_label(x) for x in grid])
    top.set_ylim(-2, 102)  # points at 0 % stay visible
    top.set_ylabel("accuracy (%)\n95 % Wilson band")
    top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel("Gini-Simpson η of\nsuccessful replacements")
    bottom.set_xlabel("PDWS exponent n\n(n < 0: replacements near the key; n > 0: far; dashed line: n = 0, uniform = "
                      "RandS)")
    bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.set_title(f"TCES two regimes (paper Fig. 2): sweep {first.sweep}, {first.benchmark}, budget {first.budget}"
                  f"\n{first.model}", fontsize=10)
    fig.tight_layout()
    path = out_dir / f"tces_sweep_n_{_slug(first.sweep, first.benchmark, first.model, f'B{first.budget}')}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_zoo(points: Sequence[SweepPoint], out_dir: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from medfuzz.scorers.tces import asr_by_budget

    first = points[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.6))
    entities = _entities(points)
    grid = sorted({p.x for p in points})
    step = min((b - a for a, b in pairwise(grid)), default=1.0)
    styles = ("-", "--", ":", "-.")
    for index, entity in enumerate(entities):
        colour = ENTITY_COLOURS.get(entity)
        row = sorted((p for p in points if p.entity == entity), key=lambda p: p.x)
        offset = (index - (len(entities) - 1) / 2) * 0.08 * step  # keeps the two entity types' bars apart
        xs = [p.x + offset for p in row]
        ys = [100 * p.asr.value for p in row]
        below = [100 * (p.asr.value - p.asr.low) for p in row]
        above = [100 * (p.asr.high - p.asr.value) for p in row]
        left.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=3, color=colour,
                      label=f"{entity} (N = {row[0].clean_correct} correct clean)")
        for shade, p in enumerate(row):
            curve = asr_by_budget(p.run.records, p.budget)
            tone = plt.get_cmap("viridis")(shade / max(1, len(row) - 1) * 0.85)
            right.plot(range(1, p.budget + 1), [100 * v for v in curve], color=tone, linestyle=styles[index % 4],
                       marker=".", label=f"{entity}, M = {p.x:g}")
    left.set_xticks(grid, [f"{m:g}" for m in grid])
    left.set_xlabel("gradient points per step M")
    left.set_ylabel(f"ASR@{first.budget} (%), 95 % Wilson CI")
    left.set_ylim(-2, 102)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    left.set_title(f"DiscreteZOO gradient points: sweep {first.sweep}, {first.benchmark}\n{first.model}", fontsize=10)
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_xlabel(f"query budget b (from the B = {first.budget} runs; below B an approximation)")
    right.set_ylabel("ASR@b (%)")
    right.set_ylim(-2, 102)
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    right.set_title("ASR against the query budget per M (paper Fig. 6)", fontsize=10)
    fig.tight_layout()
    path = out_dir / f"tces_sweep_zoo_{_slug(first.sweep, first.benchmark, first.model, f'B{first.budget}')}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _pct(interval: stats.Proportion) -> str:
    """A proportion with its Wilson interval, in percent to one decimal: ``42.5 [30.1, 55.9]``."""
    value, low, high = interval
    return number(value, interval=(low, high), spec=".1f", scale=100.0)


COLUMNS = ("sweep", "benchmark", "model", "budget", "study", "entity", "x", "items", "evaluated", "clean_correct",
           "successes", "clean_acc", "attacked_acc", "attacked_acc_low", "attacked_acc_high", "asr", "asr_low",
           "asr_high", "gini_simpson", "distinct_replacements", "log",
           "left_out")


def _row(p: SweepPoint) -> dict[str, object]:
    return {"sweep": p.sweep, "benchmark": p.benchmark, "model": p.model, "budget": p.budget, "study": p.study,
            "entity": p.entity, "x": p.x, "items": p.items, "evaluated": p.evaluated,
            "clean_correct": p.clean_correct, "successes": p.successes, "clean_acc": p.clean_accuracy.value,
            "attacked_acc": p.attacked_accuracy.value, "attacked_acc_low": p.attacked_accuracy.low,
            "attacked_acc_high": p.attacked_accuracy.high, "asr": p.asr.value, "asr_low": p.asr.low,
            "asr_high": p.asr.high, "gini_simpson": p.gini_simpson, "distinct_replacements": p.distinct,
            "log": p.run.path.name,
            "left_out": " ".join(r.path.name for r in p.left_out)}


def _tables(points: Sequence[SweepPoint], out_dir: Path) -> list[Path]:
    csv_path = out_dir / "tces_sweep.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for p in points:
            writer.writerow({k: safe_cell(v) for k, v in _row(p).items()})
    lines = ["# TCES sweeps", "",
             "Accuracy after the attack and ASR in percent with 95 % Wilson intervals; Gini-Simpson η of the "
             "successful replacements (at most 1 − 1/successes).", ""]
    groups: dict[tuple, list[SweepPoint]] = defaultdict(list)
    for p in points:
        groups[p.group].append(p)
    notes = []
    for (study, sweep, benchmark, model, budget), members in groups.items():
        what = "PDWS n-sweep" if study == "n" else "DiscreteZOO gradient points M"
        lines += [f"## {what}: sweep {sweep}, {benchmark}, budget {budget}, {model}", "",
                  f"| entity | {'n' if study == 'n' else 'M'} | evaluated | correct clean | successes | "
                  "accuracy after attack | ASR | Gini-Simpson η | distinct replacements | log |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for p in members:
            lines.append(f"| {p.entity} | {p.x:g} | {p.evaluated} | {p.clean_correct} | {p.successes} | "
                         f"{_pct(p.attacked_accuracy)} | {_pct(p.asr)} | {number(p.gini_simpson, spec='.2f')} | "
                         f"{p.distinct} | {p.run.path.name} |")
            if p.left_out:
                notes.append(f"{what} {p.entity} at {p.x:g} (sweep {sweep}): {len(p.left_out) + 1} runs; drawn the "
                             f"latest, {p.run.path.name} (started {p.run.created}); left out "
                             + ", ".join(f"{r.path.name} (started {r.created})" for r in p.left_out) + ".")
        lines.append("")
    if notes:
        lines += ["**Duplicate runs.** " + note for note in notes]
    md_path = out_dir / "tces_sweep.md"
    md_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [md_path, csv_path]


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """Write the sweep figures and tables for the ``medfuzz sweep`` runs among ``log_paths``; returns the files
    written (none when no log belongs to a sweep)."""
    import matplotlib

    matplotlib.use("Agg")
    runs = [run for run in (read_tces_log(Path(p)) for p in log_paths) if run is not None and run.sweep is not None]
    points = sweep_points(runs)
    if not points:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple, list[SweepPoint]] = defaultdict(list)
    for p in points:
        groups[p.group].append(p)
    figures = [(_plot_n if group[0] == "n" else _plot_zoo)(members, out_dir) for group, members in groups.items()]
    return [*figures, *_tables(points, out_dir)]
