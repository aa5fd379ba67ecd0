"""The planted target through the real lm-eval tasks (``medqa_clean``, ``tces_medqa_drugs``; ``simple_evaluate``
with lm-eval's own results and samples writer, as ``--output_path ... --log_samples``): what ``medfuzz validate``'s
surfaces section runs. The harness calls live here, in the shell; ``medfuzz.validation.surfaces`` reads the files
it writes."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import lm_eval.models  # noqa: F401 - lm-eval's own registry first
import yaml
from lm_eval import simple_evaluate
from lm_eval.api.registry import get_model
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

from medfuzz.adapters.lm_eval_registry import register_models
from medfuzz.planted import PlantedSpec
from medfuzz.records.keys import MODEL_LABEL
from medfuzz.tasks import LM_EVAL_TASKS_PATH


@cache
def task_manager() -> TaskManager:
    """lm-eval's task index with medfuzz's tasks, built once per process (building it reads every task file of
    lm-eval: about 10 s on 2 cores)."""
    return TaskManager(include_path=str(LM_EVAL_TASKS_PATH))


def planted_results(spec: PlantedSpec, tasks: list[str], metadata: dict[str, object], folder: Path,
                    model_label: str, data: str = "demo") -> Path:
    """lm-eval's ``tasks`` with ``--metadata`` ``metadata`` against the planted ``LM`` knowing the items of ``data``
    (the bundled demo rows, or a file; the same behaviour as the Inspect runs' server, from a spec file); the
    results file lm-eval's tracker wrote (its samples files beside it)."""
    register_models()
    written = folder / "planted.yaml"
    written.write_text(yaml.safe_dump(spec.to_dict()), encoding="utf-8")
    lm = get_model("medfuzz-planted").create_from_arg_string(f"data={data},spec={written}")
    tracker = EvaluationTracker(output_path=str(folder / "lm-eval"))
    results = simple_evaluate(model=lm, tasks=tasks, log_samples=True, evaluation_tracker=tracker,
                              metadata={**metadata, MODEL_LABEL: model_label}, task_manager=task_manager())
    if results is None:
        raise RuntimeError("validate surfaces: lm-eval returned no results")
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task, task_samples in samples.items():
        tracker.save_results_samples(task_name=task, samples=task_samples)
    return max((folder / "lm-eval").rglob("results_*.json"), key=lambda p: p.stat().st_mtime)


def clean_baseline_results(spec: PlantedSpec, limit: int, folder: Path, model_label: str) -> Path:
    """The clean baseline on the bundled demo rows against the planted ``LM``; its results file."""
    return planted_results(spec, ["medqa_clean"], {"data": "demo", "limit": limit}, folder, model_label)


__all__ = ["clean_baseline_results", "planted_results", "task_manager"]
