"""``medfuzz-local`` scoring as it was, for the before/after benchmarks.

- ``TokenByToken``: before the one-decode-per-request change (commit 5fd9c2f): requests in token order, the
  next-token distribution after a context kept, but every continuation token after the first evaluated by its own
  llama.cpp decode (only the last position's logits).
- ``PerRequest``: up to commit 22e195c: one decode per request from the first unknown position to the end of the
  sequence (its last token evaluated too), the next-token distribution kept at one position only (the other
  letters), so a version turning off inside a shared continuation re-evaluated the last shared token."""

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

    def _score(self, tokens: list[int], scored_from: int, later=()) -> tuple[float, bool]:
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


class PerRequest(LlamaCppLM):
    """Up to 22e195c (copied from it; ``_decode`` renamed so the class keeps today's name free)."""

    counts: dict[str, float]

    def _forget(self) -> None:
        super()._forget()
        self._row: tuple[int, np.ndarray] | None = None

    def _decode_from(self, tokens: list[int], start: int, first_output: int) -> np.ndarray:
        """Evaluate ``tokens[start:]`` after the cached ``tokens[:start]`` and return the logits at every
        position from ``first_output`` on (row ``i`` predicts the token after position ``first_output + i``).

        llama-cpp-python's ``Llama.eval`` keeps either the last position's logits or, with ``logits_all``, a
        ``n_ctx x n_vocab`` matrix for the whole context (1.6 GB at 8k tokens); scoring a long continuation
        with the last position only costs one decode per token (a MedFuzz pair doc, whose question is in the
        continuation, took 156 s). So the batch asks llama.cpp for exactly the positions needed, in one decode
        per ``n_batch`` tokens."""
        import llama_cpp

        self.counts["evals"] += 1
        self.counts["tokens"] += len(tokens) - start

        llm = self.llm
        if self._row is not None and self._row[0] >= start:  # computed from tokens about to be overwritten
            self._row = None
        llm.n_tokens = start
        llm._ctx.kv_cache_seq_rm(-1, start, -1)
        rows = []
        for begin in range(start, len(tokens), llm.n_batch):
            chunk = tokens[begin: begin + llm.n_batch]
            batch = llm._batch.batch
            batch.n_tokens = len(chunk)
            outputs = 0
            for i, token in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, begin + i, 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = begin + i >= first_output
                outputs += int(batch.logits[i])
            llm._ctx.decode(llm._batch)
            llm.input_ids[begin: begin + len(chunk)] = chunk
            llm.n_tokens = begin + len(chunk)
            if outputs:
                pointer = llama_cpp.llama_get_logits(llm.ctx)
                rows.append(np.ctypeslib.as_array(pointer, shape=(outputs, llm.n_vocab())).copy())
        return np.concatenate(rows) if rows else np.empty((0, llm.n_vocab()), dtype=np.float32)

    def _score(self, tokens: list[int], scored_from: int, later=()) -> tuple[float, bool]:
        """Sum of log p(token | everything before it) over ``tokens[scored_from:]``, and whether each was the
        argmax. Log-probabilities already known for the cached prefix are reused; the rest is one decode."""
        cached = self.llm.input_ids[: self.llm.n_tokens]
        common = 0
        for old, new in zip(cached, tokens, strict=False):
            if old != new:
                break
            common += 1
        known = self._token_logprob
        missing = [p for p in range(scored_from, len(tokens)) if p >= common or np.isnan(known[p])]
        if missing and self._row is not None and self._row[0] == missing[0] - 1 and self._row[0] < common:
            # the next-token distribution after the shared prefix (the other letters of the same question)
            position, row = missing.pop(0), self._row[1]
            known[position], self._token_greedy[position] = row[tokens[position]], row.argmax() == tokens[position]
            # the cache now holds another token at `position`: everything after it is unknown again
            known[position + 1:], common = np.nan, min(common, position)
            self.llm.n_tokens = min(self.llm.n_tokens, position)
            missing = [p for p in missing if p > position]
        if missing:
            start = min(missing[0] - 1, common)
            first_output = max(start, scored_from - 1)
            logprobs = _log_softmax(self._decode_from(tokens, start, first_output).astype(np.float64))
            known[start + (start < common):] = np.nan  # position `start` keeps its value if its token is kept
            for i, row in enumerate(logprobs[:-1]):
                position = first_output + 1 + i
                known[position], self._token_greedy[position] = row[tokens[position]], row.argmax() == tokens[position]
            if len(tokens) >= 2 and first_output <= len(tokens) - 2:
                self._row = (len(tokens) - 2, logprobs[len(tokens) - 2 - first_output])
        span = slice(scored_from, len(tokens))
        return float(known[span].sum()), bool(self._token_greedy[span].all())
