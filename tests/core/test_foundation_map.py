"""docs/foundation.md's module map names every module under src/medfuzz and no module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

from tests.core.test_layer_order import _is_module, import_graph, layer_of

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "src" / "medfuzz"
PACKAGE_LINE = re.compile(r"^  ([a-z_]+)/\s")  # "  solvers/     outcomes.py ...": the lines below are in solvers/
TOP_LINE = re.compile(r"^  \S")  # "  errors.py paths.py ...": top-level modules
MODULE = re.compile(r"([\w/]*)\{([\w,]+)\}\.py|([\w/]*\w)\.py")


def map_block(text: str) -> str:
    start = text.index("```\nsrc/medfuzz/\n") + len("```\n")
    return text[start:text.index("```", start)]


def modules_named(block: str) -> set[str]:
    """Paths relative to src/medfuzz of the modules the map names (``medfuzz/{a,b}.py`` expanded)."""
    named: set[str] = set()
    package = ""
    for line in block.splitlines()[1:]:
        if match := PACKAGE_LINE.match(line):
            package = match.group(1) + "/"
        elif TOP_LINE.match(line):
            package = ""
        for folder, names, single in MODULE.findall(line):
            stems = [f"{folder}{name}" for name in names.split(",")] if names else [single]
            named.update(f"{package}{stem}.py" for stem in stems)
    return named


def test_the_map_names_every_module_and_no_other() -> None:
    tree = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    named = modules_named(map_block((ROOT / "docs" / "foundation.md").read_text(encoding="utf-8")))
    assert sorted(tree - named) == [], "modules the map misses"
    assert sorted(named - tree) == [], "modules the map names that are gone"


def map_order(block: str) -> dict[str, int]:
    """Layer -> its line in the map (a top-level module is its own layer, e.g. ``stats``)."""
    order: dict[str, int] = {}
    for rank, line in enumerate(block.splitlines()[1:]):
        if match := PACKAGE_LINE.match(line):
            order[match.group(1)] = rank
        elif TOP_LINE.match(line):
            order.update((single, rank) for _, _, single in MODULE.findall(line) if single)
    return order


def test_every_import_follows_the_maps_order() -> None:
    order = map_order(map_block((ROOT / "docs" / "foundation.md").read_text(encoding="utf-8")))
    upward = [f"{module} -> {target}" for module, targets in import_graph().items() for target in sorted(targets)
              if target.startswith("medfuzz.") and _is_module(target)
              and order[layer_of(target)] > order[layer_of(module)]]
    assert upward == []


def test_the_reader_expands_the_maps_notation() -> None:
    block = "src/medfuzz/\n  stats.py (x)\n  solvers/     outcomes.py\n               tces/{config,attack}.py packs/\n"
    assert modules_named(block) == {"stats.py", "solvers/outcomes.py", "solvers/tces/config.py",
                                    "solvers/tces/attack.py"}
    assert map_order(block) == {"stats": 0, "solvers": 1}
