"""The suite's progress line: model calls done against the bound, and an ETA over the whole suite.

Inspect's hooks (``inspect_ai.hooks``) report every model call (``on_model_usage``; cache hits come through
``on_model_cache_usage`` and are not paid for), every started and every finished sample. The ETA:

- **calls still to come**, per run, from the calls per sample actually observed: the calls a run paid so far over
  the samples' worth of work they bought (finished samples whole, samples in flight half: in a run with steady
  concurrency a sample in flight is on average half done), times the samples' worth left. A run with no finished
  sample takes the share of its bound that the finished runs of the same method used (the TCES settings, or one
  method over several models); an attack method with no finished sample anywhere takes the share the other
  attacks' runs used (``ADAPTIVE``), and only with no attack observed at all falls back to the bound, which
  overstates (MedFuzz stops at the first successful attack and uses about a tenth of its bound);
- **time**: those calls at the recent call rate (over the later half of the time since the first task started:
  the build, the embedded server's start and a run's slow first seconds are not its pace), or, when longer, a
  running run's calls still expected at its own recent rate per sample in flight times the samples it will run
  at once (the last runs' samples set the pace at the end).

Measured on recorded event sequences (``tests/suite_events.py``; ``bench/eta_accuracy.py`` prints before/after):
within 2× of the real time left from 25 % of the calls on wherever every method has finished a sample by then;
a method that has not is estimated at its bound (``suite_events.HARD`` lists the cases and their errors); and on
a real run against the planted server (``bench/eta_planted.py``). Drawn with tqdm on a terminal; elsewhere (CI, a
log file) one plain line every 10 s, from a ``Heartbeat`` (also while no call ends). The hook is registered
once per process and only active while a ``SuiteProgress`` is
(``enabled()``).
"""

from __future__ import annotations

import bisect
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.hooks import Hooks, ModelUsageData, SampleEnd, SampleStart, TaskStart, hooks

from medfuzz.cli.suite.build import Bound
from medfuzz.cli.suite.heartbeat import Heartbeat, eta_text
from medfuzz.cli.suite.plan import SuiteRun, run_key
from medfuzz.records.keys import SUITE_KEY

_active: SuiteProgress | None = None


# A sample in flight counts as this share of a finished one: with steady concurrency the samples in flight are
# on average half way through their calls. Without it the calls of the samples in flight are charged to the
# finished ones alone, and early in a run (many in flight, few finished) the calls per sample come out several
# times too high.
IN_FLIGHT_SHARE = 0.5
# The pool of every adaptive run (``_RunState.adaptive``): a method with no finished sample yet takes the share of
# the bound the other attacks used (MedFuzz and TCES both stop at the first success, so both use less of their
# bound the less robust the model is). Its bound alone overstated 8-10x (issue 26: 15:15 printed at 32 % of the
# README's main command, 1:34 real, with the TCES runs not yet started behind MedFuzz).
ADAPTIVE = "adaptive runs"
# A sample in flight longer than this many times every finished sample of its run marks the ETA as not yet known
# (``_RunState.censored``). At 2 a paper-level MedFuzz run (recorded sequences, tests/suite_events.py PAPER) was
# called known at 20x too low: an expensive sample that finished says little of those still running.
CENSORED_AFTER = 1.0
RATE_MIN_CALLS = 20  # the fewest calls a recent window needs to give the rate
BAR_FORMAT = "{{desc}} {{percentage:3.0f}}%|{{bar}}| {{n_fmt}}/{{total_fmt}} calls [{{elapsed}}<{eta}] {{postfix}}"


@dataclass
class _RunState:
    samples: int
    bound: int
    method: str  # runs of one method share their observed use of the bound (``SuiteProgress.pooled_use``)
    calls: int = 0
    started: int = 0  # samples started by this invocation
    finished: int = 0  # samples finished by this invocation (their calls, and those in flight, are ``calls``)
    reused: int = 0  # samples a resumed run had finished before (paid by an earlier invocation)
    most_in_flight: int = 0  # the most samples this run had in flight at once: its concurrency
    started_at: float | None = None  # when its task started
    call_times: list[float] = field(default_factory=list)  # when each of its calls ended, in order
    sample_starts: dict[str, float] = field(default_factory=dict)  # samples in flight (by id): when they started
    longest_finished: float = 0.0  # the longest a finished sample of this run took

    def censored(self, now: float) -> bool:
        """Whether a sample in flight has run longer than any finished one: the finished samples (the first to
        end are the cheap ones: an item answered wrongly before any attack, an attack that failed) say nothing
        yet about what the expensive ones (MedFuzz's significance tests) will cost."""
        longest = CENSORED_AFTER * self.longest_finished
        return self.adaptive and any(now - start > longest for start in self.sample_starts.values())

    @property
    def bound_per_sample(self) -> float:
        return self.bound / max(1, self.samples)

    def pace(self, now: float) -> float:
        """Calls a second this run can keep up: its recent rate (``recent_rate``) per sample in flight, times the
        samples it will run at once (its concurrency, at most the samples it has left); 0 with none in flight."""
        if not self.in_flight or self.started_at is None:
            return 0.0
        rate = recent_rate(self.call_times, self.started_at, now)
        return rate / self.in_flight * max(1, min(self.most_in_flight, self.samples - self.reused - self.finished))

    @property
    def in_flight(self) -> int:
        return max(0, self.started - self.finished)

    def work_done(self) -> float:
        """Samples' worth of work the calls so far paid for."""
        return self.finished + IN_FLIGHT_SHARE * self.in_flight

    def work_left(self) -> float:
        return max(0.0, self.samples - self.reused - self.work_done())

    def bound_used(self) -> float | None:
        """Calls paid over the bound of the work they bought; None before a sample has finished (samples in flight
        alone are no guide: just started, they would be taken as half done after a call or two)."""
        if not self.finished:
            return None
        return self.calls / (self.work_done() * self.bound_per_sample) if self.bound_per_sample else 0.0

    @property
    def adaptive(self) -> bool:
        """Whether this run's samples may stop before their bound (an attack under a query budget: more than one
        call per sample at most); a run of one call per sample always uses its bound."""
        return self.bound_per_sample > 1

    def remaining_calls(self, pooled: dict[str, float]) -> float:
        """The work left at this run's own observed use of the bound, else at its method's, else (an adaptive run
        of a method not yet observed) at the use observed over the other adaptive runs, else at the bound."""
        use = self.bound_used()
        if use is None:
            use = pooled.get(self.method, pooled.get(ADAPTIVE, 1.0) if self.adaptive else 1.0)
        return self.work_left() * self.bound_per_sample * use


def recent_rate(times: list[float], origin: float, now: float) -> float:
    """Calls a second over the later half of the time since ``origin`` (all of it while that half holds fewer
    than ``RATE_MIN_CALLS``; ``times``: when each call ended, in order): a run's first seconds are slower than the
    rest (connections, datasets, the first samples' set-up; on the planted server the first quarter of the calls
    took 60 % of the time), so the rate since the start alone would stay too low for most of the run."""
    if not times or now <= origin:
        return 0.0
    window = (now - origin) / 2
    recent = len(times) - bisect.bisect_left(times, now - window)
    return recent / window if recent >= RATE_MIN_CALLS else len(times) / (now - origin)


def run_methods(runs: Iterable[SuiteRun], models: Sequence[str]) -> dict[str, str]:
    """Run key (``plan.run_key``, as the bound is keyed) -> method, for ``SuiteProgress(methods=...)``."""
    return {run_key(run.label, model, len(models) > 1): run.method for run in runs for model in models}


@dataclass
class SuiteProgress:
    """Counts of this invocation (calls and tokens paid, samples finished) and the progress bar."""

    bound: Bound
    show: bool = True
    several_models: bool = False  # runs are keyed "label · model" (plan.run_key)
    # run key -> method (``run_methods``): runs of one method pool their observed calls per sample. A run not
    # named here is known by its Inspect task from its start on.
    methods: dict[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic  # the recorded-sequence tests bring their own
    calls: int = 0
    cached: int = 0
    tokens: int = 0
    started: float = 0.0
    first_task: float | None = None  # when the first task started: the origin of the call rate
    runs: dict[str, _RunState] = field(default_factory=dict)
    _call_times: list[float] = field(default_factory=list)  # when each call ended, in order (``call_rate``)
    _eval_labels: dict[str, str] = field(default_factory=dict)
    _bar: Any = None
    _last_line: float = 0.0
    line_interval: float = 10.0  # without a terminal: a plain line this often (``Heartbeat``), events or not
    _heartbeat: Heartbeat | None = None

    def __post_init__(self) -> None:
        self.started = self.clock()
        for label, samples in self.bound.samples.items():
            self.runs[label] = _RunState(samples, sum(self.bound.per_run[label].values()),
                                         self.methods.get(label, label))

    def __enter__(self) -> SuiteProgress:
        global _active
        if self.show and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.bound.total, unit="call", dynamic_ncols=True, mininterval=1.0,
                             bar_format=BAR_FORMAT.format(eta="?"))
            self._bar.set_description("medfuzz run")
        elif self.show:  # a log file, CI: a plain line every ``line_interval`` s, also while no call ends
            self._heartbeat = Heartbeat(self.status_text, self.line_interval).__enter__()
        _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = None
        if self._heartbeat is not None:
            self._heartbeat.__exit__()
        if self._bar is not None:
            self._bar.close()
        elif self.show:  # the last state, whatever the minute
            print(self.status_text(), file=sys.stderr, flush=True)

    # -- events
    def reusing(self, done: dict[str, int]) -> None:
        """Samples an earlier invocation finished, per run (``inspect_half.samples_done_before``): they run no more."""
        for key, count in done.items():
            if key in self.runs:
                self.runs[key].reused = min(count, self.runs[key].samples)
        self._refresh()

    def task_started(self, eval_id: str, label: str | None, samples: int, model: str = "", task: str = "") -> None:
        if label is not None:
            label = run_key(label, model, self.several_models)
        if label is None or label not in self.runs:
            return
        if self.first_task is None:
            self.first_task = self.clock()
        state = self.runs[label]
        if label in self._eval_labels.values():  # eval_set retrying the run: the samples in flight ended with it
            state.started = state.finished
        self._eval_labels[eval_id] = label
        if state.started_at is None:
            state.started_at = self.clock()
        if task and label not in self.methods:  # runs of one Inspect task are runs of one method
            state.method = task
        if samples and samples < state.samples:  # a start that lists only the samples left to run
            state.reused = max(state.reused, state.samples - samples)
        self._refresh()

    def model_call(self, eval_id: str | None, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens
        self._call_times.append(self.clock())
        label = self._eval_labels.get(eval_id or "")
        if label:
            self.runs[label].calls += 1
            self.runs[label].call_times.append(self._call_times[-1])
        self._refresh()

    def sample_started(self, eval_id: str, sample_id: str = "") -> None:
        label = self._eval_labels.get(eval_id)
        if label:
            state = self.runs[label]
            state.started += 1
            state.most_in_flight = max(state.most_in_flight, state.in_flight)
            if sample_id:
                state.sample_starts[sample_id] = self.clock()
        self._refresh()

    def sample_finished(self, eval_id: str, sample_id: str = "") -> None:
        label = self._eval_labels.get(eval_id)
        if label:
            state = self.runs[label]
            state.finished += 1
            start = state.sample_starts.pop(sample_id, None)
            if start is not None:
                state.longest_finished = max(state.longest_finished, self.clock() - start)
        self._refresh()

    def eta_known(self) -> bool:
        """Whether the ETA rests on samples like the ones still running: not while a sample of an attack run has
        run longer than every finished one of its run (``_RunState.censored``); the line then says the ETA is not
        yet known and gives the current estimate as a floor."""
        now = self.clock()
        return not any(state.censored(now) for state in self.runs.values())

    # -- estimate
    def pooled_use(self) -> dict[str, float]:
        """Per method, the share of the bound its runs with a finished sample used: their calls over the bound of
        the work those calls bought (runs of different bounds per sample weigh by their bound); under ``ADAPTIVE``
        the same over every adaptive run (``_RunState.adaptive``) with a finished sample."""
        calls: dict[str, float] = {}
        bounds: dict[str, float] = {}
        for state in self.runs.values():
            if state.finished:
                for pool in (state.method, *([ADAPTIVE] if state.adaptive else [])):
                    calls[pool] = calls.get(pool, 0.0) + state.calls
                    bounds[pool] = bounds.get(pool, 0.0) + state.work_done() * state.bound_per_sample
        return {pool: calls[pool] / bounds[pool] for pool in calls if bounds[pool]}

    def estimated_total(self) -> float:
        """Calls made so far plus the calls the unfinished samples are expected to make."""
        pooled = self.pooled_use()
        return self.calls + sum(state.remaining_calls(pooled) for state in self.runs.values())

    def eta_seconds(self) -> float:
        """The longer of two lower bounds on the time left (NaN before the first call):

        - the suite's: the calls still expected at the recent call rate (``call_rate``);
        - each running run's: its calls still expected at its own pace (``_RunState.pace``). When most runs have
          ended, the last ones' samples, not the endpoint, set the pace (the suite's rate, measured while every
          run was going, would then be several times too fast).
        """
        rate = self.call_rate()
        if not rate:
            return float("nan")
        pooled = self.pooled_use()
        suite = (self.estimated_total() - self.calls) / rate
        # only runs estimated from their own method's calls: another method's share, or the bound, over a run's
        # pace would stretch an overestimate
        runs = [state.remaining_calls(pooled) / pace for state in self.runs.values()
                if (state.finished or state.method in pooled) and (pace := state.pace(self.clock()))]
        return max([suite, *runs])

    def call_rate(self) -> float:
        """The suite's calls a second (``recent_rate`` since the first task started)."""
        origin = self.first_task if self.first_task is not None else self.started
        return recent_rate(self._call_times, origin, self.clock())

    def samples_done(self) -> tuple[int, int]:
        return (sum(min(s.finished + s.reused, s.samples) for s in self.runs.values()),
                sum(s.samples for s in self.runs.values()))

    def status_text(self) -> str:
        done, total = self.samples_done()
        elapsed = self.clock() - self.started
        expected = self.estimated_total()
        return (f"medfuzz run: {self.calls:,} calls (bound {self.bound.total:,}; expected ~{round(expected):,}) · "
                f"samples {done}/{total} · tokens {self.tokens:,} · elapsed {eta_text(elapsed)} · ETA "
                f"{self.eta_display()}")

    def eta_display(self) -> str:
        """The ETA as the line prints it: the estimate, or while it is not yet known (``eta_known``) the estimate
        as a floor and why."""
        eta = eta_text(self.eta_seconds())
        if self.eta_known():
            return eta
        now = self.clock()
        longer = sum(now - start > CENSORED_AFTER * state.longest_finished
                     for state in self.runs.values() if state.adaptive for start in state.sample_starts.values())
        return (f"not yet known, at least {eta} ({longer} attack sample(s) have run longer than any finished "
                "one of their run: the expensive phase, e.g. MedFuzz's significance tests, is not measured yet)")

    def _refresh(self) -> None:
        if self._bar is None:  # plain lines come from the heartbeat
            return
        done, total = self.samples_done()
        self._bar.total = max(self.calls, round(self.estimated_total()))
        self._bar.n = self.calls
        self._bar.set_postfix_str(f"bound {self.bound.total:,} · samples {done}/{total} · tokens {self.tokens:,}",
                                  refresh=False)
        # this estimate in tqdm's place for {remaining} (tqdm's own divides the calls left by its smoothed rate)
        eta = eta_text(self.eta_seconds())
        self._bar.bar_format = BAR_FORMAT.format(eta=eta if self.eta_known() else f">={eta}?")
        self._bar.refresh()


@hooks(name="medfuzz_suite_progress", description="medfuzz run: calls against the bound and the suite's ETA")
class SuiteProgressHooks(Hooks):
    def enabled(self) -> bool:
        return _active is not None

    async def on_task_start(self, data: TaskStart) -> None:
        if _active is not None:
            ids = data.spec.dataset.sample_ids
            samples = len(ids) if ids is not None else (data.spec.dataset.samples or 0)
            _active.task_started(data.eval_id, (data.spec.metadata or {}).get(SUITE_KEY), samples, data.spec.model,
                                 data.spec.task)

    async def on_sample_start(self, data: SampleStart) -> None:
        if _active is not None:
            _active.sample_started(data.eval_id, data.sample_id)

    async def on_model_usage(self, data: ModelUsageData) -> None:
        if _active is not None:
            _active.model_call(data.eval_id, data.usage.total_tokens)

    async def on_sample_end(self, data: SampleEnd) -> None:
        if _active is not None:
            _active.sample_finished(data.eval_id, data.sample_id)
