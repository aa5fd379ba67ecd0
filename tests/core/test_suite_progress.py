"""The suite's ETA on recorded event sequences (``tests/suite_events.py``): within 2× of the real time left from
25 % of the calls on, with samples that use a tenth of their bound, runs of one method that start later, and
concurrency. Deterministic: the sequences carry their own clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests import suite_events


def progress_for(sequence: suite_events.Sequence) -> Callable[[Callable[[], float]], object]:
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    bound = Bound({r.key: {"target": r.samples * r.bound_per_sample} for r in sequence.runs},
                  {r.key: r.samples for r in sequence.runs})
    methods = {r.key: r.method for r in sequence.runs}
    return lambda clock: SuiteProgress(bound, show=False, methods=methods, clock=clock)


@pytest.mark.parametrize("name", list(suite_events.SUITES))
def test_the_eta_is_within_twice_the_real_time_left_from_a_quarter_of_the_calls_on(name: str) -> None:
    runs, max_tasks, max_samples = suite_events.SUITES[name]
    for seed in range(3):
        sequence = suite_events.record(runs, max_tasks, max_samples, seed=seed)
        for share, eta, truth in suite_events.replay(sequence, progress_for(sequence)):
            assert truth / 2 <= eta <= 2 * truth, (name, seed, share, eta, truth)


def test_the_expected_calls_count_in_flight_samples_half_and_pool_a_methods_runs() -> None:
    """Counted by hand: run a (bound 100 a sample, 4 samples) with 1 finished and 2 in flight after 10 calls has
    done 1 + 2/2 = 2 samples' worth at 5 calls each (a twentieth of its bound); b (same method, not started, 10
    samples of bound 10) takes that share: 10 x 10 x 1/20 = 5 calls; c (another method, one call a sample)
    keeps its bound; d (an attack method not yet observed, 5 samples of bound 8) takes the share the adaptive
    runs used: 5 x 8 x 1/20 = 2 calls."""
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import ADAPTIVE, SuiteProgress

    now = [0.0]
    bound = Bound({"a": {"target": 400}, "b": {"target": 100}, "c": {"target": 7}, "d": {"target": 40}},
                  {"a": 4, "b": 10, "c": 7, "d": 5})
    progress = SuiteProgress(bound, show=False, methods={"a": "medfuzz", "b": "medfuzz", "c": "medguard",
                                                         "d": "tces"}, clock=lambda: now[0])
    assert progress.estimated_total() == 547  # nothing finished: the bounds
    now[0] = 2.0
    progress.task_started("e1", "a", 4)
    for _ in range(3):
        progress.sample_started("e1")
    for _ in range(10):
        progress.model_call("e1", tokens=1)
    progress.sample_finished("e1")
    assert progress.pooled_use() == {"medfuzz": 10 / (2 * 100), ADAPTIVE: 10 / (2 * 100)}
    # a: 2 samples' worth left at 5 calls = 10; b: 5; c: 7; d: 2
    assert progress.estimated_total() == 10 + 10 + 5 + 7 + 2
    now[0] = 12.0  # 10 calls in the 10 s since the first task started: 24 calls to come take 24 s
    # a's own pace: 1 call a second over its 2 samples in flight, times the 3 it ran at once (3 left): 1.5 a
    # second, so its 10 calls take 6.7 s, less than the suite's 22 s
    assert progress.runs["a"].pace(now[0]) == pytest.approx(1.5)
    assert progress.eta_seconds() == pytest.approx(24.0)
    assert progress.samples_done() == (1, 26)


def test_the_call_rate_is_the_later_half_of_the_time_since_the_first_task() -> None:
    """10 calls at 1 a second, then 40 at 4 a second: at t = 20 the later half [10, 20] holds the call at 10 and
    the 40 fast ones, 41 calls in 10 s (the whole run's 50 / 20 = 2.5 a second would be the slow start's pace);
    with fewer than 20 calls in that half, the whole time since the first task."""
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    now = [0.0]
    progress = SuiteProgress(Bound({"a": {"target": 100}}, {"a": 10}), show=False, clock=lambda: now[0])
    progress.task_started("e", "a", 10)
    for second in range(1, 11):
        now[0] = float(second)
        progress.model_call("e", tokens=1)
    assert progress.call_rate() == pytest.approx(10 / 10)  # 6 calls in [5, 10]: too few, the whole 10 s
    for quarter in range(1, 41):
        now[0] = 10 + quarter / 4
        progress.model_call("e", tokens=1)
    assert progress.call_rate() == pytest.approx(41 / 10)


def test_a_retried_run_forgets_the_samples_its_failed_attempt_had_in_flight() -> None:
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    progress = SuiteProgress(Bound({"a": {"target": 100}}, {"a": 10}), show=False, clock=lambda: 0.0)
    progress.task_started("first", "a", 10)
    for _ in range(4):
        progress.sample_started("first")
    progress.sample_finished("first")
    assert progress.runs["a"].in_flight == 3
    progress.task_started("retry", "a", 10)  # the attempt failed with 3 samples unfinished
    assert progress.runs["a"].in_flight == 0 and progress.runs["a"].finished == 1


def test_the_terminal_bar_shows_this_eta_where_tqdm_would_show_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.heartbeat import eta_text
    from medfuzz.cli.suite.progress import SuiteProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    now = [0.0]
    with SuiteProgress(Bound({"a": {"target": 400}}, {"a": 4}), clock=lambda: now[0]) as progress:
        progress.task_started("e", "a", 4)
        progress.sample_started("e")
        for second in range(1, 11):
            now[0] = float(second)
            progress.model_call("e", tokens=1)
        progress.sample_finished("e")  # 10 calls a sample at 1 a second: 30 calls, 30 s to come
        assert progress.eta_seconds() == pytest.approx(30.0)
        assert f"<{eta_text(30.0)}]" in progress._bar.bar_format
    assert "calls [" in terminal.getvalue()


def test_a_heartbeat_prints_while_a_silent_step_runs_and_stops_with_it(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from medfuzz.cli.suite.heartbeat import Heartbeat

    with Heartbeat(lambda: "medfuzz run: working", interval=0.02):
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3 and set(lines) == {"medfuzz run: working"}
    time.sleep(0.1)
    assert capsys.readouterr().err == ""  # stopped with the step

    def broken() -> str:
        raise OSError("gone")

    with Heartbeat(broken, interval=0.02):
        time.sleep(0.1)
    assert "status unavailable: OSError" in capsys.readouterr().err


def test_without_a_terminal_the_inspect_half_prints_a_line_even_when_no_call_ends(
        capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    with SuiteProgress(Bound({"a": {"target": 100}}, {"a": 10}), line_interval=0.02):
        time.sleep(0.2)  # an endpoint taking its time: no event at all
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("medfuzz run: 0 calls")]
    assert len(lines) >= 3


def test_the_lm_eval_half_line_reads_lm_eval_s_own_progress(tmp_path: Path) -> None:
    import time

    from medfuzz.cli.suite.heartbeat import lm_eval_status

    out = tmp_path / "lm-eval.out"
    assert lm_eval_status(out, time.monotonic()).startswith("medfuzz run: lm-eval half: loading the model")
    out.write_text("INFO building\nRunning loglikelihood requests:   0%|          | 0/1200 [00:00<?, ?it/s]"
                   "\rRunning loglikelihood requests:  45%|####5     | 540/1200 [01:30<01:50,  6.0it/s]")
    line = lm_eval_status(out, time.monotonic() - 125)
    assert line == ("medfuzz run: lm-eval half: Running loglikelihood requests 540/1,200 (45 %), ETA 01:50 "
                    "(lm-eval's, this phase) · elapsed 0:02:05")
    out.write_text(out.read_text() + "\rRunning loglikelihood requests: 100%|##########| 1200/1200 [03:10<00:00]\n")
    assert "1,200/1,200 (100 %), done" in lm_eval_status(out, time.monotonic())


@pytest.mark.parametrize("name", [*suite_events.SUITES, *suite_events.PAPER])
def test_a_known_eta_is_within_twice_the_time_left_and_an_unknown_one_says_so(name: str) -> None:
    """From a quarter of the calls on, an ETA the line calls known is within 2x of the real time left; at the
    paper level (most of MedFuzz's calls in significance tests that end last) it is not known at a quarter of the
    calls, and the floor it prints is below twice the time left."""
    runs, max_tasks, max_samples = {**suite_events.SUITES, **suite_events.PAPER}[name]
    for seed in range(3):
        sequence = suite_events.record(runs, max_tasks, max_samples, max_connections=64, seed=seed)
        marks = list(suite_events.replay_known(sequence, progress_for(sequence), at=(0.25, 0.4, 0.5, 0.6, 0.75)))
        for share, eta, truth, known in marks:
            if known:
                assert truth / 2 <= eta <= 2 * truth, (name, seed, share, eta, truth)
            else:
                assert eta <= 2 * truth, (name, seed, share, eta, truth)
        if name in suite_events.PAPER:
            assert not marks[0][3], (name, seed, marks[0])


def test_the_line_says_when_the_eta_is_not_yet_known() -> None:
    from medfuzz.cli.suite.build import Bound
    from medfuzz.cli.suite.progress import SuiteProgress

    now = [0.0]
    progress = SuiteProgress(Bound({"m": {"target": 1000}}, {"m": 3}), show=False, clock=lambda: now[0])
    progress.task_started("e", "m", 3)
    for sample in ("a", "b", "c"):
        progress.sample_started("e", sample)
    for _ in range(30):
        now[0] += 1
        progress.model_call("e", 1)
    progress.sample_finished("e", "a")  # a cheap one, after 30 s
    assert progress.eta_known()
    now[0] += 31  # b and c now running longer than any finished sample
    progress.model_call("e", 1)
    assert not progress.eta_known()
    assert "ETA not yet known, at least " in progress.status_text()
    assert "2 attack sample(s) have run longer than any finished one" in progress.status_text()
    progress.sample_finished("e", "b")
    assert progress.eta_known()
