"""Golden output: the bundled MedGuard build for a fixed seed, compared field by field with a stored file.

Any change to a builder, a source, the key balancing or the seeding shows up here as a named difference
(item, field). When the change is intended, regenerate the file and review its diff in the commit:

    MEDFUZZ_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/medguard/test_medguard_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from medfuzz.solvers.medguard.builders import BuildConfig, build
from tests.golden import portable

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "medguard_build_n3_seed11.json"
CONFIG = BuildConfig(n=3, seed=11)


def _current() -> dict:
    bench = build(CONFIG)
    return portable(json.loads(json.dumps({"header": bench.header, "items": [i.to_record() for i in bench.items]})))


def test_bundled_build_matches_the_golden_file() -> None:
    current = _current()
    if os.environ.get("MEDFUZZ_REGENERATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = portable(json.loads(GOLDEN.read_text(encoding="utf-8")))
    differences = [f"header.{k}: {golden['header'].get(k)!r} != {current['header'].get(k)!r}"
                   for k in sorted(set(golden["header"]) | set(current["header"]))
                   if golden["header"].get(k) != current["header"].get(k)]
    assert [i["id"] for i in current["items"]] == [i["id"] for i in golden["items"]], "item ids or order changed"
    for want, got in zip(golden["items"], current["items"], strict=True):
        for field in ("question", "options", "answer"):
            if want[field] != got[field]:
                differences.append(f"{want['id']}.{field}: {want[field]!r} != {got[field]!r}")
        for key in sorted(set(want["metadata"]) | set(got["metadata"])):
            if want["metadata"].get(key) != got["metadata"].get(key):
                differences.append(f"{want['id']}.metadata.{key}: {want['metadata'].get(key)!r} != "
                                   f"{got['metadata'].get(key)!r}")
    assert not differences, "the build differs from the golden file (regenerate if intended, see module doc):\n" + \
        "\n".join(differences[:40])
