"""The sequential test's batch sizes change what is paid, never what is decided (issue 37).

Property: on the same control stream, every batch policy (``control_batch`` N, or the default batches that grow
with the evidence) gives the decision, the p-value and the stop of drawing one control at a time, and scores
at least the controls that decision reads. Checked on thousands of random streams through the engine's loop
(``stats.ControlSchedule``) and on random streams through the engine itself (scripted actors whose controls
are seeded by control index, so the stream does not depend on the schedule).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest

from medfuzz import stats
from medfuzz.scorers.medfuzz import significance_test
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.results import Outcome
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, item_text, models

BATCHES = (None, 1, 2, 3, 5, 7, 1000)


def run_schedule(p0: float, pa: float, stream: Sequence[float | None], limit: int, h: int, least: int,
                 batch: int | None) -> tuple[stats.ControlSchedule, list[range]]:
    schedule = stats.ControlSchedule(limit, h, least, batch=batch)
    batches = []
    while drawn := schedule.next_batch():
        batches.append(drawn)
        schedule.record(p0, pa, stream[drawn.start:drawn.stop])
    return schedule, batches


def verdict(p0: float, pa: float, stream: Sequence[float | None], schedule: stats.ControlSchedule, h: int,
            least: int, alpha: float) -> tuple[bool, float | None, bool]:
    """(tested, valid p-value, significant) from the controls drawn, as the scorer reads them (an untested
    attack has no p-value: it is never significant and stays out of the Holm/BH family)."""
    test = stats.permutation_p_value(p0, pa, stream[:schedule.attempted], stop_at=h)
    if test is None:
        return False, None, False
    tested = test.scored >= least or test.exceedances >= h
    return tested, test.p_value if tested else None, tested and stats.significant(test.p_value, alpha)


def random_stream(rng: random.Random, m: int) -> tuple[float, float, list[float | None]]:
    """p0, pa and M control p-hats from a mixture of laws: nulls, alternatives, ties on a grid, failures."""
    p0 = rng.choice([rng.random(), 0.9, 0.5])
    law = rng.choice(["null", "alternative", "grid", "rare"])
    fail = rng.choice([0.0, 0.0, 0.1, 0.3, 0.8])
    if law == "grid":  # discrete p-hats (sampling fallback): ties count as exceedances
        draw = lambda: rng.randrange(6) / 5  # noqa: E731
    else:
        sd = rng.choice([0.02, 0.1, 0.3])
        draw = lambda: min(1.0, max(0.0, rng.gauss(p0, sd)))  # noqa: E731
    pa = draw() if law in ("null", "grid") else max(0.0, p0 - rng.uniform(0.1, 0.7))
    if law == "rare":  # exceedances at chosen rates, late or never
        q = rng.choice([0.0, 0.01, 0.03, 0.1])
        stream = [p0 + 2 * (pa - p0) if rng.random() < q else p0 for _ in range(m)]
        stream = [min(1.0, max(0.0, c)) for c in stream]
    else:
        stream = [draw() for _ in range(m)]
    return p0, pa, [None if rng.random() < fail else c for c in stream]


def test_every_batch_policy_decides_as_batch_one_on_random_streams():
    rng = random.Random(37)
    stopped_early = grown = 0
    for case in range(3000):
        m = rng.choice([1, 2, 5, 10, 19, 30, 30, 30, 60, 100])
        alpha = rng.choice([0.05, 0.05, 0.01, 0.1, 0.25])
        h = rng.choice([stats.stop_exceedances(alpha, m), 1, 2, 5])
        least = rng.choice([max(1, -(-4 * m // 5)), 1, m])
        p0, pa, stream = random_stream(rng, m)
        one, one_batches = run_schedule(p0, pa, stream, m, h, least, 1)
        assert one.attempted == one.decided_at == len(one_batches)  # batch 1 scores exactly what it reads
        reference = verdict(p0, pa, stream, one, h, least, alpha)
        stopped_early += one.attempted < m
        for batch in BATCHES:
            schedule, batches = run_schedule(p0, pa, stream, m, h, least, batch)
            label = (case, batch, m, h, least)
            assert verdict(p0, pa, stream, schedule, h, least, alpha) == reference, label
            assert (schedule.stopped, schedule.decided_at) == (one.stopped, one.decided_at), label
            assert one.attempted <= schedule.attempted <= m, label
            assert [i for r in batches for i in r] == list(range(schedule.attempted)), label  # in order, once
            # the last batch holds the stop: nothing is drawn after the decision is known
            assert schedule.attempted - len(batches[-1]) < one.attempted, label
            if batch is None and len(batches) > 1:
                grown += 1
                # first batch: what the decision certainly needs; later ones at most the controls drawn so far
                # (or what is certainly needed), so at most twice what the decision reads, minus one
                assert schedule.attempted <= max(2 * one.attempted - 1, len(batches[0])), label
    assert stopped_early > 1000 and grown > 1000  # the comparison is not vacuous


def test_controls_needed_is_a_lower_bound_on_what_batch_one_draws():
    """From every state of a one-at-a-time run, the controls it still draws are at least ``controls_needed``:
    a first batch of that size never scores a control the decision does not read."""
    rng = random.Random(11)
    tight = 0
    for _ in range(2000):
        m = rng.choice([5, 10, 30, 60])
        h = rng.choice([1, 2, 3, 6])
        least = rng.choice([1, max(1, -(-4 * m // 5)), m])
        p0, pa, stream = random_stream(rng, m)
        schedule = stats.ControlSchedule(m, h, least, batch=1)
        states = []
        while drawn := schedule.next_batch():
            states.append((schedule.exceedances, schedule.usable, m - drawn.start))
            schedule.record(p0, pa, stream[drawn.start:drawn.stop])
        for n, (exceedances, usable, remaining) in enumerate(states):
            needed = stats.controls_needed(exceedances, usable, remaining, h, least)
            assert 1 <= needed <= schedule.attempted - n, (n, states, schedule.attempted)
            tight += needed == schedule.attempted - n
    assert tight > 1000


@pytest.mark.parametrize("limit, h, least, expected", [
    (30, 1, 24, [1, 1, 2, 4, 8, 14]),  # the paper's default: doubling
    (30, 3, 24, [3, 3, 6, 12, 6]),  # h = 3 (alpha 0.1): three exceedances are needed before any stop
    (4, 1, 4, [1, 1, 2]),
    (1999, 1, 1600, [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 975]),  # holm_family: 12 steps to M
])
def test_default_batches_double_after_what_is_certainly_needed(limit, h, least, expected):
    schedule = stats.ControlSchedule(limit, h, least)
    sizes = []
    while drawn := schedule.next_batch():
        sizes.append(len(drawn))
        schedule.record(0.9, 0.3, [0.88] * len(drawn))  # no exceedance: every control is drawn
    assert sizes == expected and schedule.decided_at == limit and schedule.stopped == ""


def test_untested_stop_is_reached_as_with_batch_one():
    # every control fails: untested as soon as neither 24 usable nor h = 3 exceedances can be reached, i.e.
    # once fewer than 3 remain (draw 28 of 30); batch 1 stops there, and so does every batch size
    for batch in BATCHES:
        schedule, _ = run_schedule(0.9, 0.3, [None] * 30, 30, 3, 24, batch)
        assert (schedule.stopped, schedule.decided_at) == ("untested", 28), batch


def test_a_stop_on_the_last_control_is_no_early_stop_for_any_batch():
    stream = [0.88] * 29 + [0.1]
    for batch in BATCHES:
        schedule, _ = run_schedule(0.9, 0.3, stream, 30, 1, 24, batch)
        assert (schedule.attempted, schedule.decided_at, schedule.stopped) == (30, 30, ""), batch


def test_fixed_policy_draws_every_control_in_one_batch():
    schedule = stats.ControlSchedule(30, 1, 24, batch=None, sequential=False)
    drawn = schedule.next_batch()
    assert drawn == range(30)
    schedule.record(0.9, 0.3, [0.1] * 30)
    assert not schedule.next_batch() and schedule.stopped == "" and schedule.decided_at == 30
    with pytest.raises(ValueError):
        stats.ControlSchedule(30, 1, 24).record(0.9, 0.3, [0.1])  # p-hats for controls never drawn


# --------------------------------------------------------------------------------------------- the engine


def seeded_stream(stream_seed: int):
    """An attacker control writer and a target probability law that depend on the control's own seed (derived
    from its index and attempt), never on call order: the same stream under every schedule."""
    rng = random.Random(stream_seed)
    q = rng.choice([0.0, 0.03, 0.1, 0.3, 0.7])  # P(a control moves p-hat at least as far as the attack)
    fail = rng.choice([0.0, 0.2, 0.5])

    def write(messages, options) -> str | None:
        if "systematic word-for-word substitution" not in messages[-1].content:
            return None
        r = random.Random(f"{stream_seed}-{options['seed']}")
        if r.random() < fail:
            return "nonsense"  # unparseable: resampled (control_tries), else the control is given up
        return item_text(ITEM.question + f" The patient enjoys knit{options['seed'] % 10**9}.")

    def probabilities(stem: str) -> dict[str, float]:
        found = re.search(r"knit(\d+)", stem)
        if "clue1" in stem:
            p = 0.3
        elif found:
            r = random.Random(f"{stream_seed}-p-{found.group(1)}")
            p = 0.1 if r.random() < q else round(0.75 + 0.2 * r.random(), 3)
        else:
            p = 0.9
        return {"Ceftriaxone": p, "Gentamicin": 1 - p}

    return write, probabilities


async def run_stream(stream_seed: int, **config):
    write, probabilities = seeded_stream(stream_seed)
    attacker = Attacker()

    def respond(messages, options):
        return write(messages, options) or attacker(messages, options)

    t, a = models(Target(weak_spots=("clue1",), probabilities=probabilities), attacker)
    a.responder = respond
    settings = {"turns": 1, "replicates": 2, "exemplars": 0, "option_orders": 2, "pvalue_prompt": "direct",
                "controls": 30, "control_tries": 2, "seed": stream_seed, **config}
    result = await MedFuzzEngine(t, a, MedFuzzConfig(**settings)).run_item(ITEM)
    assert all(r.outcome is Outcome.SUCCESS for r in result.replicates)
    return [r.significance for r in result.replicates]


async def test_engine_decides_as_batch_one_on_random_seeded_streams():
    paid = {batch: 0 for batch in BATCHES}
    stops = 0
    for stream_seed in range(12):
        runs = {batch: await run_stream(stream_seed, control_batch=batch) for batch in BATCHES}
        for replicate, one in enumerate(runs[1]):
            test, untested = significance_test(one)
            reference = (untested is None, None if untested else test.p_value, one.stopped)
            stops += bool(one.stopped)
            for batch, sigs in runs.items():
                sig = sigs[replicate]
                test, untested = significance_test(sig)
                assert (untested is None, None if untested else test.p_value, sig.stopped) == reference, \
                    (stream_seed, replicate, batch)
                # the controls batch 1 drew are the first ones drawn under every batch size, the same texts
                assert [c.question for c in sig.controls[:len(one.controls)]] == [c.question for c in one.controls]
                assert sig.controls_attempted >= one.controls_attempted
                paid[batch] += sig.controls_attempted
    assert stops >= 5
    assert paid[1] <= paid[None] <= paid[5] <= paid[1000]  # growing batches pay less than batches of 5


async def test_default_engine_batches_grow_and_stop_at_the_first_exceedance():
    config = MedFuzzConfig()
    assert config.control_batch is None  # the default: batches that grow with the evidence
    from tests.medfuzz.test_medfuzz_sequential import control_writer, engine_for

    attacker = Attacker(controls=control_writer({2, 4}))
    sig = (await engine_for(attacker, control_batch=None).run_item(ITEM)).replicates[0].significance
    # batches 1, 1: the exceedance at control 2 stops the test with nothing scored past it (batch 5: 5 scored)
    assert attacker.control_calls == 2 and sig.controls_attempted == 2 and sig.stopped == "h_exceedances"
    test, untested = significance_test(sig)
    assert untested is None and test.p_value == pytest.approx(1 / 2)
    attacker = Attacker(controls=control_writer(set()))
    sig = (await engine_for(attacker, control_batch=None).run_item(ITEM)).replicates[0].significance
    assert attacker.control_calls == 30 and sig.stopped == "" and significance_test(sig)[0].p_value == 1 / 31
