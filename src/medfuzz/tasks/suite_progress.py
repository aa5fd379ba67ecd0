"""The suite's progress line: model calls done against the bound, and an ETA over the whole suite.

Inspect's hooks (``inspect_ai.hooks``) report every model call (``on_model_usage``; cache hits come through
``on_model_cache_usage`` and are not paid for) and every finished sample. The ETA estimates the calls still to
come per run from that run's own calls per finished sample (the bound per sample until one has finished: attacks
stop early, so the bound overstates), and divides by the suite's call rate so far. Drawn with tqdm on a
terminal; elsewhere (CI, a log file) one plain line a minute.
The hook is registered once per process and only active while a ``SuiteProgress`` is (``enabled()``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.hooks import Hooks, ModelUsageData, SampleEnd, TaskStart, hooks

from medfuzz.tasks.suite import SUITE_KEY, Bound, run_key

_active: SuiteProgress | None = None


@dataclass
class _RunState:
    samples: int
    bound: int
    calls: int = 0
    finished: int = 0  # samples finished by this invocation (their calls are ``calls``)
    reused: int = 0  # samples a resumed run had finished before (paid by an earlier invocation)

    def remaining_calls(self) -> float:
        left = max(0, self.samples - self.finished - self.reused)
        per_sample = self.calls / self.finished if self.finished else self.bound / max(1, self.samples)
        return left * per_sample


@dataclass
class SuiteProgress:
    """Counts of this invocation (calls and tokens paid, samples finished) and the progress bar."""

    bound: Bound
    show: bool = True
    several_models: bool = False  # runs are keyed "label · model" (suite.run_key)
    calls: int = 0
    cached: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    runs: dict[str, _RunState] = field(default_factory=dict)
    _eval_labels: dict[str, str] = field(default_factory=dict)
    _bar: Any = None
    _last_line: float = 0.0
    line_interval: float = 60.0

    def __post_init__(self) -> None:
        for label, samples in self.bound.samples.items():
            self.runs[label] = _RunState(samples, sum(self.bound.per_run[label].values()))

    def __enter__(self) -> SuiteProgress:
        global _active
        if self.show and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.bound.total, unit="call", dynamic_ncols=True, mininterval=1.0,
                             bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} calls "
                                        "[{elapsed}<{remaining}] {postfix}")
            self._bar.set_description("medfuzz run")
        _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = None
        if self._bar is not None:
            self._bar.close()
        elif self.show:  # the last state, whatever the minute
            print(self.status_text(), file=sys.stderr, flush=True)

    # -- events
    def reusing(self, done: dict[str, int]) -> None:
        """Samples an earlier invocation finished, per run (``suite.samples_done_before``): they run no more."""
        for key, count in done.items():
            if key in self.runs:
                self.runs[key].reused = min(count, self.runs[key].samples)
        self._refresh()

    def task_started(self, eval_id: str, label: str | None, samples: int, model: str = "") -> None:
        if label is not None:
            label = run_key(label, model, self.several_models)
        if label is None or label not in self.runs:
            return
        self._eval_labels[eval_id] = label
        state = self.runs[label]
        if samples and samples < state.samples:  # a start that lists only the samples left to run
            state.reused = max(state.reused, state.samples - samples)
        self._refresh()

    def model_call(self, eval_id: str | None, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens
        label = self._eval_labels.get(eval_id or "")
        if label:
            self.runs[label].calls += 1
        self._refresh()

    def sample_finished(self, eval_id: str) -> None:
        label = self._eval_labels.get(eval_id)
        if label:
            self.runs[label].finished += 1
        self._refresh()

    # -- estimate
    def estimated_total(self) -> float:
        """Calls made so far plus the calls the unfinished samples are expected to make."""
        return self.calls + sum(state.remaining_calls() for state in self.runs.values())

    def samples_done(self) -> tuple[int, int]:
        return (sum(min(s.finished + s.reused, s.samples) for s in self.runs.values()),
                sum(s.samples for s in self.runs.values()))

    def status_text(self) -> str:
        done, total = self.samples_done()
        elapsed = time.monotonic() - self.started
        expected = self.estimated_total()
        eta = elapsed * (expected - self.calls) / self.calls if self.calls else float("nan")
        from medfuzz.tasks.suite import eta_text

        return (f"medfuzz run: {self.calls:,} calls (bound {self.bound.total:,}; expected ~{round(expected):,}) · "
                f"samples {done}/{total} · tokens {self.tokens:,} · elapsed {eta_text(elapsed)} · ETA {eta_text(eta)}")

    def _refresh(self) -> None:
        if self._bar is None:
            if self.show and time.monotonic() - self._last_line >= self.line_interval:
                self._last_line = time.monotonic()
                print(self.status_text(), file=sys.stderr, flush=True)
            return
        done, total = self.samples_done()
        self._bar.total = max(self.calls, round(self.estimated_total()))
        self._bar.n = self.calls
        self._bar.set_postfix_str(f"bound {self.bound.total:,} · samples {done}/{total} · tokens {self.tokens:,}",
                                  refresh=False)
        self._bar.refresh()


@hooks(name="medfuzz_suite_progress", description="medfuzz run: calls against the bound and the suite's ETA")
class SuiteProgressHooks(Hooks):
    def enabled(self) -> bool:
        return _active is not None

    async def on_task_start(self, data: TaskStart) -> None:
        if _active is not None:
            ids = data.spec.dataset.sample_ids
            samples = len(ids) if ids is not None else (data.spec.dataset.samples or 0)
            _active.task_started(data.eval_id, (data.spec.metadata or {}).get(SUITE_KEY), samples, data.spec.model)

    async def on_model_usage(self, data: ModelUsageData) -> None:
        if _active is not None:
            _active.model_call(data.eval_id, data.usage.total_tokens)

    async def on_sample_end(self, data: SampleEnd) -> None:
        if _active is not None:
            _active.sample_finished(data.eval_id)
