"""The MedFuzz attack loop (paper Algorithm 1, §4 replicates), harness-agnostic and async.

Per item and replicate: the target answers the original item in a fresh dialog (reasoning, 1-5 confidence
per option, letter); if it is right, one persistent attacker dialog plans and writes a modified item (cold
start), the target answers it in a fresh dialog that never shows earlier turns, and after each failure the
attacker writes a post-mortem, a new plan and a new item, for at most K turns; the loop stops at the first
wrong answer. Successful attacks then get Algorithm 2's control fuzzes and p-hat estimates
(``medfuzz_significance``). Models are only reached through ``ChatModel``; nothing here imports a harness.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from medfuzz.benchmarks.items import MCQItem, item_seed
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation, UsageLedger
from medfuzz.solvers import medfuzz_prompts as prompts
from medfuzz.solvers.medfuzz_parsing import (
    added_spans,
    added_word_count,
    is_refusal,
    parse_answer,
    parse_confidences,
    parse_modified_item,
)
from medfuzz.solvers.medfuzz_prompts import AssumptionPack, load_pack
from medfuzz.solvers.medfuzz_results import ItemResult, Outcome, Rejected, ReplicateResult, TargetReply, Turn


@dataclass(frozen=True)
class MedFuzzConfig:
    """Every knob of a MedFuzz run (recorded with each result). Defaults follow the paper where it says."""

    turns: int = 5  # K attack attempts per replicate (paper: 5)
    replicates: int = 5  # attack trajectories per item (paper: 5)
    exemplars: int = 2  # in-context exemplars drawn at random per replicate for the target
    controls: int = 30  # M control fuzzes per successful attack (paper: 30); 0 = no significance test
    option_orders: int = 5  # draws (random option order + exemplars) averaged in each p-hat
    pvalue_prompt: str = "dialog"  # dialog: the full target dialog per draw | direct: letter only (cheaper)
    max_retries: int = 2  # extra tries per step before the turn is an LLM error
    min_kept: float = 0.5  # share of the original question's words a modified question must keep
    require_options: bool = False  # reject modified items that leave the options out (else re-attach them)
    require_confidences: bool = True  # unparseable confidences are an LLM error (paper); False: keep raw text
    word_tolerance: float = 0.1  # control fuzz added-word count may differ by max(1, tol * attack's count)
    control_tries: int = 3  # samples per control fuzz before it is given up
    target_temperature: float | None = 1.0  # paper: 1.0
    attacker_temperature: float | None = 1.0
    seed: int = 0
    cot_tokens: int = 400
    confidence_tokens: int = 80
    answer_tokens: int = 8
    plan_tokens: int = 400
    item_tokens: int = 1200

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled_tokens(self, scale: float) -> MedFuzzConfig:
        """The same config with the generation budgets (reasoning, plan, item) scaled, e.g. for small models."""
        from dataclasses import replace

        return replace(self, cot_tokens=max(16, int(self.cot_tokens * scale)),
                       plan_tokens=max(16, int(self.plan_tokens * scale)),
                       item_tokens=max(64, int(self.item_tokens * scale)))


def derive_seed(seed: int, *parts: object) -> int:
    """A seed for one random choice or model call, stable across processes and call order."""
    return item_seed(seed, ":".join(str(p) for p in parts)) % (2**31 - 1)


@dataclass
class _Session:
    """The per-replicate context every step needs."""

    item: MCQItem
    replicate: int
    seed: int
    exemplars: list[MCQItem]
    ledger: UsageLedger = field(default_factory=UsageLedger)


class LLMError(Exception):
    """A step failed after its retries; the replicate's outcome becomes ``llm_error``."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


class MedFuzzEngine:
    """Runs MedFuzz on items with a target and an attacker ``ChatModel`` (the same model may play both:
    every dialog is a separate session)."""

    def __init__(self, target: ChatModel, attacker: ChatModel, config: MedFuzzConfig | None = None,
                 pack: AssumptionPack | str | None = None, exemplar_pool: Sequence[MCQItem] = ()) -> None:
        self.target = target
        self.attacker = attacker
        self.config = config or MedFuzzConfig()
        self.pack = pack if isinstance(pack, AssumptionPack) else load_pack(pack or prompts.DEFAULT_PACK)
        self.exemplar_pool = list(exemplar_pool)

    # ---------------------------------------------------------------------------------------- public

    async def run_item(self, item: MCQItem) -> ItemResult:
        replicates = await asyncio.gather(*(self.run_replicate(item, r) for r in range(self.config.replicates)))
        return ItemResult(item=item, replicates=list(replicates),
                          config={**self.config.to_dict(), "pack": self.pack.name, "pack_source": self.pack.source,
                                  "target": self.target.name, "attacker": self.attacker.name})

    async def run_replicate(self, item: MCQItem, replicate: int) -> ReplicateResult:
        seed = derive_seed(self.config.seed, item.id, replicate)
        session = _Session(item, replicate, seed, self.draw_exemplars(item, derive_seed(seed, "exemplars")))
        result = ReplicateResult(item_id=item.id, replicate=replicate, seed=seed, outcome=Outcome.LLM_ERROR,
                                 exemplar_ids=[e.id for e in session.exemplars])
        try:
            await self._attack(session, result)
        except LLMError as err:
            result.outcome, result.error, result.error_step = Outcome.LLM_ERROR, err.message, err.step
        if result.outcome is Outcome.SUCCESS and self.config.controls > 0:
            from medfuzz.solvers.medfuzz_significance import test_attack

            result.significance = await test_attack(self, session.item, result, session.ledger)
        result.usage = session.ledger.as_dict()
        return result

    def draw_exemplars(self, item: MCQItem, seed: int) -> list[MCQItem]:
        pool = [e for e in self.exemplar_pool if e.id != item.id and e.question != item.question]
        count = min(self.config.exemplars, len(pool))
        return random.Random(seed).sample(pool, count) if count else []

    # ------------------------------------------------------------------------------------ Algorithm 1

    async def _attack(self, s: _Session, result: ReplicateResult) -> None:
        cfg = self.config
        result.original = await self.ask_target(s.item, s.exemplars, derive_seed(s.seed, "original"), s.ledger,
                                                role="target")
        if not result.original.ok:
            raise LLMError("target on the original item", result.original.error or "")
        if result.original.answer != s.item.answer:
            result.outcome = Outcome.WRONG_ORIGINAL
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
                    turn.postmortem = await self._attacker_text(dialog, "post-mortem", step_seed, s.ledger,
                                                                cfg.plan_tokens)
                    dialog += [ChatMessage("assistant", turn.postmortem),
                               ChatMessage("user", prompts.attacker_replan(self.pack, s.item))]
                turn.plan = await self._attacker_text(dialog, "plan", step_seed + 1, s.ledger, cfg.plan_tokens)
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
            turn.target = await self.ask_target(fuzzed, s.exemplars, derive_seed(step_seed, "target"), s.ledger,
                                                role="target")
            if not turn.target.ok:
                turn.error = turn.target.error
                raise LLMError(f"target at turn {index}", turn.target.error or "")
            if turn.target.answer != s.item.answer:
                result.outcome, result.success_turn = Outcome.SUCCESS, index
                return
            previous = turn.target
        result.outcome = Outcome.ATTACK_FAILED

    # ------------------------------------------------------------------------------------- attacker

    async def _call(self, model: ChatModel, role: str, ledger: UsageLedger, messages: list[ChatMessage],
                    max_tokens: int, temperature: float | None, seed: int,
                    letters: Sequence[str] | None = None) -> Generation:
        reply = await model.generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                     letters=letters)
        ledger.record(role, reply)
        return reply

    async def _attacker_text(self, dialog: list[ChatMessage], step: str, seed: int, ledger: UsageLedger,
                             max_tokens: int) -> str:
        problem = ""
        for attempt in range(self.config.max_retries + 1):
            reply = await self._call(self.attacker, "attacker", ledger, dialog, max_tokens,
                                     self.config.attacker_temperature, derive_seed(seed, step, attempt))
            text = reply.text.strip()
            if not reply.ok:
                problem = reply.error or "error"
            elif not text:
                problem = "empty reply"
            elif _refuses(text):
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
            reply = await self._call(self.attacker, "attacker", s.ledger, messages, self.config.item_tokens,
                                     self.config.attacker_temperature, derive_seed(seed, "item", attempt))
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

    # --------------------------------------------------------------------------------------- target

    async def ask_target(self, item: MCQItem, exemplars: Sequence[MCQItem], seed: int, ledger: UsageLedger,
                         role: str = "target", with_confidences: bool = True,
                         retries: int | None = None, require_confidences: bool | None = None) -> TargetReply:
        """One fresh target dialog (A.1): reasoning, confidences, letter. Errors are returned, not raised."""
        cfg = self.config
        retries = cfg.max_retries if retries is None else retries
        strict = cfg.require_confidences if require_confidences is None else require_confidences
        reply = TargetReply()
        dialog = [*prompts.target_system(exemplars), ChatMessage("user", prompts.target_cot(item))]

        async def step(name: str, max_tokens: int, check, letters: Sequence[str] | None = None):
            nonlocal reply
            problem = ""
            for attempt in range(retries + 1):
                if attempt:
                    reply.retries += 1
                out = await self._call(self.target, role, ledger, dialog, max_tokens, cfg.target_temperature,
                                       derive_seed(seed, name, attempt), letters)
                if not out.ok:
                    problem = out.error or "error"
                    continue
                parsed, problem = check(out.text)
                if problem is None:
                    return out, parsed
            reply.error = f"{name}: {problem}"
            return None, None

        def check_cot(text: str):
            if not text.strip():
                return None, "empty reply"
            if _refuses(text):
                return None, f"refusal: {text.strip()[:200]}"
            return text.strip(), None

        out, cot = await step("reasoning", cfg.cot_tokens, check_cot)
        if out is None:
            return reply
        reply.cot = cot
        dialog += [ChatMessage("assistant", out.text), ChatMessage("user", prompts.TARGET_CONFIDENCE)]
        if with_confidences:
            def check_conf(text: str):
                parsed = parse_confidences(text, item.letters)
                if parsed is None and strict:
                    return None, f"unparseable confidences {text.strip()[:200]!r}"
                return parsed, None

            out, reply.confidences = await step("confidences", cfg.confidence_tokens, check_conf)
            if out is None:
                return reply
            reply.confidences_raw = out.text.strip()
            dialog += [ChatMessage("assistant", out.text), ChatMessage("user", prompts.target_answer(item))]

        def check_answer(text: str):
            letter = parse_answer(text, item.letters, item.clean_options())
            return (letter, None) if letter else (None, f"no option letter in {text.strip()[:200]!r}")

        out, reply.answer = await step("answer", cfg.answer_tokens, check_answer, item.letters)
        if out is not None:
            reply.answer_raw = out.text.strip()
            reply.letter_logprobs = out.letter_logprobs
        return reply


def _refuses(text: str) -> bool:
    """A reply that is a refusal rather than an answer: starts by declining and stays short."""
    return is_refusal(text[:120]) and len(text.split()) < 80
