"""docs/medfuzz.md's parameter table is the one generated from ``MedFuzzConfig``.

After changing a parameter (name, default, DOCS entry), regenerate the table with

    MEDFUZZ_REGENERATE_DOCS=1 .venv/bin/python -m pytest tests/medfuzz/test_medfuzz_docs.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from medfuzz.options import parameter_table
from medfuzz.solvers.medfuzz.config import MedFuzzConfig

PAGE = Path(__file__).parents[2] / "docs" / "medfuzz.md"
BLOCK = re.compile(r"(<!-- params:MedFuzzConfig -->\n)(.*?)(<!-- /params -->)", re.S)


def test_docs_parameter_table_is_generated_from_the_config():
    text = PAGE.read_text(encoding="utf-8")
    match = BLOCK.search(text)
    assert match, f"{PAGE}: markers <!-- params:MedFuzzConfig --> ... <!-- /params --> not found"
    generated = parameter_table(MedFuzzConfig) + "\n"
    if os.environ.get("MEDFUZZ_REGENERATE_DOCS"):
        text = text[:match.start(2)] + generated + text[match.end(2):]
        PAGE.write_text(text, encoding="utf-8")
        match = BLOCK.search(text)
    assert match.group(2) == generated, "docs/medfuzz.md parameter table is out of date (see module docstring)"
    # every parameter has a meaning, and no bare | splits a cell
    for row in generated.splitlines()[2:]:
        cells = re.split(r"(?<!\\)\|", row)[1:-1]
        assert len(cells) == 4 and cells[3].strip(), row
