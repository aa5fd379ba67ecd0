"""``DataSelection`` is the one owner of the data-selection parameters: the Inspect task signatures show its
defaults, the lm-eval readers know its names, the docs table is generated from it.

After changing a field (name, default, DOCS entry), regenerate the table with

    MEDFUZZ_REGENERATE_DOCS=1 .venv/bin/python -m pytest tests/core/test_data_selection.py
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

from medfuzz.benchmarks import registry
from medfuzz.benchmarks.selection import DataSelection
from medfuzz.options import ConfigError, parameter_table

PAGE = Path(__file__).parents[2] / "docs" / "foundation.md"
BLOCK = re.compile(r"(<!-- params:DataSelection -->\n)(.*?)(<!-- /params -->)", re.S)


def test_every_inspect_task_takes_the_selection_with_its_defaults() -> None:
    from medfuzz.tasks.inspect import baselines, medfuzz, tces

    variants = [getattr(module, pattern.format(key)) for key in registry.BENCHMARKS
                for module, pattern in ((medfuzz, "medfuzz_{}"), (tces, "tces_{}"), (baselines, "{}_clean"))]
    assert len(variants) >= 9  # medqa, medmcqa and mcq (your own data), one task per method each
    for fn in (medfuzz.medfuzz, tces.tces, *variants):
        parameters = inspect.signature(fn).parameters
        for name in DataSelection.names():
            default = getattr(DataSelection, name)
            if name == "split" and fn.__name__.endswith("_clean"):
                default = registry.get(fn.__name__.removesuffix("_clean")).default_split
            assert parameters[name].default == default, (fn.__name__, name)


def test_lm_eval_readers_know_every_selection_name() -> None:
    from medfuzz.tasks.lm_eval.hook_options import families

    for family in ("clean", "tces"):
        assert set(DataSelection.names()) <= families()[family][0], family
    assert {"data", "split", "attack_limit"} <= families()["medfuzz"][0]


def test_values_are_converted_and_unknown_names_refused() -> None:
    chosen = DataSelection.from_options(data="demo", split="", limit="3", shuffle_choices="true")
    assert chosen == DataSelection(data="demo", split=None, limit=3, shuffle_choices=True)
    assert [i.id for i in chosen.items("medqa", 0)] == [f"medqa-dev-0000{i}" for i in (1, 2, 3)]
    assert len(chosen.items("medqa", 0, apply_limit=False)) == 50
    with pytest.raises(ConfigError, match="did you mean 'shuffle_choices'"):
        DataSelection.from_options(shufle_choices=True)
    with pytest.raises(ConfigError, match="limit='x' is not an integer"):
        DataSelection.from_options(limit="x")


def test_an_inspect_task_checks_its_selection_through_the_owner() -> None:
    from medfuzz.tasks.inspect.tces import tces_medqa

    with pytest.raises(ConfigError, match="limit='many' is not an integer"):
        tces_medqa(data="demo", limit="many")


def test_docs_parameter_table_is_generated_from_the_dataclass() -> None:
    text = PAGE.read_text(encoding="utf-8")
    match = BLOCK.search(text)
    assert match, f"{PAGE}: markers <!-- params:DataSelection --> ... <!-- /params --> not found"
    generated = parameter_table(DataSelection) + "\n"
    if os.environ.get("MEDFUZZ_REGENERATE_DOCS"):
        text = text[:match.start(2)] + generated + text[match.end(2):]
        PAGE.write_text(text, encoding="utf-8")
        match = BLOCK.search(text)
    assert match.group(2) == generated, "docs/foundation.md DataSelection table is out of date (module docstring)"
