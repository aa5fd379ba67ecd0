"""Recorded event sequences of a ``medfuzz run`` suite, to test its ETA deterministically.

A small discrete-event simulation of what Inspect's hooks report while an eval set runs: tasks start (at most
``max_tasks`` at a time, in order), each runs at most ``max_samples`` samples at a time, a sample makes its
calls one after another, each taking a seeded random latency, and at most ``max_connections`` calls are in flight
(Inspect's per-model connection limit: the others queue). The sequence (time, event) is replayed into a
``SuiteProgress`` whose clock is the sequence's own, so the ETA it prints at any point can be compared with the
real time left. Nothing here waits or reads the wall clock.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SimRun:
    """One run of the suite: its key, method, samples, the bound of calls per sample and how many calls each of
    its samples really makes (drawn from ``calls`` with the sequence's random generator)."""

    key: str
    method: str
    samples: int
    bound_per_sample: int
    calls: Callable[[random.Random], int]


@dataclass(frozen=True)
class Event:
    time: float
    kind: str  # task_start | sample_start | call | sample_end
    run: str
    sample: str = ""  # the sample's id (sample_start, sample_end)


@dataclass
class Sequence:
    runs: list[SimRun]
    events: list[Event] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.events[-1].time

    @property
    def calls(self) -> int:
        return sum(e.kind == "call" for e in self.events)


def record(runs: list[SimRun], max_tasks: int, max_samples: int, max_connections: int = 16,
           latency: tuple[float, float] = (0.5, 1.5), seed: int = 0) -> Sequence:
    """The events of ``runs`` run as an eval set would, in time order."""
    rng = random.Random(seed)
    out = Sequence(runs)
    queue: list[tuple[float, int, str, Any]] = []  # (time, tie-breaker, action, payload)
    order = iter(range(10**9))
    pending = list(runs)
    waiting: dict[str, list[int]] = {}  # run -> calls of each sample not yet started
    running: dict[str, int] = {}  # run -> samples in flight
    connections = [0]  # calls in flight
    queued: list[tuple[str, int, str]] = []  # calls waiting for a connection: (run, calls after it, sample)
    started = [0]

    def call(key: str, left: int, now: float, sample: str) -> None:
        if connections[0] >= max_connections:
            queued.append((key, left, sample))
            return
        connections[0] += 1
        heapq.heappush(queue, (now + rng.uniform(*latency), next(order), "call", (key, left, sample)))

    def start_task(now: float) -> None:
        run = pending.pop(0)
        out.events.append(Event(now, "task_start", run.key))
        waiting[run.key] = [max(1, run.calls(rng)) for _ in range(run.samples)]
        running[run.key] = 0
        fill(run.key, now)

    def fill(key: str, now: float) -> None:
        while waiting[key] and running[key] < max_samples:
            calls = waiting[key].pop(0)
            running[key] += 1
            started[0] += 1
            sample = f"s{started[0]}"
            out.events.append(Event(now, "sample_start", key, sample))
            call(key, calls - 1, now, sample)

    for _ in range(min(max_tasks, len(pending))):
        start_task(0.0)
    while queue:
        now, _, _, (key, left, sample) = heapq.heappop(queue)
        out.events.append(Event(now, "call", key))
        connections[0] -= 1
        if queued:
            waiting_key, waiting_left, waiting_sample = queued.pop(0)
            call(waiting_key, waiting_left, now, waiting_sample)
        if left:
            call(key, left - 1, now, sample)
            continue
        out.events.append(Event(now, "sample_end", key, sample))
        running[key] -= 1
        fill(key, now)
        if not waiting[key] and not running[key] and pending:  # the task ended: the eval set starts the next
            start_task(now)
    return out


def replay(sequence: Sequence, progress_factory: Callable[[Callable[[], float]], Any],
           at: tuple[float, ...] = (0.25, 0.5, 0.75)) -> Iterator[tuple[float, float, float]]:
    """Feed ``sequence`` into the progress ``progress_factory(clock)`` builds; at each share of the calls in
    ``at`` yield (share, the ETA the progress gives, the real time left)."""
    for share, eta, truth, _ in replay_known(sequence, progress_factory, at):
        yield share, eta, truth


def replay_known(sequence: Sequence, progress_factory: Callable[[Callable[[], float]], Any],
                 at: tuple[float, ...] = (0.25, 0.5, 0.75)) -> Iterator[tuple[float, float, float, bool]]:
    """``replay`` with, beside each ETA, whether the progress calls it known (``eta_known``; a progress without
    it: always); the samples' ids reach a progress whose sample events take them."""
    import inspect

    now = [0.0]
    progress = progress_factory(lambda: now[0])
    with_ids = hasattr(progress, "sample_started") and len(inspect.signature(progress.sample_started).parameters) > 1
    known = getattr(progress, "eta_known", lambda: True)
    total = sequence.calls
    marks = list(at)
    calls = 0
    for event in sequence.events:
        now[0] = event.time
        if event.kind == "task_start":
            run = next(r for r in sequence.runs if r.key == event.run)
            progress.task_started(event.run, event.run, run.samples)
        elif event.kind == "sample_start" and hasattr(progress, "sample_started"):
            progress.sample_started(event.run, *([event.sample] if with_ids else []))
        elif event.kind == "call":
            progress.model_call(event.run, tokens=1)
            calls += 1
            while marks and calls >= marks[0] * total:
                yield marks.pop(0), eta_of(progress, event.time), sequence.end - event.time, known()
        elif event.kind == "sample_end":
            progress.sample_finished(event.run, *([event.sample] if with_ids else []))


def eta_of(progress: Any, now: float) -> float:
    """The ETA in seconds at ``now``; for a progress without ``eta_seconds`` (the estimator before issue 26, its
    clock started at 0), its formula: elapsed × calls still expected / calls so far."""
    if hasattr(progress, "eta_seconds"):
        return progress.eta_seconds()
    return now * (progress.estimated_total() - progress.calls) / progress.calls


# ------------------------------------------------------------------------------------------- suites


def fixed(calls: int) -> Callable[[random.Random], int]:
    return lambda rng: calls


def between(low: int, high: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randint(low, high)


def early_stop(stop_share: float, short: int, long: int) -> Callable[[random.Random], int]:
    """MedFuzz-like: most samples stop at the first successful attack (``short`` calls), the others go all turns
    (``long``)."""
    return lambda rng: short if rng.random() < stop_share else long


def _suite(medfuzz_samples: int, medfuzz_calls: Callable[[random.Random], int]) -> list[SimRun]:
    return [SimRun("clean baseline", "baseline", 40, 1, fixed(1)),
            SimRun("tces disease pdws", "tces", 30, 8, between(1, 8)),
            SimRun("tces drug pdws", "tces", 30, 8, between(1, 8)),
            SimRun("medguard", "medguard", 60, 1, fixed(1)),
            SimRun("medfuzz", "medfuzz", medfuzz_samples, 120, medfuzz_calls)]


def _demo() -> list[SimRun]:
    """The README's main command (``--level demo`` on the embedded model) in ``suite.run_order``'s order: MedFuzz
    first, then the one-call runs and four TCES runs whose bound (18 calls an item) is far above their use."""
    tces = [SimRun(f"tces {kind} {sampler}", "tces", 12, 18, between(1, 5))
            for kind in ("drugs", "diseases") for sampler in ("rands", "pdws")]
    return [SimRun("medfuzz", "medfuzz", 10, 82, early_stop(0.7, 8, 30)),
            SimRun("clean baseline", "baseline", 10, 1, fixed(1)), *tces,
            SimRun("medguard", "medguard", 32, 1, fixed(1))]


SUITES: dict[str, tuple[list[SimRun], int, int]] = {  # name -> (runs, max_tasks, max_samples)
    "one run, 10 calls of a bound of 100": (
        [SimRun("medfuzz", "medfuzz", 60, 100, fixed(10))], 1, 8),
    "three runs of one method one after another, 8 to 12 calls of 100": (
        [SimRun(f"tces {i}", "tces", 30, 100, between(8, 12)) for i in range(3)], 1, 6),
    "MedFuzz over two models, the second waiting, 5 to 20 calls of 100": (
        [SimRun(f"medfuzz · {m}", "medfuzz", 40, 100, between(5, 20)) for m in "ab"], 1, 10),
    "MedFuzz over two models, the second waiting, 6 or 24 calls of 100": (
        [SimRun(f"medfuzz · {m}", "medfuzz", 40, 100, early_stop(0.5, 6, 24)) for m in "ab"], 1, 10),
    "the demo one run at a time, MedFuzz first, the TCES runs not started at 25 %": (_demo(), 1, 1),
}
def paper_medfuzz(rng: random.Random) -> int:
    """A paper-level MedFuzz item: 35 % end early (answered wrongly before any attack), 25 % after a failed attack
    (all turns), 40 % after a success and its significance test (hundreds to thousands of p-hat calls) — the
    cheap ones finish first."""
    u = rng.random()
    if u < 0.35:
        return rng.randint(15, 30)
    if u < 0.60:
        return rng.randint(80, 160)
    return rng.randint(600, 2400)


# The suite at the paper level (every run at once, MedFuzz bound 3,270 calls an item): calls per finished sample
# say nothing of the significance tests still running, and the estimate is 5-20x too low from start to end; the
# line says the ETA is not yet known (``SuiteProgress.eta_known``) instead.
PAPER: dict[str, tuple[list[SimRun], int, int]] = {
    f"the suite at the paper level, {samples} samples at once": (
        [*_suite(50, paper_medfuzz)[:4], SimRun("medfuzz", "medfuzz", 50, 3270, paper_medfuzz)], 10, samples)
    for samples in (16, 50)}
# Where the rule does not hold (bench/eta_accuracy.py prints them). A method with no finished sample anywhere at
# 25 % of the calls takes the share of the bound the other attack's runs used (``suite_progress.ADAPTIVE``),
# which is only a guess: MedFuzz last of one-at-a-time runs (not medfuzz run's order: ``suite.run_order`` puts it
# first) takes TCES's share, 4-6x its own; with its first samples still running at an endpoint, up to 2.3x. And
# calls per sample of two far-apart kinds in parallel runs (60 % of the samples stop after 6 calls, the rest make
# 30): the first samples to finish are the short ones, and the estimate is low (0.48) at half the calls.
HARD: dict[str, tuple[list[SimRun], int, int]] = {
    "the suite one run at a time, MedFuzz last with most of the calls": (_suite(60, between(5, 20)), 1, 8),
    "the suite at an endpoint (every run at once), MedFuzz 5 to 20 calls of 120": (_suite(60, between(5, 20)), 10, 8),
    "the suite at an endpoint, MedFuzz 6 or 30 calls": (_suite(30, early_stop(0.6, 6, 30)), 10, 8),
}
