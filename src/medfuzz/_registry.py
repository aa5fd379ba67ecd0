"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks."""

from medfuzz.tasks.baselines import medmcqa, medqa
from medfuzz.tasks.medfuzz_tasks import medfuzz_medmcqa, medfuzz_medqa
from medfuzz.tasks.medguard import *  # noqa: F403 - registers medfuzz/medguard and medfuzz/medguard_<aspect>
from medfuzz.tasks.tces import tces_medmcqa, tces_medqa

__all__ = ["medfuzz_medmcqa", "medfuzz_medqa", "medmcqa", "medqa", "tces_medmcqa", "tces_medqa"]
