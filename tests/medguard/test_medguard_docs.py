"""docs/medguard.md's parameter table is the one generated from ``MedGuardConfig``.

After changing a parameter (name, default, DOCS entry), regenerate the table with

    MEDFUZZ_REGENERATE_DOCS=1 .venv/bin/python -m pytest tests/medguard/test_medguard_docs.py
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from medfuzz.options import parameter_table
from medfuzz.solvers.medguard.config import MedGuardConfig

PAGE = Path(__file__).parents[2] / "docs" / "medguard.md"
BLOCK = re.compile(r"(<!-- params:MedGuardConfig -->\n)(.*?)(<!-- /params -->)", re.S)


def _cells(table: str) -> list[str]:
    """The table with Markdown's escaped pipes read as pipes (so the comparison does not depend on whether
    ``parameter_table`` escapes the ``|`` in ``str | None`` yet)."""
    return [row.replace("\\|", "|") for row in table.splitlines()]


def test_docs_parameter_table_is_generated_from_the_config() -> None:
    text = PAGE.read_text(encoding="utf-8")
    match = BLOCK.search(text)
    assert match, f"{PAGE}: markers <!-- params:MedGuardConfig --> ... <!-- /params --> not found"
    generated = parameter_table(MedGuardConfig) + "\n"
    if os.environ.get("MEDFUZZ_REGENERATE_DOCS"):
        text = text[:match.start(2)] + generated + text[match.end(2):]
        PAGE.write_text(text, encoding="utf-8")
        match = BLOCK.search(text)
    assert _cells(match.group(2)) == _cells(generated), "docs/medguard.md parameter table is out of date " \
                                                          "(see module docstring)"
    documented = {row.split("`")[1] for row in match.group(2).splitlines()[2:]}
    assert documented == {f.name for f in dataclasses.fields(MedGuardConfig)}


def test_docs_name_the_current_commands_and_options() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "python -m medfuzz.medguard" not in text and "medfuzz medguard build" in text
    assert not re.search(r"medguard_limit\b", text), "the lm-eval option is medguard_limit_per_aspect"
    metadata_options = re.findall(r'"medguard_(\w+)"\s*:', text)
    fields = {f.name for f in dataclasses.fields(MedGuardConfig)}
    assert metadata_options and set(metadata_options) <= fields, metadata_options
