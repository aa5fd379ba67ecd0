"""Algorithm 2's model work: control fuzzes and p-hat estimates (the p-value itself: ``medfuzz.stats``).

Control fuzzes: the attacker rewrites the original item by systematic lexical substitution of the attack's
added text (same syntax, same number of added words). The added-word count is checked by diffing; a control
that drifts by more than ``max(1, word_tolerance * n)`` words, changes the options or answer, or repeats the
attack is resampled (``control_tries``) and otherwise given up (recorded).

p-hat: the probability that the target picks the correct answer, averaged over ``option_orders`` draws; each
draw shuffles the options (the correct letter follows its option) and draws new in-context exemplars. The
same draws are used for the original, the attack and every control (common random numbers), so the
differences the test compares are not blurred by different option orders. The draws are made per item
(not per replicate), so p-hat of the original is one number per item, estimated once and shared by every
replicate's test. Per draw the probability comes
from the answer-letter log-probabilities (renormalised over the option letters) when the backend gives
them, else from whether the sampled answer was correct (the sampling fallback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import medfuzz.solvers.medfuzz.prompts as prompts  # the module itself, not the package that re-exports it
from medfuzz import stats
from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.models.logprobs import normalise
from medfuzz.models.protocol import ChatMessage, ChatModel, UsageLedger
from medfuzz.solvers.medfuzz.cache import RequestCache
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.parsing import added_word_count, parse_modified_item
from medfuzz.solvers.medfuzz.prompts import AssumptionPack
from medfuzz.solvers.medfuzz.results import ControlFuzz, Rejected, ReplicateResult, Significance
from medfuzz.solvers.medfuzz.target import TargetDialog, call_model

TARGET_ROLE = "target_significance"
ATTACKER_ROLE = "attacker_controls"


@dataclass(frozen=True)
class Draw:
    """One random draw of the prompting procedure: option order, exemplars, sampling seed."""

    index: int
    order_seed: int
    exemplars: tuple[MCQItem, ...]
    call_seed: int


@dataclass
class Estimate:
    p_hat: float | None
    logprob_draws: int = 0
    sampled_draws: int = 0
    failed_draws: int = 0

    @property
    def used(self) -> int:
        return self.logprob_draws + self.sampled_draws


def make_draws(target: TargetDialog, item: MCQItem, seed: int) -> list[Draw]:
    return [Draw(index=i, order_seed=derive_seed(seed, "order", i),
                 exemplars=tuple(target.draw_exemplars(item, derive_seed(seed, "exemplars", i))),
                 call_seed=derive_seed(seed, "call", i))
            for i in range(max(1, target.config.option_orders))]


async def estimate_p(target: TargetDialog, item: MCQItem, draws: Sequence[Draw], ledger: UsageLedger,
                     role: str = TARGET_ROLE, cache: RequestCache | None = None) -> Estimate:
    """p-hat for one version of an item: the mean over draws of P(correct letter)."""
    values = await asyncio.gather(*(_draw_probability(target, item, draw, ledger, role, cache) for draw in draws))
    estimate = Estimate(p_hat=None)
    used: list[float] = []
    for value, kind in values:
        if value is None:
            estimate.failed_draws += 1
            continue
        used.append(value)
        if kind == "logprobs":
            estimate.logprob_draws += 1
        else:
            estimate.sampled_draws += 1
    estimate.p_hat = sum(used) / len(used) if used else None
    return estimate


async def _draw_probability(target: TargetDialog, item: MCQItem, draw: Draw, ledger: UsageLedger,
                            role: str, cache: RequestCache | None) -> tuple[float | None, str]:
    shown = item.shuffled(draw.order_seed)
    if target.config.pvalue_prompt == "direct":
        messages = [*prompts.target_system(draw.exemplars), ChatMessage("user", prompts.target_direct(shown))]
        out = await call_model(target.model, role, ledger, messages, target.config.answer_tokens,
                               target.config.target_temperature, draw.call_seed, shown.letters, cache)
        if not out.ok:
            return None, "error"
        letter_logprobs, answer = out.letter_logprobs, answer_letter(out.text, shown.letters, shown.clean_options())
    else:
        # the confidences are part of the prompting procedure, but p-hat does not need them readable
        reply = await target.ask(shown, draw.exemplars, draw.call_seed, ledger, role=role, retries=0,
                                 require_confidences=False, cache=cache)
        if reply.error:
            return None, "error"
        letter_logprobs, answer = reply.letter_logprobs, reply.answer
    if letter_logprobs:
        try:
            return normalise(letter_logprobs, shown.letters)[shown.answer], "logprobs"
        except ValueError:
            pass
    if answer is None:
        return None, "error"
    return float(answer == shown.answer), "sampling"


async def generate_control(attacker: ChatModel, cfg: MedFuzzConfig, pack: AssumptionPack, original: MCQItem,
                           fuzzed: MCQItem, index: int, seed: int, ledger: UsageLedger,
                           rejected: list[Rejected], cache: RequestCache | None = None) -> MCQItem | None:
    """One control fuzz, resampled while it drifts in word count, tampers with the item or repeats the attack."""
    target_words = added_word_count(original.clean_question(), fuzzed.clean_question())
    tolerance = max(1, round(cfg.word_tolerance * target_words))
    messages = [ChatMessage("system", prompts.ATTACKER_SYSTEM),
                ChatMessage("user", prompts.control_fuzz(pack, original, fuzzed, target_words))]
    for attempt in range(max(1, cfg.control_tries)):
        out = await call_model(attacker, ATTACKER_ROLE, ledger, messages, cfg.item_budget, cfg.attacker_temperature,
                               derive_seed(seed, "control", index, attempt), cache=cache)
        if not out.ok:
            rejected.append(Rejected(text="", kind="error", problem=out.error or "error"))
            continue
        parsed = parse_modified_item(out.text, original, cfg.min_kept, cfg.require_options)
        if not parsed.ok or parsed.item is None:
            rejected.append(Rejected(text=out.text, kind=parsed.kind or "unparseable", problem=parsed.problem or ""))
            continue
        words = added_word_count(original.clean_question(), parsed.item.question)
        if abs(words - target_words) > tolerance:
            rejected.append(Rejected(text=out.text, kind="word_count",
                                     problem=f"{words} added words, attack added {target_words} (±{tolerance})"))
            continue
        if parsed.item.question.strip() == fuzzed.clean_question().strip():
            rejected.append(Rejected(text=out.text, kind="same_as_attack", problem="identical to the attack"))
            continue
        return parsed.item
    return None


@dataclass
class SignificanceContext:
    """What every replicate of one item shares in Algorithm 2: the draws (option orders, exemplars, call
    seeds, derived from the item, not the replicate) and p-hat of the original over them, estimated once
    (the first replicate that needs it pays; the others await the same task)."""

    draws: list[Draw]
    p0: Callable[[UsageLedger], tuple[Awaitable[Estimate], bool]]
    cache: RequestCache | None = None
    # the shared estimate's task: shielded from one replicate's cancellation, so the item cancels it when it ends
    # (else it goes on calling the model after Inspect ended the sample: one warning and traceback per call)
    tasks: list[asyncio.Task[Estimate]] = field(default_factory=list)

    def cancel(self) -> None:
        for task in self.tasks:
            if not task.done():
                task.cancel()


async def _control(target: TargetDialog, attacker: ChatModel, pack: AssumptionPack, item: MCQItem, fuzzed: MCQItem,
                   index: int, seed: int, ledger: UsageLedger, rejected: list[Rejected], draws: Sequence[Draw],
                   cache: RequestCache | None) -> tuple[ControlFuzz, Estimate] | None:
    """One control fuzz and its p-hat (``None`` when no usable control could be written)."""
    control = await generate_control(attacker, target.config, pack, item, fuzzed, index, seed, ledger, rejected, cache)
    if control is None:
        return None
    estimate = await estimate_p(target, control, draws, ledger, cache=cache)
    return ControlFuzz(question=control.question, added_words=added_word_count(item.clean_question(), control.question),
                       p_hat=estimate.p_hat, draws_used=estimate.used, index=index), estimate


async def test_attack(target: TargetDialog, attacker: ChatModel, pack: AssumptionPack, item: MCQItem,
                      result: ReplicateResult, ledger: UsageLedger, shared: SignificanceContext) -> Significance:
    """Controls and p-hats for a successful attack (Algorithm 2 lines 1-8).

    ``fixed`` draws all M controls at once. ``sequential`` draws them in batches (``control_batch``; by
    default batches that grow with the evidence, ``medfuzz.stats.next_control_batch``) from the same control
    stream (control i has the same seed under every policy and batch size) and stops at the h-th exceedance
    (Besag & Clifford; ``medfuzz.stats.sequential_decision``) or when the attack can no longer be tested, at
    the control where drawing one at a time would stop (``medfuzz.stats.ControlSchedule``); p-hat of the
    original and of the attack are estimated alongside the first batch. M is ``cfg.max_controls`` (the
    paper's M, or more with ``holm_family``); h comes from the paper's M either way.
    """
    cfg = target.config
    question = result.fuzzed_question
    limit = cfg.max_controls
    significance = Significance(controls_requested=limit, policy=cfg.controls_policy,
                                min_controls=cfg.min_usable_controls, draws=len(shared.draws),
                                stop_at=cfg.stop_exceedances)
    if question is None:
        significance.error = "no modified item to test"
        return significance
    fuzzed = item.with_question(question)
    seed = derive_seed(result.seed, "significance")  # control fuzzes differ per replicate; draws do not
    before = _calls(ledger)
    p0_pending, significance.p0_shared = shared.p0(ledger)
    pa_pending = estimate_p(target, fuzzed, shared.draws, ledger, cache=shared.cache)
    schedule = stats.ControlSchedule(limit=limit, stop_at=cfg.stop_exceedances, min_controls=significance.min_controls,
                                     batch=cfg.control_batch, sequential=cfg.controls_policy == "sequential")
    estimates: list[Estimate] = []
    head: tuple[Estimate, Estimate] | None = None
    while indices := schedule.next_batch():
        work = [_control(target, attacker, pack, item, fuzzed, i, seed, ledger, significance.controls_rejected,
                         shared.draws, shared.cache) for i in indices]
        if head is None:
            p0, pa, *done = await asyncio.gather(p0_pending, pa_pending, *work)
            head = (p0, pa)
            significance.p0, significance.pa = p0.p_hat, pa.p_hat
        else:
            done = await asyncio.gather(*work)
        for pair in done:
            if pair is not None:
                control, estimate = pair
                significance.controls.append(control)
                estimates.append(estimate)
        if significance.p0 is None or significance.pa is None:
            break  # nothing to compare the controls with: drawing more would be wasted
        schedule.record(significance.p0, significance.pa, [pair[0].p_hat if pair is not None else None
                                                           for pair in done])
    significance.stopped = schedule.stopped
    attempted = schedule.attempted
    significance.controls_attempted = attempted
    counted = ([*head, *estimates] if head is not None else estimates)
    significance.logprob_draws = sum(e.logprob_draws for e in counted)
    significance.sampled_draws = sum(e.sampled_draws for e in counted)
    significance.failed_draws = sum(e.failed_draws for e in counted)
    significance.method = ("logprobs" if not significance.sampled_draws else
                           "sampling" if not significance.logprob_draws else "mixed")
    after = _calls(ledger)
    significance.target_calls = after[TARGET_ROLE] - before[TARGET_ROLE]
    significance.attacker_calls = after[ATTACKER_ROLE] - before[ATTACKER_ROLE]
    if significance.p0 is None or significance.pa is None:
        significance.error = "the target gave no usable answer on the original or the attack"
    elif not any(c.p_hat is not None for c in significance.controls):
        significance.error = "no usable control fuzz"
    return significance


def _calls(ledger: UsageLedger) -> dict[str, int]:
    return {TARGET_ROLE: ledger.calls.get(TARGET_ROLE, 0), ATTACKER_ROLE: ledger.calls.get(ATTACKER_ROLE, 0)}
