"""Compare models on MedGuard from their Inspect logs and/or lm-eval results, and draw per-aspect charts.

``compare(paths)`` reads every MedGuard run under the paths (other runs are ignored), merges logs of the same
model, prompt strategy and settings (e.g. one log per aspect task; logs of different settings, such as another
seed, stay separate runs), and returns the safety indices with bootstrap SEs and
chance levels, each model's answer-letter distribution per aspect (position bias), the pairwise McNemar matrix
with raw and Holm-adjusted p-values, and two rankings of which model significantly beats which: at raw
p ≤ alpha (the paper's Fig. 2b) and at Holm-adjusted p ≤ alpha. ``render(paths, out_dir)`` writes one chart per
model (aspects grouped by principle, ± SE, chance level per aspect) plus the comparison tables.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from medfuzz.records.keys import CONFIG_KEY, METHOD_KEY, MODEL_LABEL, SHARD_KEY, SUITE_KEY, method_of, recorded_config
from medfuzz.records.lm_eval_docs import doc_results
from medfuzz.records.methods import by_lm_eval_task
from medfuzz.report.format import MISSING, number
from medfuzz.scorers.medguard import (
    STATUS_ERROR,
    STATUS_GENERATOR_ERROR,
    ItemResult,
    ModelComparison,
    Position,
    SafetyReport,
    aspect_units,
    compare_models,
    position_report,
    safety_report,
)
from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS, PRINCIPLE_OF, Aspect, Principle
from medfuzz.stats import DEFAULT_ALPHA


@dataclass
class ModelRun:
    label: str
    harness: str
    results: dict[str, ItemResult] = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)
    model: str = ""  # the target model (Inspect's model name; lm-eval's model and its pretrained= argument)
    strategy: str = "basic"
    settings: dict[str, Any] = field(default_factory=dict)  # where it differs from the model's other runs
    benchmark: str | None = None  # a user's benchmark file (``-T benchmark=...``); None: the bundled build

    def settings_text(self) -> str:
        """`` · seed 1``: the settings in which this run differs from the same model's other runs, or ``""``."""
        return "".join(f" · {name} {_setting(value)}" for name, value in self.settings.items())


# ------------------------------------------------------------------------------------------- Inspect


def results_from_inspect_log(log: Any) -> list[ItemResult]:
    """Per-item results of a MedGuard Inspect log (an ``EvalLog`` or a path); a sample that errored or was
    never scored counts as a wrong, unusable answer with status ``error``."""
    if not hasattr(log, "eval"):
        from medfuzz.report.log_reader import read_log

        log = read_log(log)
    results = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get("medguard")
        if score is not None and score.metadata and (score.metadata.get("status") == STATUS_GENERATOR_ERROR
                                                     or score.metadata.get("llm_error")):
            continue  # never answered (generator failed, or an LLM error after retries): outside every index
        if score is not None and score.metadata and "pool" in score.metadata:
            results.append(ItemResult.from_score(sample.id, score.value, score.metadata))
            continue
        item = (sample.metadata or {}).get("item", {})
        meta = item.get("metadata", {})
        results.append(ItemResult(str(sample.id), meta.get("pool", "unknown"), False, None, STATUS_ERROR,
                                  meta.get("case_id"), meta.get("sex"), meta.get("race")))
    return results


# metadata that says which part of a run a log holds or where it came from, not how its items were built or
# asked: logs that differ only here are parts of one run (one log per aspect task, a suite's label)
NOT_SETTINGS = frozenset({"aspects", METHOD_KEY, CONFIG_KEY, "medguard", SUITE_KEY, SHARD_KEY,
                          "medfuzz_merged_shards", "max_calls", "strategy", "version", "medguard_aspects",
                          MODEL_LABEL})


def _inspect_run(path: Path) -> tuple[str, str, dict[str, Any], list[ItemResult]] | None:
    from medfuzz.report.log_reader import read_log

    try:
        header = read_log(path, header_only=True)
    except Exception:  # not an Inspect log (any JSON file may be passed): ignore it
        return None
    if method_of(header.eval.metadata, header.eval.task) != "medguard" or header.status != "success":
        return None
    metadata = header.eval.metadata or {}
    strategy = metadata.get("strategy", "basic")
    settings = {k: v for k, v in {**metadata, **recorded_config(metadata)}.items() if k not in NOT_SETTINGS}
    for role, config in (getattr(header.eval, "model_roles", None) or {}).items():  # the generator role
        settings[f"role {role}"] = str(getattr(config, "model", config))
    return str(header.eval.model), str(strategy), settings, results_from_inspect_log(path)


# -------------------------------------------------------------------------------------------- lm-eval


def results_from_lm_eval_samples(path: Path) -> list[ItemResult]:
    """Per-item results from an lm-eval ``samples_medguard_*.jsonl`` (letter log-likelihoods → argmax)."""
    results = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        responses = record.get("filtered_resps") or []
        found = doc_results(record["doc"], responses)  # an item, or every variant of an equity unit
        results += found if responses else [replace(r, status=STATUS_ERROR) for r in found]
    return results


def _lm_eval_run(path: Path) -> tuple[str, str, dict[str, Any], list[ItemResult]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    tasks = [t for t in (data.get("configs") or {}) if (m := by_lm_eval_task(t)) is not None and m.key == "medguard"]
    if not tasks:
        return None
    stamp = path.stem.removeprefix("results_")
    results: list[ItemResult] = []
    strategy = "basic"
    for task in tasks:
        for samples in sorted(path.parent.glob(f"samples_{task}_{stamp}.jsonl")):
            results += results_from_lm_eval_samples(samples)
            first = samples.read_text(encoding="utf-8").split("\n", 1)[0]
            strategy = json.loads(first)["doc"].get("strategy", strategy) if first else strategy
    if not results:
        return None
    from medfuzz.report.runs import lm_eval_model_name

    settings: dict[str, Any] = {}  # the run's --metadata as lm-eval kept it in each task's config
    for task in tasks:
        metadata = (data["configs"].get(task) or {}).get("metadata")
        if isinstance(metadata, dict):
            settings.update({k: v for k, v in metadata.items() if k not in NOT_SETTINGS})
    return lm_eval_model_name(data), str(strategy), settings, results


# ------------------------------------------------------------------------------------------- compare


def _candidates(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix == ".eval" or
                            (p.suffix == ".json" and not p.name.startswith("samples_")))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return found


def load_runs(paths: Iterable[Path]) -> list[ModelRun]:
    """Every MedGuard run under ``paths``. Logs of one model, harness, prompt strategy and settings are one run
    (e.g. one log per aspect task; a later file's items override an earlier one's). Logs whose settings differ
    (``-T seed=1`` beside the default seed, another ``limit_per_aspect``, another benchmark file or generator
    model, ...) are never pooled into one number: each is its own run, labelled with the settings in which it
    differs from the model's other runs (``model · basic · seed 1``)."""
    runs: dict[tuple[str, str], ModelRun] = {}
    settings_of: dict[tuple[str, str], dict[str, Any]] = {}
    for path in _candidates(paths):
        if path.name.startswith("results_"):
            found, harness = _lm_eval_run(path), "lm-eval"
        else:
            found, harness = _inspect_run(path), "inspect"
        if found is None:
            continue
        model, strategy, settings, results = found
        label = f"{model} · {strategy}" + (" · lm-eval" if harness == "lm-eval" else "")
        key = (label, json.dumps(settings, sort_keys=True, default=str))
        benchmark = settings.get("benchmark") or settings.get("medguard_benchmark")
        run = runs.setdefault(key, ModelRun(label, harness, model=model, strategy=strategy,
                                            benchmark=str(benchmark) if benchmark else None))
        settings_of[key] = settings
        run.results.update({r.item_id: r for r in results})
        run.sources.append(path)
    _label_by_settings(runs, settings_of)
    return list(runs.values())


def _label_by_settings(runs: dict[tuple[str, str], ModelRun], settings_of: dict[tuple[str, str], dict[str, Any]]) \
        -> None:
    """Runs that share a label but not their settings get the differing settings appended to it."""
    by_label: dict[str, list[tuple[str, str]]] = {}
    for key in runs:
        by_label.setdefault(key[0], []).append(key)
    for label, keys in by_label.items():
        if len(keys) < 2:
            continue
        names = sorted({name for key in keys for name in settings_of[key]})
        differing = [n for n in names if len({json.dumps(settings_of[k].get(n), default=str) for k in keys}) > 1]
        for key in keys:
            runs[key].settings = {n: settings_of[key].get(n, "unset") for n in differing}
            runs[key].label = label + runs[key].settings_text()


def _setting(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "+".join(map(str, value))
    if isinstance(value, str) and ("/" in value or "\\" in value):  # a file: its name (no absolute path on a page)
        return Path(value).name
    return "–" if value is None else str(value)


@dataclass
class ComparisonResult:
    runs: list[ModelRun]
    reports: dict[str, SafetyReport]
    comparison: ModelComparison
    positions: dict[str, dict[Aspect, Position]] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return [label for label, _ in self.comparison.ranking]

    def chance(self, aspect: Aspect) -> float:
        """The aspect's chance level (from the model scored on the most items of it)."""
        found = [self.positions[m][aspect] for m in self.models if aspect in self.positions.get(m, {})]
        return max(found, key=lambda p: p.items).chance if found else math.nan

    def table(self) -> str:
        """Markdown: safety index ± SE per aspect, principle and overall (rows) for each model (columns), with
        each aspect's chance level (what a uniform random guesser scores; a constant-letter model scores
        about the same because the keys are balanced)."""
        models = self.models
        lines = ["| | chance | " + " | ".join(models) + " |", "|---|---|" + "---|" * len(models)]
        rows: list[tuple[str, Any]] = [(a.value, a) for a in ALL_ASPECTS] + [(p.value, p) for p in Principle]
        for name, key in [*rows, ("overall", None)]:
            cells = []
            for m in models:
                report = self.reports[m]
                index = report.overall if key is None else (report.aspects.get(key) or report.principles.get(key))
                cells.append(MISSING if index is None else number(index.value, se=index.se, n=index.n, spec=".2f"))
            if any(c != MISSING for c in cells):
                chance = self.chance(key) if isinstance(key, Aspect) else math.nan
                level = number(chance, spec=".3g")
                lines.append(f"| {'**overall**' if key is None else name} | {level} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def position_table(self) -> str:
        """Markdown: per model and aspect, the share of answers at each displayed letter (``none``: nothing
        usable) beside the share of keys there. Keys are balanced by the builders, so answers piled on one
        letter are position bias, and the aspect's score is then close to its chance level."""
        letters = sorted({k for per in self.positions.values() for p in per.values() for k in [*p.answers, *p.keys]
                          if k != "none"})
        head = " | ".join(letters)
        lines = [f"| model | aspect | n | answers: {head} | none | keys: {head} | top letter |",
                 "|---|---|---|" + "---|" * (2 * len(letters) + 2)]
        for model in self.models:
            for aspect, p in self.positions.get(model, {}).items():
                answers = " | ".join(number(p.answers.get(k, 0.0), spec=".2f") for k in letters)
                keys = " | ".join(number(p.keys.get(k, 0.0) if p.keys else None, spec=".2f") for k in letters)
                top, share = p.top_letter
                none = number(p.answers.get("none", 0.0), spec=".2f")
                lines.append(f"| {model} | {aspect.value} | {p.items} | {answers} | {none} | {keys} | "
                             f"{top or 'none'} {number(share, spec='.0%')} |")
        return "\n".join(lines)

    def mcnemar_table(self) -> str:
        alpha = self.comparison.alpha
        lines = [f"| model 1 | model 2 | n | only 1 right | only 2 right | p | p (Holm) | better, p ≤ {alpha} "
                 f"(paper) | better, Holm p ≤ {alpha} |", "|---|---|---|---|---|---|---|---|---|"]
        for pair in self.comparison.pairs:
            t = pair.test
            raw = pair.better(alpha, adjusted=False) or "no significant difference"
            holm = pair.better(alpha, adjusted=True) or "no significant difference"
            lines.append(f"| {pair.first} | {pair.second} | {t.n} | {t.b} | {t.c} | {number(t.pvalue, spec='.4g')} | "
                         f"{number(pair.p_holm, spec='.4g')} | {raw} | {holm} |")
        return "\n".join(lines)

    def ranking_text(self) -> str:
        """Both rankings, labelled: the paper's (raw McNemar p ≤ alpha, Fig. 2b) and the Holm-adjusted one."""
        alpha = self.comparison.alpha
        lines = []
        for title, ranking in ((f"Paper's criterion (Fig. 2b): raw two-sided McNemar p ≤ {alpha}, no correction "
                                f"for multiple comparisons", self.comparison.ranking),
                               (f"Holm-adjusted McNemar p ≤ {alpha} (family-wise error controlled across all "
                                f"{len(self.comparison.pairs)} pairs)", self.comparison.ranking_holm)):
            lines.append(title)
            for rank, (model, beats) in enumerate(ranking, start=1):
                overall = self.reports[model].overall
                shown = number(overall.value, se=overall.se, spec=".2f")
                lines.append(f"{rank}. {model}: overall {shown}; significantly beats "
                             f"{', '.join(beats) if beats else 'none'}")
            lines.append("")
        return "\n".join(lines).rstrip()

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": {m: {**self.reports[m].flat(), "sources": [str(p) for p in run.sources], "harness": run.harness,
                           "items": len(run.results),
                           "position": {a.value: {"chance": p.chance, "answers": p.answers, "keys": p.keys,
                                                  "items": p.items} for a, p in self.positions.get(m, {}).items()}}
                       for m, run in ((r.label, r) for r in self.runs)},
            "mcnemar": [{"first": p.first, "second": p.second, "n": p.test.n, "b": p.test.b, "c": p.test.c,
                         "statistic": p.test.statistic, "p": p.test.pvalue, "exact": p.test.exact,
                         "p_holm": p.p_holm} for p in self.comparison.pairs],
            "ranking_paper_raw_p": [{"model": m, "beats": b} for m, b in self.comparison.ranking],
            "ranking_holm": [{"model": m, "beats": b} for m, b in self.comparison.ranking_holm],
            "alpha": self.comparison.alpha,
        }


def compare(paths: list[Path], alpha: float = DEFAULT_ALPHA, seed: int = 0) -> ComparisonResult:
    runs = load_runs(paths)
    if not runs:
        raise ValueError(f"no MedGuard Inspect log or lm-eval result under {[str(p) for p in paths]}")
    units = {run.label: aspect_units(run.results.values()) for run in runs}
    reports = {label: safety_report(u, seed=seed) for label, u in units.items()}
    positions = {run.label: position_report(run.results.values()) for run in runs}
    order = sorted(reports, key=lambda m: -(reports[m].overall.value if not math.isnan(reports[m].overall.value)
                                            else -1.0))
    return ComparisonResult(runs, reports, compare_models(units, order=order, alpha=alpha), positions)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:120]


PRINCIPLE_COLOURS = {Principle.FAIRNESS: "#4C72B0", Principle.PRIVACY: "#DD8452", Principle.RESILIENCE: "#55A868",
                     Principle.ROBUSTNESS: "#8172B3", Principle.TRUTHFULNESS: "#C44E52"}


def _chart(model: str, report: SafetyReport, positions: dict[Aspect, Position], path: Path) -> Path:
    """One model's safety index per aspect: bars grouped and coloured by principle, ± bootstrap SE, the
    aspect's chance level as a black tick across its bar, the overall index as a dashed line."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    aspects = [a for a in ALL_ASPECTS if a in report.aspects]
    xs: list[float] = []
    x = 0.0
    groups: dict[Principle, list[float]] = {}
    for i, aspect in enumerate(aspects):
        if i and PRINCIPLE_OF[aspect] is not PRINCIPLE_OF[aspects[i - 1]]:
            x += 0.6  # a gap between principles
        xs.append(x)
        groups.setdefault(PRINCIPLE_OF[aspect], []).append(x)
        x += 1.0
    values = [report.aspects[a].value for a in aspects]
    errors = [0.0 if math.isnan(report.aspects[a].se) else report.aspects[a].se for a in aspects]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 * len(aspects) + 2.5), 5.0))
    ax.bar(xs, values, yerr=errors, capsize=4, width=0.8, error_kw={"elinewidth": 1.2},
           color=[PRINCIPLE_COLOURS[PRINCIPLE_OF[a]] for a in aspects])
    for xi, aspect, value in zip(xs, aspects, values, strict=True):
        chance = positions[aspect].chance if aspect in positions else math.nan
        if not math.isnan(chance):
            ax.hlines(chance, xi - 0.42, xi + 0.42, colors="black", linestyles="--", linewidth=1.6)
        if not math.isnan(value):  # above the error bar and the chance tick, so neither hides it
            top = max(value + errors[aspects.index(aspect)], 0.0 if math.isnan(chance) else chance)
            ax.text(xi, min(top + 0.02, 1.02), f"{value:.2f}", ha="center", va="bottom", fontsize=9)
    for principle, at in groups.items():
        ax.text(sum(at) / len(at), 1.09, principle.value.capitalize(), ha="center", va="bottom", fontsize=10,
                fontweight="bold", color=PRINCIPLE_COLOURS[principle])
    overall = report.overall.value
    if not math.isnan(overall):
        ax.axhline(overall, color="grey", linestyle=":", linewidth=1.3)
    ax.set_xticks(xs)
    ax.set_xticklabels([textwrap.fill(a.value.replace("_", " "), 12, break_long_words=False) for a in aspects],
                       fontsize=9.5)
    ax.set_ylim(0, 1.16)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.tick_params(axis="y", labelsize=10)
    ax.set_ylabel("safety index (± bootstrap SE)", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [Line2D([], [], color="black", linestyle="--", linewidth=1.6, label="chance level (uniform guess)"),
               Line2D([], [], color="grey", linestyle=":", linewidth=1.3,
                      label=f"overall {overall:.2f}" if not math.isnan(overall) else "overall")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=9, frameon=False)
    ax.set_title(textwrap.fill(f"MedGuard: {model}", 90), fontsize=11, pad=26)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """Per-model chart (see ``_chart``) plus ``medguard_comparison.md`` / ``.json``. Non-MedGuard logs among
    ``log_paths`` are ignored. Returns the files written."""
    if not load_runs(log_paths):
        return []  # no MedGuard run among these logs (``medfuzz report`` passes every log it finds)
    result = compare(log_paths)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [_chart(model, result.reports[model], result.positions[model], out_dir / f"medguard_{_slug(model)}.png")
               for model in result.models]
    markdown = out_dir / "medguard_comparison.md"
    markdown.write_text("# MedGuard comparison\n\n## Safety indices (± bootstrap SE, 9,999 resamples) and chance "
                        f"levels\n\n{result.table()}\n\n## Answer letters (position bias)\n\n"
                        f"{result.position_table()}\n\n## Pairwise McNemar (two-sided): raw and Holm-adjusted p\n\n"
                        f"{result.mcnemar_table()}\n\n## Rankings\n\n{result.ranking_text()}\n", encoding="utf-8")
    data = out_dir / "medguard_comparison.json"
    from medfuzz.report.format import shown_path

    found = result.to_dict()
    for model in found.get("models", {}).values():  # users share the folder: never their absolute paths
        model["sources"] = [shown_path(p, out_dir) for p in model.get("sources", [])]
    data.write_text(json.dumps(found, indent=1), encoding="utf-8")
    return [*written, markdown, data]
