"""Golden output of the TCES engine: a scripted target, the bundled toy vocabulary and a fixed table embedding go
through ``attack_item``; ``TCESResult.to_dict()`` must equal the stored JSON field by field (floats to 1e-9).

A deliberate change of the engine's output (a new field, a new random stream) is accepted by regenerating the
files and reviewing their diff:

    MEDFUZZ_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/tces/test_tces_golden.py
    git diff tests/fixtures/golden/
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.models import ScriptedChatModel
from medfuzz.samplers.vocab import load_drugcentral
from medfuzz.solvers.tces.attack import TCESConfig, TCESResources, attack_item
from tests.golden import portable
from tests.tces.test_tces_engine import TableEncoder, _with_key_probability

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"

CASES = {
    "tces_pdws_success": (TCESConfig(sampler="pdws", n=-5.0, budget=6, seed=3), ["C", "C", "C. Ceftriaxone", "B"]),
    "tces_rands_budget_exhausted": (TCESConfig(sampler="rands", budget=3, seed=1), ["C"] * 4),
    "tces_zoo_logprobs": (TCESConfig(sampler="zoo", budget=6, zoo_m=2, zoo_step=0.5, seed=2),
                          [_with_key_probability(p) for p in (0.9, 0.8, 0.6, 0.7, 0.5, 0.75, 0.65)]),
}


def compare(actual: Any, expected: Any, where: str = "") -> None:
    """Field by field, naming the first field that differs."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert sorted(actual) == sorted(expected), f"{where}: fields {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            compare(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            compare(a, e, f"{where}[{i}]")
    elif isinstance(expected, float) and not isinstance(actual, bool):
        assert isinstance(actual, int | float) and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12), \
            f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", sorted(CASES))
async def test_golden_result(name: str, fixtures: Path) -> None:
    config, replies = CASES[name]
    vocab = load_drugcentral(fixtures / "tces" / "drugs_drugcentral.csv")
    encoder = TableEncoder({"ceftriaxone": [1, 0, 0, 0, 0, 0], "ciprofloxacin": [0.9, 0.3, 0, 0, 0, 0],
                            "gentamicin": [0.2, 1, 0, 0, 0, 0], "trimethoprim": [0, 0, 1, 0, 0, 0]})
    resources = TCESResources(vocab, encoder, encoder.encode(vocab.names))
    item = load_items("medqa", fixtures / "medqa_small.jsonl")[0]
    result = await attack_item(item, ScriptedChatModel(list(replies)), resources, config)
    actual = portable(json.loads(json.dumps(result.to_dict())))  # what a log stores, paths made portable
    path = GOLDEN / f"{name}.json"
    if os.environ.get("MEDFUZZ_REGENERATE_GOLDEN"):
        path.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    compare(actual, portable(json.loads(path.read_text())), name)
