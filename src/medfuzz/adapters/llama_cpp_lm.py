"""``medfuzz-local``: the embedded GGUF run in-process by llama.cpp as an lm-eval ``LM``.

Why not ``local-completions`` against llama-cpp-python's server: its ``echo`` prompt logprobs are shifted by
one position (token *i* is given the log-probability read from the logits *at* position *i*, which predict
token *i+1*; checked on 0.3.36), so every loglikelihood task would be scored wrongly. Here the
log-probability of each continuation token is read from the logits of the position before it.

Cost: requests are scored in the order of their token sequences (a trie walk, like lm-eval's ``hf`` model
sorting and grouping its requests), so every request shares the longest possible prefix with the one before
it and only the tokens after that prefix are evaluated, through llama.cpp's KV cache; each token position of
the batch's trie is evaluated once, which is the floor for exact scores (a test checks the count against it).
The four answer letters of a question cost one prompt evaluation (the next-token distribution after a context
is kept); a TCES attacked version costs only the text from its substituted option on, since it follows its
clean twin; a clean doc asked by two tasks in one run is evaluated once. llama.cpp is asked for the logits at
the positions needed only (no ``logits_all``). Progress is shown with tqdm, as lm-eval's own models do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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


def _shared_prefix(first, second) -> int:
    """How many leading tokens two sequences share."""
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count


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
        """Start with nothing known (on loading, and after a generation, whose prompts no later request reuses).
        ``_token_logprob[p]`` is log p(token p | tokens before it) for the tokens of ``_known_tokens`` (NaN
        where no logits were computed), ``_token_greedy[p]`` whether it was the argmax, ``_rows[p]`` the whole
        next-token distribution after position ``p``, kept where a later request of the batch turns off onto
        another token there (the other answer letters; the attacked version of a TCES doc). They depend on the
        token prefix only, not on what the KV cache holds (``_decode`` starts after the prefix it holds)."""
        self._token_logprob = np.full(self.llm.n_ctx(), np.nan)
        self._token_greedy = np.zeros(self.llm.n_ctx(), dtype=bool)
        self._rows: dict[int, np.ndarray] = {}
        self._known_tokens: list[int] = []  # the last request scored

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

    def _decode(self, tokens: list[int], start: int, end: int, outputs: list[int]) -> np.ndarray:
        """Evaluate ``tokens[start:end]`` after the cached ``tokens[:start]`` and return the logits at the
        positions ``outputs`` (ascending, within ``[start, end)``; row ``i`` predicts the token after position
        ``outputs[i]``).

        llama-cpp-python's ``Llama.eval`` keeps either the last position's logits or, with ``logits_all``, a
        ``n_ctx x n_vocab`` matrix for the whole context (1.6 GB at 8k tokens); scoring a long continuation
        with the last position only costs one decode per token (a MedFuzz pair doc, whose question is in the
        continuation, took 156 s). So the batch asks llama.cpp for exactly the positions needed, in one decode
        per ``n_batch`` tokens."""
        import llama_cpp

        llm = self.llm
        wanted = set(outputs)
        llm.n_tokens = start
        llm._ctx.kv_cache_seq_rm(-1, start, -1)
        rows = []
        for begin in range(start, end, llm.n_batch):
            chunk = tokens[begin: min(begin + llm.n_batch, end)]
            batch = llm._batch.batch
            batch.n_tokens = len(chunk)
            count = 0
            for i, token in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, begin + i, 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = begin + i in wanted
                count += int(batch.logits[i])
            llm._ctx.decode(llm._batch)
            llm.input_ids[begin: begin + len(chunk)] = chunk
            llm.n_tokens = begin + len(chunk)
            if count:
                pointer = llama_cpp.llama_get_logits(llm.ctx)
                rows.append(np.ctypeslib.as_array(pointer, shape=(count, llm.n_vocab())).copy())
        return np.concatenate(rows) if rows else np.empty((0, llm.n_vocab()), dtype=np.float32)

    def _score(self, tokens: list[int], scored_from: int,
               later: Iterable[tuple[list[int], int]] = ()) -> tuple[float, bool]:
        """Sum of log p(token | everything before it) over ``tokens[scored_from:]``, and whether each was the
        argmax. ``later``: the batch's requests still to come, in order (``(tokens, scored_from)`` each).

        What is already known is reused and the rest is one decode, which computes every trie node of the batch
        once: it starts after the longest prefix the KV cache holds, stops at the last position whose logits are
        needed (a request's last token is never evaluated), and also returns the logits that the later requests
        sharing a prefix with this one need from it (their scored tokens inside the shared prefix, and the whole
        distribution where they turn off onto another token), so no later request evaluates a token again
        (``bench/lm_eval_tces_cost.py`` prints the floor beside the count)."""
        n = len(tokens)
        # what is known is a function of the token prefix alone: keep what was computed for the same prefix
        same = _shared_prefix(self._known_tokens, tokens)
        known, greedy = self._token_logprob, self._token_greedy
        known[same:] = np.nan
        self._rows = {p: row for p, row in self._rows.items() if p < same}
        self._known_tokens = list(tokens)
        for p in range(scored_from, n):
            if np.isnan(known[p]) and p - 1 in self._rows:  # the distribution after a shared prefix, kept
                row = self._rows[p - 1]
                known[p], greedy[p] = row[tokens[p]], row.argmax() == tokens[p]
        missing = [p for p in range(scored_from, n) if np.isnan(known[p])]
        if missing:
            start = min(missing[0] - 1, _shared_prefix(self.llm.input_ids[: self.llm.n_tokens], tokens))
            values = set(range(max(start, scored_from - 1), n - 1))
            branches = set()
            for later_tokens, later_from in later:
                shared = _shared_prefix(tokens, later_tokens)
                if shared <= start:  # token order: no request after this one shares more of what we evaluate
                    break
                # its scored tokens inside the shared prefix are ours; where it turns off it needs the whole row
                values.update(range(max(start, later_from - 1), min(shared, len(later_tokens)) - 1))
                if later_from <= shared < len(later_tokens):
                    branches.add(shared - 1)
            outputs = sorted(values | branches)
            logprobs = _log_softmax(self._decode(tokens, start, outputs[-1] + 1, outputs).astype(np.float64))
            for position, row in zip(outputs, logprobs, strict=True):
                if position in branches:
                    self._rows[position] = row
                if position + 1 < n:
                    token = tokens[position + 1]
                    known[position + 1], greedy[position + 1] = row[token], row.argmax() == token
        span = slice(scored_from, n)
        return float(known[span].sum()), bool(greedy[span].all())

    # ------------------------------------------------------------------------------- lm-eval API

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        encoded = [self._fit(*self._encode_pair(*request.args), request) for request in requests]
        # token-sequence order: neighbours share the longest prefixes, so the KV cache does the most work
        order = sorted(range(len(encoded)), key=lambda i: encoded[i])
        in_order = [encoded[i] for i in order]
        results: list[tuple[float, bool]] = [(0.0, False)] * len(encoded)
        for rank, index in enumerate(tqdm(order, disable=disable_tqdm, desc="Running loglikelihood requests")):
            following = (in_order[j] for j in range(rank + 1, len(in_order)))  # read only as far as shared
            results[index] = self._score(*encoded[index], later=following)
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
            self._forget()
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
