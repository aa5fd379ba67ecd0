"""The MedFuzz attack loop (paper Algorithm 1, §4 replicates), harness-agnostic and async.

Per item and replicate: the target answers the original item in a fresh dialog (reasoning, 1-5 confidence
per option, letter); if it is right, one persistent attacker dialog plans and writes a modified item (cold
start), the target answers it in a fresh dialog that never shows earlier turns, and after each failure the
attacker writes a post-mortem, a new plan and a new item, for at most K turns; the loop stops at the first
wrong answer. Successful attacks then get Algorithm 2's control fuzzes and p-hat estimates (``controls``).
Models are only reached through ``ChatModel``; nothing here imports a harness.

Within one ``run_item`` nothing is paid for twice: p-hat of the original item is estimated once over the
item's draws and shared by every replicate's significance test, and identical requests (same model,
messages, sampling settings and seed) are answered from a per-item request cache (``cache``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field

import medfuzz.solvers.medfuzz.prompts as prompts  # the module itself, not the package that re-exports it
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.models.protocol import ChatMessage, ChatModel, UsageLedger
from medfuzz.solvers.medfuzz.cache import RequestCache
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.controls import Estimate, SignificanceContext, estimate_p, make_draws, test_attack
from medfuzz.solvers.medfuzz.parsing import (
    added_spans,
    added_word_count,
    parse_modified_item,
)
from medfuzz.solvers.medfuzz.prompts import AssumptionPack, load_pack
from medfuzz.solvers.medfuzz.results import ItemResult, Outcome, Rejected, ReplicateResult, TargetReply, Turn
from medfuzz.solvers.medfuzz.target import TargetDialog, call_model, refuses


@dataclass
class _Session:
    """The per-replicate context every step needs."""

    item: MCQItem
    replicate: int
    seed: int
    exemplars: list[MCQItem]
    ledger: UsageLedger = field(default_factory=UsageLedger)
    cache: RequestCache | None = None
    shared: SignificanceContext | None = None


class LLMError(Exception):
    """A step failed after its retries; the replicate's outcome becomes ``llm_error``."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


logger = logging.getLogger(__name__)

SELF_ATTACK_WARNING = ("MedFuzz: target {name} is its own attacker (unlike the paper, whose attacker was GPT-4 "
                       "for every target); give a separate attacker for results comparable to the paper's")
_warned: set[str] = set()  # target names already warned about in this process (one line per run, not per item)


def same_model(target: ChatModel, attacker: ChatModel) -> bool:
    """Whether the attacker is the target model itself (the same object, or the same model name)."""
    return attacker is target or attacker.name == target.name


class MedFuzzEngine:
    """Runs MedFuzz on items with a target and an attacker ``ChatModel`` (the same model may play both:
    every dialog is a separate session). ``attacker_is_target`` is recorded with every result (default:
    ``same_model``); a harness that knows better (e.g. no attacker role was given) passes it."""

    def __init__(self, target: ChatModel, attacker: ChatModel, config: MedFuzzConfig | None = None,
                 pack: AssumptionPack | str | None = None, exemplar_pool: Sequence[MCQItem] = (),
                 attacker_is_target: bool | None = None) -> None:
        self.target = target
        self.attacker = attacker
        self.config = config or MedFuzzConfig()
        self.pack = pack if isinstance(pack, AssumptionPack) else load_pack(pack or prompts.DEFAULT_PACK)
        self.exemplar_pool = list(exemplar_pool)
        self.target_dialog = TargetDialog(target, self.config, self.exemplar_pool)
        self.attacker_is_target = same_model(target, attacker) if attacker_is_target is None else attacker_is_target
        if self.attacker_is_target and target.name not in _warned:
            _warned.add(target.name)
            logger.warning(SELF_ATTACK_WARNING.format(name=target.name))

    # ---------------------------------------------------------------------------------------- public

    async def run_item(self, item: MCQItem) -> ItemResult:
        cache = RequestCache()
        shared = self._significance_context(item, cache)
        try:
            replicates = await asyncio.gather(*(self.run_replicate(item, r, cache, shared)
                                                for r in range(self.config.replicates)))
        finally:  # an item cancelled (Ctrl-C, a sample limit) leaves no shared estimate calling the model on
            shared.cancel()
        return ItemResult(item=item, replicates=list(replicates), cache_hits=dict(sorted(cache.hits.items())),
                          config={**self.config.to_dict(), "pack": self.pack.name, "pack_source": self.pack.source,
                                  "target": self.target.name, "attacker": self.attacker.name,
                                  "attacker_is_target": self.attacker_is_target})

    async def run_replicate(self, item: MCQItem, replicate: int, cache: RequestCache | None = None,
                            shared: SignificanceContext | None = None) -> ReplicateResult:
        seed = derive_seed(self.config.seed, item.id, replicate)
        exemplars = self.target_dialog.draw_exemplars(item, derive_seed(seed, "exemplars"))
        session = _Session(item, replicate, seed, exemplars, cache=cache, shared=shared)
        result = ReplicateResult(item_id=item.id, replicate=replicate, seed=seed, outcome=Outcome.LLM_ERROR,
                                 exemplar_ids=[e.id for e in session.exemplars])
        try:
            await self._attack(session, result)
        except LLMError as err:
            result.outcome, result.error, result.error_step = Outcome.LLM_ERROR, err.message, err.step
        if result.outcome is Outcome.SUCCESS and self.config.controls > 0:
            context = session.shared or self._significance_context(item, session.cache)
            try:
                result.significance = await test_attack(self.target_dialog, self.attacker, self.pack, session.item,
                                                        result, session.ledger, context)
            finally:
                if context is not session.shared:  # its own context: nobody else ends it
                    context.cancel()
        result.usage = session.ledger.as_dict()
        return result

    def _significance_context(self, item: MCQItem, cache: RequestCache | None) -> SignificanceContext:
        """The item's draws and a p-hat of the original estimated at most once, by the first replicate that
        asks (its ledger pays); later ones await the same task."""
        draws = make_draws(self.target_dialog, item, derive_seed(self.config.seed, item.id, "significance"))
        pending: list[asyncio.Task[Estimate]] = []

        def p0(ledger: UsageLedger) -> tuple[Awaitable[Estimate], bool]:
            shared = bool(pending)
            if not pending:
                pending.append(asyncio.ensure_future(estimate_p(self.target_dialog, item, draws, ledger,
                                                                cache=cache)))
            # shielded: one replicate's cancellation must not cancel the estimate the others await
            return asyncio.shield(pending[0]), shared

        return SignificanceContext(draws=draws, p0=p0, cache=cache, tasks=pending)

    # ------------------------------------------------------------------------------------ Algorithm 1

    async def _attack(self, s: _Session, result: ReplicateResult) -> None:
        cfg = self.config
        result.original = await self.target_dialog.ask(s.item, s.exemplars, derive_seed(s.seed, "original"), s.ledger,
                                                       role="target", cache=s.cache)
        if not result.original.ok:
            raise LLMError("target on the original item", result.original.error or "")
        if result.original.answer != s.item.answer:
            result.outcome = Outcome.ALREADY_WRONG
            return
        original_conf = prompts.show_confidences(result.original.confidences, result.original.confidences_raw)
        dialog = [ChatMessage("system", prompts.ATTACKER_SYSTEM),
                  ChatMessage("user", prompts.attacker_cold_start(self.pack, s.item, result.original.cot,
                                                                  original_conf))]
        previous: TargetReply | None = None
        for index in range(1, cfg.turns + 1):
            turn = Turn(index=index)
            result.turns.append(turn)
            step_seed = derive_seed(s.seed, "turn", index)
            try:
                if previous is not None:
                    dialog.append(ChatMessage("user", prompts.attacker_postmortem(
                        original_conf, previous.cot,
                        prompts.show_confidences(previous.confidences, previous.confidences_raw))))
                    turn.postmortem = await self._attacker_text(dialog, "post-mortem", step_seed, s,
                                                                cfg.plan_budget)
                    dialog += [ChatMessage("assistant", turn.postmortem),
                               ChatMessage("user", prompts.attacker_replan(self.pack, s.item))]
                turn.plan = await self._attacker_text(dialog, "plan", step_seed + 1, s, cfg.plan_budget)
                dialog += [ChatMessage("assistant", turn.plan),
                           ChatMessage("user", prompts.attacker_item_request(s.item))]
                fuzzed, reply = await self._attacker_item(dialog, s, turn, step_seed + 2)
                dialog.append(ChatMessage("assistant", reply))
            except LLMError as err:
                turn.error = str(err)
                raise
            turn.question = fuzzed.question
            turn.added_spans = added_spans(s.item.clean_question(), fuzzed.question)
            turn.added_words = added_word_count(s.item.clean_question(), fuzzed.question)
            turn.target = await self.target_dialog.ask(fuzzed, s.exemplars, derive_seed(step_seed, "target"),
                                                       s.ledger, role="target", cache=s.cache)
            if not turn.target.ok:
                turn.error = turn.target.error
                raise LLMError(f"target at turn {index}", turn.target.error or "")
            if turn.target.answer != s.item.answer:
                result.outcome, result.success_turn = Outcome.SUCCESS, index
                return
            previous = turn.target
        result.outcome = Outcome.ATTACK_FAILED

    # ------------------------------------------------------------------------------------- attacker

    async def _attacker_text(self, dialog: list[ChatMessage], step: str, seed: int, s: _Session,
                             max_tokens: int) -> str:
        problem = ""
        for attempt in range(self.config.max_retries + 1):
            reply = await call_model(self.attacker, "attacker", s.ledger, dialog, max_tokens,
                                     self.config.attacker_temperature, derive_seed(seed, step, attempt), cache=s.cache)
            text = reply.text.strip()
            if not reply.ok:
                problem = reply.error or "error"
            elif not text:
                problem = "empty reply"
            elif refuses(text):
                problem = f"refusal: {text[:200]}"
            else:
                return text
        raise LLMError(f"attacker {step}", problem)

    async def _attacker_item(self, dialog: list[ChatMessage], s: _Session, turn: Turn,
                             seed: int) -> tuple[MCQItem, str]:
        """The modified item; an invalid one is sent back with the reason (the bad reply is not kept)."""
        messages = list(dialog)
        problem = ""
        for attempt in range(self.config.max_retries + 1):
            reply = await call_model(self.attacker, "attacker", s.ledger, messages, self.config.item_budget,
                                     self.config.attacker_temperature, derive_seed(seed, "item", attempt),
                                     cache=s.cache)
            if not reply.ok:
                problem = reply.error or "error"
                turn.rejected.append(Rejected(text="", kind="error", problem=problem))
                messages = list(dialog)
                continue
            parsed = parse_modified_item(reply.text, s.item, self.config.min_kept, self.config.require_options)
            if parsed.ok and parsed.item is not None:
                return parsed.item, reply.text.strip()
            problem = f"{parsed.kind}: {parsed.problem}"
            turn.rejected.append(Rejected(text=reply.text, kind=parsed.kind or "unparseable",
                                          problem=parsed.problem or ""))
            messages = [*dialog, ChatMessage("assistant", reply.text),
                        ChatMessage("user", prompts.attacker_fix(parsed.problem or "it could not be read", s.item))]
        raise LLMError("attacker modified item", problem)
