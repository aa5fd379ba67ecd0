"""Compare models on MedGuard from their Inspect logs and/or lm-eval results, and draw per-aspect charts.

``compare(paths)`` reads every MedGuard run under the paths (other runs are ignored), merges runs of the same
model and prompt strategy (e.g. one log per aspect task), and returns the safety indices with bootstrap SEs,
the pairwise McNemar matrix with Holm-adjusted p-values, and the ranking of which model significantly beats
which. ``render(paths, out_dir)`` writes one per-aspect bar chart per model plus the comparison tables.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from medfuzz.scorers.medguard import (
    STATUS_ERROR,
    STATUS_GENERATOR_ERROR,
    ItemResult,
    ModelComparison,
    SafetyReport,
    aspect_units,
    compare_models,
    result_from_doc,
    safety_report,
)
from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS, Principle


@dataclass
class ModelRun:
    label: str
    harness: str
    results: dict[str, ItemResult] = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- Inspect


def _is_medguard_inspect(log: Any) -> bool:
    return bool((log.eval.metadata or {}).get("medguard")) and log.eval.task.split("/")[-1].startswith("medguard")


def results_from_inspect_log(log: Any) -> list[ItemResult]:
    """Per-item results of a MedGuard Inspect log (an ``EvalLog`` or a path); a sample that errored or was
    never scored counts as a wrong, unusable answer with status ``error``."""
    if not hasattr(log, "eval"):
        from inspect_ai.log import read_eval_log

        log = read_eval_log(str(log))
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


def _inspect_run(path: Path) -> tuple[str, list[ItemResult]] | None:
    from inspect_ai.log import read_eval_log

    try:
        header = read_eval_log(str(path), header_only=True)
    except Exception:  # not an Inspect log (any JSON file may be passed): ignore it
        return None
    if not _is_medguard_inspect(header) or header.status != "success":
        return None
    strategy = (header.eval.metadata or {}).get("strategy", "basic")
    return f"{header.eval.model} · {strategy}", results_from_inspect_log(path)


# -------------------------------------------------------------------------------------------- lm-eval


def results_from_lm_eval_samples(path: Path) -> list[ItemResult]:
    """Per-item results from an lm-eval ``samples_medguard_*.jsonl`` (letter log-likelihoods → argmax)."""
    results = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        responses = record.get("filtered_resps") or []
        result = result_from_doc(record["doc"], responses)
        results.append(result if responses else replace(result, status=STATUS_ERROR))
    return results


def _lm_eval_run(path: Path) -> tuple[str, list[ItemResult]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    tasks = [t for t in (data.get("configs") or {}) if t.startswith("medguard_")]
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
    config = data.get("config") or {}
    model = str(config.get("model") or data.get("model_name") or "lm-eval")
    named = re.search(r"(?:^|,)(?:pretrained|model)=([^,]+)", str(config.get("model_args") or ""))
    name = f"{model}:{named.group(1)}" if named else model
    return f"{name} · {strategy} · lm-eval", results


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
    """Every MedGuard run under ``paths``, merged per model label (later files override earlier items)."""
    runs: dict[str, ModelRun] = {}
    for path in _candidates(paths):
        if path.name.startswith("results_"):
            found, harness = _lm_eval_run(path), "lm-eval"
        else:
            found, harness = _inspect_run(path), "inspect"
        if found is None:
            continue
        label, results = found
        run = runs.setdefault(label, ModelRun(label, harness))
        run.results.update({r.item_id: r for r in results})
        run.sources.append(path)
    return list(runs.values())


@dataclass
class ComparisonResult:
    runs: list[ModelRun]
    reports: dict[str, SafetyReport]
    comparison: ModelComparison

    @property
    def models(self) -> list[str]:
        return [label for label, _ in self.comparison.ranking]

    def table(self) -> str:
        """Markdown: safety index ± SE per aspect, principle and overall (rows) for each model (columns)."""
        models = self.models
        lines = ["| | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
        rows: list[tuple[str, Any]] = [(a.value, a) for a in ALL_ASPECTS] + [(p.value, p) for p in Principle]
        for name, key in [*rows, ("overall", None)]:
            cells = []
            for m in models:
                report = self.reports[m]
                index = report.overall if key is None else (report.aspects.get(key) or report.principles.get(key))
                cells.append("–" if index is None else _fmt(index.value, index.se, index.n))
            if any(c != "–" for c in cells):
                lines.append(f"| {'**overall**' if key is None else name} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def mcnemar_table(self) -> str:
        lines = ["| model 1 | model 2 | n | only 1 right | only 2 right | p | p (Holm) | better |",
                 "|---|---|---|---|---|---|---|---|"]
        for pair in self.comparison.pairs:
            t = pair.test
            better = pair.winner if pair.p_holm < self.comparison.alpha and pair.winner else "no significant difference"
            lines.append(f"| {pair.first} | {pair.second} | {t.n} | {t.b} | {t.c} | {t.pvalue:.4g} | "
                         f"{pair.p_holm:.4g} | {better} |")
        return "\n".join(lines)

    def ranking_text(self) -> str:
        lines = []
        for rank, (model, beats) in enumerate(self.comparison.ranking, start=1):
            overall = self.reports[model].overall
            lines.append(f"{rank}. {model}: overall {_fmt(overall.value, overall.se)}; significantly beats "
                         f"{', '.join(beats) if beats else 'none'} (Holm-adjusted McNemar p < {self.comparison.alpha})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": {m: {**self.reports[m].flat(), "sources": [str(p) for p in run.sources], "harness": run.harness,
                           "items": len(run.results)}
                       for m, run in ((r.label, r) for r in self.runs)},
            "mcnemar": [{"first": p.first, "second": p.second, "n": p.test.n, "b": p.test.b, "c": p.test.c,
                         "statistic": p.test.statistic, "p": p.test.pvalue, "exact": p.test.exact,
                         "p_holm": p.p_holm} for p in self.comparison.pairs],
            "ranking": [{"model": m, "beats": b} for m, b in self.comparison.ranking],
            "alpha": self.comparison.alpha,
        }


def _fmt(value: float, se: float, n: int | None = None) -> str:
    text = "nan" if math.isnan(value) else f"{value:.2f}"
    if not math.isnan(se):
        text += f" ± {se:.2f}"
    return text + (f" (n={n})" if n is not None else "")


def compare(paths: list[Path], alpha: float = 0.05, seed: int = 0) -> ComparisonResult:
    runs = load_runs(paths)
    if not runs:
        raise ValueError(f"no MedGuard Inspect log or lm-eval result under {[str(p) for p in paths]}")
    units = {run.label: aspect_units(run.results.values()) for run in runs}
    reports = {label: safety_report(u, seed=seed) for label, u in units.items()}
    order = sorted(reports, key=lambda m: -(reports[m].overall.value if not math.isnan(reports[m].overall.value)
                                            else -1.0))
    return ComparisonResult(runs, reports, compare_models(units, order=order, alpha=alpha))


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:120]


def render(log_paths: list[Path], out_dir: Path) -> list[Path]:
    """Per-aspect bar chart (index ± SE) for each model found, plus ``medguard_comparison.md`` / ``.json``.
    Non-MedGuard logs among ``log_paths`` are ignored. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not load_runs(log_paths):
        return []  # no MedGuard run among these logs (``medfuzz report`` passes every log it finds)
    result = compare(log_paths)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for model in result.models:
        report = result.reports[model]
        aspects = [a for a in ALL_ASPECTS if a in report.aspects]
        values = [report.aspects[a].value for a in aspects]
        errors = [0.0 if math.isnan(report.aspects[a].se) else report.aspects[a].se for a in aspects]
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.bar([a.value.replace("_", " ") for a in aspects], values, yerr=errors, capsize=3, color="#4C72B0")
        ax.axhline(report.overall.value, color="#C44E52", linestyle="--", linewidth=1,
                   label=f"overall {report.overall.value:.2f}")
        ax.set_ylim(0, 1)
        ax.set_ylabel("safety index (± bootstrap SE)")
        ax.set_title(f"MedGuard: {model}", fontsize=10)
        ax.tick_params(axis="x", rotation=35)
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        path = out_dir / f"medguard_{_slug(model)}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    markdown = out_dir / "medguard_comparison.md"
    markdown.write_text("# MedGuard comparison\n\n## Safety indices (± bootstrap SE, 9,999 resamples)\n\n"
                        f"{result.table()}\n\n## Pairwise McNemar (two-sided), Holm-corrected\n\n"
                        f"{result.mcnemar_table()}\n\n## Ranking\n\n{result.ranking_text()}\n", encoding="utf-8")
    data = out_dir / "medguard_comparison.json"
    data.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    return [*written, markdown, data]
