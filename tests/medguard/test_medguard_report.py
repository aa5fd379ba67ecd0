"""``medfuzz compare`` / ``medfuzz.report.medguard`` over real Inspect logs from the offline scripted provider
(and lm-eval sample files in lm-eval's layout): MedGuard logs picked out, others ignored; McNemar and Holm
numbers as statsmodels computes them on the pooled units."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from medfuzz.cli import main as medfuzz_main
from medfuzz.report.medguard import compare, load_runs, render
from medfuzz.scorers.medguard import aspect_units, pooled_units
from medfuzz.solvers.medguard.builders import BuildConfig, build, limit_per_pool
from medfuzz.solvers.medguard.taxonomy import Aspect
from medfuzz.tasks.inspect.baselines import medqa_clean
from medfuzz.tasks.inspect.medguard import medguard
from medfuzz.tasks.lm_eval.medguard import equity_docs, item_to_doc, process_results
from tests.scripted_inspect import SCRIPT


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("logs")
    aspects = "defense,error_tolerance,sycophancy,stereotype,equity"
    SCRIPT[:] = ["ANSWER: A"] * 200
    inspect_eval(medguard(aspects=aspects, limit_per_aspect=6), model="medfuzz-scripted/always-a",
                 display="none", log_dir=str(folder))
    SCRIPT[:] = ["ANSWER: B"] * 200
    inspect_eval(medguard(aspects=aspects, limit_per_aspect=6, strategy="safe"), model="medfuzz-scripted/always-b",
                 display="none", log_dir=str(folder))
    SCRIPT[:] = ["ANSWER: A"] * 10
    inspect_eval(medqa_clean(data="demo", limit=2), model="medfuzz-scripted/other", display="none", log_dir=str(folder))
    SCRIPT.clear()
    return folder


def test_compare_picks_medguard_logs_and_tests_pairs_like_statsmodels(logs: Path) -> None:
    result = compare([logs])
    assert sorted(result.models) == ["medfuzz-scripted/always-a · basic", "medfuzz-scripted/always-b · safe"]
    (pair,) = result.comparison.pairs
    units = {run.label: pooled_units(aspect_units(run.results.values())) for run in result.runs}
    first, second = units[pair.first], units[pair.second]
    shared = sorted(set(first) & set(second))
    assert len(shared) == 4 * 6 + 6 * 4 + 6 * 2  # 4 accuracy aspects; equity: 6 cases x (4 races + 2 sexes)
    both = sum(first[u] and second[u] for u in shared)
    neither = sum(not first[u] and not second[u] for u in shared)
    table = [[both, pair.test.b], [pair.test.c, neither]]
    ref = sm_mcnemar(table, exact=pair.test.exact)
    assert pair.test.pvalue == pytest.approx(ref.pvalue)
    assert pair.p_holm == pytest.approx(min(1.0, ref.pvalue))  # one pair: Holm leaves it as is
    text = result.table()
    assert "| gender_equity |" in text and "| **overall** |" in text and "| privacy |" not in text
    assert "| defense | 0.25 |" in text  # the chance level column
    ranking = result.ranking_text()
    assert ranking.startswith("Paper's criterion (Fig. 2b): raw two-sided McNemar p ≤ 0.05") and "\n1. " in ranking
    assert "Holm-adjusted McNemar p ≤ 0.05" in ranking
    assert "better, p ≤ 0.05 (paper) | better, Holm p ≤ 0.05" in result.mcnemar_table()
    # position bias: always-a answered A everywhere while the keys are spread over the letters
    positions = result.positions["medfuzz-scripted/always-a · basic"]
    assert all(p.answers == {"A": 1.0} for p in positions.values())
    keys = positions[Aspect.DEFENSE].keys  # the first 6 of a balanced pool: each letter 1 or 2 times
    assert set(keys) == set("ABCD") and set(keys.values()) == {1 / 6, 2 / 6}
    table = result.position_table()
    assert "| medfuzz-scripted/always-a · basic | defense | 6 | 1.00 | 0.00 | 0.00 | 0.00 | 0.00 |" in table


def test_render_writes_one_chart_per_model_and_tables(logs: Path, tmp_path: Path) -> None:
    written = render([logs], tmp_path / "report")
    pngs = [p for p in written if p.suffix == ".png"]
    assert len(pngs) == 2 and all(p.stat().st_size > 5_000 for p in pngs)
    data = json.loads((tmp_path / "report" / "medguard_comparison.json").read_text())
    assert len(data["models"]) == 2 and len(data["mcnemar"]) == 1
    assert "## Pairwise McNemar" in (tmp_path / "report" / "medguard_comparison.md").read_text()


def test_compare_cli(logs: Path, tmp_path: Path, capsys) -> None:
    assert medfuzz_main(["compare", str(logs), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "Pairwise two-sided McNemar: raw p (the paper's criterion) and Holm-adjusted p" in out
    assert "medguard_comparison.md" in out and "Answer letters per aspect" in out
    assert "Paper's criterion (Fig. 2b)" in out and "Holm-adjusted McNemar p ≤ 0.05" in out
    with pytest.raises(ValueError, match="no MedGuard"):
        compare([tmp_path / "out"])


def test_lm_eval_samples_are_read_like_inspect_results(tmp_path: Path) -> None:
    """lm-eval's layout (results_<stamp>.json + samples_<task>_<stamp>.jsonl): answers from log-likelihoods,
    an equity unit doc read as its variants."""
    items = limit_per_pool(build(BuildConfig(n=2), "equity,defense").items, 2)
    stamp = "2026-01-01T00-00-00"
    docs = {"medguard_race_equity": equity_docs([i for i in items if i.metadata["pool"] == "equity"],
                                                Aspect.RACE_EQUITY, "basic"),
            "medguard_defense": [{**item_to_doc(i, "basic"), "aspect": "defense"}
                                 for i in items if i.metadata["pool"] == "defense"]}

    def always_a(doc: dict) -> list[tuple[float, bool]]:
        variants = json.loads(doc["variants"]) if doc.get("variants") else [doc]
        return [(-1.0 if letter == "A" else -2.0, False) for v in variants for letter in v["letters"]]

    for task, task_docs in docs.items():
        lines = [json.dumps({"doc": d, "filtered_resps": [[str(v), "False"] for v, _ in always_a(d)]})
                 for d in task_docs]
        (tmp_path / f"samples_{task}_{stamp}.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / f"results_{stamp}.json").write_text(json.dumps({
        "configs": {t: {} for t in docs}, "config": {"model": "hf", "model_args": "pretrained=tiny"}}))
    (run,) = load_runs([tmp_path])
    assert run.label == "tiny · basic · lm-eval" and len(run.results) == 18  # 2 cases x 8 variants + 2 items
    # the hook's per-doc values, averaged by lm-eval's mean, agree with the harness-free units
    per_doc = [process_results(d, always_a(d))["safety"] for d in docs["medguard_race_equity"]]
    units = aspect_units(run.results.values())
    race = units[next(a for a in units if a.value == "race_equity")]
    assert sorted(race) == sorted(d["id"] for d in docs["medguard_race_equity"])
    assert sum(per_doc) / len(per_doc) == pytest.approx(sum(race.values()) / len(race))


def test_medfuzz_report_dispatcher_includes_medguard(logs: Path, tmp_path: Path) -> None:
    from medfuzz.report import render_all

    written = render_all([logs], tmp_path / "all")
    assert len([p for p in written["medguard"] if p.suffix == ".png"]) == 2
    others = [p for p in logs.glob("*.eval") if "_medqa-clean_" in p.name]
    assert len(others) == 1 and render(others, tmp_path / "none") == []
