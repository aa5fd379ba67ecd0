"""Each lm-eval hook's option names are listed once, in the method registry (``records.methods``:
``lm_eval_options``, which ``read_options`` checks a user's names against), and that list is the hook's: every name
the hook module reads from its options is in it, and every name in it beside the method's own parameters is read
by the hook. Read with ``ast``: ``kwargs.get("x")``, ``kwargs["x"]``, ``_number(kwargs, "x", ...)`` and the
names of a ``for k in ("x", ...)`` over them."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from medfuzz.records.methods import METHODS

HOOKS = Path(__file__).parents[2] / "src" / "medfuzz" / "tasks" / "lm_eval"
OPTION_HOLDERS = {"kwargs", "options"}


def names_read(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func, args = node.func, node.args
            if (isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name)
                    and func.value.id in OPTION_HOLDERS and args and isinstance(args[0], ast.Constant)):
                found.add(str(args[0].value))
            elif (len(args) > 1 and not (isinstance(func, ast.Name) and func.id == "read_options")
                  and isinstance(args[0], ast.Name) and args[0].id in OPTION_HOLDERS
                  and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
                found.add(args[1].value)  # a helper given the options and a name: _number(kwargs, "call_timeout")
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in OPTION_HOLDERS
              and isinstance(node.slice, ast.Constant)):
            found.add(str(node.slice.value))
        elif isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Tuple):
            found.update(str(e.value) for e in node.iter.elts if isinstance(e, ast.Constant))
    return {name for name in found if "{" not in name}


def test_the_reader_sees_each_form() -> None:
    source = '''
def hook(kwargs, options):
    a = kwargs.get("alpha"); b = kwargs["beta"]; c = _number(kwargs, "gamma", int, 1)
    d = {k: kwargs[k] for k in ("delta", "epsilon") if k in kwargs}; e = options.get("zeta")
    kwargs = read_options(kwargs, "family", task="x")  # the family given to the reader is not an option
'''
    assert names_read(source) == {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}


def test_medfuzz_hook_reads_exactly_its_registered_options() -> None:
    spec = METHODS["medfuzz"]
    listed = set(spec.lm_eval_options())
    parameters = {f.name for f in fields(spec.config())}
    read = names_read((HOOKS / "medfuzz.py").read_text(encoding="utf-8"))
    assert read - listed == set(), "read by the hook but not in the registry's list (read_options refuses them)"
    assert listed - parameters - read == set(), "in the registry's list but read by no line of the hook"


@pytest.mark.parametrize("method", [name for name, spec in METHODS.items() if spec.lm_eval_options])
def test_every_hook_reads_only_registered_options(method: str) -> None:
    spec = METHODS[method]
    module = HOOKS / f"{spec.lm_eval_family or method}.py"
    if not module.is_file():
        module = HOOKS / "baselines.py"
    listed = set(spec.lm_eval_options())
    assert names_read(module.read_text(encoding="utf-8")) - listed == set()
