"""Every Inspect task medfuzz registers carries its family's ``TASK_VERSION`` (inspect_evals' habit).

Inspect writes a task's version into each log (``eval.task_version``) and ``inspect eval-set`` reuses only logs of
the same version, so a task whose scoring or data changed must not be resumed from, or pooled with, older logs;
the bump rule is in CHANGELOG.md ("Task versions"). A task added without ``version=`` gets Inspect's default 0 and
fails here.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import medfuzz._registry as registry

# the smallest arguments that build each family's task from the bundled data (no model is called)
SMALL: dict[str, dict[str, Any]] = {
    "baselines": {"data": "demo", "limit": 1},
    "medfuzz": {"data": "demo", "limit": 1},
    "tces": {"data": "demo", "limit": 1},
    "medguard": {"limit_per_aspect": 1},
}


def _registered_tasks() -> dict[str, Any]:
    """The task factories the Inspect entry point registers, by registry name."""
    return {info.name: value for value in vars(registry).values()
            if (info := getattr(value, "__registry_info__", None)) is not None and info.type == "task"}


def test_the_entry_point_registers_every_family() -> None:
    names = set(_registered_tasks())
    assert {"medfuzz/medqa_clean", "medfuzz/medfuzz_medqa", "medfuzz/tces", "medfuzz/medguard",
            "medfuzz/medguard_sycophancy"} <= names
    assert len(names) == 19  # 2 baselines, 3 MedFuzz, 3 TCES, MedGuard and its 10 aspects


@pytest.mark.parametrize("name", sorted(_registered_tasks()))
def test_every_inspect_task_carries_its_family_version(name: str) -> None:
    factory = _registered_tasks()[name]
    module = sys.modules[factory.__module__]
    family = module.__name__.rsplit(".", 1)[-1]
    task = factory(**SMALL[family])
    assert isinstance(module.TASK_VERSION, int) and module.TASK_VERSION >= 1
    assert task.version == module.TASK_VERSION, f"{name}: Task(version=...) missing"
