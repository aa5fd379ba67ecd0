"""Rewrite the parameter tables in docs/*.md from the method configs (the tests fail when they differ).

    .venv/bin/python scripts/docs_tables.py
"""

from __future__ import annotations

import re
from pathlib import Path

from medfuzz.benchmarks.selection import DataSelection
from medfuzz.options import parameter_table
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medguard.config import MedGuardConfig
from medfuzz.solvers.tces.config import TCESConfig

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = {"medfuzz.md": MedFuzzConfig, "tces.md": TCESConfig, "medguard.md": MedGuardConfig,
         "foundation.md": DataSelection}


def main() -> None:
    for page, config in PAGES.items():
        path = DOCS / page
        text = path.read_text()
        name = config.__name__
        pattern = re.compile(rf"(<!-- params:{name} -->\n).*?(\n<!-- /params -->)", flags=re.S)
        if not pattern.search(text):
            print(f"{path}: no <!-- params:{name} --> markers, left alone")
            continue
        table = parameter_table(config)
        path.write_text(pattern.sub(lambda m, table=table: m.group(1) + table + m.group(2), text))
        print(f"{path}: table of {name} written")


if __name__ == "__main__":
    main()
