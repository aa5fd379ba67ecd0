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

from typing import Any

import numpy as np
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from medfuzz.models.local import embedded_gguf


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@register_model("medfuzz-local")
class LlamaCppLM(LM):
    """lm-eval model over ``llama_cpp.Llama``. ``--model_args model_path=...`` runs another GGUF."""

    def __init__(self, model_path: str | None = None, n_ctx: int = 4096, n_threads: int = 2,
                 max_gen_toks: int = 256, seed: int = 0, **_: Any) -> None:
        super().__init__()
        from llama_cpp import Llama

        self.model_path = str(model_path or embedded_gguf())
        self.llm = Llama(model_path=self.model_path, n_ctx=int(n_ctx), n_threads=int(n_threads),
                         n_threads_batch=int(n_threads), logits_all=False, seed=int(seed), verbose=False)
        self.max_gen_toks = int(max_gen_toks)
        self._chat_template = self.llm.metadata.get("tokenizer.chat_template")
        # the last context fed and the next-token log-probabilities after it (a pure function of the tokens)
        self._after: tuple[list[int], np.ndarray] | None = None

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

    def _last_logprobs(self) -> np.ndarray:
        """Log-probabilities of the next token after everything evaluated so far."""
        import llama_cpp

        pointer = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return _log_softmax(np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).astype(np.float64))

    def _feed(self, tokens: list[int]) -> np.ndarray:
        """Evaluate ``tokens`` (reusing the cached common prefix) and return the next-token log-probabilities."""
        if len(tokens) > self.llm.n_ctx():
            raise ValueError(f"request of {len(tokens)} tokens exceeds the context of {self.llm.n_ctx()}")
        common = 0
        for cached, token in zip(self.llm.input_ids[: self.llm.n_tokens], tokens, strict=False):
            if cached != token:
                break
            common += 1
        if common == len(tokens) and self._after is not None and self._after[0] == tokens:
            self.llm.n_tokens = common  # drop continuation tokens evaluated after it; its logits are kept
            return self._after[1]
        common = min(common, len(tokens) - 1)  # evaluate at least one token so its logits are fresh
        self.llm.n_tokens = common
        self.llm.eval(tokens[common:])
        logprobs = self._last_logprobs()
        self._after = (list(tokens), logprobs)
        return logprobs

    def _continuation_logprobs(self, context: list[int], continuation: list[int]) -> tuple[float, bool]:
        """Sum of log p(continuation token | everything before it), and whether each was the argmax."""
        logprobs = self._feed(context)
        total, greedy = 0.0, True
        for position, token in enumerate(continuation):
            if position:
                self.llm.eval([continuation[position - 1]])
                logprobs = self._last_logprobs()
            total += float(logprobs[token])
            greedy = greedy and int(logprobs.argmax()) == token
        return total, greedy

    # ------------------------------------------------------------------------------- lm-eval API

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        encoded = []
        for request in requests:
            context, continuation = request.args
            context_tokens, continuation_tokens = self._encode_pair(context, continuation)
            if not context_tokens:  # nothing to condition on: start from the BOS token
                context_tokens = [self.llm.token_bos()]
            encoded.append((context_tokens, continuation_tokens))
        # token-sequence order: neighbours share the longest prefixes, so the KV cache does the most work
        order = sorted(range(len(encoded)), key=lambda i: (encoded[i][0], encoded[i][1]))
        results: list[tuple[float, bool]] = [(0.0, False)] * len(encoded)
        for index in tqdm(order, disable=disable_tqdm, desc="Running loglikelihood requests"):
            results[index] = self._continuation_logprobs(*encoded[index])
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
                total += self._continuation_logprobs([self.llm.token_bos()], tokens[begin : begin + window])[0]
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
            output = self.llm.create_completion(
                context, max_tokens=int(kwargs.get("max_gen_toks", self.max_gen_toks)),
                temperature=temperature, stop=until or None, seed=int(kwargs.get("seed", 0)),
            )
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
