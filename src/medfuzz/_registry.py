"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks, one per
method and benchmark of ``medfuzz.benchmarks.registry`` (``medqa_clean``, ``tces_mcq``, ...) and MedGuard's."""

from medfuzz.adapters.inspect_template import TemplateAttackerAPI  # noqa: F401 - model provider medfuzz-template
from medfuzz.tasks.inspect.baselines import *  # noqa: F403 - medfuzz/<benchmark>_clean
from medfuzz.tasks.inspect.medfuzz import *  # noqa: F403 - medfuzz/medfuzz and medfuzz/medfuzz_<benchmark>
from medfuzz.tasks.inspect.medguard import *  # noqa: F403 - registers medfuzz/medguard and medfuzz/medguard_<aspect>
from medfuzz.tasks.inspect.tces import *  # noqa: F403 - medfuzz/tces and medfuzz/tces_<benchmark>
