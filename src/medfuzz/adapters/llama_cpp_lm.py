"""``medfuzz-local``: the embedded GGUF run in-process by llama.cpp as an lm-eval ``LM``.

Why not ``local-completions`` against llama-cpp-python's server: its ``echo`` prompt logprobs are shifted by
one position (token *i* is given the log-probability read from the logits *at* position *i*, which predict
token *i+1*; checked on 0.3.36), so every loglikelihood task would be scored wrongly. Here the
log-probability of each continuation token is read from the logits of the position before it.

Cost: requests are scored in the order of their token sequences (a trie walk, like lm-eval's ``hf`` model
sorting and grouping its requests), so every request shares the longest possible prefix with the one before
it and only the tokens after that prefix are evaluated, through llama.cpp's KV cache. The four answer letters
of a question cost one prompt evaluation (the next-token log-probabilities after a context are kept, not
re-evaluated); a TCES attacked doc costs only the text after its substituted option, since it follows its
clean twin; a clean doc asked by two tasks in one run is evaluated once. Only the last position's logits are
computed (no ``logits_all``). Progress is shown with tqdm, as lm-eval's own models do.
"""

from __future__ import annotations

import logging
from typing import Any

from medfuzz.models.local import apply_openmp_defaults, default_threads, embedded_gguf, generation_threads

# before anything can load llama.cpp's OpenMP library (which reads OMP_WAIT_POLICY once, on loading): spinning
# threads collapse next to any other busy process (medfuzz.models.local.OPENMP_DEFAULTS). llama_cpp itself is
# imported only in LlamaCppLM.__init__; `grep -rn "import llama_cpp\|from llama_cpp" src` finds no earlier one.
apply_openmp_defaults()

import numpy as np  # noqa: E402
from lm_eval.api.model import LM  # noqa: E402
from lm_eval.api.registry import register_model  # noqa: E402
from tqdm import tqdm  # noqa: E402

log = logging.getLogger(__name__)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@register_model("medfuzz-local")
class LlamaCppLM(LM):
    """lm-eval model over ``llama_cpp.Llama``. ``--model_args model_path=...`` runs another GGUF;
    ``n_ctx=0`` (the default) is the model's own training context; ``n_threads`` (prompt batches) defaults to
    ``medfuzz.models.local.default_threads()``, generation uses ``generation_threads``."""

    def __init__(self, model_path: str | None = None, n_ctx: int = 0, n_threads: int | None = None,
                 max_gen_toks: int = 256, seed: int = 0, **_: Any) -> None:
        super().__init__()
        from llama_cpp import Llama

        n_threads = int(n_threads or default_threads())
        self.model_path = str(model_path or embedded_gguf())
        # prompt batches on n_threads, token generation as the embedded server does (one thread for SmolLM2)
        self.llm = Llama(model_path=self.model_path, n_ctx=int(n_ctx),
                         n_threads=generation_threads(n_threads, embedded=model_path is None),
                         n_threads_batch=int(n_threads), logits_all=False, seed=int(seed), verbose=False)
        self.max_gen_toks = int(max_gen_toks)
        self._chat_template = self.llm.metadata.get("tokenizer.chat_template")
        self._forget()

    def _forget(self) -> None:
        """Drop what is known about the evaluated tokens (after llama.cpp's own generation rewrote them).
        ``_token_logprob[p]`` is log p(token p | tokens before it) of the tokens now in the KV cache (NaN where
        no logits were computed), ``_token_greedy[p]`` whether it was the argmax; ``_row`` is the whole
        next-token distribution at one position, which the next request usually needs (the other letters)."""
        self._token_logprob = np.full(self.llm.n_ctx(), np.nan)
        self._token_greedy = np.zeros(self.llm.n_ctx(), dtype=bool)
        self._row: tuple[int, np.ndarray] | None = None

    # ------------------------------------------------------------------------------------- tokens

    def tok_encode(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        # as lm-eval's TemplateLM: trailing context spaces belong to the continuation, and the split is
        # taken from the joint encoding so merges across the boundary are tokenised as the model sees them
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole = self.tok_encode(context + continuation)
        context_tokens = self.tok_encode(context)
        return whole[: len(context_tokens)], whole[len(context_tokens):]

    def _fit(self, context: list[int], continuation: list[int], request: Any) -> tuple[list[int], int]:
        """The token sequence and where its scored part starts. Longer than the context window: the oldest
        tokens are dropped, as lm-eval's ``hf`` model does (``(context + continuation)[-(max_length + 1):]``),
        and the request is named in a warning, so one long prompt neither crashes the run nor passes unseen."""
        if not context:  # nothing to condition on: start from the BOS token
            context = [self.llm.token_bos()]
        sequence, limit = context + continuation, self.llm.n_ctx()
        if len(sequence) <= limit:
            return sequence, len(context)
        kept = sequence[-limit:]
        scored_from = max(1, limit - len(continuation))
        log.warning("medfuzz-local: %s doc %s: %d tokens exceed the context window of %d; the first %d were "
                    "dropped (left truncation, as lm-eval's hf model does)%s",
                    getattr(request, "task_name", None) or "request", getattr(request, "doc_id", None),
                    len(sequence), limit, len(sequence) - limit,
                    "" if scored_from == limit - len(continuation) else
                    f"; only the last {limit - scored_from} continuation tokens are scored")
        return kept, scored_from

    def _decode(self, tokens: list[int], start: int, first_output: int) -> np.ndarray:
        """Evaluate ``tokens[start:]`` after the cached ``tokens[:start]`` and return the logits at every
        position from ``first_output`` on (row ``i`` predicts the token after position ``first_output + i``).

        llama-cpp-python's ``Llama.eval`` keeps either the last position's logits or, with ``logits_all``, a
        ``n_ctx x n_vocab`` matrix for the whole context (1.6 GB at 8k tokens); scoring a long continuation
        with the last position only costs one decode per token (a MedFuzz pair doc, whose question is in the
        continuation, took 156 s). So the batch asks llama.cpp for exactly the positions needed, in one decode
        per ``n_batch`` tokens."""
        import llama_cpp

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

    def _score(self, tokens: list[int], scored_from: int) -> tuple[float, bool]:
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
            logprobs = _log_softmax(self._decode(tokens, start, first_output).astype(np.float64))
            known[start + (start < common):] = np.nan  # position `start` keeps its value if its token is kept
            for i, row in enumerate(logprobs[:-1]):
                position = first_output + 1 + i
                known[position], self._token_greedy[position] = row[tokens[position]], row.argmax() == tokens[position]
            if len(tokens) >= 2 and first_output <= len(tokens) - 2:
                self._row = (len(tokens) - 2, logprobs[len(tokens) - 2 - first_output])
        span = slice(scored_from, len(tokens))
        return float(known[span].sum()), bool(self._token_greedy[span].all())

    # ------------------------------------------------------------------------------- lm-eval API

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        encoded = [self._fit(*self._encode_pair(*request.args), request) for request in requests]
        # token-sequence order: neighbours share the longest prefixes, so the KV cache does the most work
        order = sorted(range(len(encoded)), key=lambda i: encoded[i])
        results: list[tuple[float, bool]] = [(0.0, False)] * len(encoded)
        for index in tqdm(order, disable=disable_tqdm, desc="Running loglikelihood requests"):
            results[index] = self._score(*encoded[index])
            self.cache_hook.add_partial("loglikelihood", requests[index].args, results[index])
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        results = []
        for request in tqdm(requests, disable=disable_tqdm, desc="Running loglikelihood_rolling requests"):
            (text,) = request.args
            tokens = self.tok_encode(text)
            window = self.llm.n_ctx() - 1
            total = 0.0
            # disjoint windows, each conditioned on BOS only (lm-eval's rolling windows with context length 1)
            for begin in range(0, len(tokens), window):
                total += self._score([self.llm.token_bos(), *tokens[begin:begin + window]], 1)[0]
            results.append(total)
        return results

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        results = []
        for request in tqdm(requests, disable=disable_tqdm, desc="Running generate_until requests"):
            context, kwargs = request.args
            kwargs = dict(kwargs or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            temperature = float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample", False) else 0.0
            max_tokens = int(kwargs.get("max_gen_toks", self.max_gen_toks))
            prompt = self.llm.tokenize(context.encode("utf-8"), add_bos=True, special=True)
            room = max(1, self.llm.n_ctx() - max_tokens)
            if len(prompt) > room:  # as lm-eval's hf model: keep the most recent max_length - max_gen_toks tokens
                log.warning("medfuzz-local: %s doc %s: a prompt of %d tokens leaves no room for %d new tokens in "
                            "the context window of %d; the first %d were dropped (left truncation, as lm-eval's "
                            "hf model does)", getattr(request, "task_name", None) or "request",
                            getattr(request, "doc_id", None), len(prompt), max_tokens, self.llm.n_ctx(),
                            len(prompt) - room)
                prompt = prompt[-room:]
            prompt = prompt or [self.llm.token_bos()]
            output = self.llm.create_completion(
                prompt, max_tokens=max_tokens, temperature=temperature, stop=until or None,
                seed=int(kwargs.get("seed", 0)),
            )
            self._forget()  # llama.cpp's generation rewrote the cached tokens
            text = output["choices"][0]["text"]
            results.append(text)
            self.cache_hook.add_partial("generate_until", (context, kwargs), text)
        return results

    # -------------------------------------------------------------------------------- chat support

    @property
    def tokenizer_name(self) -> str:
        return self.model_path.replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self._chat_template

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not self._chat_template:
            raise ValueError(f"{self.model_path} has no chat template in its metadata")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        formatter = Jinja2ChatFormatter(
            template=self._chat_template,
            eos_token=self.llm.detokenize([self.llm.token_eos()]).decode(errors="ignore"),
            bos_token=self.llm.detokenize([self.llm.token_bos()]).decode(errors="ignore"),
            add_generation_prompt=add_generation_prompt,
        )
        return formatter(messages=chat_history).prompt
