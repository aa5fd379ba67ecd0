"""Golden output: scripted target and attacker -> MedFuzz engine -> ``ItemResult.to_dict()``, compared field by
field with ``tests/fixtures/golden/medfuzz_item.json``.

Any change in what a run records (outcomes, turns, prompts' effect on the actors, seeds, controls, p-hats,
usage, config) shows up here as a list of differing fields. After an intended change, regenerate with

    MEDFUZZ_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest tests/medfuzz/test_medfuzz_golden.py

and review the diff of the JSON file before committing it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from medfuzz.benchmarks import load_items
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from tests.golden import portable
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, models, probability_table

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden" / "medfuzz_item.json"


def differences(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Paths where ``actual`` differs from ``expected`` (floats within 1e-9 relative)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{path}.{k}: missing" for k in expected if k not in actual]
        out += [f"{path}.{k}: unexpected" for k in actual if k not in expected]
        for key in expected.keys() & actual.keys():
            out += differences(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(actual)} entries instead of {len(expected)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for d in differences(e, a, f"{path}[{i}]")]
    if isinstance(expected, float) and isinstance(actual, float):
        close = math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
        return [] if close else [f"{path}: {actual} != {expected}"]
    return [] if expected == actual and type(expected) is type(actual) else [f"{path}: {actual!r} != {expected!r}"]


async def golden_run(fixtures: Path) -> dict[str, Any]:
    """Two replicates with one exemplar each, both flipped at turn 2; the sequential test (h = 1 of M = 4,
    batches of 2) stops after the first batch in replicate 0 and draws all 4 controls in replicate 1, whose
    attack p-hat comes from the request cache (same attack text, same item draws)."""
    pool = load_items("medqa", fixtures / "medqa_small.jsonl")
    t, a = models(Target(weak_spots=("clue2",), probabilities=probability_table), Attacker())
    config = MedFuzzConfig(turns=3, replicates=2, exemplars=1, controls=4, control_batch=2, option_orders=2,
                           pvalue_prompt="dialog", seed=11)
    result = await MedFuzzEngine(t, a, config, exemplar_pool=pool).run_item(ITEM)
    return portable(json.loads(json.dumps(result.to_dict())))


async def test_golden_item_result(fixtures):
    actual = await golden_run(fixtures)
    if os.environ.get("MEDFUZZ_REGENERATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = portable(json.loads(GOLDEN.read_text(encoding="utf-8")))
    found = differences(expected, actual)
    assert not found, "MedFuzz output differs from the golden file:\n" + "\n".join(found[:40])


def test_differences_names_the_changed_fields():
    assert differences({"a": [1, {"b": 0.5}]}, {"a": [1, {"b": 0.5 + 1e-13}]}) == []
    assert differences({"a": [1, {"b": 0.5}], "c": 1}, {"a": [2, {"b": 0.6}], "d": 1}) == [
        "$.c: missing", "$.d: unexpected", "$.a[0]: 2 != 1", "$.a[1].b: 0.6 != 0.5"]
    assert differences({"x": 1}, {"x": 1.0}) == ["$.x: 1.0 != 1"]
