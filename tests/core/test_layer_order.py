"""Layers only point down: the imports of every module under ``src/medfuzz`` (module level and inside functions,
read with ``ast``, plus module paths named as string constants, which is how ``importlib`` loads a module) never
go from a layer to one that must not be below it. The record vocabulary both shells share is ``medfuzz.records``;
the statistics both the solvers and the scorers use are ``medfuzz.stats``."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).parents[2] / "src"
PACKAGE = SRC / "medfuzz"
HARNESSES = ("inspect_ai", "lm_eval")
CORE = ("benchmarks", "models", "samplers", "solvers", "scorers", "records", "planted", "stats", "options", "errors",
        "paths")  # the harness-free layers: none imports a harness or a shell
FORBIDDEN = [  # (importing layer, imported layer): each pair is a direction the layers must never point
    ("solvers", "scorers"), ("report", "tasks"), ("tasks", "report"), ("tasks", "cli"), ("models", "samplers"),
    ("report", "cli"), ("validation", "cli"),  # `medfuzz run`'s application (cli/suite/) sits above them both
    ("models", "planted"),  # the known-truth models use the samplers' own vocabulary: they sit above them
    *((core, shell) for core in CORE for shell in ("tasks", "report", "cli", "adapters", "validation")),
]
MODULE_NAME = re.compile(r"^(medfuzz(\.[A-Za-z_]\w*)+)(:[A-Za-z_][\w.]*)?$")  # a module, or "module:attribute"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """``medfuzz.solvers.tces.attack`` -> ``solvers``; a top-level module (``medfuzz.stats``) is its own layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_in(source: str, importer: str = "medfuzz.x", is_package: bool = False) -> set[str]:
    """Every module ``source`` imports, wherever the import statement is, and every string constant that is a
    ``medfuzz.*`` module path (what ``importlib.import_module`` is given)."""
    from medfuzz.records.methods import SHELL_CODE

    found: set[str] = set()
    tree = ast.parse(source)
    # a method spec's names of its shells' code (``Method(renderer="medfuzz.report.tces", ...)``) are imported
    # by those shells, never by the registry (``tests/core/test_method_registry.py`` holds each in its shell)
    declared = {id(keyword.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Method"
                for keyword in node.keywords if keyword.arg in SHELL_CODE}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, importer, is_package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # ``from medfuzz import stats``
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared
              and (named := MODULE_NAME.match(node.value))):
            found.add(named.group(1))
    return found


@cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the ``medfuzz`` modules and harness packages it imports."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        found = imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        graph[name] = {m for m in found if m.startswith("medfuzz.") or m.split(".")[0] in HARNESSES}
    return graph


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (SRC / relative).with_suffix(".py").is_file() or (SRC / relative / "__init__.py").is_file()


def edges_between(importing: str, imported: str) -> list[str]:
    """``module -> module`` for every import from layer ``importing`` into layer ``imported``."""
    return [f"{module} -> {target}" for module, targets in import_graph().items() if layer_of(module) == importing
            for target in sorted(targets)
            if target.startswith("medfuzz.") and layer_of(target) == imported and _is_module(target)]


@pytest.mark.parametrize(("importing", "imported"), FORBIDDEN, ids=[f"{a}-/->{b}" for a, b in FORBIDDEN])
def test_no_layer_points_up(importing: str, imported: str) -> None:
    assert edges_between(importing, imported) == []


def test_the_core_imports_no_harness_anywhere_in_a_module() -> None:
    offenders = [f"{module} -> {target}" for module, targets in import_graph().items() if layer_of(module) in CORE
                 for target in sorted(targets) if target.split(".")[0] in HARNESSES]
    assert offenders == []


def test_the_reader_sees_every_kind_of_import() -> None:  # the reader itself, on code that must be caught
    source = '''
import inspect_ai.log
from medfuzz.scorers import medfuzz as scorer
def late():
    from lm_eval.api import model
    from . import sibling
RENDERERS = {"sweep": "medfuzz.cli.suite.sweep_report", "prose": "medfuzz is a package"}
READER = "medfuzz.report.overview:tces_result"
SPEC = Method(key="x", renderer="medfuzz.report.tces", title="medfuzz.report.index")
'''
    found = imports_in(source, "medfuzz.solvers.tces.attack")
    assert {"inspect_ai.log", "medfuzz.scorers.medfuzz", "lm_eval.api", "medfuzz.solvers.tces.sibling",
            "medfuzz.cli.suite.sweep_report", "medfuzz.report.overview", "medfuzz.report.index"} <= found
    assert "medfuzz is a package" not in found
    assert "medfuzz.report.tces" not in found  # a spec's name of its shell's code: that shell imports it
    assert layer_of("medfuzz.solvers.tces.attack") == "solvers" and layer_of("medfuzz.stats") == "stats"


def test_the_graph_covers_every_layer() -> None:  # a rule over a layer the reader never saw would pass vacuously
    layers = {layer_of(module) for module in import_graph()}
    assert {a for a, _ in FORBIDDEN} | {b for _, b in FORBIDDEN} <= layers
    assert "medfuzz.stats" in import_graph()["medfuzz.scorers.medfuzz"]


def test_tasks_holds_only_harness_task_definitions() -> None:
    """tasks/ is the Inspect tasks and the lm-eval hooks: `medfuzz run`'s orchestration lives in cli/suite/."""
    assert sorted(p.name for p in (PACKAGE / "tasks").iterdir() if p.name != "__pycache__") == [
        "__init__.py", "inspect", "lm_eval"]


def test_medfuzz_runs_package_is_split_by_role() -> None:
    """No module of `medfuzz run`'s application is over 400 lines (a walk of the plan reads one role at a time)."""
    long = {p.name: n for p in (PACKAGE / "cli" / "suite").glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
