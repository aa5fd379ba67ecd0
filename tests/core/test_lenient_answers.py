"""Inspect baselines: strict ``choice()`` stays the headline metric; the lenient reading sits beside it."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def baseline_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    # demo targets of the first four items: C, A, D, ? (the fourth reply names no option at all)
    SCRIPT[:] = ["ANSWER: C", "A) because of the history", "(B)", "I am not sure about this one."]
    [log] = inspect_eval(medqa_clean(data="demo", limit=4), model="medfuzz-scripted/x",
                         log_dir=str(tmp_path_factory.mktemp("lenient")), display="none")
    assert log.status == "success", log.error
    return Path(log.location)


def test_strict_and_lenient_scores_side_by_side(baseline_log: Path) -> None:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(baseline_log))
    assert [s.target for s in log.samples][:3] == ["C", "A", "D"]
    assert [s.scores["baseline_choice"].value for s in log.samples] == ["C", "I", "I", "I"]
    assert [s.scores["lenient_choice"].value for s in log.samples] == ["C", "C", "I", "I"]
    assert [s.scores["lenient_choice"].answer for s in log.samples] == ["C", "A", "B", ""]
    assert [s.scores["lenient_choice"].metadata["lenient_needed"] for s in log.samples] == [False, True, True, False]
    by_name = {s.name: s.metrics for s in log.results.scores}
    assert by_name["baseline_choice"]["baseline_acc"].value == pytest.approx(0.25)
    assert by_name["lenient_choice"]["lenient_accuracy"].value == pytest.approx(0.5)
    assert by_name["lenient_choice"]["lenient_needed"].value == 2


def test_run_summary_exposes_both(baseline_log: Path) -> None:
    from medfuzz.report.runs import read_inspect_log

    run = read_inspect_log(baseline_log)
    assert (run.reported, run.recomputed, run.unparsed) == (0.25, 0.25, 3)
    assert run.lenient == pytest.approx(0.5) and run.lenient_needed == 2
    # Inspect's stderr: sample standard deviation (ddof 1) over sqrt(n) of [1, 1, 0, 0]
    assert run.lenient_stderr == pytest.approx(statistics.stdev([1, 1, 0, 0]) / 2)


def test_lenient_reading_follows_shuffled_choices() -> None:
    """When Inspect shuffles the choices, the letter names the displayed position, scored at its origin."""
    import asyncio

    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState
    from inspect_ai.solver._task_state import Choices

    from medfuzz.tasks.inspect.baselines import lenient_choice

    choices = Choices(["aspirin", "heparin", "warfarin"])
    choices.shuffle(__import__("random").Random(3))
    shown = [c.value for c in choices]
    state = TaskState(model="x", sample_id=1, epoch=1, input="q", messages=[], choices=[c.value for c in choices])
    state.choices = choices
    letter = "ABC"[shown.index("heparin")]
    state.output = ModelOutput.from_content("x", f"{letter}. heparin")
    score = asyncio.run(lenient_choice()(state, Target("B")))  # heparin was option B before the shuffle
    assert (score.value, score.answer, score.metadata["lenient_needed"]) == ("C", letter, True)
