"""An lm-eval ``LM`` (hf, vllm, gguf, local-completions, ...) as a medfuzz ``ChatModel``.

Letter log-probabilities come from ``loglikelihood`` of each letter as the continuation, so they are exact
(every letter, no top-k cut-off) on any backend that supports loglikelihood. lm-eval models are synchronous
and not thread-safe: calls run one at a time in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from lm_eval.api.instance import Instance

from medfuzz.models.protocol import ChatMessage, Generation, TokenUsage


class LMEvalChatModel:
    def __init__(self, lm: Any, name: str | None = None, apply_chat_template: bool | None = None) -> None:
        self._lm = lm
        self.name = name or type(lm).__name__
        self._lock = asyncio.Lock()
        if apply_chat_template is None:
            apply_chat_template = bool(getattr(lm, "tokenizer", None) is not None
                                       and getattr(lm.tokenizer, "chat_template", None))
        self.apply_chat_template = apply_chat_template

    def render(self, messages: Sequence[ChatMessage]) -> str:
        """The prompt string: the model's chat template when it has one, else a plain transcript."""
        history = [{"role": m.role, "content": m.content} for m in messages]
        if self.apply_chat_template:
            return self._lm.apply_chat_template(history, add_generation_prompt=True)
        body = "\n\n".join(f"{m.role.capitalize()}: {m.content}" for m in messages)
        return f"{body}\n\nAssistant:"

    def _count(self, text: str) -> int:
        try:
            return len(self._lm.tok_encode(text))
        except Exception:  # some API backends have no local tokenizer: usage is then unknown (0)
            return 0

    def _generate_sync(self, prompt: str, max_tokens: int, temperature: float | None,
                       letters: Sequence[str] | None) -> Generation:
        kwargs: dict[str, Any] = {"until": [], "max_gen_toks": max_tokens}
        if temperature:
            kwargs.update(do_sample=True, temperature=temperature)
        else:
            kwargs.update(do_sample=False)
        request = Instance(request_type="generate_until", doc={}, arguments=(prompt, kwargs), idx=0)
        text = self._lm.generate_until([request])[0]
        letter_logprobs = None
        if letters:
            prefix = "" if self.apply_chat_template else " "
            requests = [
                Instance(request_type="loglikelihood", doc={}, arguments=(prompt, f"{prefix}{letter}"), idx=i)
                for i, letter in enumerate(letters)
            ]
            scores = self._lm.loglikelihood(requests)
            letter_logprobs = {letter: float(score[0]) for letter, score in zip(letters, scores, strict=True)}
        usage = TokenUsage(self._count(prompt), self._count(text))
        return Generation(text=text, letter_logprobs=letter_logprobs, usage=usage, model=self.name)

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        letters: Sequence[str] | None = None,
    ) -> Generation:
        prompt = self.render(messages)
        async with self._lock:
            try:
                return await asyncio.to_thread(self._generate_sync, prompt, max_tokens, temperature, letters)
            except Exception as err:  # backend failures are LLM errors, never crashes of the engine
                return Generation(text="", error=f"{type(err).__name__}: {err}", model=self.name)
