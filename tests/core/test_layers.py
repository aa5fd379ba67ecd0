"""The harness-free core never imports a harness: only the shells (tasks/, adapters/, report/, cli/,
tces_studies/, validation's runners and the registry) may import inspect_ai or lm_eval."""

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
    assert HARNESS_IMPORT.search((SRC / "tasks" / "suite_progress.py").read_text())
    assert HARNESS_IMPORT.search("    from lm_eval.api import model\n")
