"""``medfuzz-local`` scoring as it was before the one-decode-per-request change (commit 5fd9c2f), for the
before/after benchmarks: requests in token order, the next-token distribution after a context kept, but every
continuation token after the first evaluated by its own llama.cpp decode (only the last position's logits)."""

from __future__ import annotations

import numpy as np

from medfuzz.adapters.llama_cpp_lm import LlamaCppLM, _log_softmax


class TokenByToken(LlamaCppLM):
    counts: dict[str, float]

    def _last_logprobs(self) -> np.ndarray:
        import llama_cpp

        pointer = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return _log_softmax(np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).astype(np.float64))

    def _eval(self, tokens: list[int]) -> None:
        self.counts["decodes"] += 1
        self.counts["tokens"] += len(tokens)
        self.llm.eval(tokens)

    def _score(self, tokens: list[int], scored_from: int) -> tuple[float, bool]:
        context, continuation = tokens[:scored_from], tokens[scored_from:]
        common = 0
        for cached, token in zip(self.llm.input_ids[: self.llm.n_tokens], context, strict=False):
            if cached != token:
                break
            common += 1
        after = getattr(self, "_after", None)
        if common == len(context) and after is not None and after[0] == context:
            self.llm.n_tokens = common
            logprobs = after[1]
        else:
            self.llm.n_tokens = min(common, len(context) - 1)
            self._eval(context[self.llm.n_tokens:])
            logprobs = self._last_logprobs()
            self._after = (list(context), logprobs)
        total, greedy = 0.0, True
        for position, token in enumerate(continuation):
            if position:
                self._eval([continuation[position - 1]])
                logprobs = self._last_logprobs()
            total += float(logprobs[token])
            greedy = greedy and int(logprobs.argmax()) == token
        return total, greedy
