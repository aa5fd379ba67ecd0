"""Read per-run summaries back from Inspect logs and lm-eval output folders.

Both readers recompute accuracy from the per-sample records, so a summary can show that the harness's
reported number is the mean of what it logged per item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunSummary:
    harness: str
    task: str
    metric: str
    reported: float
    stderr: float | None
    n: int
    recomputed: float
    location: Path
    per_item: dict[str, bool] = field(default_factory=dict)
    unparsed: int | None = None  # replies the scorer could not read an answer from (Inspect only)
    # Inspect baselines: accuracy when replies may name their option the lenient way, and how many needed it
    lenient: float | None = None
    lenient_stderr: float | None = None
    lenient_needed: int | None = None


def read_inspect_log(path: str | Path, scorer: str = "baseline_choice",
                     lenient_scorer: str = "lenient_choice") -> RunSummary:
    """Strict accuracy from ``scorer`` (over answered samples) and, when the log has it, the lenient accuracy
    and the count of replies that needed the lenient reading from ``lenient_scorer``
    (``medfuzz.tasks.inspect.baselines``)."""
    from medfuzz.report.log_reader import read_log

    log = read_log(path)
    if log.status != "success" or log.results is None:
        raise RuntimeError(f"{path}: Inspect run did not succeed (status {log.status}): {log.error}")
    score = next(s for s in log.results.scores if s.name == scorer)
    samples = log.samples or []
    # LLM-error samples (no answer after the retries) are outside the accuracy, as in the metric
    samples = [s for s in samples if not (s.scores[scorer].metadata or {}).get("llm_error")]
    per_item = {str(s.id): s.scores[scorer].value == "C" for s in samples}
    unparsed = sum(not s.scores[scorer].answer for s in samples)
    metrics = score.metrics
    lenient = next((s for s in log.results.scores if s.name == lenient_scorer), None)
    lenient_metrics = lenient.metrics if lenient is not None else {}
    return RunSummary(
        harness="inspect",
        task=log.eval.task,
        metric="accuracy",
        reported=float(metrics["baseline_acc"].value),
        stderr=float(metrics["baseline_stderr"].value) if "baseline_stderr" in metrics else None,
        n=len(per_item),
        recomputed=sum(per_item.values()) / len(per_item) if per_item else float("nan"),
        location=Path(path),
        per_item=per_item,
        unparsed=unparsed,
        lenient=float(lenient_metrics["lenient_accuracy"].value) if "lenient_accuracy" in lenient_metrics else None,
        lenient_stderr=float(lenient_metrics["stderr"].value) if "stderr" in lenient_metrics else None,
        lenient_needed=int(lenient_metrics["lenient_needed"].value) if "lenient_needed" in lenient_metrics else None,
    )


# lm-eval's own order for the model's name in --model_args (``GeneralConfigTracker._get_model_name``, private):
# an adapter (peft, delta) names the model better than the base it is loaded on
MODEL_ARG_NAMES = ("peft", "delta", "pretrained", "model", "path", "engine")


def lm_eval_model_name(data: Mapping[str, Any]) -> str:
    """The model an lm-eval results file (``results_*.json``) belongs to, as the report names it: the name given
    as ``--metadata '{"medfuzz_model": NAME}'`` (``medfuzz run`` passes its Inspect model name), else the served
    model from ``--model_args`` (``model=`` of local-completions, ``pretrained=`` of hf, ...), else the backend
    (``config.model``, e.g. ``medfuzz-local``). Not lm-eval's top-level ``model_name``: with no name in the model
    args it is a random id."""
    from medfuzz.records.keys import MODEL_LABEL

    for config in (data.get("configs") or {}).values():
        label = ((config or {}).get("metadata") or {}).get(MODEL_LABEL) if isinstance(config, dict) else None
        if isinstance(label, str) and label.strip():
            return label.strip()
    config = data.get("config") or {}
    args = model_args(config.get("model_args"))
    served = next((args[name] for name in MODEL_ARG_NAMES if args.get(name)), None)
    return served or str(config.get("model") or "lm-eval")


def model_args(value: Any) -> dict[str, str]:
    """``--model_args`` as lm-eval stored it: a mapping (lm-eval 0.4.9 on), or the ``k=v,k=v`` string."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items() if v is not None}
    if isinstance(value, str):
        pairs = (part.split("=", 1) for part in value.split(",") if "=" in part)
        return {k.strip(): v.strip() for k, v in pairs}
    return {}


def lm_eval_metric_counts(results_file: Path, data: Mapping[str, Any], task: str,
                          filter_name: str = "none") -> dict[str, int | None]:
    """How many docs each metric of ``task`` is an average over. A rate over a subset of the docs (TCES's flip
    rate over the clean-correct docs; MedFuzz's accuracies over the scored pairs, its flip rate over their
    clean-correct ones) is returned only by the docs in its denominator (its ``metric_list`` entry names them:
    ``denominator``; results before task version 5 put NaN on the others and aggregated by ``nanmean``), so the
    task's doc count (``n-samples``) is not its n: counted from the per-doc values in the samples file lm-eval
    wrote beside ``results_file`` (``--log_samples``, the same timestamp), the docs whose value is a number and not
    NaN. Without that file: the doc count for a ``mean`` metric over every doc, None (unknown) for any other."""
    configs = (data.get("configs") or {}).get(task) or {}
    entries = [m for m in configs.get("metric_list") or [] if isinstance(m, Mapping)]
    aggregation = {str(m.get("metric")): m.get("aggregation") for m in entries}
    subset = {str(m.get("metric")) for m in entries if m.get("denominator")}
    effective = ((data.get("n-samples") or {}).get(task) or {}).get("effective")
    stamp = results_file.name.removeprefix("results_").removesuffix(".json")
    samples = results_file.parent / f"samples_{task}_{stamp}.jsonl"
    unknown = {metric: effective if kind == "mean" and metric not in subset and isinstance(effective, int) else None
               for metric, kind in aggregation.items()}
    try:
        lines = samples.read_text(encoding="utf-8").splitlines() if samples.is_file() else None
        records = [json.loads(line) for line in lines if line.strip()] if lines is not None else None
    except (OSError, UnicodeDecodeError, ValueError):  # an unreadable samples file: the counts stay unknown
        records = None
    if records is None:
        return unknown
    counts = dict.fromkeys(aggregation, 0)
    for record in records:
        if not isinstance(record, dict) or record.get("filter", filter_name) != filter_name:  # one per (doc, filter)
            continue
        for metric in counts:
            value = record.get(metric)
            if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
                counts[metric] += 1
    return dict(counts)


def _newest(folder: Path, pattern: str) -> Path:
    found = sorted(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no {pattern} under {folder}")
    return found[-1]


def read_lm_eval_output(folder: str | Path, task: str, metric: str = "acc", filter_name: str = "none") -> RunSummary:
    """Summary of one task of an lm-eval run; ``filter_name`` is the task's filter (``letter`` for the
    generate variants), which lm-eval appends to metric names."""
    folder = Path(folder)
    results_file = _newest(folder, "results_*.json")
    results = json.loads(results_file.read_text())["results"][task]
    # "_2": the timestamp lm-eval appends, so task "medqa" does not pick up "medqa_clean_generate" samples
    samples_file = _newest(results_file.parent, f"samples_{task}_2*.jsonl")
    per_item: dict[str, bool] = {}
    for line in samples_file.read_text().splitlines():
        record = json.loads(line)
        if record.get("filter", filter_name) == filter_name:  # one record per (doc, filter)
            per_item[str(record["doc"]["id"])] = bool(record[metric])
    stderr = results.get(f"{metric}_stderr,{filter_name}")
    return RunSummary(
        harness="lm-eval",
        task=task,
        metric=metric,
        reported=float(results[f"{metric},{filter_name}"]),
        stderr=float(stderr) if isinstance(stderr, int | float) else None,
        n=len(per_item),
        recomputed=sum(per_item.values()) / len(per_item) if per_item else float("nan"),
        location=results_file,
        per_item=per_item,
    )
