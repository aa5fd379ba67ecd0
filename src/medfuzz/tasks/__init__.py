"""Harness shells: Inspect ``@task`` definitions and the lm-eval YAML task folder with its hooks."""

from pathlib import Path

LM_EVAL_TASKS_PATH = Path(__file__).parent / "lm_eval" / "yaml"

__all__ = ["LM_EVAL_TASKS_PATH"]
