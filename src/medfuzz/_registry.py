"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks."""

from medfuzz.tasks.baselines import medmcqa, medqa

__all__ = ["medmcqa", "medqa"]
from medfuzz.tasks.medfuzz_tasks import medfuzz_medmcqa, medfuzz_medqa  # noqa: F401
