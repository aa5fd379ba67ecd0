"""``medfuzz run``'s plan: which runs with which options, the call bound, per-backend defaults, settings written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from medfuzz.cli.suite.build import bound, build_tasks
from medfuzz.cli.suite.inspect_half import write_settings
from medfuzz.cli.suite.levels import LEVELS
from medfuzz.cli.suite.plan import SuitePlan, backend_for
from medfuzz.options import ConfigError
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.tces.config import TCESConfig


def plan(tmp_path: Path, **kwargs) -> SuitePlan:
    return SuitePlan(model="openai-api/vllm/m", out=tmp_path, data="demo", **kwargs)


def test_paper_level_runs_every_method_at_the_configs_defaults(tmp_path: Path) -> None:
    runs = plan(tmp_path).runs()
    assert [r.label for r in runs] == ["clean baseline", "tces drugs pdws", "tces diseases pdws", "medguard",
                                       "medfuzz"]
    medfuzz = runs[-1]
    assert medfuzz.args == {"data": "demo"}  # nothing overridden: MedFuzzConfig's defaults are the paper's
    assert runs[1].args == {"data": "demo", "entity": "drugs"}


def test_options_reach_the_methods_that_have_them_and_prefixes_pick_one(tmp_path: Path) -> None:
    runs = {r.label: r for r in plan(tmp_path, options={"seed": 3, "medfuzz_turns": 2, "budget": 4,
                                                        "tces_budget": 1}).runs()}
    assert runs["medfuzz"].args["seed"] == 3 and runs["medfuzz"].args["turns"] == 2
    assert runs["tces drugs pdws"].args["budget"] == 1  # the prefixed value wins over the plain one
    assert "budget" not in runs["medfuzz"].args and "turns" not in runs["tces drugs pdws"].args
    assert runs["medguard"].args["seed"] == 3 and runs["clean baseline"].args["seed"] == 3


@pytest.mark.parametrize("name, hint", [("trns", "'turns'"), ("medfuzz_trns", "'medfuzz_turns'")])
def test_an_option_no_chosen_method_has_is_an_error_naming_the_closest(tmp_path: Path, name: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=f"--option {name}: .*did you mean {hint}"):
        plan(tmp_path, options={name: 3}).check_options()


def test_an_option_of_a_method_not_chosen_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--option medfuzz_turns"):
        plan(tmp_path, methods=("baseline", "tces"), options={"medfuzz_turns": 3}).check_options()


def test_limits_per_method(tmp_path: Path) -> None:
    demo = plan(tmp_path, level="demo", limits={"baseline": 4})
    assert {m: demo.limit_for(m) for m in ("baseline", "tces", "medfuzz", "medguard")} == {
        "baseline": 4, "tces": 12, "medfuzz": 10, "medguard": 2}
    assert plan(tmp_path, level="demo", limit=3).limit_for("tces") == 3
    assert plan(tmp_path).limit_for("medfuzz") is None


def test_bad_methods_level_and_limit_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--methods"):
        plan(tmp_path, methods=("medfuz",))
    with pytest.raises(ConfigError, match="--level"):
        plan(tmp_path, level="cheap")
    with pytest.raises(ConfigError, match="--limit"):
        plan(tmp_path, limit=0)


def test_backend_defaults() -> None:
    embedded = backend_for("embedded")
    # one request, one sample and one run at a time: parallel runs would evict the server's prompt cache
    assert (embedded.max_connections, embedded.max_samples, embedded.max_tasks) == (1, 1, 1)
    assert backend_for("openai-api/vllm/m").max_tasks is None  # eval_set's own default
    assert backend_for("openai-api/vllm/m").max_connections == 16
    assert backend_for("openai/gpt-4o").max_connections is None  # Inspect's own per-provider default
    assert all(backend_for(m).attempt_timeout == 120 for m in ("embedded", "vllm/x", "anthropic/claude"))


def test_bound_is_the_sum_of_the_tasks_own_bounds(tmp_path: Path) -> None:
    suite = plan(tmp_path, level="quick", methods=("baseline", "tces", "medfuzz"))
    built = build_tasks(suite)
    calls = bound(built)
    assert calls.samples == {"clean baseline": 10, "tces drugs rands": 10, "medfuzz": 2}
    medfuzz_config = MedFuzzConfig.from_options(**LEVELS["quick"].options_of("medfuzz"))
    tces_config = TCESConfig.from_options(**{k: v for k, v in LEVELS["quick"].settings_for("tces")[0].items()})
    assert calls.per_run["medfuzz"] == medfuzz_config.max_calls(2)
    assert calls.per_run["tces drugs rands"] == tces_config.max_calls(10)
    assert calls.per_run["clean baseline"] == {"target": 10}
    assert calls.total == 10 + sum(tces_config.max_calls(10).values()) + sum(medfuzz_config.max_calls(2).values())
    # every task names its run, which is how the logs are found again
    assert [task.metadata["medfuzz_suite"] for _, task in built] == ["clean baseline", "tces drugs rands", "medfuzz"]


def test_settings_file_holds_every_resolved_default(tmp_path: Path) -> None:
    suite = plan(tmp_path, level="quick", methods=("baseline",), max_connections=4)
    path = write_settings(suite, bound(build_tasks(suite)))
    written = json.loads(path.read_text())
    assert written["max_connections"] == 4 and written["attempt_timeout"] == 120
    assert written["backend"]["kind"].startswith("OpenAI-compatible")
    assert written["runs"] == [{"label": "clean baseline", "task": "medfuzz/medqa_clean",
                                "args": {"data": "demo", "limit": 10}}]
    assert written["max_calls"]["total"] == 10 and written["generate"] == dict(LEVELS["quick"].generate)


def _stated_bound(summary: str) -> int:
    """The MedFuzz bound a level's summary states ("at most N calls per MedFuzz item")."""
    found = re.findall(r"at most ([\d,]+) calls per MedFuzz item", summary)
    assert len(found) == 1, f"the summary must state one MedFuzz bound per item: {summary!r}"
    return int(found[0].replace(",", ""))


@pytest.mark.parametrize("name", list(LEVELS))
def test_every_level_states_the_bound_its_medfuzz_options_imply(name: str) -> None:
    # the summary is what `medfuzz run` prints before the first call: it must not drift from max_calls
    config = MedFuzzConfig.from_options(**LEVELS[name].options_of("medfuzz"))
    assert _stated_bound(LEVELS[name].summary) == sum(config.max_calls(1).values())
    p_hat = re.findall(r"([\d,]+) (?:of them )?p̂ calls\)", LEVELS[name].summary)
    if name in ("paper", "direct", "lean"):  # the cost levels also state the target's p-hat calls
        assert len(p_hat) == 1
    for stated in p_hat:
        assert int(stated.replace(",", "")) == config.max_calls(1)["target_significance"]


def test_cost_levels_change_only_p_hat_and_replicates_and_cost_less() -> None:
    paper = MedFuzzConfig.from_options(**LEVELS["paper"].options_of("medfuzz"))
    costs = {}
    for name in ("direct", "lean"):
        level = LEVELS[name]
        config = MedFuzzConfig.from_options(**level.options_of("medfuzz"))
        # what keeps a level's attacks and controls paired with the paper's (same seeds, same K, M, test, alpha)
        assert set(level.options_of("medfuzz")) <= {"pvalue_prompt", "option_orders", "replicates"}
        assert config.option_orders <= paper.option_orders and config.replicates <= paper.replicates
        assert config.pvalue_prompt == "direct"
        # TCES and MedGuard stay at the paper's (they are cheap)
        paper_level = LEVELS["paper"]
        assert (level.settings_for("tces"), level.settings_for("medguard"), level.limits, level.generate) == (
            paper_level.settings_for("tces"), paper_level.settings_for("medguard"), paper_level.limits,
            paper_level.generate)
        costs[name] = sum(config.max_calls(1).values())
    assert sum(paper.max_calls(1).values()) > costs["direct"] > costs["lean"]


@pytest.mark.parametrize("name", ["direct", "lean"])
def test_a_cost_level_reaches_the_medfuzz_run_and_its_bound(tmp_path: Path, name: str) -> None:
    suite = plan(tmp_path, level=name, methods=("medfuzz",), limit=2)
    (run,) = suite.runs()
    assert run.args == {"data": "demo", "limit": 2, **LEVELS[name].options_of("medfuzz")}
    (built,) = build_tasks(suite)
    level_config = MedFuzzConfig.from_options(**LEVELS[name].options_of("medfuzz"))
    assert bound([built]).per_run["medfuzz"] == level_config.max_calls(2)


def test_run_command_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in an option and a provider's missing key end ``medfuzz run`` with one line, before any call."""
    from medfuzz.cli import main

    monkeypatch.delenv("NOWHERE_API_KEY", raising=False)
    common = ["run", "--methods", "baseline", "--data", "demo", "--limit", "1", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match=r"^medfuzz run: --option prompt_styl: .*'prompt_style'"):
        main([*common, "--model", "openai-api/nowhere/x", "-T", "prompt_styl=cot"])
    with pytest.raises(SystemExit, match=r"(?s)^medfuzz run: .*NOWHERE_API_KEY"):
        main([*common, "--model", "openai-api/nowhere/x", "--display", "plain"])
    assert not list((tmp_path / "out").glob("inspect/*.eval"))  # nothing ran


def test_progress_expects_each_runs_own_calls_per_finished_sample() -> None:
    """The expected total: calls so far + per run, unfinished samples x that run's calls per finished sample (before
    any has finished, the share of the bound the other attacks used, or the bound), counted by hand."""
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    calls = Bound({"a": {"target": 40}, "b": {"target": 10, "attacker": 90}}, {"a": 4, "b": 10})
    progress = SuiteProgress(calls, show=False)
    assert progress.estimated_total() == 140  # nothing finished: the bounds
    progress.task_started("e1", "a", 4)
    for _ in range(6):
        progress.model_call("e1", tokens=10)
    progress.sample_finished("e1")
    # a: 6 calls so far, 3 samples left at 6 per finished sample = 18; b, another attack not yet observed: the
    # share of its bound a used (6 of 10 a sample), 100 x 0.6 = 60
    assert progress.estimated_total() == 6 + 18 + 60
    assert progress.samples_done() == (1, 14) and progress.tokens == 60
    progress.task_started("e2", "b", 5)  # a resumed run: 5 of its 10 samples left to run
    assert progress.samples_done() == (6, 14)
    assert progress.estimated_total() == 6 + 18 + 5 * 10 * 0.6  # b: 5 unfinished x 10 per sample x a's share


def test_the_embedded_model_and_the_demo_level_bring_their_own_attacker_and_data(tmp_path: Path) -> None:
    """README's main command, ``medfuzz run --model embedded --level demo``: the template attacker (a 135M model
    cannot write rewrites) and the bundled items; any other model attacks itself on the test split unless told."""
    import argparse

    from medfuzz.cli import run as run_cli
    from medfuzz.cli.suite.plan import TEMPLATE_ATTACKER

    parser = argparse.ArgumentParser()
    run_cli.add_parser(parser.add_subparsers())
    embedded = run_cli.plan_from(parser.parse_args(["run", "--model", "embedded", "--level", "demo",
                                                    "--out", str(tmp_path)]))
    assert (embedded.attacker, embedded.data) == (TEMPLATE_ATTACKER, "demo")
    other = run_cli.plan_from(parser.parse_args(["run", "--model", "openai-api/vllm/m", "--out", str(tmp_path)]))
    assert (other.attacker, other.data) == (None, "hf")
    told = run_cli.plan_from(parser.parse_args(["run", "--model", "embedded", "--level", "demo", "--data", "hf",
                                                "--attacker", "openai/gpt-4o", "--out", str(tmp_path)]))
    assert (told.attacker, told.data) == ("openai/gpt-4o", "hf")


def test_realtime_buffer_is_off_unless_asked(tmp_path: Path) -> None:
    import argparse

    from medfuzz.cli import run as run_cli
    from medfuzz.cli.suite.inspect_half import eval_set_args

    quiet = plan(tmp_path)
    assert eval_set_args(quiet)["log_realtime"] is False and quiet.settings()["log_realtime"] is False
    live = plan(tmp_path, log_realtime=True)
    assert eval_set_args(live)["log_realtime"] is True and live.settings()["log_realtime"] is True
    parser = argparse.ArgumentParser()
    run_cli.add_parser(parser.add_subparsers())
    base = ["run", "--model", "openai-api/vllm/m", "--out", str(tmp_path)]
    assert run_cli.plan_from(parser.parse_args(base)).log_realtime is False
    assert run_cli.plan_from(parser.parse_args([*base, "--log-realtime"])).log_realtime is True
    assert run_cli.plan_from(parser.parse_args([*base, "--no-log-realtime"])).log_realtime is False  # old flag


def test_a_limit_option_is_the_limit_of_both_harnesses(tmp_path: Path) -> None:
    """``-T baseline_limit=4`` sets the Inspect task's limit (the option wins in the task args) and the lm-eval
    half's ``clean_limit`` alike (it once reached Inspect only: the harnesses ran 4 and 10 items)."""
    from medfuzz.cli.suite.lm_eval_half import lm_eval_tasks

    suite = plan(tmp_path, level="quick", options={"baseline_limit": 4, "medguard_limit_per_aspect": 1})
    runs = {r.label: r for r in suite.runs()}
    assert runs["clean baseline"].args["limit"] == suite.limit_for("baseline") == 4
    assert runs["medguard"].args["limit_per_aspect"] == suite.limit_for("medguard") == 1
    _, metadata = lm_eval_tasks(suite, None)
    assert metadata["clean_limit"] == 4 and metadata["medguard_limit_per_aspect"] == 1
    # no option for TCES: the level's own lm-eval count (Level.lm_eval_limits), not its Inspect count
    assert metadata["tces_limit"] == suite.lm_eval_limit_for("tces") == 5 and suite.limit_for("tces") == 10
    assert plan(tmp_path, level="quick", options={"limit": 3}).limit_for("medfuzz") == 3
    given = plan(tmp_path, level="quick", limit=7)  # a count the user gives wins in both halves
    assert lm_eval_tasks(given, None)[1]["tces_limit"] == given.limit_for("tces") == 7


@pytest.mark.parametrize("level", list(LEVELS))
def test_the_plan_resolves_the_levels_defaults_as_medfuzz_run_does(tmp_path: Path, level: str) -> None:
    """``SuitePlan(level=...)`` scripted from Python runs what ``medfuzz run --level ...`` runs: the level's data
    (demo and quick: the bundled items, not the whole Hugging Face split) and, for the embedded model, the
    template attacker."""
    from medfuzz.cli import build_parser
    from medfuzz.cli.run import plan_from
    from medfuzz.cli.suite.plan import TEMPLATE_ATTACKER

    scripted = SuitePlan(model="embedded", out=tmp_path, level=level)
    assert scripted.data == LEVELS[level].data and scripted.attacker == TEMPLATE_ATTACKER
    assert {run.args.get("data") for run in scripted.runs() if run.method != "medguard"} == {LEVELS[level].data}
    command = plan_from(build_parser().parse_args(["run", "--model", "embedded", "--level", level,
                                                   "--out", str(tmp_path)]))
    assert (command.data, command.attacker) == (scripted.data, scripted.attacker)
    assert SuitePlan(model="openai-api/vllm/m", out=tmp_path, level=level).attacker is None  # attacks itself
    assert SuitePlan(model="embedded", out=tmp_path, level=level, data="hf", attacker="openai/gpt-4o").data == "hf"


@pytest.mark.parametrize("model", ["embedded", "openai-api/vllm/m", "openai/gpt-4o,openai-api/vllm/m"])
@pytest.mark.parametrize("level", list(LEVELS))
def test_every_default_of_medfuzz_run_is_the_plans(tmp_path: Path, model: str, level: str) -> None:
    """The command with only --model, --level and --out is the plan scripted with the same three: the parser
    adds no default of its own (its options are generated from the plan's fields)."""
    from medfuzz.cli import build_parser
    from medfuzz.cli.run import plan_from
    from medfuzz.cli.suite.run import RunOptions
    from medfuzz.options import flag_values

    command = build_parser().parse_args(["run", "--model", model, "--level", level, "--out", str(tmp_path)])
    assert plan_from(command) == SuitePlan(model=model, out=tmp_path.resolve(), level=level)
    assert RunOptions(**flag_values(RunOptions, command)) == RunOptions()


def test_medfuzz_runs_options_are_the_fields_of_the_plan_and_the_run_options() -> None:
    """Every option of ``medfuzz run`` is a field with ``flag`` metadata: argparse re-declares nothing by hand."""
    import argparse
    import dataclasses

    from medfuzz.cli import run as run_cli
    from medfuzz.cli.suite.run import RunOptions
    from medfuzz.options import FLAG

    commands = argparse.ArgumentParser().add_subparsers()
    run_cli.add_parser(commands)
    run = commands.choices["run"]
    options = {action.dest for action in run._actions if action.dest != "help"}
    flagged = {f.name for cls in (SuitePlan, RunOptions) for f in dataclasses.fields(cls) if FLAG in f.metadata}
    assert options == flagged
    assert {"model", "out", "level", "options", "shard", "lm_eval", "threads", "report", "dry_run"} <= flagged


def test_with_one_run_at_a_time_medfuzz_starts_first_else_the_plans_order(tmp_path: Path) -> None:
    from medfuzz.cli.suite.inspect_half import run_order

    runs = [(run, run.label) for run in plan(tmp_path).runs()]  # the plan: cheap runs first, MedFuzz last
    assert [label for _, label in run_order(runs, 1)] == ["medfuzz", "clean baseline", "tces drugs pdws",
                                                         "tces diseases pdws", "medguard"]
    for several in (None, 2, 10):
        assert run_order(runs, several) == runs
    without = [pair for pair in runs if pair[0].method != "medfuzz"]
    assert run_order(without, 1) == without


def test_a_finished_lm_eval_half_is_reused_only_for_the_same_command(tmp_path: Path) -> None:
    from medfuzz.cli.suite.lm_eval_half import finished_lm_eval_run

    out = tmp_path / "lm-eval"
    results = out / "model" / "results_2026-01-01T00-00-00.json"
    results.parent.mkdir(parents=True)
    results.write_text("{}")
    record = {"model": "medfuzz-local", "model_args": "n_threads=2", "tasks": ["medqa_clean"],
              "metadata": {"data": "demo", "clean_limit": 10}}
    marker = tmp_path / "finished-run.jsonl"
    marker.write_text(json.dumps({**record, "results": "model/results_2026-01-01T00-00-00.json"}) + "\n")
    assert finished_lm_eval_run(marker, record, out) == results
    for changed in ({"metadata": {"data": "demo", "clean_limit": 20}}, {"tasks": ["medqa_clean", "medguard"]},
                    {"model_args": "n_threads=1"}, {"model": "hf"}):
        assert finished_lm_eval_run(marker, {**record, **changed}, out) is None, changed
    results.unlink()  # the results file is gone: run again
    assert finished_lm_eval_run(marker, record, out) is None
    for broken in ("{not json", "[1, 2]"):
        marker.write_text(broken)
        assert finished_lm_eval_run(marker, record, out) is None
    assert finished_lm_eval_run(tmp_path / "absent.jsonl", record, out) is None


def test_the_printed_lm_eval_command_is_the_command_that_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The ``$ medfuzz-lm-eval ...`` line is shell-quoted: pasted into a shell it is the argument list the suite
    ran (its --metadata JSON holds spaces and quotes)."""
    import shlex
    import subprocess

    from medfuzz.cli.suite.lm_eval_half import LmEvalPlan, run_lm_eval

    ran: list[list[str]] = []

    def popen(command: list[str], **kwargs: object) -> None:
        ran.append(command)
        raise RuntimeError("stop here")

    monkeypatch.setattr(subprocess, "Popen", popen)
    plan = SuitePlan(model="openai-api/vllm/m", out=tmp_path / "out", level="demo", methods=("baseline", "tces"))
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError, match="stop here"):
        run_lm_eval(plan, LmEvalPlan.parse("hf:pretrained=my model", 1), None, tmp_path / "out" / "lm-eval.out",
                    model_label="my model's name")
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("$ ")]
    assert shlex.split(line[2:]) == ran[0]
    assert any(" " in part for part in ran[0])  # something needed quoting
