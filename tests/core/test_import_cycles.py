"""No import circle in ``src/medfuzz`` (imports at module level and inside functions alike, read by
``test_layer_order``'s reader): a package's ``__init__`` may re-export its submodules, so a submodule imports its
siblings by their own module path (``import medfuzz.x.y as y``, ``Path(__file__)`` for bundled files), never the
package that re-exports them. No module imports a private module (``_x.py``) or a private name (``_x``) of
another module."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.core.test_layer_order import MODULE_NAME, PACKAGE, _absolute, _is_module, import_graph


def module_edges(prefix: str = "medfuzz") -> dict[str, set[str]]:
    """Module -> the modules under ``prefix`` it imports (not itself, not names that are not modules)."""
    inside = [prefix, f"{prefix}."]
    return {module: {t for t in targets if t != module and _is_module(t) and any(
                (t == p or t.startswith(p)) for p in inside)}
            for module, targets in import_graph().items() if module == prefix or module.startswith(f"{prefix}.")}


def circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _private(part: str) -> bool:
    """``_logs``, ``_read``: private; ``__future__`` and other dunders are not."""
    return part.startswith("_") and not part.endswith("__")


def private_imports(package: Path) -> list[str]:
    """``module -> what`` for every import by a module of ``package`` of a private ``medfuzz`` module
    (``medfuzz.report._logs``, by an import statement or by the module path ``importlib`` is given) or of a
    private name (``_x``) from another module."""
    root = next(folder for folder in (package, *package.parents) if folder.name == "medfuzz").parent
    found = []
    for path in sorted(package.rglob("*.py")):
        importer = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [f"{importer} -> {alias.name}" for alias in node.names
                          if alias.name.startswith("medfuzz.") and any(map(_private, alias.name.split(".")))]
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, importer, path.name == "__init__.py")
                if module.startswith("medfuzz.") and any(map(_private, module.split("."))):
                    found.append(f"{importer} -> {module}")
                elif module != importer:
                    found += [f"{importer} -> {module}.{alias.name}" for alias in node.names if _private(alias.name)]
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.match(node.value)
                  and any(map(_private, node.value.split(".")))):
                found.append(f"{importer} -> {node.value}")
    return found


def test_report_has_no_import_circle() -> None:
    assert circles(module_edges("medfuzz.report")) == []


def test_no_import_circle_anywhere_in_src() -> None:
    assert circles(module_edges()) == []


def test_report_imports_no_private_module_or_name_across_modules() -> None:
    assert private_imports(PACKAGE / "report") == []


def test_no_module_imports_a_private_module_or_name_of_another() -> None:
    """A private module (``_x.py``) is imported by none of medfuzz's modules and a private name by none but its
    own: what other modules use has a public name that says what it is."""
    assert private_imports(PACKAGE) == []


def test_the_checks_catch_a_circle_and_a_private_import(tmp_path: Path) -> None:
    """The tools themselves, on a graph and a package that must be caught (a check that passes on anything would
    pass vacuously)."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(edges) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b"}, "b": set()}) == []
    package = tmp_path / "medfuzz" / "report"
    package.mkdir(parents=True)
    (package / "pages.py").write_text("def late():\n    from medfuzz.report.reader import _read, rows\n"
                                      "    from medfuzz.report._cache import rows\n    import medfuzz._paths\n"
                                      "    importlib.import_module('medfuzz.report._cache')\n")
    (package / "reader.py").write_text("from __future__ import annotations\nfrom . import _cache\n"
                                       "from .pages import rows\n\n"
                                       "def _own():\n    from medfuzz.report.reader import _x\n")
    assert [line.split(" -> ")[1] for line in private_imports(package)] == [
        "medfuzz.report.reader._read", "medfuzz.report._cache", "medfuzz._paths", "medfuzz.report._cache",
        "medfuzz.report._cache"]
