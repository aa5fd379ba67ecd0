"""No code outside the records layer decides by a method's task name (issue 35): a ``task.startswith("tces_")`` or
an ``== "medfuzz_medqa"`` is a second list of a method's tasks that a new method, or a renamed task, would miss.
The registry answers instead (``records.methods.by_lm_eval_task``, ``Method.owns_lm_eval_task``; ``keys.method_of``
for Inspect logs, which reads logs written before ``METHOD_KEY`` by their task names).

Metric ids share their method's prefix (``medfuzz_asr``), so the rule looks at what is tested: a variable that
holds a task (``task``, ``t``, ``task_name``, ``name`` of a task)."""

from __future__ import annotations

import ast
from pathlib import Path

from medfuzz.benchmarks.registry import BENCHMARKS
from medfuzz.records.methods import METHODS

SRC = Path(__file__).parents[2] / "src" / "medfuzz"
ALLOWED = ("records/",)  # the registry and the log vocabulary
TASK_VARIABLES = {"task", "t", "task_name", "tasks"}


def _task_words() -> set[str]:
    """Every registered method's lm-eval task names (per benchmark and entity) and task-name prefixes (``tces_``)."""
    words = set()
    for method in METHODS.values():
        if method.lm_eval_prefix:
            words.add(f"{method.lm_eval_prefix.rstrip('_')}_")
        for name in (*method.lm_eval_names, *method.lm_eval_tasks):
            words |= {name.format_map({"benchmark": key, "entity": entity}) for key in BENCHMARKS
                      for entity in ("drugs", "diseases")}
    return words


def _is_task(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in TASK_VARIABLES


def _dispatches(source: str) -> list[tuple[int, str]]:
    """``task.startswith(<task word>)`` (a tuple of them too) and ``task == <task word>`` / ``in``."""
    words = _task_words()
    found = []
    for node in ast.walk(ast.parse(source)):
        sides: list[ast.expr] = []
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "removeprefix") and _is_task(node.func.value)):
            sides = list(node.args)
        elif isinstance(node, ast.Compare) and any(map(_is_task, [node.left, *node.comparators])):
            sides = [node.left, *node.comparators]
        for side in sides:
            for value in ([side] if isinstance(side, ast.Constant) else list(getattr(side, "elts", []))):
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in words:
                    found.append((node.lineno, value.value))
    return found


def test_no_module_decides_by_a_method_s_task_name() -> None:
    offenders = {str(path.relative_to(SRC)): hits for path in sorted(SRC.rglob("*.py"))
                 if not str(path.relative_to(SRC)).startswith(ALLOWED)
                 and (hits := _dispatches(path.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_rule_sees_each_form_of_dispatch() -> None:
    assert _dispatches('if task.startswith("tces_"): pass') == [(1, "tces_")]
    assert _dispatches('ok = task.startswith(("tces_", "medfuzz_"))') == [(1, "tces_"), (1, "medfuzz_")]
    assert _dispatches('xs = [t for t in configs if t.startswith("medguard_")]') == [(1, "medguard_")]
    assert _dispatches('if task == "medfuzz_medqa": pass') == [(1, "medfuzz_medqa")]
    assert _dispatches('if "medqa_clean" in tasks: pass') == [(1, "medqa_clean")]
    assert _dispatches('key = metric if metric.startswith("medguard_") else "x"') == []  # a metric id, not a task
    assert _dispatches('run = ["tces_medqa_drugs"]') == []  # a list of tasks to run does not decide by one
