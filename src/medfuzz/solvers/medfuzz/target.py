"""The target's side of MedFuzz (TextAttack's "goal function"): one fresh target dialog per question (paper
App. A.1: reasoning, a 1-5 confidence per option, then the letter), the in-context exemplars it sees, and
the one place every model call is made and recorded. Algorithm 1 (``engine``) and Algorithm 2 (``controls``)
both ask through here, so neither needs the other.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import medfuzz.solvers.medfuzz.prompts as prompts  # the module itself, not the package that re-exports it
from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.models.failures import reply_excerpt
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation, UsageLedger
from medfuzz.solvers.medfuzz.cache import RequestCache
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.parsing import is_refusal, parse_confidences
from medfuzz.solvers.medfuzz.results import TargetReply


async def call_model(model: ChatModel, role: str, ledger: UsageLedger, messages: list[ChatMessage],
                     max_tokens: int, temperature: float | None, seed: int,
                     letters: Sequence[str] | None = None, cache: RequestCache | None = None) -> Generation:
    """One model call, recorded in ``ledger`` under ``role`` (calls, tokens, errors). With ``cache``, an
    identical earlier request of the run is replayed instead and not recorded (the ledger counts paid calls;
    the cache counts its hits)."""
    async def call() -> Generation:
        return await model.generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                    letters=letters)

    if cache is None:
        reply = await call()
    else:
        reply, hit = await cache.get(RequestCache.key(model, messages, max_tokens, temperature, seed, letters),
                                     role, call)
        if hit:
            return reply
    ledger.record(role, reply)
    return reply


def refuses(text: str) -> bool:
    """A reply that is a refusal rather than an answer: starts by declining and stays short."""
    return is_refusal(text[:120]) and len(text.split()) < 80


class TargetDialog:
    """Asks the target model a question the way the paper does and reads its reply."""

    def __init__(self, model: ChatModel, config: MedFuzzConfig, exemplar_pool: Sequence[MCQItem] = ()) -> None:
        self.model = model
        self.config = config
        self.exemplar_pool = list(exemplar_pool)

    def draw_exemplars(self, item: MCQItem, seed: int) -> list[MCQItem]:
        """``config.exemplars`` seeded draws from the pool, never the item itself."""
        pool = [e for e in self.exemplar_pool if e.id != item.id and e.question != item.question]
        count = min(self.config.exemplars, len(pool))
        return random.Random(seed).sample(pool, count) if count else []

    async def ask(self, item: MCQItem, exemplars: Sequence[MCQItem], seed: int, ledger: UsageLedger,
                  role: str = "target", retries: int | None = None,
                  require_confidences: bool | None = None, cache: RequestCache | None = None) -> TargetReply:
        """One fresh target dialog: reasoning, confidences, letter. Errors are returned, not raised.

        ``retries``: extra tries per step (default ``config.max_retries``); ``require_confidences``: an
        unparseable confidence reply is an error (default ``config.require_confidences``); ``cache``: the
        run's request cache."""
        cfg = self.config
        retries = cfg.max_retries if retries is None else retries
        strict = cfg.require_confidences if require_confidences is None else require_confidences
        reply = TargetReply()
        dialog = [*prompts.target_system(exemplars), ChatMessage("user", prompts.target_cot(item))]

        async def step(name: str, max_tokens: int, check: Callable[[str], tuple[Any, str | None]],
                       letters: Sequence[str] | None = None) -> tuple[Generation | None, Any]:
            problem = ""
            for attempt in range(retries + 1):
                if attempt:
                    reply.retries += 1
                out = await call_model(self.model, role, ledger, dialog, max_tokens, cfg.target_temperature,
                                       derive_seed(seed, name, attempt), letters, cache)
                if not out.ok:
                    problem = out.error or "error"
                    continue
                parsed, problem = check(out.text)
                if problem is None:
                    return out, parsed
            reply.error = f"{name}: {problem}"
            return None, None

        def check_cot(text: str) -> tuple[str | None, str | None]:
            if not text.strip():
                return None, "empty reply"
            if refuses(text):
                return None, f"refusal: {text.strip()[:200]}"
            return text.strip(), None

        def check_confidences(text: str) -> tuple[dict[str, int] | None, str | None]:
            parsed = parse_confidences(text, item.letters)
            if parsed is None and strict:
                return None, f"unparseable confidences {reply_excerpt(text)}"
            return parsed, None

        def check_answer(text: str) -> tuple[str | None, str | None]:
            letter = answer_letter(text, item.letters, item.clean_options())
            return (letter, None) if letter else (None, f"no option letter in {reply_excerpt(text)}")

        out, cot = await step("reasoning", cfg.cot_budget, check_cot)
        if out is None:
            return reply
        reply.cot = cot
        dialog += [ChatMessage("assistant", out.text), ChatMessage("user", prompts.TARGET_CONFIDENCE)]
        out, reply.confidences = await step("confidences", cfg.confidence_tokens, check_confidences)
        if out is None:
            return reply
        reply.confidences_raw = out.text.strip()
        dialog += [ChatMessage("assistant", out.text), ChatMessage("user", prompts.target_answer(item))]
        out, reply.answer = await step("answer", cfg.answer_tokens, check_answer, item.letters)
        if out is not None:
            reply.answer_raw = out.text.strip()
            reply.letter_logprobs = out.letter_logprobs
        return reply
