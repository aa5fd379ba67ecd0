"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks."""

from medfuzz.adapters.inspect_template import TemplateAttackerAPI  # noqa: F401 - model provider medfuzz-template
from medfuzz.tasks.inspect.baselines import medmcqa_clean, medqa_clean
from medfuzz.tasks.inspect.medfuzz import medfuzz, medfuzz_medmcqa, medfuzz_medqa
from medfuzz.tasks.inspect.medguard import *  # noqa: F403 - registers medfuzz/medguard and medfuzz/medguard_<aspect>
from medfuzz.tasks.inspect.tces import tces, tces_medmcqa, tces_medqa

__all__ = ["medfuzz", "medfuzz_medmcqa", "medfuzz_medqa", "medmcqa_clean", "medqa_clean", "tces", "tces_medmcqa",
           "tces_medqa"]
