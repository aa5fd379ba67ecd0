"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks."""

from medfuzz.tasks.baselines import medmcqa, medqa

__all__ = ["medmcqa", "medqa"]
