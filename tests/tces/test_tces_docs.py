"""docs/tces.md carries the parameter table generated from TCESConfig (so the docs cannot drift from the code)."""

from __future__ import annotations

import re
from pathlib import Path

from medfuzz.options import parameter_table
from medfuzz.solvers.tces.config import TCESConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tces.md"


def test_parameter_table_matches_the_config() -> None:
    text = DOCS.read_text()
    found = re.search(r"<!-- params:TCESConfig -->\n(.*?)\n<!-- /params -->", text, flags=re.S)
    assert found, "docs/tces.md lacks the <!-- params:TCESConfig --> ... <!-- /params --> markers"
    assert found.group(1).strip() == parameter_table(TCESConfig).strip(), (
        "docs/tces.md's parameter table differs from TCESConfig: paste the output of "
        "`python -c 'from medfuzz.options import parameter_table; from medfuzz.solvers.tces.config import TCESConfig; "
        "print(parameter_table(TCESConfig))'` between the markers")
