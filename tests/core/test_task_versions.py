"""Every Inspect task medfuzz registers carries its family's ``TASK_VERSION`` (inspect_evals' habit).

Inspect writes a task's version into each log (``eval.task_version``) and ``inspect eval-set`` reuses only logs of
the same version, so a task whose scoring or data changed must not be resumed from, or pooled with, older logs;
the bump rule is in CHANGELOG.md ("Task versions"). A task added without ``version=`` gets Inspect's default 0 and
fails here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import medfuzz._registry as registry
from medfuzz.benchmarks.registry import BENCHMARKS

# the smallest arguments that build each family's task from the bundled data (no model is called)
SMALL: dict[str, dict[str, Any]] = {
    "baselines": {"data": "demo", "limit": 1},
    "medfuzz": {"data": "demo", "limit": 1},
    "tces": {"data": "demo", "limit": 1},
    "medguard": {"limit_per_aspect": 1},
}


OWN_DATA = Path(__file__).parents[1] / "fixtures" / "own_mmlu.csv"  # a benchmark without bundled items reads it


def _registered_tasks() -> dict[str, Any]:
    """The task factories the Inspect entry point registers, by registry name: the ``@task`` functions of the task
    modules it imports (``Method.task_module`` of every registered method)."""
    modules = [sys.modules[spec.task_module] for spec in registry.METHODS.values()
               if spec.task_module is not None]  # imported by the entry point itself (KeyError otherwise)
    return {info.name: value for module in modules for value in vars(module).values()
            if (info := getattr(value, "__registry_info__", None)) is not None and info.type == "task"
            and getattr(value, "__module__", None) == module.__name__}


def test_the_entry_point_registers_every_family() -> None:
    names = set(_registered_tasks())
    assert {"medfuzz/medqa_clean", "medfuzz/medfuzz_medqa", "medfuzz/tces", "medfuzz/medguard",
            "medfuzz/medguard_sycophancy"} <= names
    # per benchmark of the registry (medqa, medmcqa, mcq) a baseline, MedFuzz and TCES; the generic medfuzz and
    # tces; MedGuard and its 10 aspects
    assert len(names) == 3 * len(BENCHMARKS) + 2 + 11


@pytest.mark.parametrize("name", sorted(_registered_tasks()))
def test_every_inspect_task_carries_its_family_version(name: str) -> None:
    factory = _registered_tasks()[name]
    module = sys.modules[factory.__module__]
    family = module.__name__.rsplit(".", 1)[-1]
    args = dict(SMALL[family])
    if args.get("data") == "demo" and any(name.split("/")[-1] in (f"{k}_clean", f"tces_{k}", f"medfuzz_{k}")
                                          for k, b in BENCHMARKS.items() if b.demo is None):
        args["data"] = str(OWN_DATA)
    task = factory(**args)
    assert isinstance(module.TASK_VERSION, int) and module.TASK_VERSION >= 1
    assert task.version == module.TASK_VERSION, f"{name}: Task(version=...) missing"
