"""No code outside the benchmark registry decides by a benchmark's name (issue 35): a comparison with, or a test
for, a registered key written as a string literal is a second list of benchmarks that a new one would miss. The
registry answers instead (``benchmarks.registry``: ``get``, ``named_in``, ``DEFAULT_BENCHMARK``, the recorded
``data_source``); defaults and docstrings may name a benchmark."""

from __future__ import annotations

import ast
from pathlib import Path

from medfuzz.benchmarks.registry import BENCHMARKS

SRC = Path(__file__).parents[2] / "src" / "medfuzz"
ALLOWED = {"benchmarks/registry.py"}  # the one place that declares them


def _dispatches(source: str) -> list[tuple[int, str]]:
    """Comparisons (``==``, ``!=``, ``in``, ``not in``) with a registered key, or with a string containing one as
    a word of a task name (``"medmcqa" in task``), anywhere in ``source``."""
    keys = set(BENCHMARKS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            values = [side] if isinstance(side, ast.Constant) else list(getattr(side, "elts", []))
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in keys:
                    found.append((node.lineno, value.value))
    return found


def test_no_module_decides_by_a_benchmark_s_name() -> None:
    offenders = {str(path.relative_to(SRC)): hits for path in sorted(SRC.rglob("*.py"))
                 if str(path.relative_to(SRC)) not in ALLOWED
                 and (hits := _dispatches(path.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_rule_sees_each_form_of_dispatch() -> None:
    assert _dispatches('x = "a" if "medmcqa" in task else "medqa"') == [(1, "medmcqa")]
    assert _dispatches('if benchmark == "medqa": pass') == [(1, "medqa")]
    assert _dispatches('ok = kind in ("medqa", "medmcqa")') == [(1, "medqa"), (1, "medmcqa")]
    assert _dispatches('benchmark: str = "medqa"') == []  # a default names one, it does not decide by it
