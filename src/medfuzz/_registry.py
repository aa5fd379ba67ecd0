"""Inspect entry point (``[project.entry-points.inspect_ai] medfuzz``): importing registers the tasks, those of
every registered method's task module (``Method.task_module`` in ``medfuzz.records.methods``: one task per method and
benchmark of ``medfuzz.benchmarks.registry``, ``medqa_clean``, ``tces_mcq``, ..., and MedGuard's per aspect), and
the ``medfuzz-template`` model provider."""

import importlib

from medfuzz.adapters.inspect_template import TemplateAttackerAPI  # noqa: F401 - model provider medfuzz-template
from medfuzz.records.methods import METHODS

for _spec in METHODS.values():
    if _spec.task_module is not None:
        importlib.import_module(_spec.task_module)
