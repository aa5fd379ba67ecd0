"""The harness-free core never imports a harness: only the shells (tasks/, adapters/, report/, cli/ — `medfuzz
run`'s application included, cli/suite/ — and Inspect's entry point, _registry.py) import inspect_ai or lm_eval
(DESIGN.md §2); `medfuzz validate` reaches the harnesses through tasks/."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "medfuzz"
CORE = ("benchmarks", "models", "samplers", "solvers", "scorers")
HARNESS_IMPORT = re.compile(r"^\s*(from|import)\s+(inspect_ai|lm_eval)\b", re.MULTILINE)


def test_the_core_imports_no_harness() -> None:
    offenders = [str(path.relative_to(SRC)) for layer in CORE for path in (SRC / layer).rglob("*.py")
                 if HARNESS_IMPORT.search(path.read_text())]
    assert offenders == []


def test_the_rule_sees_a_harness_import() -> None:  # the pattern itself, on the shells that must match it
    assert HARNESS_IMPORT.search((SRC / "cli" / "suite" / "progress.py").read_text())
    assert HARNESS_IMPORT.search("    from lm_eval.api import model\n")


SHELLS = ("tasks", "adapters", "report", "cli")


def test_only_the_shells_import_a_harness() -> None:
    offenders = sorted(str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
                       if HARNESS_IMPORT.search(path.read_text())
                       and path.relative_to(SRC).parts[0] not in SHELLS and path.name != "_registry.py")
    assert offenders == []
